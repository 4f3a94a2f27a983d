"""Restore a physical backup of MariaDB (backup/mariadb_copy.py: mariadb-backup's xbstream) into a
new cluster.

    results, errors = restore(client, targets, source, manifest, donor, ...)   # from restore_job.restore_all

1. Verify the data object against the manifest (size, sha256, the key), as for a dump; check every
   instance is new; read the new cluster's accounts from its first instance (statements with
   their password hashes).
2. Serve the copy on `donor.port` as a re-seed donor does (sh/seed.sh donate; backup/copy_serving.py): TLS with the
   Job's certificate (the cluster CA's, for the restore Service's name), and only to a requester
   that is one of the new cluster's instances: its certificate chains to the cluster's CA AND
   names one of the targets (peer_named: the instances' certificates carry
   *.<headless Service>.<namespace>.svc), AND its first line is the new cluster's operator
   password ($MYSQL_OPERATOR_SEED_TOKEN, from its credentials Secret: what sh/seed.sh receive
   sends from $SEED_TOKEN_FILE). A Pod of another namespace or cluster, whatever issuer signed
   its certificate, gets "ERR refused" and not a byte. Each accepted connection gets
   "OK <bytes> <position>", the backup's xbstream (downloaded, decrypted and decompressed again
   for each: nothing is kept on disk), its chunks checked as they pass, and - only once the
   whole object matched its manifest - one more file, the new cluster's accounts as SQL. A copy
   without that file is refused by the instance.
3. The operator sees the Job ready (its port answers) and asks every instance to start on a copy
   from the restore Service (the re-seed request, marked "restore"): each Pod's `seed` init
   container receives it, prepares it, and the server starts on it with the copy's GTID state
   and the new cluster's accounts (start.sh's init file).
4. Wait until every instance answers at the backup's GTID position; a point-in-time restore then
   replays the archived binary logs into each, as after a dump; the restore account drops itself
   and the instances are read-only again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import time
from dataclasses import replace
from typing import Iterator

from mysql_operator.backup import commands, storage
from mysql_operator.backup.crypto import CryptoError
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pipeline import CHUNK, TailBuffer, drain, pass_on, spawn, stop
from mysql_operator.backup.restore import (
    checked_tables,
    finish_all,
    new_cluster_accounts,
    roll_forward,
    with_checks,
)
from mysql_operator.backup.restore_server import settle_events
from mysql_operator.backup.user_checks import Check
from mysql_operator.backup.restore_source import plaintext_opener
from mysql_operator.backup.copy_serving import CopyServer, Peers
from mysql_operator.backup.restore_types import (
    Donor,
    RestoreError,
    RestoreResult,
    Source,
    Target,
    instance_of,
)
from mysql_operator.db.gtid import MariaDBGtids
from mysql_operator.db.observation import InstanceError

# the new cluster's operator password (its credentials Secret's operator-password, manifests/
# restore_jobs.py restore_job): the line its instances' seed init containers send first
SEED_TOKEN_ENV = "MYSQL_OPERATOR_SEED_TOKEN"


def restore(
    client,
    targets: dict[str, Target],
    source: Source,
    m: Manifest,
    donor: Donor | None,
    app_database: str | None,
    *,
    drop_account: bool = False,
    chain: list | None = None,
    copy_timeout: float = 6 * 3600,
    primary: str | None = None,
    checks: tuple[Check, ...] = (),
    check_tables: bool = False,
) -> tuple[list[RestoreResult], list[str]]:
    """Restore the MariaDB physical backup `m` into every target. Returns the results and the
    errors, each naming its instance; never a password. `check_tables`: once the primary started
    on the copy, its tables are compared with those the backup recorded from the copy
    (restore.checked_tables; before any replay): a difference fails it, naming each table."""
    if donor is None or not donor.tls_dir:
        return [], [f"{m.backup} is a physical backup of MariaDB: this restore Job cannot serve it"]
    token = os.environ.get(SEED_TOKEN_ENV, "")
    if not token:
        return [], [
            f"{m.backup} is a physical backup of MariaDB: this restore Job has no ${SEED_TOKEN_ENV} "
            "(the new cluster's operator-password) to tell its instances from anyone else: delete the "
            "restore Job so that the operator makes it again"
        ]
    peers = Peers(token, frozenset(t.host for t in targets.values()))
    results: list[RestoreResult] = []
    errors: list[str] = []
    try:
        etag, accounts = new_cluster_accounts(
            client,
            targets,
            source,
            m,
            app_database,
            lambda v: series_refusal(m.server_version, v.major, v.minor),
        )
        init_sql = init_file(accounts)
        answer = f"OK {m.uncompressed_size} {m.gtid_position or ''}\n"
        pieces = functools.partial(decompressed, client, source, m, etag)
        started = time.monotonic()
        with CopyServer(donor, peers, pieces, answer, init_sql) as server:
            wait_restored(targets, m.gtid_position or "", server, copy_timeout)
        # verified, downloaded, decrypted, decompressed, served; each instance prepared it and
        # started on it
        copied = round(time.monotonic() - started, 2)
        for name, t in targets.items():
            try:
                done = _finish_one(client, t, source, m, chain, name == primary, check_tables)
                done = replace(done, phases={"copy": copied, **done.phases})
                results.append(with_checks(t, done, checks) if name == primary else done)
            except (RestoreError, InstanceError) as e:
                errors.append(f"{name}: {e}")
                break
    except (RestoreError, storage.StorageError) as e:
        errors.append(str(e))
    finally:
        finish_all(targets, drop_account, errors)
    return results, errors


def series_refusal(backup_version: str, major: int, minor: int) -> str | None:
    """Pure: why a copy made by MariaDB `backup_version` cannot start a server of series
    major.minor (its data files and redo log are that series'), or None."""
    series = ".".join(backup_version.split(".")[:2])
    if series == f"{major}.{minor}":
        return None
    return (
        f"the backup is a physical copy of MariaDB {backup_version}; the new cluster runs {major}.{minor}: "
        f"a copy starts only a server of its own series: restore it into a {series} cluster (then "
        "upgrade), or restore a logical backup"
    )


def init_file(accounts: list[str]) -> bytes:
    """Pure: the account statements as a server's init file reads them (one a line)."""
    lines = []
    for sql in accounts:
        if "\n" in sql or "\r" in sql:
            raise RestoreError(f"an account statement spans lines: {sql.split(' IDENTIFIED ', 1)[0][:200]}")
        lines.append(sql.rstrip(";") + ";\n")
    return "".join(lines).encode()


def _finish_one(
    client, t: Target, source: Source, m: Manifest, chain, primary: bool, check_tables: bool = False
) -> RestoreResult:
    settle_events(t, m, source.key, primary, copy=True)
    phases: dict[str, float] = {}
    checked = None
    if check_tables and primary:  # still read-only (its my.cnf): the check only reads
        began = time.monotonic()
        inst = instance_of(t)
        try:
            version = inst.dialect.version
        finally:
            inst.close()
        checked = checked_tables(t, m, source.key, version)
        phases["checkTables"] = round(time.monotonic() - began, 2)
    result = RestoreResult(
        manifest=m,
        gtid_position=m.gtid_position,
        bytes_loaded=m.compressed_size,
        table_check=checked,
        phases=phases,
    )
    if chain is None:
        return result
    began = time.monotonic()
    inst = instance_of(t)
    try:
        inst.set_read_only(False)  # it started on the copy fenced (its my.cnf): the replay writes
    finally:
        inst.close()
    position = roll_forward(client, t, source, m, chain)
    phases["replay"] = round(time.monotonic() - began, 2)
    return replace(result, gtid_position=position, replayed=tuple(chain), phases=phases)


def wait_restored(
    targets: dict[str, Target], position: str, server: "CopyServer", timeout: float, interval: float = 2.0
) -> None:
    """Until every target answers at `position` (it started on the copy); RestoreError when the
    time is up, or when the copy server failed in a way no retry mends (the backup's object does
    not match its manifest)."""
    want = MariaDBGtids.parse(position)
    deadline = time.monotonic() + timeout
    waiting = dict(targets)
    last: dict[str, str] = {}
    while waiting:
        if server.fatal:
            raise RestoreError(server.fatal)
        for name, t in list(waiting.items()):
            try:
                inst = instance_of(t, slow_timeout=10)
                try:
                    at = str(inst.scalar("SELECT @@GLOBAL.gtid_binlog_pos") or "")
                finally:
                    inst.close()
            except InstanceError as e:
                last[name] = f"not answering ({e})"
                continue
            if MariaDBGtids.parse(at) == want:
                del waiting[name]
            else:
                last[name] = f"at {at or 'no position'}, waiting for it to start on the copy"
        if not waiting:
            return
        if time.monotonic() > deadline:
            said = "; ".join(f"{n}: {last.get(n, 'no answer')}" for n in waiting)
            raise RestoreError(
                f"the instances did not start on the copy within {timeout:.0f}s ({said}); served "
                f"{server.served} copies{', last error: ' + server.last_error if server.last_error else ''}"
            )
        time.sleep(interval)


def decompressed(client, source: Source, m: Manifest, etag: str) -> Iterator[bytes]:
    """The backup's data object (pinned to `etag`), decrypted and decompressed; RestoreError at the
    end when it does not match its manifest (size, sha256)."""
    _, decompress_argv, _ = commands.compressor(m.compression)
    dec = spawn(decompress_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = TailBuffer()
    readers = [drain(dec.stderr, err)]
    digest, size = hashlib.sha256(), 0
    failed: list[BaseException] = []

    def feed() -> Iterator[bytes]:
        nonlocal size
        opener = plaintext_opener(source.s3, m, source.key)
        for chunk in storage.iter_object(client, source.s3, m.data_key, etag):
            digest.update(chunk)
            size += len(chunk)
            yield from opener.feed(chunk)
        yield opener.finish()

    class _Src:  # pass_on reads a file-like object
        def __init__(self) -> None:
            self.it = feed()

        def read(self, _n: int) -> bytes:
            try:
                return next(self.it, b"")
            except (CryptoError, storage.StorageError, OSError) as e:
                failed.append(e)
                return b""

        def close(self) -> None:
            pass

    try:
        readers.append(pass_on(_Src(), dec.stdin))
        for piece in iter(lambda: dec.stdout.read(CHUNK), b""):
            yield piece
        rc = dec.wait()
        for t in readers:
            t.join(30)
        if failed:
            raise RestoreError(f"reading the backup's object: {failed[0]}")
        if rc != 0:
            raise RestoreError(
                f"{decompress_argv[0]} failed (exit status {rc}): {err.text() or 'no message'}"
            )
        if (size, digest.hexdigest()) != (m.compressed_size, m.sha256):
            raise RestoreError(
                "the backup's object does not match its manifest (size or sha256): it was altered"
            )
    finally:
        stop(dec)
