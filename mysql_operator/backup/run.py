"""One backup: dump tool (logical), tar of a CLONE copy (physical, MySQL: backup/physical.py) or
the donor sidecar's mariadb-backup stream (physical, MariaDB: backup/mariadb_copy.py) ->
compressor -> S3 multipart upload, then the manifest.

    manifest = run_backup(request, s3_credentials, db_password)

The dump's stdout goes through this process (counted, its first and last 64 KiB kept to read the
GTID position) into the compressor; the compressor's output is cut into fixed-size parts and
uploaded while the dump continues. Memory stays at a few parts whatever the database size; nothing
is written to disk. A failure anywhere (dump tool, compressor, S3) aborts the multipart upload, so
no data object appears, and the manifest - written last - never does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable

from mysql_operator import clock
from mysql_operator.api import S3
from mysql_operator.backup import commands, mariadb_copy, physical, storage, xbstream
from mysql_operator.backup import upload
from mysql_operator.backup import copy_server
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.digest_process import DigestProcess, dump_digests
from mysql_operator.backup.dump_text import gtid_from_dump
from mysql_operator.backup.crypto import ALGORITHM, Encryptor, Key, seal
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pitr import local_launch, sidecar_launch
from mysql_operator.backup.pipeline import (
    TailBuffer,
    drain,
    enlarge_pipes,
    option_file,
    server_tls,
    spawn,
    stop,
    tool_check,
)
from mysql_operator.backup.stream import PAUSE, DumpStream, counting
from mysql_operator.backup.table_digest import tables_json
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import Observation
from mysql_operator.manifests.common import SEED_PORT


class BackupError(Exception):
    pass


@dataclass(frozen=True)
class Candidate:
    name: str  # instance name as shown in status (e.g. pod name)
    endpoint: Endpoint


@dataclass(frozen=True)
class BackupRequest:
    cluster: str
    namespace: str
    backup: str
    s3: S3
    candidates: tuple[Candidate, ...]
    compression: str = "zstd"
    part_size: int = upload.DEFAULT_PART_SIZE
    max_lag_seconds: int = 300
    tls_ca: str | None = None  # the cluster's CA certificate file: TLS verifying it and the host name
    # a folder shared with the Job's `client-tools` sidecar, which runs the dump tool of the
    # cluster's server image (backup/sidecar.py); None: run the dump tool of this image
    tools_dir: str | None = None
    # client-side encryption of the dump and the manifest's sensitive fields (backup/crypto.py)
    key: Key | None = None
    method: str = physical.METHOD_LOGICAL  # or METHOD_PHYSICAL (MySQL: with tools_dir)
    seed_port: int = SEED_PORT  # physical, MariaDB: where the Pods' seed-donor sidecar listens
    scratch_dir: str | None = None  # physical: the disk folder the copy is made in (else tools_dir)
    # MySQL physical: record the copy's table digests (a dump of it, before the tar: 1.46 times the
    # backup's time measured at 1.2 GiB); the operator asks for them when the cluster has drills
    copy_digests: bool = False


def choose_source(observed: list[tuple[str, Observation]], max_lag_seconds: int = 300) -> str:
    """Pure: the healthy replica with the least lag, else the primary. Raises BackupError."""
    replicas, primaries, notes = [], [], []
    for name, o in observed:
        if not o.reachable:
            notes.append(f"{name}: unreachable ({o.error or 'no answer'})")
            continue
        r = o.replica
        if r is None:
            primaries.append((o.read_only, name))  # a writable one first
        elif (
            r.io_running
            and r.sql_running
            and r.seconds_behind is not None
            and r.seconds_behind <= max_lag_seconds
        ):
            replicas.append((r.seconds_behind, name))
        else:
            notes.append(
                f"{name}: replica not healthy (io {r.io_state}, sql "
                f"{'running' if r.sql_running else 'stopped'}, lag {r.seconds_behind})"
            )
    if replicas:
        return min(replicas)[1]
    if primaries:
        return min(primaries)[1]
    raise BackupError("no instance to back up from: " + "; ".join(notes or ["no instances given"]))


def run_backup(
    req: BackupRequest,
    s3_credentials: storage.Credentials,
    db_password: str,
    *,
    client=None,
    on_part: Callable[[int], None] | None = None,
) -> Manifest:
    """Take the backup and return its manifest (already stored). Raises BackupError or StorageError
    whose text never contains a password."""
    started = clock.stamp()
    tls = server_tls(req.tls_ca)  # a CA that cannot be used fails before anything else
    client = client or storage.make_client(req.s3, s3_credentials)
    storage.check_bucket(client, req.s3)  # wrong bucket/credentials/endpoint: fail before dumping
    src = _source(req, db_password, tls)
    compress_argv, _, suffix = commands.compressor(req.compression)
    folder = storage.backup_folder(req.s3, req.cluster, req.backup)
    kind = "xbstream" if src.donated else "tar" if src.physical_copy else "sql"
    data_key = f"{folder}/backup.{kind}{suffix}{'.enc' if req.key else ''}"
    secrets = (db_password, s3_credentials.secret_access_key)

    reader = xbstream.Reader(keep=xbstream.POSITION_FILES)
    stream = DumpStream()
    with contextlib.ExitStack() as scope:
        copy, offer, argv = _producer(scope, req, src, db_password, tls, stream)
        uploaded = _pipe_and_upload(
            client, req, src, argv, offer, compress_argv, data_key, stream, reader, secrets, on_part
        )

    if copy is not None:
        gtid = copy.gtid_executed or None
    elif src.donated:
        gtid = xbstream.copy_position(reader.kept)
    else:
        gtid = gtid_from_dump(
            src.version.flavor,
            stream.head.decode(errors="replace") + "\n" + stream.tail.decode(errors="replace"),
        )
    manifest = Manifest(
        cluster=req.cluster,
        namespace=req.namespace,
        backup=req.backup,
        flavor=src.version.flavor.value,
        server_version=src.full_version,
        gtid_position=gtid,
        source_instance=src.name,
        started_at=started,
        completed_at=clock.stamp(),
        data_key=data_key,
        compression=req.compression,
        compressed_size=uploaded.size,
        uncompressed_size=stream.size,
        sha256=uploaded.sha256,
        method=req.method,
        tables_note=stream.tables_note or None,
        **_protected(
            req.key,
            {
                "databases": list(src.databases),
                "events": src.events,
                **({} if stream.tables is None else {"tables": tables_json(stream.tables)}),
            },
        ),
    )
    storage.put_bytes(client, req.s3, f"{folder}/{storage.MANIFEST_NAME}", manifest.to_json())
    return manifest


@dataclass(frozen=True)
class Source:
    """The instance a backup copies, and what was read of it before the copy."""

    candidate: Candidate
    version: Any  # db.flavor.ServerVersion
    full_version: str  # VERSION() without its suffix
    databases: list[str]
    plugins: list[str]  # the donor's plugin libraries a CLONE recipient needs (MySQL, physical)
    events: list[tuple[str, str, str]] | None  # the primary's scheduled events
    physical_copy: bool
    donated: bool  # a MariaDB physical copy, streamed by the donor's sidecar

    @property
    def name(self) -> str:
        return self.candidate.name


def _source(req: BackupRequest, db_password: str, tls) -> Source:
    """The candidate to copy (choose_source over one observation of each), and what it holds."""
    observed = []
    for c in req.candidates:
        inst = _session(c, db_password, tls)
        observed.append((c.name, inst.observe()))
        inst.close()
    try:
        source_name = choose_source(observed, req.max_lag_seconds)
    except BackupError as e:
        raise BackupError(commands.tls_hint(str(e), req.tls_ca)) from None
    source = next(c for c in req.candidates if c.name == source_name)
    version = dict(observed)[source_name].version
    events = _primary_events(req, observed, db_password, tls)
    physical_copy = req.method == physical.METHOD_PHYSICAL
    donated = physical_copy and version.flavor.value == "mariadb"
    if physical_copy and not donated and not req.tools_dir:
        raise BackupError("a physical backup of MySQL needs the Job's client-tools sidecar (CLONE)")
    if donated and tls is None:
        raise BackupError(
            "a physical backup of MariaDB is asked for over TLS: it needs the cluster's CA (--tls-ca)"
        )
    inst = _session(source, db_password, tls)
    try:
        full_version = str(inst.scalar("SELECT VERSION()")).split("-")[0]
        databases = commands.user_databases([r[0] for r in inst.execute("SHOW DATABASES")])
        plugins = copy_server.donor_libraries(inst) if physical_copy and not donated else []
    except Exception as e:  # noqa: BLE001
        raise BackupError(f"reading the databases of {source_name}: {e}") from None
    finally:
        inst.close()
    return Source(source, version, full_version, databases, plugins, events, physical_copy, donated)


def _producer(
    scope: contextlib.ExitStack, req: BackupRequest, src: Source, db_password: str, tls, stream: DumpStream
):
    """What produces the backup's bytes, entered into `scope`: (the CLONE copy, MySQL physical,
    None otherwise; the donor's offer, MariaDB physical, None otherwise; the argv whose stdout
    carries the bytes: the tar of the copy or the dump tool, [] for a donor's stream). A CLONE
    copy's table digests go into `stream` (copy_digests)."""
    source = src.candidate
    if src.donated:
        assert tls is not None
        try:
            offer = scope.enter_context(
                mariadb_copy.requested(source.endpoint.host, req.seed_port, db_password, tls)
            )
        except mariadb_copy.CopyError as e:
            raise BackupError(f"the physical copy of {src.name}: {e}") from None
        return None, offer, []
    if src.physical_copy:
        try:
            copy = scope.enter_context(
                physical.cloned(
                    req.tools_dir or "",
                    source.endpoint,
                    db_password,
                    req.tls_ca,
                    copy_server.recipient_plugins(src.plugins),
                    scratch=req.scratch_dir,
                    inspect=(
                        (lambda socket, databases: copy_digests(req, src, stream, socket, databases))
                        if req.copy_digests
                        else None
                    ),
                )
            )
        except copy_server.PhysicalError as e:
            raise BackupError(f"the physical copy of {src.name}: {e}") from None
        return copy, None, copy_server.tar_command(copy.data)
    options = scope.enter_context(option_file(source.endpoint.user, db_password, req.tools_dir))
    argv = commands.dump_command(src.version, source.endpoint, options, src.databases, req.tls_ca)
    launch = sidecar_launch(req.tools_dir, stdin=False) if req.tools_dir else local_launch
    try:  # a dump tool of an older series than the server's, or none: fail before dumping
        unfit, _ = tool_check(launch, argv[0], src.version)
    except (RuntimeError, OSError) as e:  # SidecarError, or not installed here
        raise BackupError(f"{argv[0]} --version: {e}") from None
    if unfit:
        raise BackupError(unfit)
    return None, None, argv


