"""Point-in-time recovery: replay archived binary logs (backup/binlog_archive.py) on top of a
restored base backup, up to a time or a GTID set.

    chain = plan(segments, base_gtids, base_completed_at, Stop(at=t), parse_gtids)   # pure
    replay(chain, fetch, target, version, Stop(at=t), applied)                       # effects

`plan` picks, from the base's GTID position on, the segments that lead to the stop: each one
starts inside what is applied already (else the archive has a gap there: refused, naming it) and
brings something new (a file a new primary wrote after a failover repeats what it replicated: the
GTID filter below skips that part). Files holding transactions the newest file's history lacks
(a failed primary's last, unreplicated ones) are never replayed. A stop after the newest archived transaction, or before the
base backup completed, is refused: the restore could not be what was asked.

`replay` streams each segment (decrypted) through the flavor's binlog tool into the client:
MySQL `mysqlbinlog --exclude-gtids=<applied>`, MariaDB `mariadb-binlog --start-position=<GTID
position>`: a transaction already applied is never applied twice. A time stop is a whole second,
inclusive (binary log events carry seconds): every transaction whose events are timestamped at or
before it, `--stop-datetime` one second later, in UTC (a transaction's GTID event carries its
commit's second on MySQL, its first statement's on MariaDB). A GTID stop includes that GTID set.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from mysql_operator.backup.binlog_archive import Base, Segment
from mysql_operator.backup.dump_text import created_database
from mysql_operator.backup.pipeline import TailBuffer, drain, pass_on
from mysql_operator.backup.pipeline import stop as stop_processes
from mysql_operator.backup.sidecar import SidecarProcess
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet


class PitrError(Exception):
    pass


@dataclass(frozen=True)
class Stop:
    at: int | None = None  # unix seconds, inclusive
    gtid: str | None = None  # a GTID set (MySQL) or position (MariaDB), inclusive

    def describe(self) -> str:
        if self.at is not None:
            return stamp(self.at)
        return f"GTID {self.gtid}" if self.gtid else "the newest archived transaction"


def stamp(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan(
    segments: Iterable[Segment],
    base: str,
    base_completed_at: int,
    stop: Stop,
    parse: Callable[[str], Any],
) -> list[Segment]:
    """Pure: the segments to replay, in order. PitrError when the archive cannot give the stop."""
    if stop.at is not None and stop.at < base_completed_at:
        raise PitrError(
            f"{stop.describe()} is before the base backup completed ({stamp(base_completed_at)}): "
            "restore from an older backup"
        )
    pool = list(segments)
    if pool:
        # the history that survived: the newest file's. A file that holds transactions outside it
        # is from a primary that failed before its last transactions reached the new one (they
        # were never acknowledged with semi-sync): it is left out; the new primary's files hold
        # the rest of it
        survived = parse(max(pool, key=lambda x: (x.last_event_at, x.first_event_at)).gtids_after)
        pool = [x for x in pool if survived.contains(parse(x.gtids_after))]
    applied, reached, chain = parse(base), base_completed_at, []
    target = parse(stop.gtid) if stop.gtid else None
    if isinstance(target, MySQLGtidSet):
        target = mysql_stop(stop.gtid or "")
        lacking = parse(base).subtract(target)
        if not lacking.is_empty():
            # the replay includes only the sources the stop names: after a failover a stop naming
            # the new primary's source alone would silently leave out the old one's last ones
            raise PitrError(
                f"the GTID stop {stop.gtid} names no transaction of {lacking} that the base backup "
                "holds: give the whole set, as SELECT @@gtid_executed prints it at that point"
            )
    while True:
        if target is not None and holds(applied, target):
            break
        todo = [s for s in pool if not holds(applied, parse(s.gtids_after))]
        if stop.at is not None:  # a file opened after the stop holds nothing to replay
            todo = [s for s in todo if s.first_event_at <= stop.at]
        if not todo:
            break
        nexts = [s for s in todo if holds(applied, parse(s.gtids_before))]
        if not nexts:
            starts = sorted({s.gtids_before for s in todo})
            after = f"{chain[-1].file} of server {chain[-1].server}" if chain else "the base backup"
            raise PitrError(
                f"the binary log archive has a gap after {after}: it holds nothing that continues "
                f"from {applied} (the next archived files start at {'; '.join(starts)}), so "
                f"{stop.describe()} cannot be reached"
            )
        s = min(nexts, key=lambda x: (x.first_event_at, x.server, x.name))
        chain.append(s)
        pool.remove(s)
        applied = applied.union(parse(s.gtids_after))
        reached = max(reached, s.last_event_at)
    if stop.at is not None and reached < stop.at:
        raise PitrError(
            f"the binary log archive holds transactions up to {stamp(reached)}; {stop.describe()} is "
            "later: wait until the archive reaches it (files are closed every "
            "spec.backup.binlogs.maxDelaySeconds), or restore to an earlier time"
        )
    if target is not None and not holds(applied, target):
        raise PitrError(f"the binary log archive does not hold {stop.describe()}: it reaches {applied}")
    return chain


def choose_base(bases: Iterable[Base], stop: Stop, parse: Callable[[str], Any]) -> Base | None:
    """Pure: the newest complete backup a restore to `stop` can start from - completed by the
    stop's time, or holding nothing beyond its GTIDs, or the newest of all for the newest stop.
    None when there is none (or none with a GTID position)."""
    fits = [b for b in bases if b.gtid_position]
    if stop.at is not None:
        fits = [b for b in fits if b.completed_at <= stop.at]
    if stop.gtid:
        target = parse(stop.gtid)
        if isinstance(target, MySQLGtidSet):
            target = mysql_stop(stop.gtid)
        fits = [b for b in fits if holds(target, parse(b.gtid_position))]
    return max(fits, key=lambda b: b.completed_at, default=None)


def holds(applied: Any, other: Any) -> bool:
    """`applied` holds every transaction of `other`, in the one history a restore replays: MySQL
    GTID sets compare as sets; MariaDB positions per domain (`MariaDBGtids.covers`). A backup
    records a MariaDB position (`gtid_binlog_pos`: one GTID per domain), while a binary log's
    GTID lists name each server's last: once the primary had been a replica of others, its files
    name several servers, and compared server by server a file wholly before the base would look
    new (replayed from the base's position it failed: "Binary logs never reached expected GTID
    state")."""
    if isinstance(applied, MariaDBGtids):
        return applied.covers(other)
    return bool(applied.contains(other))


def mysql_stop(text: str) -> MySQLGtidSet:
    """A MySQL GTID stop as the set it stands for: each source it names from its first transaction
    to the highest named (`uuid:N` means everything of uuid up to N)."""
    named = MySQLGtidSet.parse(text)
    return MySQLGtidSet.of({key: [(1, ivs[-1][1])] for key, ivs in named.sets})


def tool_argv(flavor: str, applied: str, stop: Stop) -> list[str]:
    """The binlog tool reading one segment from stdin, skipping what `applied` holds."""
    if flavor == "mysql":
        argv = ["mysqlbinlog"]
        if applied:
            argv.append(f"--exclude-gtids={applied}")
        if stop.gtid:
            # mysqlbinlog has no GTID stop, only the filter --include-gtids: given a single GTID
            # uuid:N (as a binary log shows a transaction) it would replay that one transaction and
            # silently skip the ones before it. Up to and including the stop: each of its sources'
            # transactions from 1 to the highest it names (what applied holds is excluded above)
            argv.append(f"--include-gtids={mysql_stop(stop.gtid) or stop.gtid}")
    else:
        # the tool takes one GTID per domain; a binary log state holds one per domain and server
        # (after a failover: the old primary's last and the new one's), seq_no ordering them
        argv = ["mariadb-binlog"]
        if applied:
            argv.append(f"--start-position={MariaDBGtids.parse(applied).position()}")
        if stop.gtid:
            argv.append(f"--stop-position={MariaDBGtids.parse(stop.gtid).position()}")
    if stop.at is not None:
        after = dt.datetime.fromtimestamp(stop.at + 1, dt.timezone.utc)
        argv.append(f"--stop-datetime={after.strftime('%Y-%m-%d %H:%M:%S')}")
    return [*argv, "-"]


DELIMITER = b"/*!*/;"  # what the binlog tools end each statement of their output with
_ACCOUNT_STATEMENT = re.compile(
    rb"^\s*(CREATE\s+(USER|ROLE)|ALTER\s+(USER|ROLE)|DROP\s+(USER|ROLE)|RENAME\s+USER|GRANT|REVOKE"
    rb"|SET\s+(PASSWORD|DEFAULT\s+ROLE)|FLUSH\s+PRIVILEGES)\b",
    re.I,
)
EMPTY_TRANSACTION = b"BEGIN\n" + DELIMITER + b"\nCOMMIT\n" + DELIMITER + b"\n"


class AccountStatements:
    """Rewrites the binlog tool's output (text) so that no statement about accounts is replayed:
    CREATE/ALTER/DROP/RENAME USER, GRANT, REVOKE, SET PASSWORD, roles. A restored cluster keeps its
    own accounts (backups hold databases, never accounts): replayed, the source's ALTER USER of the
    replication or application account would give them the source's passwords, which the restored
    cluster's Secret does not hold. Each becomes an empty transaction, so its GTID is still used.
    Feed pieces of any size; b"" at the end returns what was held back."""

    def __init__(self, on_database: Callable[[str], None] | None = None) -> None:
        self.on_database = on_database  # called with each database a statement creates, before it
        self.partial = b""  # the last line, not complete yet
        self.in_statement = False  # inside a statement (its first line seen, not its delimiter)
        self.skipping = False  # inside an account statement
        self.skipped = 0

    def __call__(self, data: bytes) -> bytes:
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop() if data else b""
        if not data and lines == [b""]:
            lines = []
        out = []
        for line in lines:
            if not self.in_statement and not line.startswith(b"#") and line.strip():
                self.in_statement = True
                self.skipping = bool(_ACCOUNT_STATEMENT.match(line))
                if self.on_database is not None:
                    created = created_database(line)
                    if created is not None:
                        self.on_database(created)
            if not self.skipping:
                out.append(line + b"\n")
            if self.in_statement and line.rstrip().endswith(DELIMITER):
                if self.skipping:
                    out.append(EMPTY_TRANSACTION)
                    self.skipped += 1
                self.in_statement = self.skipping = False
        return b"".join(out)


def local_launch(argv: list[str]) -> subprocess.Popen:
    """A tool of this image (what the tests use), its times in UTC."""
    env = {**os.environ, "TZ": "UTC"}
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def sidecar_launch(folder: str, stdin: bool = True) -> Callable[[list[str]], SidecarProcess]:
    """A tool of the cluster's server image, in the Pod's client-tools sidecar (backup/sidecar.py)."""
    return lambda argv: SidecarProcess(argv, folder, stdin=stdin)


def replay_segment(
    data: Iterable[bytes],
    tool: list[str],
    client: list[str],
    *,
    launch: Callable[[list[str]], Any] = local_launch,
    secrets: tuple[str, ...] = (),
    on_database: Callable[[str], None] | None = None,
) -> None:
    """One segment's plaintext -> binlog tool -> client, the tool's output passed on by this
    process (so either may run in the sidecar). PitrError with either's message.
    `on_database`: see AccountStatements."""
    dec = cli = None
    dec_err, cli_err = TailBuffer(), TailBuffer()
    try:
        dec = launch(tool)
        cli = launch(client)
        accounts = AccountStatements(on_database)
        readers = [
            pass_on(dec.stdout, cli.stdin, accounts),
            drain(dec.stderr, dec_err),
            drain(cli.stderr, cli_err),
        ]
        readers.append(drain(cli.stdout, TailBuffer(1)))  # a client replaying prints nothing
        try:
            for chunk in data:
                view = memoryview(chunk)
                while view:
                    view = view[dec.stdin.write(view) :]
            dec.stdin.close()
        except (BrokenPipeError, ValueError):
            pass  # the tool ended: its status says why
        dec_rc, cli_rc = dec.wait(), cli.wait()
        for t in readers:
            t.join(5)
    finally:
        stop_processes(dec, cli)
    if cli_rc != 0:
        raise PitrError(f"{client[0]} failed replaying: {cli_err.text(secrets) or 'no message'}")
    if dec_rc != 0:
        raise PitrError(f"{tool[0]} failed: {dec_err.text(secrets) or 'no message'}")
