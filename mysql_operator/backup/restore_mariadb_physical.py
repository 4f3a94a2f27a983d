"""Restore a physical backup of MariaDB (backup/mariadb_copy.py: mariadb-backup's xbstream) into a
new cluster.

    results, errors = restore(client, targets, source, manifest, donor, ...)   # from restore_job.restore_all

1. Verify the data object against the manifest (size, sha256, the key), as for a dump; check every
   instance is new; read the new cluster's accounts from its first instance (statements with
   their password hashes).
2. Serve the copy on `donor.port` as a re-seed donor does (sh/seed.sh donate): TLS with the
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

import contextlib
import functools
import hashlib
import hmac
import os
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from mysql_operator.backup import commands, storage, xbstream
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

RESTORE_SQL = "mysql-operator-restore.sql"  # what sh/seed.sh receive looks for (RESTORE_SQL)
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


@dataclass(frozen=True)
class Peers:
    """Who may have the copy: a requester whose first line is `token` and whose certificate names
    one of `hosts` (the new cluster's instances)."""

    token: str = field(repr=False)
    hosts: frozenset[str]


def _dns_names(cert: dict) -> list[str]:
    """Pure: the DNS names of a certificate as ssl's getpeercert() gives it (its SANs; its
    common name only when it has none, as TLS clients do)."""
    sans = [v for kind, v in cert.get("subjectAltName", ()) if kind == "DNS"]
    if sans:
        return sans
    return [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]


def _matches(name: str, host: str) -> bool:
    """Pure: whether certificate name `name` covers `host` (a wildcard covers one label, the first)."""
    name, host = name.lower().rstrip("."), host.lower().rstrip(".")
    if name.startswith("*."):
        first, dot, rest = host.partition(".")
        return bool(first) and bool(dot) and rest == name[2:]
    return name == host


def peer_named(cert: dict | None, hosts: frozenset[str]) -> bool:
    """Pure: whether the peer's certificate (getpeercert()) names one of `hosts`."""
    return cert is not None and any(_matches(n, h) for n in _dns_names(cert) for h in hosts)


class CopyServer:
    """Serves the copy to the new cluster's instances (sh/seed.sh receive), each connection in a
    thread, until closed: a certificate of the cluster's CA naming one of `peers.hosts` and the
    first line `peers.token`, or "ERR refused" and nothing."""

    def __init__(
        self,
        donor: Donor,
        peers: Peers,
        pieces: Callable[[], Iterator[bytes]],
        answer: str,
        init_sql: bytes,
    ):
        self.pieces, self.answer, self.init_sql = pieces, answer.encode(), init_sql
        self.peers = peers
        self.refused = 0  # requesters turned away (no byte of the copy reached them)
        d = donor.tls_dir
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=f"{d}/ca.crt")
        self.tls.load_cert_chain(f"{d}/tls.crt", f"{d}/tls.key")
        self.tls.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.create_server(("", donor.port), family=socket.AF_INET, reuse_port=False)
        self.served = 0
        self.last_error = ""
        self.fatal = ""  # the backup itself is bad: no instance can ever be served
        self._closed = threading.Event()

    def __enter__(self) -> "CopyServer":
        threading.Thread(target=self._accept, daemon=True, name="copy-server").start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="copy").start()

    def _serve(self, raw: socket.socket) -> None:
        """One copy. A connection that is no TLS client of the cluster (the kubelet's readiness
        check, anyone else) ends at the handshake."""
        try:
            raw.settimeout(30)
            with self.tls.wrap_socket(raw, server_side=True) as conn:
                conn.settimeout(600)
                why = self._refusal(conn.getpeercert(), _read_line(conn))
                if why:
                    self.refused += 1
                    self.last_error = why
                    conn.sendall(b"ERR refused\n")
                    return
                conn.sendall(self.answer)
                reader = xbstream.Reader()
                for piece in self.pieces():
                    reader.feed(piece)
                    conn.sendall(piece)
                reader.finish()  # (and the object matched its manifest: pieces raised otherwise)
                conn.sendall(xbstream.file_chunks(RESTORE_SQL, self.init_sql))
                self.served += 1
        except (ssl.SSLError, ConnectionError, socket.timeout):
            pass  # not a client of the cluster, or it went away: it asks again
        except (RestoreError, xbstream.StreamError) as e:
            self.fatal = self.last_error = str(e)
        except OSError as e:
            self.last_error = str(e)
        finally:
            with contextlib.suppress(OSError):
                raw.close()

    def _refusal(self, cert: dict | None, line: bytes) -> str:
        """Why this requester gets nothing ("" when it is one of the new cluster's instances);
        never the line it sent."""
        if not peer_named(cert, self.peers.hosts):
            names = ", ".join(_dns_names(cert or {})[:4]) or "no name"
            return f"refused a copy to a certificate for {names[:300]}: not an instance of this cluster"
        if not hmac.compare_digest(line.rstrip(b"\r\n"), self.peers.token.encode()):
            return "refused a copy to a requester without the new cluster's operator password"
        return ""


def _read_line(conn, limit: int = 4096) -> bytes:
    got = b""
    while not got.endswith(b"\n") and len(got) < limit:
        piece = conn.recv(1)
        if not piece:
            break
        got += piece
    return got