def copy_digests(
    req: BackupRequest, src: Source, stream: DumpStream, socket: str, databases: list[str]
) -> None:
    """A MySQL physical copy's table digests, as a logical backup records its own: while a server
    runs on the copy (physical.cloned's `inspect`), the dump tool of the sidecar - the same tool,
    with the options that shape the rows, as a restore's check dumps the restored server with
    (commands.copy_dump_command) - dumps the copy's `databases` over that server's socket into a
    DigestProcess, in this Job; the dump's bytes go nowhere else. The tables go into
    `stream.tables`; when they cannot be read the backup goes on without them, the reason in
    `stream.tables_note` - without the dump tool's message when the backup is encrypted (it may
    name a database or table, which an encrypted backup's manifest only holds sealed)."""
    if not databases:
        stream.tables, stream.tables_note = {}, ""
        return
    argv = commands.copy_dump_command(src.version, socket, databases)
    try:
        read = dump_digests(SidecarProcess(argv, req.tools_dir or ""))
    except (SidecarError, OSError) as e:
        stream.tables, stream.tables_note = (
            None,
            f"the dump of the copy for its table digests did not run: {e}",
        )
        return
    note = read.note
    if read.status != 0:
        told = "" if req.key else read.stderr.text()
        note = f"{argv[0]} of the copy for its table digests failed (exit status {read.status})" + (
            f": {told}" if told else ""
        )
    stream.tables, stream.tables_note = read.tables, note


