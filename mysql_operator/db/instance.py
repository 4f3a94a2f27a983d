"""One MySQL/MariaDB server as the operator sees it: a small class around one pymysql connection.

Connections use short connect/read timeouts and autocommit; transient connection failures are
retried with tenacity. Every error leaves as `InstanceError` whose text never contains a password
(the instance's own, or any password passed to a statement): pymysql errors can quote the SQL.

A server is a tenant's (it chooses the image): nothing it sends can hold a thread or the memory
the other clusters need (db/connection.py): every exchange has an overall deadline (not only one per
socket read) and a cap on the bytes it reads, and the password never leaves in clear text (no
cleartext authentication plugin, no plaintext when TLS is asked for). Error texts are short: a
server's own words are cut (`MESSAGE_CHARS`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import pymysql
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo
from mysql_operator.db import accounts
from mysql_operator.db.accounts import Grant
from mysql_operator.db.flavor import Dialect, detect, dialect_for
from mysql_operator.db.statements import DatabaseState, Statement, UserState, identified, quote
from mysql_operator.redaction import redact
from mysql_operator.topology import CLONE_FAILED
from mysql_operator.db.observation import (
    ACCESS_DENIED,
    CLONE_SESSION_ENDS,
    CloneStatus,
    ER_NONEXISTING_GRANT,
    ER_REPLICA_NOT_CONFIGURED,
    ER_STOP_REPLICA_SQL_THREAD_TIMEOUT,
    Event,
    GTID_TEXT_CHARS,
    InstanceError,
    KEPT_IF_GRANTED,
    LOST_CONNECTION,
    Login,
    Observation,
    ReplicaStatus,
    TEXT_CHARS,
    TRANSIENT_ERRNOS,
    clone_stage,
    connections_to_kill,
    parse_tls_time,
)
from mysql_operator.db.connection import MAX_ANSWER, ServerTLS, ServerConnection

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")
_DATABASE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HOST = re.compile(r"^[A-Za-z0-9_.:%-]{1,255}$")
MESSAGE_CHARS = 300  # of an error's own text (a server's, the driver's) kept in InstanceError


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + f"... ({len(text)} characters)"


def _errno(e: BaseException) -> int | None:
    if isinstance(e, pymysql.err.MySQLError) and e.args and isinstance(e.args[0], int):
        return e.args[0]
    return None


def _transient(e: BaseException) -> bool:
    """Worth another attempt: refused or dropped connections. Not a timeout: a hung server
    will not answer the next attempt either, and observation must stay quick."""
    return (
        isinstance(e, pymysql.err.OperationalError)
        and _errno(e) in TRANSIENT_ERRNOS
        and "timed out" not in str(e)
    )


# the GTID of a transaction's first event in SHOW BINLOG EVENTS: MySQL "SET @@SESSION.GTID_NEXT=
# '<uuid>:<n>'", MariaDB "BEGIN GTID <domain>-<server>-<seq>" (or "GTID ..." for DDL)
_GTID_NEXT = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'|\bGTID\s+(\d+-\d+-\d+)")


def _its_failure(method):
    """For the methods that read a server's answer into values: whatever it answered that does
    not parse (a tenant's server chooses what it says) is that server's InstanceError, like a
    failed statement, never another exception that would end the caller's pass."""

    @functools.wraps(method)
    def wrapper(self: "Instance", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except InstanceError:
            raise
        except Exception as e:  # noqa: BLE001 - see above
            raise self._error(e, f"{method.__name__.strip('_')}: its answer does not parse") from None

    return wrapper


@dataclass
class Instance:
    """Operations on one server. Not thread-safe: one Instance per thread."""

    host: str | None  # None: no address yet (unreachable, never localhost)
    port: int
    user: str
    password: str = field(repr=False)
    name: str = ""
    connect_timeout: float = 1.0
    read_timeout: float = 5.0
    connect_attempts: int = 3
    slow_timeout: float = 30.0  # statements that wait on the server: STOP REPLICA, read_only
    # seconds one exchange may take in all (a statement and its whole answer; a login); None:
    # read_timeout. Slow statements have their own (slow_timeout, wait_for's timeout, CLONE)
    deadline: float | None = None
    max_answer: int = MAX_ANSWER  # bytes one exchange may read
    tls: ssl.SSLContext | None = field(default=None, repr=False)  # see tls_context()
    # the name the server's certificate must carry (with a ServerTLS `tls`); None: the chain only
    tls_name: str | None = None
    plaintext: bool = False  # True: never TLS, not even the driver's unverified TLS when it can (tls None)
    _conn: ServerConnection | None = field(default=None, repr=False)
    _dialect: Dialect | None = field(default=None, repr=False)
    _has_clone: bool | None = field(default=None, repr=False)  # per connection; None: not checked
    # the GTIDs before each finished binary log, by (file, size): read once, from its header
    _binlog_headers: dict = field(default_factory=dict, repr=False)
    _purged: Any = field(default=None, repr=False)  # the last purged set read (MariaDB), see purged_gtids

    def __post_init__(self):
        self.name = self.name or f"{self.host}:{self.port}"

    # -- plumbing --------------------------------------------------------------------------------
    @property
    def exchange_deadline(self) -> float:
        return self.deadline if self.deadline is not None else self.read_timeout

    def _open(self, read_timeout: float | None = None) -> ServerConnection:
        """A new connection; `read_timeout` (default: the instance's) is also the deadline of
        each of its exchanges, unless the instance's `deadline` is shorter than the default."""
        if not self.host:  # pymysql would take "no host" for localhost
            raise pymysql.err.OperationalError(2005, "no address (its Pod has no IP)")
        tls, tls_name = self.tls, None
        if self.tls_name and isinstance(self.tls, ServerTLS):  # the name checked, see ServerTLS
            tls, tls_name = self.tls.naming(), self.tls_name

        @retry(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self.connect_attempts),
            wait=wait_exponential(multiplier=0.1, max=0.5),
            reraise=True,
        )
        def attempt():
            return ServerConnection(
                deadline=self.connect_timeout + self.exchange_deadline,
                cap=self.max_answer,
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password,
                connect_timeout=self.connect_timeout,
                read_timeout=read_timeout or self.read_timeout,
                write_timeout=read_timeout or self.read_timeout,
                autocommit=True,
                charset="utf8mb4",
                ssl=tls,
                ssl_disabled=self.plaintext,
                tls_name=tls_name,
            )

        return attempt()

    def _error(self, e: BaseException, what: str, secrets: Iterable[str | None] = ()) -> InstanceError:
        """`e` as this server's failure: redacted first (a cut could split a secret), then cut."""
        text = redact(str(e) or type(e).__name__, [self.password, *secrets])
        return InstanceError(f"{self.name}: {what}: {_short(text)}", _errno(e))

    def _exchange(
        self, conn: ServerConnection, sql: str, args: tuple, seconds: float | None = None, cursor: Any = None
    ) -> list:
        """One statement and its whole answer, within `seconds` (default: the instance's
        deadline) and `max_answer` bytes."""
        conn.bound(seconds or self.exchange_deadline, self.max_answer)
        with conn.cursor(cursor or pymysql.cursors.Cursor) as cur:
            cur.execute(sql, args or None)
            return list(cur.fetchall())

    def _fresh(self, seconds: float) -> ServerConnection:
        """A connection of its own, whose exchanges may take `seconds` each."""
        try:
            return self._open(read_timeout=seconds)
        except pymysql.err.MySQLError as e:
            raise self._error(e, "cannot connect") from None

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._conn = None
            self._has_clone = None
            self._binlog_headers.clear()  # the next connection may reach another server's files

    def _connection(self) -> ServerConnection:
        if self._conn is None:
            try:
                self._conn = self._open()
            except pymysql.err.MySQLError as e:
                raise self._error(e, "cannot connect") from None
        return self._conn

    def _run(
        self, sql: str, args: tuple = (), secrets: Iterable[str | None] = (), dict_rows: bool = False
    ) -> list:
        conn = self._connection()
        try:
            return self._exchange(conn, sql, args, cursor=pymysql.cursors.DictCursor if dict_rows else None)
        except pymysql.err.MySQLError as e:
            if isinstance(e, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
                self.close()  # the next call reconnects
            raise self._error(e, sql.split(" ")[0] + " failed", secrets) from None
        except Exception as e:  # noqa: BLE001 - the driver's own breakage (it closed the socket
            # and re-raised, e.g. AttributeError on a connection it had already torn down)
            self.close()
            raise self._error(e, sql.split(" ")[0] + " failed (connection broken)", secrets) from None

    def _run_slow(self, sql: str, args: tuple = (), secrets: Iterable[str | None] = ()) -> None:
        """A statement that may legitimately wait (STOP REPLICA while the IO thread reconnects to a
        hung source, read_only waiting for commits): its own connection, a longer read timeout."""
        conn = self._fresh(self.slow_timeout)
        try:
            self._exchange(conn, sql, args, self.slow_timeout)
        except pymysql.err.MySQLError as e:
            raise self._error(e, sql.split(" ")[0] + " failed", secrets) from None
        except Exception as e:  # noqa: BLE001 - the driver's own breakage, as in _run
            raise self._error(e, sql.split(" ")[0] + " failed (connection broken)", secrets) from None
        finally:
            with contextlib.suppress(Exception):  # already closed by the driver
                conn.close()

    def execute(self, sql: str, args: tuple = (), secrets: Iterable[str | None] = ()) -> list:
        return self._run(sql, args, secrets)

    def scalar(self, sql: str, args: tuple = ()) -> Any:
        rows = self._run(sql, args)
        return rows[0][0] if rows else None

    @property
    @_its_failure
    def dialect(self) -> Dialect:
        if self._dialect is None:
            version, comment = self._run(
                f"SELECT LEFT(VERSION(), {TEXT_CHARS}), LEFT(@@version_comment, {TEXT_CHARS})"
            )[0]
            self._dialect = dialect_for(detect(version, comment))
        return self._dialect

    # -- observe ---------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """Everything the decision needs; `reachable=False` (never an exception) when it is down."""
        try:
            d = self.dialect
            # four statements (MariaDB: five while its one binary log is the active file), none
            # remembered: a change made through any connection is seen at the next pass
            server_id, uuid, read_only, hostname, report_host, executed, purged = self._run(
                d.server_state_sql(TEXT_CHARS, GTID_TEXT_CHARS + 1)
            )[0]
            for which, text in (("executed", executed), ("purged", purged)):
                if text is not None and len(text) > GTID_TEXT_CHARS:
                    raise InstanceError(
                        f"{self.name}: its {which} GTID set is longer than {GTID_TEXT_CHARS} "
                        "characters: refused (a set read in part would be a wrong one)"
                    )
            replica = self.replica_status()
            state = {str(k).lower(): v for k, v in self._run(d.semisync_state_sql())}
            acks = state.get(d.semisync_ack_count.lower()) if d.semisync_ack_count else None
            uptime = state.get("uptime")
            clients = state.get(d.semisync_source_clients.lower())
            heartbeats = state.get(d.HEARTBEATS)

            def on(name: str) -> bool:
                return str(state.get(name.lower(), "")).upper() == "ON"

            return Observation(
                reachable=True,
                version=d.version,
                server_id=int(server_id),
                server_uuid=uuid,
                hostname=hostname,
                report_host=report_host,
                read_only=bool(int(read_only)),
                executed=d.parse_gtids(executed),
                purged=d.parse_gtids(purged) if purged is not None else self.purged_gtids(),
                replica=replica,
                semisync_source_enabled=on(d.semisync_source_enabled),
                semisync_source_active=on(d.semisync_source_status),
                semisync_replica_enabled=on(d.semisync_replica_enabled),
                semisync_replica_active=on(d.semisync_replica_status),
                semisync_ack_count=int(acks) if acks is not None else None,
                semisync_clients=int(clients) if clients is not None else None,
                heartbeats=int(heartbeats) if heartbeats is not None else None,
                uptime=float(uptime) if uptime is not None else None,
                clone=self.clone_status() if d.flavor.value == "mysql" else None,
            )
        except InstanceError as e:
            self.close()
            return Observation(reachable=False, error=_short(str(e)))
        except Exception as e:  # noqa: BLE001 - whatever a server sent (a value that does not
            # parse, a GTID set that does not), it is that server's failure, never the pass's
            self.close()
            return Observation(reachable=False, error=str(self._error(e, "observing failed")))

    @_its_failure
    def replica_status(self) -> ReplicaStatus | None:
        d = self.dialect
        rows = self._run(d.show_replica_status(), dict_rows=True)
        if not rows:
            return None
        r, c = rows[0], d.columns
        behind = r.get(c.seconds_behind)
        return ReplicaStatus(
            source_host=r.get(c.source_host) or "",
            source_port=int(r.get(c.source_port) or 0),
            io_state=r.get(c.io_running) or "No",
            sql_running=r.get(c.sql_running) == "Yes",
            io_errno=int(r.get(c.io_errno) or 0),
            io_error=_short(r.get(c.io_error) or ""),
            sql_errno=int(r.get(c.sql_errno) or 0),
            sql_error=_short(r.get(c.sql_error) or ""),
            seconds_behind=None if behind is None else int(behind),
            received=d.parse_gtids(r.get(c.received) or ""),
            ssl_allowed=r.get(c.ssl_allowed) == "Yes",
            ssl_verify=r.get(c.ssl_verify) == "Yes",
        )

    @_its_failure
    def purged_gtids(self):
        """MariaDB has no variable for it: the header of its oldest binary log. SHOW BINARY LOGS
        waits while a commit waits for a semi-sync acknowledgement (a primary whose replicas are
        gone): then the last set read stands (it grows only by a purge, which waits too), so
        that such a primary is not taken for unreachable and failed over."""
        d = self.dialect
        sql = d.purged_gtids_sql()
        if sql is not None:
            return d.parse_gtids(self.scalar(sql))
        try:
            logs = [(str(r[0]), int(r[1])) for r in self._run("SHOW BINARY LOGS")]
            self._purged = self._header(logs[0], finished=len(logs) > 1) if logs else d.parse_gtids("")
        except InstanceError as e:
            if self._purged is None or e.errno != LOST_CONNECTION:
                raise
        return self._purged

    def _header(self, log: tuple[str, int], finished: bool):
        """The GTIDs before binary log `log` (file, size); a finished file's are read once."""
        previous = self._binlog_headers.get(log)
        if previous is None:
            previous = self._gtids_before(log[0])
            if finished:  # it never changes again
                self._binlog_headers[log] = previous
        return previous

    def _gtids_before(self, file: str):
        """The GTIDs written before binary log `file`, from its header event: Previous_gtids
        (MySQL), Gtid_list (MariaDB). Empty when it has none (a server's very first file)."""
        for row in self._run("SHOW BINLOG EVENTS IN %s LIMIT 4", (file,), dict_rows=True):
            if row["Event_type"] in ("Gtid_list", "Previous_gtids"):
                return self.dialect.parse_gtids(row["Info"].strip("[]"))
        return self.dialect.parse_gtids("")

    @_its_failure
    def binary_logs(self) -> list[BinlogFile]:
        """This server's binary logs, oldest first, each with the GTIDs written before it (the
        headers of finished files are read once: they never change)."""
        logs = [(str(r[0]), int(r[1])) for r in self._run("SHOW BINARY LOGS")]
        out = [
            BinlogFile(name, size, self._header((name, size), finished=i < len(logs) - 1))
            for i, (name, size) in enumerate(logs)
        ]
        live = set(logs)
        for key in [k for k in self._binlog_headers if k not in live]:
            del self._binlog_headers[key]
        return out

    def purge_binary_logs(self, plan: PurgeBefore | PurgeTo) -> list[str]:
        """Carry out a purge plan (binlogs.plan_purge); the files that went. The server keeps a
        file a connected replica is reading whatever the plan says."""
        before = [str(r[0]) for r in self._run("SHOW BINARY LOGS")]
        if isinstance(plan, PurgeTo):
            self._run("PURGE BINARY LOGS TO %s", (plan.file,))
        else:
            self._run("PURGE BINARY LOGS BEFORE NOW() - INTERVAL %s SECOND", (int(plan.seconds),))
        after = {str(r[0]) for r in self._run("SHOW BINARY LOGS")}
        return [f for f in before if f not in after]

    @_its_failure
    def clone_status(self) -> CloneStatus | None:
        """The last copy onto this server (MySQL CLONE), or None: no clone plugin, never cloned.
        One query a pass once the plugin is there (checked once per connection before that)."""
        if self._has_clone is None:
            self._has_clone = self._clone_loaded()
        if not self._has_clone:
            return None
        rows = self._run(
            "SELECT s.STATE, s.ERROR_NO, s.ERROR_MESSAGE, UNIX_TIMESTAMP(s.END_TIME), "
            "UNIX_TIMESTAMP() - (SELECT VARIABLE_VALUE FROM performance_schema.global_status "
            "WHERE VARIABLE_NAME = 'Uptime'), "
            "(SELECT COALESCE(SUM(p.DATA), 0) FROM performance_schema.clone_progress p), "
            "(SELECT COALESCE(SUM(p.ESTIMATE), 0) FROM performance_schema.clone_progress p) "
            "FROM performance_schema.clone_status s"
        )
        if not rows:
            return None
        state, errno, message, ended, booted, copied, total = rows[0]
        stage = clone_stage(
            state,
            int(errno or 0),
            None if ended is None else float(ended),
            None if booted is None else float(booted),
        )
        if stage is None:
            return None
        return CloneStatus(
            stage, (message or "")[:512] if stage == CLONE_FAILED else "", int(copied), int(total)
        )

    ERRANT_SCAN_BYTES = 1024 * 1024 * 1024  # read from one binary log by errant_events

    @_its_failure
    def errant_events(self, gtids: str, limit: int = 2000) -> list[str]:
        """The binary log events of the transactions `gtids` (errant ones, about to be discarded),
        one line each ("file:position type info"), newest binary logs first, at most `limit`
        events, looking through the last 4 binary logs. SHOW BINLOG EVENTS lists the tables each
        transaction touched (Table_map) and statement-based events' statements, not row images.
        MariaDB's errant set holds the highest sequence number per server: the record may also
        hold that server's earlier transactions (more than discarded, never less)."""
        d = self.dialect
        wanted = d.parse_gtids(gtids)
        out: list[str] = []
        logs = [r[0] for r in self._run("SHOW BINARY LOGS")][-4:]
        conn = self._fresh(self.slow_timeout)
        try:
            for name in reversed(logs):
                # streamed (the rows are not all held): the cap bounds the time, not the memory
                conn.bound(self.slow_timeout, self.ERRANT_SCAN_BYTES)
                with conn.cursor(pymysql.cursors.SSCursor) as cur:
                    cur.execute("SHOW BINLOG EVENTS IN %s LIMIT 500000", (name,))
                    keep = False
                    for _log, pos, etype, _sid, _end, info in cur.fetchall_unbuffered():
                        if etype.startswith("Gtid") and etype != "Gtid_list" and etype != "Gtids_log":
                            m = _GTID_NEXT.search(info or "")
                            keep = bool(m) and wanted.contains(d.parse_gtids(m.group(1) or m.group(2)))
                        if keep and len(out) < limit:
                            out.append(_short(f"{name}:{pos} {etype} {info}"))
        except pymysql.err.MySQLError as e:
            raise self._error(e, "SHOW BINLOG EVENTS failed") from None
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return out

    def _clone_loaded(self) -> bool:
        return bool(self._run("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone'"))

    def ensure_clone_plugin(self) -> None:
        """MySQL's clone plugin (donor and recipient): loaded at start by the operator's
        my.cnf; installed here on a server started before that, when it is writable."""
        if not self._clone_loaded():
            try:
                self._run("INSTALL PLUGIN clone SONAME 'mysql_clone.so'")
            except InstanceError as e:
                raise InstanceError(
                    f"{self.name}: the clone plugin is not loaded and cannot be installed on a "
                    f"read-only server ({e}): it is loaded once the server restarts with the "
                    "operator's configuration",
                    e.errno,
                ) from None
        self._has_clone = True

    CLONE_START_WAIT = 3.0  # seconds a new copy is watched for an early refusal
    CLONE_SECONDS = 24 * 3600  # the CLONE statement's deadline: the copy of a whole data directory

    def start_clone(
        self,
        host: str,
        port: int,
        user: str,
        password: str,
        tls_ca: str | None,
        require_ssl: bool | None = None,
    ) -> None:
        """Start replacing this server's data by a copy of host:port's (CLONE INSTANCE, as
        `user`), on a connection of its own in a thread: the copy runs in the server, watched
        through clone_status. An early refusal (privileges, donor unreachable) raises. A copy
        ends with the server restarting on it: under start.sh, which supervises mysqld
        (MYSQLD_PARENT_PID), in place, and this session is lost; without a supervisor the
        statement fails with ER_CLONE_RESTART and the server shuts down, for its container to
        start it on the copy. Neither is a failure. Killing the CLONE session would abort the copy
        and leave the server empty: this connection is never killed, only dropped (the copy goes
        on in the server). `require_ssl` (default: with a CA) encrypts the copy; a CA also verifies
        the donor's certificate."""
        encrypt = bool(tls_ca) if require_ssl is None else require_ssl
        self.ensure_clone_plugin()
        # CLONE is refused under super_read_only; read_only stays on (only accounts with
        # CONNECTION_ADMIN could write, and the copy replaces whatever they would); the server
        # restarts on the copy with super_read_only on again (my.cnf)
        self._run_slow("SET GLOBAL super_read_only = OFF")
        self._run("SET GLOBAL clone_valid_donor_list = %s", (f"{host}:{int(port)}",))
        if tls_ca:
            self._run("SET GLOBAL clone_ssl_ca = %s", (tls_ca,))
        conn = self._fresh(self.CLONE_SECONDS)
        failure: list[InstanceError] = []

        def run() -> None:
            try:
                self._exchange(
                    conn,
                    f"CLONE INSTANCE FROM %s@%s:{int(port)} IDENTIFIED BY %s "
                    + ("REQUIRE SSL" if encrypt else "REQUIRE NO SSL"),
                    (user, host, password),
                    self.CLONE_SECONDS,
                )
            except pymysql.err.MySQLError as e:
                if _errno(e) not in CLONE_SESSION_ENDS:
                    failure.append(self._error(e, "CLONE INSTANCE failed", [password]))
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

        worker = threading.Thread(target=run, name=f"clone-{self.name}", daemon=True)
        worker.start()
        worker.join(self.CLONE_START_WAIT)
        if failure:
            raise failure[0]

    # -- act -------------------------------------------------------------------------------------
    def set_read_only(self, on: bool) -> None:
        for sql in self.dialect.set_read_only(on):
            self._run_slow(sql)

    def fence(self, keep_users: Iterable[str] = ()) -> int:
        """Stop a possibly stuck primary from taking writes: kill client connections FIRST (a
        session waiting for a semi-sync acknowledgement that will never come holds the commit
        lock read-only needs; killed, its client never gets an OK), then read-only. Returns
        the number of connections killed.

        MySQL does not end the acknowledgement wait of a killed session: it would hold the lock
        for good (the source timeout is effectively infinite). Such waiters are released by
        turning the semi-sync source off - only once nobody who could still receive an OK is
        connected: offline_mode first refuses new connections of accounts without
        CONNECTION_ADMIN and drops the open ones, a second kill takes the rest, and a session
        still waiting that was not killed stops the fence (raises). offline_mode is lifted
        once the server is read-only."""
        killed = self.kill_client_connections(keep_users)
        offline = self.dialect.offline_mode(True)  # none on MariaDB, whose killed waiters stop waiting
        if offline and self.ack_waiters():
            killed += self._end_ack_waits(keep_users)
        self.set_read_only(True)
        for sql in self.dialect.offline_mode(False):  # read-only now: clients may read again
            self._run(sql)
        return len(killed)

    def _end_ack_waits(self, keep_users: Iterable[str]) -> list[int]:
        """MySQL: offline_mode on (the caller lifts it), every client connection killed, then the
        semi-sync source off, which ends the killed sessions' waits; raises, leaving the source
        on, when a session still waiting was not killed. Returns the connections killed."""
        for sql in self.dialect.offline_mode(True):
            self._run(sql)
        killed = self.kill_client_connections(keep_users)
        alive = [w for w in self.ack_waiters() if w["COMMAND"] != "Killed"]
        if alive:
            raise InstanceError(
                "sessions of "
                + ", ".join(sorted({str(w["USER"]) for w in alive}))
                + " wait for a semi-sync acknowledgement and were not killed: the semi-sync "
                "source stays on (turning it off would acknowledge their commits)"
            )
        for sql, args in self.dialect.disable_semisync_source():
            self._run(sql, args)
        return killed

    STUCK_COMMIT_SECONDS = 5

    @_its_failure
    def release_stuck_commits(self, keep_users: Iterable[str] = ()) -> int:
        """MySQL, a primary a copy is made from while no semi-sync replica is connected (its only
        replicas are being re-seeded): CLONE waits for every transaction prepared in the binary
        log to end, and such a commit waits for an acknowledgement only a copied replica can
        give - neither ever ends, and KILL does not end a MySQL acknowledgement wait. Once a
        commit has waited STUCK_COMMIT_SECONDS with no semi-sync replica connected, the waits
        are ended as fence() ends them, without making the server read-only: clients dropped and
        refused (offline_mode), their clients get an error, never an acknowledgement (the
        transactions are in the binary log, and then in the copy, like any unacknowledged write
        a failover may keep); the semi-sync source off until no session waits, on again, then
        clients are let in. Returns the sessions whose waits were ended - those waiting when it
        began and those killed (offline_mode may drop a waiting session before the KILL reaches
        it); 0 when there was nothing to do (and always on MariaDB, whose donor does this
        itself: sh/seed.sh release_commits)."""
        d = self.dialect
        if not d.offline_mode(True):
            return 0
        waiting = self.ack_waiters()
        if not any(int(w["TIME"] or 0) >= self.STUCK_COMMIT_SECONDS for w in waiting):
            return 0
        clients = self._run("SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Rpl_semi_sync%clients'")
        if any(int(value or 0) > 0 for _, value in clients):
            return 0  # a replica may still acknowledge them
        try:
            killed = self._end_ack_waits(keep_users)
            deadline = time.monotonic() + 10
            while self.ack_waiters() and time.monotonic() < deadline:
                time.sleep(0.05)  # the released sessions commit; switched on before, they wait again
        finally:
            self._run(f"SET GLOBAL {d.semisync_source_enabled} = ON")
            for sql in d.offline_mode(False):
                self._run(sql)
        return len({int(w["ID"]) for w in waiting} | set(killed))

    @_its_failure
    def ack_waiters(self) -> list[dict]:
        """PROCESSLIST rows (ID, USER, COMMAND, TIME) of sessions waiting for a semi-sync
        acknowledgement; COMMAND is 'Killed' for those killed while waiting."""
        return self._run(
            "SELECT ID, USER, COMMAND, TIME FROM information_schema.PROCESSLIST "
            "WHERE STATE LIKE 'Waiting for semi-sync ACK%'",
            dict_rows=True,
        )

    def stop_replica(self) -> None:
        self._run_slow(self.dialect.stop_replica())

    def stop_io_thread(self) -> None:
        self._run_slow(self.dialect.stop_io_thread())

    def stop_receiving(self, complete_within: float = 3.0, attempts: int = 3) -> None:
        """A running receiver (IO thread) stopped between two transactions, not inside one. A
        transaction only partly in the relay log holds MySQL's multi-threaded applier (there is
        no single-threaded one since 9.x: its coordinator waits for the rest), and STOP REPLICA
        then fails with 1875 for up to 60 s, and a failover's promotion with it (measured: a
        stop under writes cut one in 3 of 19 runs). When a stop left one half queued, the receiver
        starts again (auto-positioning fetches that transaction whole) and stops once it is
        complete, `attempts` times at most. It is waited for while the receiver is connected (a
        large transaction on a loaded machine takes seconds, the source first scans its binary
        logs for it, and each start fetches it from its beginning again: seen in CI), up to
        `slow_timeout`; a receiver not connected for `complete_within` seconds (a source that does
        not answer) leaves it to the server (the applier gives it up by itself). Only for a
        failover's quiesce: the receiver gets whatever the source sends meanwhile, and the
        failover decides again on what each replica holds afterwards."""
        status = self.replica_status()
        if status is None or status.io_state == "No":
            return  # not receiving: left as it is
        self.stop_io_thread()
        sql = self.dialect.QUEUEING_SQL
        if sql is None:
            return

        def queueing() -> str:
            rows = self._run(sql)
            return str(rows[0][0] or "") if rows else ""

        for _ in range(attempts):
            half = queueing()
            if not half:
                return
            wanted = self.dialect.parse_gtids(half)
            self._run(self.dialect.start_io_thread())
            seen = time.monotonic()  # last seen connected (or started)
            deadline = seen + self.slow_timeout
            while True:
                now, status = time.monotonic(), self.replica_status()
                if status is None or status.received.contains(wanted):
                    break  # received whole (QUEUEING_TRANSACTION reads "" while it reconnects)
                if status.io_state == "Yes":
                    seen = now
                elif now - seen >= complete_within:
                    break  # the source does not answer
                if now >= deadline:
                    break  # not in time
                time.sleep(0.05)
            self.stop_io_thread()
            if queueing() == half:
                return  # not completed: left to the server

    def start_replica(self) -> None:
        self._run(self.dialect.start_replica())

    def start_sql_thread(self) -> None:
        self._run(self.dialect.start_replica() + " SQL_THREAD")

    def reset_replica(self) -> None:
        """Forget the source entirely (a promoted or removed instance)."""
        self._run_slow(self.dialect.stop_replica())
        self._run(self.dialect.reset_replica_all())

    def point_at(
        self,
        source_host: str,
        source_port: int,
        user: str,
        password: str,
        start: bool = True,
        attempts: int = 5,
        tls_ca: str | None = None,
    ) -> None:
        """Replicate from a source with GTID auto-positioning (idempotent); with `tls_ca` (a CA
        file on the server's own file system) over TLS verifying the source's certificate.

        CHANGE MASTER and START are two statements: another actor (a second operator process, a
        CLI switchover promoting this server) may RESET the replica between them, and START then
        fails with "MASTER_HOST was not set". The pair is repeated until START runs on the
        configuration written here, so the call either leaves it pointed and started or fails
        for a reason other than a lost configuration."""
        d = self.dialect
        self._stop_replica()
        for sql in d.prepare_replica_position():
            self._run(sql)
        sql, args = d.change_source(source_host, source_port, user, password, tls_ca=tls_ca)
        for attempt in range(1, attempts + 1):
            self._run(sql, args, secrets=[password])
            if not start:
                return
            try:
                self._run(d.start_replica())
                return
            except InstanceError as e:
                if e.errno != ER_REPLICA_NOT_CONFIGURED or attempt == attempts:
                    raise

    def _stop_replica(self) -> None:
        """STOP REPLICA, and when the server gave up waiting for a busy SQL thread (1875: it got the
        stop signal and stops once its current task is done), the wait for that, up to
        slow_timeout: the source cannot be changed while the thread runs, and failing here would
        leave the replica on its old source until a later pass (after a failover, a new primary
        with no replica acknowledging its commits)."""
        try:
            self._run_slow(self.dialect.stop_replica())
        except InstanceError as e:
            if e.errno != ER_STOP_REPLICA_SQL_THREAD_TIMEOUT:
                raise
            stopped, _ = self._replica_until(
                lambda r: r is None or (r.io_state == "No" and not r.sql_running), self.slow_timeout
            )
            if not stopped:
                raise InstanceError(
                    f"{self.name}: its SQL thread did not stop within {self.slow_timeout:.0f}s "
                    f"after STOP REPLICA ({e})",
                    e.errno,
                ) from None

    def _replica_until(
        self, done: Callable[[ReplicaStatus | None], bool], timeout: float
    ) -> tuple[bool, ReplicaStatus | None]:
        """SHOW REPLICA STATUS read every 0.1 s until it is `done` (True) or `timeout` seconds
        have passed (False), with the last status read."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.replica_status()
            if done(status):
                return True, status
            if time.monotonic() >= deadline:
                return False, status
            time.sleep(0.1)

    @_its_failure
    def tls_not_after(self) -> dt.datetime | None:
        """When the certificate the server presents to new connections stops being valid (UTC);
        None without TLS. Asked on a new connection: MariaDB reports the certificate of the
        connection's own TLS session, which an open connection keeps across a reload."""
        conn = self._fresh(self.read_timeout)
        try:
            rows = self._exchange(conn, self.dialect.tls_not_after_sql(), ())
            row = rows[0] if rows else None
        except pymysql.err.MySQLError as e:
            raise self._error(e, "reading Ssl_server_not_after failed") from None
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return parse_tls_time(row[1] if row else "")

    def reload_tls(self) -> None:
        """Serve the certificate, key and CA now in the server's files to new connections (MariaDB
        FLUSH NO_WRITE_TO_BINLOG SSL: RELOAD; MySQL ALTER INSTANCE RELOAD TLS: CONNECTION_ADMIN),
        never binlogged. Open connections, replicas' included, keep their session."""
        self._run(self.dialect.reload_tls())

    @_its_failure
    def wait_for(self, gtids, timeout: float) -> bool:
        """True once `gtids` are applied here, False after `timeout` seconds."""
        if gtids is None or gtids.is_empty():
            return True
        d = self.dialect
        sql, args = d.wait_for_gtids(gtids, timeout)
        conn = self._fresh(timeout + 5)
        try:
            return d.wait_succeeded(self._exchange(conn, sql, args, timeout + 5)[0][0])
        except pymysql.err.MySQLError as e:
            raise self._error(e, "waiting for GTIDs failed") from None
        finally:
            conn.close()

    @_its_failure
    def kill_client_connections(self, keep_users: Iterable[str] = ()) -> list[int]:
        """Kill application connections; returns the ids killed."""
        own = int(self.scalar("SELECT CONNECTION_ID()"))
        rows = self._run("SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST", dict_rows=True)
        killed = []
        for cid in connections_to_kill(rows, own, [self.user, *keep_users]):
            try:
                self._run("KILL CONNECTION %s", (cid,))
                killed.append(cid)
            except InstanceError as e:
                if e.errno != 1094:  # unknown thread id: it ended on its own
                    raise
        return killed

    def set_password(self, user: str, host: str, password: str) -> None:
        """ALTER USER ... IDENTIFIED BY (binlogged: it replicates; on MariaDB by its hash, see
        db/statements.identified)."""
        if not _NAME.match(user) or not _HOST.match(host):
            raise InstanceError(f"account {user!r}@{host!r} is invalid")
        clause, secret = identified(self.dialect.flavor, None, password)
        self._run(f"ALTER USER %s@%s {clause}", (user, host, *secret), secrets=[password, *secret])

    def ensure_user(
        self, user: str, host: str, password: str, grants: Iterable[Grant], local: bool = False
    ) -> list[str]:
        """Create or converge an account to exactly `grants` (db/accounts.py): its password, and
        its global, database and table privileges - what it holds beyond them is revoked.
        `local=True` keeps the statements out of the binary log (only for per-server accounts).
        Returns what changed besides the password ("created", "revoked ...", "granted ...")."""
        if not _NAME.match(user):
            raise InstanceError(f"user name {user!r} is invalid: use letters, digits, _ . -")
        if not _HOST.match(host):
            raise InstanceError(f"user host {host!r} is invalid: use a host name, IP or '%'")
        grants = tuple(grants)
        if local:
            self._run("SET SESSION sql_log_bin = 0")
        changes = []
        try:
            current = self.grants_of(user, host)
            clause, secret = identified(self.dialect.flavor, None, password)
            hidden = [password, *secret]
            if current is None:
                # only then: MySQL refuses even CREATE USER IF NOT EXISTS of an account that exists
                # and is the definer of a stored object (error 4006)
                self._run(f"CREATE USER IF NOT EXISTS %s@%s {clause}", (user, host, *secret), secrets=hidden)
                changes.append("created")
            self._run(f"ALTER USER %s@%s {clause}", (user, host, *secret), secrets=hidden)
            todo = accounts.plan(current or {}, grants)
            try:
                for g in todo.revoke:
                    self._run(g.revoke_sql(), (user, host))
                    changes.append(f"revoked {g.clause()}")
            except InstanceError as e:
                if e.errno not in ACCESS_DENIED:
                    raise
                # it holds what this account does not (granted by root): REVOKE of one privilege
                # needs it WITH GRANT OPTION, this one needs CREATE USER only; the list follows
                self._run("REVOKE ALL PRIVILEGES, GRANT OPTION FROM %s@%s", (user, host))
                changes.append("revoked ALL PRIVILEGES, GRANT OPTION")
                todo = accounts.plan({}, grants)
            for g in todo.grant:
                self._run(g.grant_sql(), (user, host))
                changes.append(f"granted {g.clause()}")
        finally:
            if local:
                self._run("SET SESSION sql_log_bin = 1")
        return changes

    @_its_failure
    def grants_of(self, user: str, host: str) -> accounts.Grants | None:
        """The account's grants as `accounts.parse_show_grants` reads them; None if it does not exist."""
        try:
            rows = self._run("SHOW GRANTS FOR %s@%s", (user, host))
        except InstanceError as e:
            if e.errno == ER_NONEXISTING_GRANT:
                return None
            raise
        return accounts.parse_show_grants((r[0] for r in rows), self.dialect.version)

    def shed_privileges(self, grants: Iterable[Grant], host: str = "%") -> list[str]:
        """Reduce this connection's account, `self.user`@`host` (an operator account from before
        privileges were listed: ALL PRIVILEGES WITH GRANT OPTION) to exactly `grants`, in one
        REVOKE of what it holds beyond them on *.*, after granting itself what `grants` adds
        elsewhere (the app database). Never revokes a listed privilege or GRANT OPTION, so it
        cannot lock itself out, nor SET USER a person granted an account without ALL
        (KEPT_IF_GRANTED); does nothing unless it holds every listed global privilege with GRANT
        OPTION (a narrower account was made by someone else: left alone). MariaDB only (checked on
        10.11 and 11.8); returns the privileges revoked. Connections already open keep what
        they had (servers check global privileges at login)."""
        grants = tuple(grants)
        if self.dialect.flavor.value != "mariadb":
            return []
        user = self.user
        listed, _ = accounts.expected(grants).get("*.*", (frozenset(), True))
        held, option = (self.grants_of(user, host) or {}).get("*.*", (frozenset(), False))
        kept = KEPT_IF_GRANTED  # a person's own grant, outside the list on purpose
        if "ALL PRIVILEGES" in held:
            kept = frozenset()  # an account from before the lists: it goes with the rest
            held = (
                frozenset(r[0].upper() for r in self._run("SHOW PRIVILEGES"))
                - {"USAGE", "GRANT OPTION", "PROXY"}
                | listed
            )
        if not option or not listed <= held:
            return []
        extra = sorted(held - listed - kept)
        if not extra:
            return []
        for g in grants:
            if g.target != "*.*":
                self._run(g.grant_sql(), (user, host))
        self._run(accounts.Grant(tuple(extra)).revoke_sql(), (user, host))
        return extra

    # -- SQL objects (MySQLDatabase, MySQLUser, MySQLGrant: db/statements.py) --------------------
    @_its_failure
    def database_state(self, name: str) -> DatabaseState | None:
        rows = self._run(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
            "WHERE SCHEMA_NAME = %s",
            (name,),
        )
        return DatabaseState(rows[0][0], rows[0][1]) if rows else None

    @_its_failure
    def user_state(self, user: str, host: str) -> UserState | None:
        rows = self._run(
            "SELECT max_user_connections, ssl_type, plugin FROM mysql.user WHERE User = %s AND Host = %s",
            (user, host),
        )
        if not rows:
            return None
        limit, ssl_type, plugin = rows[0]
        return UserState(int(limit), str(ssl_type or ""), str(plugin or ""))

    def run_statements(
        self, statements: Iterable[Statement], secrets: Iterable[str | None] = ()
    ) -> list[str]:
        """Each statement in order (they replicate: run them on the primary); what each did."""
        done = []
        secrets = list(secrets)
        for st in statements:
            self._run(st.sql, st.args, secrets + list(st.hide))
            done.append(st.what)
        return done

    @_its_failure
    def events(self) -> list[Event]:
        """Every scheduled event on this server (the operator's account holds EVENT on *.*)."""
        rows = self._run("SELECT EVENT_SCHEMA, EVENT_NAME, STATUS, DEFINER FROM information_schema.EVENTS")
        return [
            Event(str(schema), str(name), str(status), str(definer)) for schema, name, status, definer in rows
        ]

    def enable_event(self, event: Event, as_user: Login | None) -> None:
        """ALTER EVENT ... ENABLE, keeping its definer (binlogged: it replicates). A plain ALTER
        EVENT makes whoever runs it the event's definer, and the event then runs with that
        account's privileges. With `as_user`, the login of the event's definer, the statement
        runs as that account on a short-lived connection (the same server, TLS context and
        timeouts): the definer stays. Without, it runs on the operator's connection naming the
        definer (ALTER DEFINER = ...), which needs SET USER (MariaDB) / SET_ANY_DEFINER (MySQL):
        the operator's account is not granted it (it would let it define a stored program that
        runs as root), so unless a person granted it the server refuses with 1227."""
        target = f"{quote(event.schema)}.{quote(event.name)}"
        if as_user is None:
            user, _, host = event.definer.rpartition("@")
            # % in a user's identifiers is no placeholder
            self._run(f"ALTER DEFINER = %s@%s EVENT {target.replace('%', '%%')} ENABLE", (user, host))
            return
        definer = Instance(
            self.host,
            self.port,
            as_user.user,
            as_user.password,
            name=self.name,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            connect_attempts=self.connect_attempts,
            deadline=self.deadline,
            max_answer=self.max_answer,
            tls=self.tls,
            tls_name=self.tls_name,
            plaintext=self.plaintext,
        )
        try:
            definer._run(f"ALTER EVENT {target} ENABLE")  # no args: nothing taken for a placeholder
        finally:
            definer.close()

    def ensure_database(self, name: str) -> None:
        if not _DATABASE.match(name):
            raise InstanceError(f"database name {name!r} is invalid: use letters, digits and _")
        self._run(f"CREATE DATABASE IF NOT EXISTS `{name}`")

    def set_semisync_source(self, on: bool, ack_count: int = 1, timeout_ms: int = 4_294_967_295) -> None:
        """Semi-sync on the primary, AFTER_SYNC; the default timeout means "never fall back"."""
        d = self.dialect
        if on:
            self._install_semisync_plugins()
            for sql, args in d.enable_semisync_source(ack_count, timeout_ms):
                self._run(sql, args)
        else:
            if self._has_variable(d.semisync_source_enabled):
                for sql, args in d.disable_semisync_source():
                    self._run(sql, args)

    def set_semisync_replica(self, on: bool, restart_io: bool = True) -> None:
        """Semi-sync acknowledgements from this replica; restarts a running IO thread to apply
        (`restart_io=False` when the caller repoints and so restarts it anyway). An IO thread
        connected and already acknowledging as asked is left alone: a reconnect is never free
        (the source's name is resolved again; a primary whose only acknowledging replica
        reconnects holds every commit until it is back)."""
        d = self.dialect
        if on:
            self._install_semisync_plugins()
        elif not self._has_variable(d.semisync_replica_enabled):
            return
        stmts = d.enable_semisync_replica() if on else d.disable_semisync_replica()
        for sql, args in stmts:
            self._run(sql, args)
        if not restart_io:
            return
        status = self.replica_status()
        if status is None or status.io_state == "No":
            return
        if status.io_state == "Yes" and self._status_is_on(d.semisync_replica_status) == on:
            return  # the setting is read at the IO thread's start: it started as asked
        self._run_slow(d.stop_io_thread())
        try:
            self._run(d.start_io_thread())
        except InstanceError as e:
            if e.errno != ER_REPLICA_NOT_CONFIGURED:
                raise  # reset meanwhile: nothing left to restart

    def _has_variable(self, name: str) -> bool:
        return bool(self._run("SHOW GLOBAL VARIABLES LIKE %s", (name,)))

    def _status_is_on(self, name: str) -> bool:
        rows = self._run("SHOW GLOBAL STATUS LIKE %s", (name,))
        return bool(rows) and str(rows[0][1]).upper() == "ON"

    @_its_failure
    def wait_connected(self, timeout: float) -> bool:
        """True once this replica's IO thread is connected to its source (False after `timeout`
        seconds, or when it is not a replica or its IO thread is stopped)."""
        _, status = self._replica_until(lambda r: r is None or r.io_state in ("Yes", "No"), timeout)
        return status is not None and status.io_state == "Yes"

    def _install_semisync_plugins(self) -> None:
        for plugin, library in self.dialect.semisync_plugins():
            present = self._run("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = %s", (plugin,))
            if not present:
                self._run(f"INSTALL PLUGIN {plugin} SONAME %s", (library,))
