"""Restore a backup into a new, empty server: verify first, then load, then set the GTID position.

    from mysql_operator.backup.restore import restore_into, Target, Source
    result = restore_into(Target(host, port, user, password), Source(s3, path), s3_credentials)

1. Read the manifest (a folder without one is not a complete backup: refused).
2. Download the data object once, streaming, computing its sha256 and size: refuse on any mismatch
   with the manifest. Nothing is written to the server and nothing to disk in this pass.
3. Check the target has no user databases (a restore never overwrites data).
4. Download again - pinned to the verified object's ETag, so a replaced object is refused - and
   stream it through the decompressor into the command-line client; the sha256 is checked again.
5. Set the server's GTID position to the backup's.

Verifying before loading costs one extra read of the compressed object and needs no disk. It is
cheap next to loading: measured with MinIO on the same 2-core machine (benchmarks/backup_bench.py),
the verify pass of a 398 MiB object takes about 0.5 s of a 30 s restore. Spooling the object to a
local file during the verify pass (then loading from it) would save that read but needs free disk of
the compressed size per instance restored at once, where the restore runs: in the restore Job,
whose /tmp is an in-memory emptyDir of 16 MiB.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import json
import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from mysql_operator import clock
from mysql_operator.api import S3
from mysql_operator.backup import commands, physical, pitr, storage
from mysql_operator.backup.binlog_archive import Segment, Store, backup_bases
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.crypto import ALGORITHM, CryptoError, Decryptor, Key, unseal, wrong_key
from mysql_operator.backup.load_account import LoadAccount
from mysql_operator.backup.manifest import Manifest, ManifestError, events_field
from mysql_operator.backup.pipeline import (
    TailBuffer,
    drain,
    option_file,
    pass_on,
    spawn,
    stop,
    verified_instance,
)
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.db.gtid import MySQLGtidSet, parser_for
from mysql_operator.db.flavor import Flavor, ServerVersion
from mysql_operator.db.observation import REPLICA_SIDE_DISABLED, SPECIFIC_ACCESS_DENIED, Event, InstanceError
from mysql_operator.db.instance import Instance
from mysql_operator.db.statements import quote
from mysql_operator.manifests.common import LOAD_USER, TLS_CA


class RestoreError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str
    password: str
    tls_ca: str | None = None  # the cluster's CA certificate file: TLS verifying it and the host name
    # a folder shared with the Job's client-tools sidecar, which runs the client of the cluster's
    # server image (backup/sidecar.py); None: run the client of this image
    tools_dir: str | None = None
    # the application account (spec.database.user, host %): every stored object of a dump gets
    # it as its definer, whoever defined it in the source (docs/design.md); None: as dumped
    definer: str | None = None

    def __repr__(self) -> str:
        return f"Target({self.host}:{self.port}, user={self.user!r})"


@dataclass(frozen=True)
class Source:
    """A backup in S3: `path` is its folder (relative to s3.prefix), or its manifest or data key."""

    s3: S3
    path: str
    key: Key | None = None  # the key of an encrypted backup (backup/crypto.py)
    # point-in-time recovery: after the backup, the archived binary logs are replayed up to here
    stop: pitr.Stop | None = None


@dataclass(frozen=True)
class Donor:
    """Where a new cluster's instances reach the restore Job's server of a physical backup (they
    clone it): the Job Pod's name and the port it listens on; `tls_dir`, the certificate it
    serves (issued by the cluster's CA for that name: the instances verify it), as the sidecar
    sees it."""

    host: str
    port: int
    scratch: str | None = None  # where the copy is unpacked (a disk folder shared with the sidecar)
    tls_dir: str | None = None
    instance_ca: str = TLS_CA  # the CA file the instances verify it with, as they see it


@dataclass(frozen=True)
class RestoreResult:
    manifest: Manifest
    gtid_position: str | None
    bytes_loaded: int
    replayed: tuple[Segment, ...] = ()  # the archived binary logs replayed after the backup


def manifest_key(source: Source) -> str:
    """Pure: the manifest's key for a spec.restore.s3.path or a status.location."""
    path = source.path
    if path.startswith("s3://"):  # a MySQLBackup's status.location: s3://bucket/key
        bucket, _, path = path[len("s3://") :].partition("/")
        if bucket != source.s3.bucket:
            raise RestoreError(f"backup location {source.path!r} is not in bucket {source.s3.bucket!r}")
        key = path.strip("/")
    else:
        key = storage.join_key(source.s3.prefix, path)
    last = key.rsplit("/", 1)[-1]
    if last == storage.MANIFEST_NAME:
        return key
    if last.startswith("backup.sql"):
        return key.rsplit("/", 1)[0] + "/" + storage.MANIFEST_NAME
    return f"{key}/{storage.MANIFEST_NAME}"


def read_manifest(client, source: Source, physical: bool = False) -> Manifest:
    """The backup's manifest; a physical backup's only when `physical` (restore_job.restore_all's path for
    it), else refused saying so."""
    key = manifest_key(source)
    try:
        data = storage.get_bytes(client, source.s3, key)
    except storage.NotFound:
        raise RestoreError(
            f"no complete backup at {storage.describe(source.s3, key.rsplit('/', 1)[0])}: "
            f"{storage.MANIFEST_NAME} is missing (wrong path, or the backup never "
            "finished)"
        ) from None
    try:
        m = Manifest.from_json(data, storage.describe(source.s3, key))
    except ManifestError as e:
        raise RestoreError(str(e)) from None
    if m.method != "logical" and not physical:
        raise RestoreError(
            f"{storage.describe(source.s3, key)}: a {m.method} backup (a MySQL data directory copied "
            "by CLONE, as tar) is restored by the restore Job's physical path, not into one server"
        )
    return m


def check_key(s3: S3, m: Manifest, key: Key | None) -> None:
    """Refuse, from the manifest alone, an encrypted backup without its key or with another one."""
    where = f"the backup {storage.describe(s3, m.data_key.rsplit('/', 1)[0])}"
    if m.encryption is None:
        return
    if m.encryption != ALGORITHM:
        raise RestoreError(f"{where} is encrypted with {m.encryption}: upgrade the operator to restore it")
    if key is None:
        raise RestoreError(
            f"{where} is encrypted (key id {m.key_id}): set spec.restore.encryption.keySecret to "
            "the Secret holding the key it was made with"
        )
    if key.id != m.key_id:
        raise RestoreError(wrong_key(where, str(m.key_id), key.id))


class _Plain:
    """The stored object's bytes as they are (an unencrypted backup)."""

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def finish(self) -> bytes:
        return b""


def plaintext_opener(s3: S3, m: Manifest, key: Key | None) -> _Plain | Decryptor:
    if m.encryption is None:
        return _Plain()
    assert key is not None  # check_key ran first
    return Decryptor(key, storage.describe(s3, m.data_key))


def verify(client, s3: S3, m: Manifest, key: Key | None = None) -> str:
    """Stream the data object and compare its size and sha256 with the manifest; an encrypted one
    is decrypted too (and the plaintext dropped), so a wrong key or an altered record is found
    before anything is loaded. Returns the ETag of the verified object. Raises RestoreError."""
    check_key(s3, m, key)
    info = storage.head(client, s3, m.data_key)
    etag = info.get("ETag")
    digest, size = hashlib.sha256(), 0
    opener = plaintext_opener(s3, m, key)
    try:
        for chunk in storage.iter_object(client, s3, m.data_key, etag):
            digest.update(chunk)
            size += len(chunk)
            opener.feed(chunk)
        _check(s3, m, size, digest.hexdigest())
        opener.finish()
    except CryptoError as e:
        raise RestoreError(str(e)) from None
    return etag


def _check(s3: S3, m: Manifest, size: int, sha: str) -> None:
    where = storage.describe(s3, m.data_key)
    if size != m.compressed_size:
        raise RestoreError(
            f"{where} has {size} bytes but the manifest says {m.compressed_size}: the "
            "object is truncated or replaced; refusing to restore from it"
        )
    if sha != m.sha256:
        raise RestoreError(
            f"{where} has sha256 {sha} but the manifest says {m.sha256}: the object is "
            "corrupted; refusing to restore from it"
        )


def _user_databases(inst: Instance) -> list[str]:
    return commands.user_databases([r[0] for r in inst.execute("SHOW DATABASES")])


def restore_into(
    target: Target, source: Source, s3_credentials: storage.Credentials, *, client=None
) -> RestoreResult:
    """Restore `source` into the empty server `target` (the new cluster's primary). Raises
    RestoreError or StorageError; their text never contains a password."""
    client = client or storage.make_client(source.s3, s3_credentials)
    m = read_manifest(client, source)
    etag = verify(client, source.s3, m, source.key)

    inst = instance_of(target, slow_timeout=120)
    try:
        version = inst.dialect.version
        if version.flavor.value != m.flavor:
            raise RestoreError(
                f"the backup is of a {m.flavor} server; the target runs {version}: restore "
                f"into a cluster with flavor {m.flavor}"
            )
        existing = _user_databases(inst)
        if existing:
            raise RestoreError(
                f"the target already has databases ({', '.join(existing)}): a restore only "
                "goes into a new, empty cluster and never overwrites data"
            )
        for sql in commands.before_load_sql(version):
            inst.execute(sql)
    except InstanceError as e:
        raise RestoreError(f"preparing {target.host}:{target.port} for the restore: {e}") from None
    finally:
        inst.close()

    loaded, dump_gtid = _load(client, source.s3, m, etag, target, version, source.key)

    refuse_foreign_definers(
        target,
        "the dump defines",
        "these were written otherwise than the dump tools write a DEFINER: take the backup again "
        "with the operator (a MySQLBackup)",
    )

    inst = instance_of(target, slow_timeout=120)
    try:
        gtid = dump_gtid if version.flavor is Flavor.MYSQL else m.gtid_position
        for sql, args in commands.after_load_sql(version, gtid):
            inst.execute(sql, args)
    except InstanceError as e:
        raise RestoreError(f"setting the GTID position {gtid} on {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
    return RestoreResult(manifest=m, gtid_position=m.gtid_position, bytes_loaded=loaded)


def _load(
    client, s3: S3, m: Manifest, etag: str, target: Target, version: ServerVersion, key: Key | None
) -> tuple[int, str | None]:
    """The dump loaded into `target` as the load account (load_account.py); returns the bytes
    read and, MySQL, the GTID set of the dump's GTID statement (held back: see DumpFilter)."""
    with as_load_account(target) as (loader, account):
        dump = commands.DumpFilter(
            commands.quote_account(target.definer) if target.definer else None,
            on_database=account.grant,
            strip_gtid=version.flavor is Flavor.MYSQL,
        )
        ep = Endpoint(loader.host, loader.port, loader.user)
        with option_file(loader.user, loader.password, loader.tools_dir) as options:
            client_argv = commands.client_command(version, ep, options, loader.tls_ca)
            size = stream_into(
                client,
                s3,
                m,
                etag,
                key,
                client_argv,
                loader.tools_dir,
                (loader.password, target.password),
                _local_infile_hint,
                change=dump,
            )
        account.problems += dump.errors
    return size, dump.gtid_purged


@contextmanager
def as_load_account(target: Target) -> Iterator[tuple[Target, LoadAccount]]:
    """`target` as the load account, made for the block and dropped after it (LoadAccount).
    RestoreError with what it refused (a system database, a changed global setting) added to the
    block's own, or alone."""
    account = LoadAccount(lambda: instance_of(target))
    where = f"{target.host}:{target.port}"
    try:
        with account:
            try:
                yield replace(target, user=account.user, password=account.password), account
            except RestoreError as e:
                if account.problems:
                    raise RestoreError(f"{e} ({'; '.join(account.problems)})") from None
                raise
    except InstanceError as e:
        raise RestoreError(f"the load account on {where}: {e}") from None
    if account.problems:
        raise RestoreError(f"{where}: {'; '.join(account.problems)}")


_DEFINED = (
    ("routine", "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, DEFINER FROM information_schema.ROUTINES"),
    ("trigger", "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, DEFINER FROM information_schema.TRIGGERS"),
    ("event", "SELECT EVENT_SCHEMA, EVENT_NAME, DEFINER FROM information_schema.EVENTS"),
    ("view", "SELECT TABLE_SCHEMA, TABLE_NAME, DEFINER FROM information_schema.VIEWS"),
)


def refuse_foreign_definers(target: Target, what: str, fix: str) -> None:
    """With target.definer (the application account): RestoreError naming each stored object of
    the user databases whose definer is another, after `what` ("the dump defines"), and `fix`."""
    if not target.definer:
        return
    inst = instance_of(target, slow_timeout=120)
    try:
        foreign = foreign_definers(inst, target.definer)
    except InstanceError as e:
        raise RestoreError(f"reading the definers on {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()
    if foreign:
        raise RestoreError(
            f"{what} {', '.join(foreign[:10])}{' ...' if len(foreign) > 10 else ''}: a restore gives "
            f"every stored object the application account {target.definer}@% as its definer, and {fix}"
        )


def foreign_definers(inst: Instance, user: str) -> list[str]:
    """The stored objects of the user databases whose definer is not `user`@% (what the
    definer rewrite could not reach: a dump not written by the dump tools), as
    "kind schema.name (definer)"."""
    out = []
    for kind, sql in _DEFINED:
        for schema, name, definer in inst.execute(sql):
            if schema.lower() not in commands.SYSTEM_DATABASES and definer != f"{user}@%":
                out.append(f"{kind} {schema}.{name} ({definer})")
    return sorted(out)


def _local_infile_hint(text: str) -> str:
    if "local infile" in text.lower() or "loading local data" in text.lower():
        return (
            " (the dump reads a local file with LOAD DATA LOCAL INFILE: restores never "
            "allow it; load such data after the restore, from the application)"
        )
    return ""


def stream_into(
    client,
    s3: S3,
    m: Manifest,
    etag: str,
    key: Key | None,
    argv: list[str],
    tools_dir: str | None,
    secrets: tuple[str, ...] = (),
    hint: Callable[[str], str] = lambda _text: "",
    change: Callable[[bytes], bytes] | None = None,
) -> int:
    """The backup's data object (pinned to the verified `etag`), decrypted and decompressed, on
    the standard input of `argv`: a client loading a dump, or tar unpacking a copy; run by the
    client-tools sidecar when `tools_dir` is set. Returns the bytes read; the size and sha256 are
    checked again. `hint(its error text)` adds advice to a failure of `argv`; `change`, what each
    piece of the plaintext becomes on its way (pipeline.pass_on)."""
    _, decompress_argv, _ = commands.compressor(m.compression)
    dec = cli = None
    dec_err, cli_err = TailBuffer(), TailBuffer()
    try:
        dec = spawn(decompress_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        readers = []
        if tools_dir:  # the sidecar's tool reads what this process passes on
            try:
                cli = SidecarProcess(argv, tools_dir, stdin=True)
            except SidecarError as e:
                raise RestoreError(str(e)) from None
            readers.append(pass_on(dec.stdout, cli.stdin, change))
            cli.stdout.close()  # loading a dump or unpacking prints nothing
        elif change is not None:
            cli = spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            readers.append(pass_on(dec.stdout, cli.stdin, change))
        else:
            cli = spawn(argv, stdin=dec.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dec.stdout.close()  # the tool owns the read end now
        readers += [drain(dec.stderr, dec_err), drain(cli.stderr, cli_err)]
        digest, size = hashlib.sha256(), 0
        write_error: BaseException | None = None
        crypto_error: CryptoError | None = None
        opener = plaintext_opener(s3, m, key)
        try:
            fd = dec.stdin.fileno()
            for chunk in storage.iter_object(client, s3, m.data_key, etag):
                digest.update(chunk)
                size += len(chunk)
                for piece in opener.feed(chunk):
                    _write_all(fd, piece)
            _write_all(fd, opener.finish())
        except BrokenPipeError as e:
            write_error = e
        except CryptoError as e:  # verified a moment ago (and pinned to its ETag): unlikely
            crypto_error = e
        finally:
            try:
                dec.stdin.close()
            except BrokenPipeError:
                pass
        dec_rc, cli_rc = dec.wait(), cli.wait()
        for t in readers:
            t.join(5)
        if crypto_error is not None:
            raise RestoreError(f"{crypto_error} (the load stopped there)")
        if cli_rc != 0:
            text = cli_err.text(secrets) or "no message"
            raise RestoreError(
                f"{argv[0]} failed loading the backup (exit status {cli_rc}): {text}{hint(text)}"
            )
        if dec_rc != 0 or write_error:
            raise RestoreError(
                f"{decompress_argv[0]} failed (exit status {dec_rc}): "
                f"{dec_err.text(secrets) or write_error or 'no message'}"
            )
        _check(s3, m, size, digest.hexdigest())
        return size
    finally:
        stop(dec, cli)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def instance_of(target: Target, slow_timeout: float = 60) -> Instance:
    """A session of `target` as the restore's account, over TLS verified with its CA when set."""
    return verified_instance(
        target.host, target.port, target.user, target.password, target.tls_ca, slow_timeout=slow_timeout
    )


def load_instance(
    target: Target,
    source: Source,
    creds: storage.Credentials,
    app_database: str | None,
    *,
    client=None,
    drop_account: bool = False,
    chain: list[Segment] | None = None,
    primary: bool = True,
) -> RestoreResult:
    """Restore into one instance of a new cluster (`primary`: the one the cluster starts with as
    its primary, see settle_events). Its server starts read-only (super_read_only on
    MySQL); the load needs it writable for its duration - no Pod carries a role label during a
    restore, so no Service routes to it meanwhile - and it is read-only again afterwards, failed
    or not. The init step creates spec.database empty: dropped (only if it has no table, outside
    the binary log) so that restore_into finds the server empty; the dump recreates it.
    `drop_account`: the account that loaded (the restore account, which holds ALL) drops itself
    at the end, outside the binary log, whatever the outcome.
    The event scheduler is off while the server is writable: an ENABLED event of the dump would
    run as soon as it is loaded, writing rows and GTIDs of this instance alone (MariaDB 10.11:
    the restore then failed with 1956 at SET GLOBAL gtid_slave_pos); it is on again once the
    instance is read-only."""
    inst = instance_of(target)
    scheduler = False
    try:
        scheduler = str(inst.scalar("SELECT @@GLOBAL.event_scheduler")).upper() == "ON"
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = OFF")
        inst.set_read_only(False)  # first: MySQL's super_read_only refuses the DROP to everyone
        if app_database:
            tables = inst.scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (app_database,)
            )
            if not tables:
                inst.execute("SET SESSION sql_log_bin = 0")
                inst.execute(f"DROP DATABASE IF EXISTS `{app_database.replace('`', '``')}`")
                inst.execute("SET SESSION sql_log_bin = 1")
    except InstanceError as e:
        raise RestoreError(f"preparing {target.host}:{target.port} for the restore: {e}") from None
    finally:
        inst.close()
    try:
        client = client or storage.make_client(source.s3, creds)
        result = restore_into(target, source, creds, client=client)
        settle_events(target, result.manifest, source.key, primary)
        if chain is None:
            return result
        position = roll_forward(client, target, source, result.manifest, chain)
        # the dump's objects are the application account's already: any other definer is the
        # replay's (a binary log's CREATE keeps its definer), which may name a privileged account
        refuse_foreign_definers(
            target,
            "the archived binary logs define",
            "a replay cannot rewrite these: recreate them as the application account in the "
            "source, take a new backup, and restore to a time after it",
        )
        return replace(result, gtid_position=position, replayed=tuple(chain))
    finally:
        finish_instance(target, drop_account, scheduler)


def source_events(m: Manifest, key: Key | None) -> tuple[tuple[str, str, str], ...] | None:
    """The events' statuses on the source's primary the manifest keeps (inside `sealed` when
    encrypted: check_key ran). None: not known."""
    if m.sealed is None or key is None:
        return m.events
    try:
        fields = json.loads(unseal(key, base64.b64decode(m.sealed), "the manifest's sealed fields"))
    except (CryptoError, ValueError) as e:
        raise RestoreError(f"reading the manifest's sealed fields: {e}") from None
    try:
        return events_field(fields.get("events"), "the manifest's sealed fields")
    except ManifestError as e:
        raise RestoreError(str(e)) from None


def event_changes(
    events: list[Event], source: tuple[tuple[str, str, str], ...] | None, primary: bool, flavor: str
) -> list[tuple[Event, str]]:
    """Pure: (event, ALTER EVENT clause) that give an instance of a restored cluster the events'
    statuses of the source's cluster. The new primary: each event the source's primary ran
    ENABLED, every other one it held DISABLED (one it held replica-side disabled did not run
    there either); an event the manifest does not name (`source` None: an older backup) is left
    as loaded. The others, replicas from the start: replica-side disabled, as replication would
    have made them (a dump of the primary loads ENABLED ones ENABLED, and they would run there)."""
    if not primary:
        clause = "DISABLE ON SLAVE" if flavor == "mariadb" else "DISABLE ON REPLICA"
        return [(e, clause) for e in events if e.status not in REPLICA_SIDE_DISABLED]
    wanted = {(schema, name): status == "ENABLED" for schema, name, status in source or ()}
    return [
        (e, "ENABLE" if wanted[e.key] else "DISABLE")
        for e in events
        if e.key in wanted and e.status != ("ENABLED" if wanted[e.key] else "DISABLED")
    ]


def settle_events(target: Target, m: Manifest, key: Key | None, primary: bool, *, copy: bool = False) -> None:
    """Give the restored `target` the source's events' statuses (event_changes), outside the binary
    log (each instance is settled by itself), each event keeping its definer: ALTER DEFINER, as
    the restore account, which holds ALL (SET USER / SET_ANY_DEFINER). After a dump the instance
    is writable, its scheduler off (load_instance). `copy`: an instance started on a physical
    copy, as the copy's source had them (a replica's: every event replica-side disabled), which
    runs fenced, its scheduler as its my.cnf says: the scheduler is off while it is writable for
    the statements, and on again after."""
    inst = instance_of(target)
    try:
        scheduler = copy and str(inst.scalar("SELECT @@GLOBAL.event_scheduler")).upper() == "ON"
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = OFF")
        if copy:
            inst.set_read_only(False)  # MySQL's super_read_only refuses ALTER EVENT to everyone
        _settle(inst, m, key, primary)
        if copy:
            inst.set_read_only(True)
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = ON")
    except InstanceError as e:
        raise RestoreError(
            f"giving the events the source's statuses on {target.host}:{target.port}: {e}"
        ) from None
    finally:
        inst.close()


def _settle(inst: Instance, m: Manifest, key: Key | None, primary: bool) -> None:
    """An event of a definer the restore account may not name (MySQL: one holding SYSTEM_USER,
    which the restore account does not; a physical copy can hold one) is left as it is."""
    changes = event_changes(inst.events(), source_events(m, key), primary, m.flavor)
    if changes:
        inst.execute("SET SESSION sql_log_bin = 0")
    for e, clause in changes:
        user, _, host = e.definer.rpartition("@")
        name = f"{quote(e.schema)}.{quote(e.name)}".replace("%", "%%")  # no placeholder
        try:
            inst.execute(f"ALTER DEFINER = %s@%s EVENT {name} {clause}", (user, host))
        except InstanceError as err:
            if err.errno != SPECIFIC_ACCESS_DENIED:
                raise


def finish_instance(target: Target, drop_account: bool, scheduler: bool = False) -> None:
    """After a restore into `target`, whatever its outcome: read-only again; with `drop_account`
    the account that restored (the restore account) drops itself first, outside the binary log.
    `scheduler`: the event scheduler was on before the restore: on again, once read-only."""
    inst = instance_of(target)
    try:
        if drop_account:  # before the fence: MySQL's super_read_only refuses DROP USER too
            for sql in inst.dialect.set_read_only(False):  # a server restarted on a copy is fenced
                inst.execute(sql)
            inst.execute("SET SESSION sql_log_bin = 0")
            inst.execute("DROP USER IF EXISTS %s@'%%'", (LOAD_USER,))  # left by a load that ended early
            inst.execute("DROP USER IF EXISTS %s@'%%'", (target.user,))
            # then fence in this same session, which keeps its privileges: no new connection
            # of the dropped account could log in
            for sql in inst.dialect.set_read_only(True):
                inst.execute(sql)
        else:
            inst.set_read_only(True)
        if scheduler:
            inst.execute("SET GLOBAL event_scheduler = ON")
    finally:
        inst.close()


def new_instance_or_refuse(target: Target, app_database: str | None) -> None:
    """RestoreError unless `target` holds no user database but `app_database` without a table
    (the init step creates it): a restore never replaces data."""
    inst = instance_of(target)
    try:
        names = _user_databases(inst)
        if app_database in names and not inst.scalar(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (app_database,)
        ):
            names.remove(app_database)
    except InstanceError as e:
        raise RestoreError(f"looking at {target.host}:{target.port} before the restore: {e}") from None
    finally:
        inst.close()
    if names:
        raise RestoreError(
            f"{target.host}:{target.port} already has databases ({', '.join(names)}): a restore "
            "only goes into a new, empty cluster and never overwrites data"
        )


def load_all(
    targets: dict[str, Target],
    source: Source,
    creds: storage.Credentials,
    app_database: str | None,
    drop_account: bool,
    chain: list[Segment] | None,
    primary: str | None,
    results: list[RestoreResult],
    errors: list[str],
) -> None:
    """A dump loaded into every instance at once; appends to `results` and `errors`."""
    primary = primary or next(iter(targets), None)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        futures = {
            pool.submit(
                load_instance,
                t,
                source,
                creds,
                app_database,
                drop_account=drop_account,
                chain=chain,
                primary=n == primary,
            ): n
            for n, t in targets.items()
        }
        for f in concurrent.futures.as_completed(futures):
            try:
                results.append(f.result())
            except Exception as e:  # noqa: BLE001 - every failure is reported by instance
                name = futures[f]
                errors.append(
                    f"{name}: {commands.tls_hint(str(e) or type(e).__name__, targets[name].tls_ca)}"
                )


def pick_base(client, source: Source) -> Source:
    """A point-in-time restore from a cluster's folder (<prefix>/<cluster>, not one backup's):
    the newest complete backup there that the stop can start from. Any other path: as it is."""
    assert source.stop is not None
    try:
        storage.head(client, source.s3, manifest_key(source))
        return source  # one backup's folder, manifest or data
    except storage.NotFound:
        pass
    folder = source.path.strip("/")
    bases = backup_bases(client, source.s3, folder)
    base = pitr.choose_base(bases, source.stop, _gtids_of_bases(client, source, bases))
    if base is None:
        raise RestoreError(
            f"no complete backup in {storage.describe(source.s3, storage.join_key(source.s3.prefix, folder))} "
            f"that a restore to {source.stop.describe()} can start from (completed by then, with a GTID position)"
        )
    return replace(source, path=f"s3://{source.s3.bucket}/{base.manifest}")


def _gtids_of_bases(client, source: Source, bases) -> Callable[[str], Any]:
    """The GTID parser of the flavor the folder's backups are of (their manifests say)."""
    if not bases:
        return MySQLGtidSet.parse
    first = read_manifest(
        client, replace(source, path=f"s3://{source.s3.bucket}/{bases[0].manifest}"), physical=True
    )
    return parser_for(first.flavor)


def replay_plan(client, source: Source, m: Manifest) -> list[Segment]:
    """The archived binary logs (<prefix>/<cluster>/binlogs, written by the cluster's archiver)
    that lead from the backup `m` to source.stop, in order; RestoreError saying why the archive
    cannot reach it (a gap, not archived yet, before the backup, another key) - before anything
    is loaded."""
    assert source.stop is not None
    store = Store(client, source.s3, m.cluster, source.key)
    completed = clock.parse(m.completed_at)
    assert completed is not None
    try:
        chain = pitr.plan(
            store.segments(),
            m.gtid_position or "",
            int(completed.timestamp()),
            source.stop,
            parser_for(m.flavor),
        )
    except pitr.PitrError as e:
        raise RestoreError(f"point-in-time recovery to {source.stop.describe()}: {e}") from None
    for seg in chain:
        where = f"the archived binary log {storage.describe(source.s3, seg.key)}"
        if seg.encryption and source.key is None:
            raise RestoreError(
                f"{where} is encrypted (key id {seg.key_id}): set spec.restore.encryption.keySecret"
            )
        if seg.encryption and source.key is not None and seg.key_id != source.key.id:
            raise RestoreError(wrong_key(where, str(seg.key_id), source.key.id))
    return chain


def _segment_bytes(client, source: Source, seg: Segment) -> Iterator[bytes]:
    """A segment's plaintext, checked against its index entry (size, sha256) and, encrypted,
    authenticated record by record."""
    where = storage.describe(source.s3, seg.key)
    opener: _Plain | Decryptor = Decryptor(source.key, where) if seg.encryption and source.key else _Plain()
    digest, size = hashlib.sha256(), 0
    try:
        for chunk in storage.iter_object(client, source.s3, seg.key):
            digest.update(chunk)
            size += len(chunk)
            yield from opener.feed(chunk)
        if (size, digest.hexdigest()) != (seg.size, seg.sha256):
            raise RestoreError(f"{where} does not match its index entry (size or sha256): it was altered")
        yield opener.finish()
    except CryptoError as e:
        raise RestoreError(str(e)) from None


def new_cluster_accounts(
    client,
    targets: dict[str, Target],
    source: Source,
    m: Manifest,
    app_database: str | None,
    refuse: Callable[[ServerVersion], str | None] = lambda _v: None,
) -> tuple[str, list[str]]:
    """Before a physical backup is copied into a new cluster: the object verified (its pinned
    ETag), every instance new, the first of the flavor of the backup (and not refused by
    `refuse(its version)`), and the new cluster's accounts read from it (account_statements).
    Raises RestoreError."""
    etag = verify(client, source.s3, m, source.key)
    for t in targets.values():
        new_instance_or_refuse(t, app_database)
    inst = instance_of(next(iter(targets.values())))
    try:
        version = inst.dialect.version
        if version.flavor.value != m.flavor:
            raise RestoreError(
                f"the backup is of a {m.flavor} server; the new cluster runs {version.flavor.value}"
            )
        refusal = refuse(version)
        if refusal:
            raise RestoreError(refusal)
        return etag, physical.account_statements(inst.execute, mariadb=m.flavor == "mariadb")
    except InstanceError as e:
        raise RestoreError(f"reading the new cluster's accounts: {e}") from None
    finally:
        inst.close()


def finish_all(targets: dict[str, Target], drop_account: bool, errors: list[str]) -> None:
    """After a restore, whatever happened: the restore account goes, read-only again (errors
    added to `errors`, naming the instance)."""
    for name, t in targets.items():
        try:
            finish_instance(t, drop_account)
        except InstanceError as e:
            errors.append(f"{name}: after the restore: {e}")


def roll_forward(client, target: Target, source: Source, m: Manifest, chain: list[Segment]) -> str:
    """Replay `chain` into `target` after the backup was loaded (each instance replays it: the
    replayed transactions keep their GTIDs, so the instances end equal). Returns the target's
    GTID position afterwards."""
    assert source.stop is not None
    parse = parser_for(m.flavor)
    applied = m.gtid_position or ""
    inst = instance_of(target)
    try:
        version = inst.dialect.version
    finally:
        inst.close()
    launch = pitr.sidecar_launch(target.tools_dir) if target.tools_dir else pitr.local_launch
    with as_load_account(target) as (loader, account):
        with option_file(loader.user, loader.password, loader.tools_dir) as options:
            ep = Endpoint(loader.host, loader.port, loader.user)
            client_argv = commands.client_command(version, ep, options, loader.tls_ca, binlogged=True)
            for seg in chain:
                try:
                    pitr.replay_segment(
                        _segment_bytes(client, source, seg),
                        pitr.tool_argv(m.flavor, applied, source.stop),
                        client_argv,
                        launch=launch,
                        secrets=(loader.password, target.password),
                        on_database=account.grant,
                    )
                except pitr.PitrError as e:
                    raise RestoreError(f"replaying {seg.file} of server {seg.server}: {e}") from None
                applied = str(parse(applied).union(parse(seg.gtids_after)))
    inst = instance_of(target)
    try:
        for sql in commands.after_replay_sql(version):
            inst.execute(sql)
        return str(inst.scalar(commands.executed_gtids_sql(version)) or "").replace("\n", "")
    except InstanceError as e:
        raise RestoreError(f"reading the GTID position of {target.host}:{target.port}: {e}") from None
    finally:
        inst.close()


__all__ = [
    "RestoreError",
    "RestoreResult",
    "Source",
    "Target",
    "manifest_key",
    "read_manifest",
    "load_instance",
    "load_all",
    "restore_into",
    "verify",
]