def _pipe_and_upload(
    client,
    req: BackupRequest,
    src: Source,
    argv: list[str],
    offer,
    compress_argv: list[str],
    data_key: str,
    stream: DumpStream,
    reader: xbstream.Reader,
    secrets: tuple[str, ...],
    on_part: Callable[[int], None] | None,
):
    """The producer's bytes (`argv`'s stdout, or the donor's `offer`) through `stream` into the
    compressor, its output uploaded as `data_key` (encrypted with req.key); the upload completes
    only once every process ended well. Returns what upload.upload_stream returned."""
    source_name = src.name
    dump = comp = digest = None
    dump_err, comp_err = TailBuffer(), TailBuffer()
    try:
        if offer is not None:
            pass  # the stream comes from the donor's sidecar, over TLS
        elif req.tools_dir and not src.physical_copy:
            try:
                dump = SidecarProcess(argv, req.tools_dir)
            except SidecarError as e:
                raise BackupError(str(e)) from None
        else:
            dump = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        comp = spawn(compress_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        readers = [drain(comp.stderr, comp_err)]
        if dump is not None:
            readers.append(drain(dump.stderr, dump_err))
            pause = PAUSE if enlarge_pipes(dump.stdout, comp.stdin, comp.stdout) else 0
            digest = None if src.physical_copy else DigestProcess()
            tee = digest.stdin if digest else None
            pump = threading.Thread(
                target=stream.pump, args=(dump.stdout, comp.stdin, pause, tee), daemon=True
            )
        else:
            enlarge_pipes(comp.stdin, comp.stdout)
            pump = threading.Thread(target=stream.pump_copy, args=(offer, comp.stdin, reader), daemon=True)
        pump.start()
        comp_out = comp.stdout.fileno()

        parts = [0]

        def readinto(view: memoryview) -> int:
            return os.readv(comp_out, [view])

        def on_progress() -> None:
            parts[0] += 1
            if on_part is not None:
                on_part(parts[0])

        def before_complete() -> None:
            pump.join()
            dump_rc, comp_rc = dump.wait() if dump else 0, comp.wait()
            for t in readers:
                t.join(5)
            if offer is not None and not stream.error:
                try:
                    reader.finish()
                except xbstream.StreamError as e:
                    raise BackupError(f"the physical copy of {source_name}: {e}") from None
            if dump_rc != 0:
                raise BackupError(
                    f"{argv[0]} failed on {source_name} (exit status {dump_rc}) after "
                    f"{stream.size} bytes: {dump_err.text(secrets) or 'no message'}"
                )
            if comp_rc != 0:
                raise BackupError(
                    f"{compress_argv[0]} failed (exit status {comp_rc}): "
                    f"{comp_err.text(secrets) or 'no message'}"
                )
            if stream.error:
                what = "the physical copy" if offer is not None else "the dump"
                raise BackupError(f"passing {what} to {compress_argv[0]} failed: {stream.error[0]}")
            if digest is not None:
                stream.tables, stream.tables_note = digest.result(stream.tee_error)

        compressed = counting(readinto, req.part_size, on_progress)
        return upload.upload_stream(
            client,
            req.s3,
            data_key,
            Encryptor(compressed, req.key).readinto if req.key else compressed,
            part_size=req.part_size,
            before_complete=before_complete,
        )
    finally:
        stop(dump, comp)
        if digest is not None:
            digest.stop()


def _session(c: Candidate, db_password: str, tls) -> Instance:
    """A session of candidate `c` as the backup account, over TLS when `tls` is set."""
    return Instance(
        c.endpoint.host,
        c.endpoint.port,
        c.endpoint.user,
        db_password,
        name=c.name,
        tls=tls,
        plaintext=tls is None,
    )


def _primary_events(req: BackupRequest, observed, db_password: str, tls) -> list[tuple[str, str, str]] | None:
    """(schema, name, status) of each event on the primary - the writable instance that does not
    replicate - as the manifest keeps them (a replica holds every event replica-side disabled).
    None when no single primary answered or reading failed: the backup goes on without them."""
    primaries = [n for n, o in observed if o.reachable and not o.read_only and o.replica is None]
    if len(primaries) != 1:
        return None
    inst = _session(next(c for c in req.candidates if c.name == primaries[0]), db_password, tls)
    try:
        return sorted((e.schema, e.name, e.status) for e in inst.events())
    except Exception:  # noqa: BLE001 - a backup without them restores events as dumped
        return None
    finally:
        inst.close()


def _protected(key: Key | None, sensitive: dict) -> dict:
    """The manifest's sensitive fields: as they are without a key, else sealed with it."""
    if key is None:
        events = sensitive["events"]
        return {
            "databases": tuple(sensitive["databases"]),
            "events": None if events is None else tuple(events),
            "tables": sensitive.get("tables"),
        }
    blob = seal(key, json.dumps(sensitive, sort_keys=True).encode())
    return {"encryption": ALGORITHM, "key_id": key.id, "sealed": base64.b64encode(blob).decode()}
