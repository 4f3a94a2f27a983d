"""One backup: dump tool (logical), tar of a CLONE copy (physical, MySQL: backup/physical.py) or
the donor sidecar's mariadb-backup stream (physical, MariaDB: backup/mariadb_copy.py) ->
compressor -> S3 multipart upload, then the manifest.

    manifest = run_backup(request, s3_credentials, db_password)

The dump's stdout goes through this process (counted, its first and last 64 KiB kept to read the
GTID position) into the compressor; the compressor's output is cut into fixed-size parts and
uploaded while the dump continues. Memory stays at a few parts whatever the database size; nothing
is written to disk. A failure anywhere (dump tool, compressor, S3) aborts the multipart upload, so
no data object appears, and the manifest - written last - never does.

The instance copied is backup_source.py's choice; what produces the bytes, backup_producer.py's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable

from mysql_operator import clock
from mysql_operator.backup import commands, storage, upload, xbstream
from mysql_operator.backup.backup_producer import mariadb_digests, producer
from mysql_operator.backup.backup_source import read_source
from mysql_operator.backup.backup_types import BackupError, BackupRequest, Source
from mysql_operator.backup.digest_process import DigestProcess
from mysql_operator.backup.dump_text import gtid_from_dump
from mysql_operator.backup.crypto import ALGORITHM, Encryptor, Key, seal
from mysql_operator.backup.sidecar import SidecarError, SidecarProcess
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.pipeline import TailBuffer, drain, enlarge_pipes, server_tls, spawn, stop
from mysql_operator.backup.stream import PAUSE, DumpStream, counting
from mysql_operator.backup.table_digest import tables_json


# a backup whose server's name did not resolve for now (commands.name_not_resolved_yet: the
# cluster DNS did not answer in time) is taken again this many times, these seconds apart: the
# lookup fails before the dump tool writes a byte, and a failed try leaves no object behind
LOOKUP_RETRIES, LOOKUP_RETRY_SECONDS = 3, 3.0


def run_backup(
    req: BackupRequest,
    s3_credentials: storage.Credentials,
    db_password: str,
    *,
    client=None,
    on_part: Callable[[int], None] | None = None,
    once: Callable[..., Manifest] | None = None,
    pause: Callable[[float], None] = time.sleep,
) -> Manifest:
    """Take the backup and return its manifest (already stored). Raises BackupError or StorageError
    whose text never contains a password. (`once`: one try, _backup_once unless a test says.)"""
    once = once or _backup_once
    for attempt in range(LOOKUP_RETRIES + 1):
        try:
            return once(req, s3_credentials, db_password, client=client, on_part=on_part)
        except BackupError as e:
            if attempt == LOOKUP_RETRIES or not commands.name_not_resolved_yet(str(e)):
                raise
            print(f"backup: {e}; again in {LOOKUP_RETRY_SECONDS:g} s", file=sys.stderr, flush=True)
            pause(LOOKUP_RETRY_SECONDS)
    raise AssertionError("unreachable")


def _backup_once(
    req: BackupRequest,
    s3_credentials: storage.Credentials,
    db_password: str,
    *,
    client=None,
    on_part: Callable[[int], None] | None = None,
) -> Manifest:
    """One try of run_backup."""
    started = clock.stamp()
    tls = server_tls(req.tls_ca)  # a CA that cannot be used fails before anything else
    client = client or storage.make_client(req.s3, s3_credentials)
    storage.check_bucket(client, req.s3)  # wrong bucket/credentials/endpoint: fail before dumping
    src = read_source(req, db_password, tls)
    compress_argv, _, suffix = commands.compressor(req.compression)
    folder = storage.backup_folder(req.s3, req.cluster, req.backup)
    kind = "xbstream" if src.donated else "tar" if src.physical_copy else "sql"
    data_key = f"{folder}/backup.{kind}{suffix}{'.enc' if req.key else ''}"
    secrets = (db_password, s3_credentials.secret_access_key)

    reader = xbstream.Reader(keep=xbstream.POSITION_FILES)
    stream = DumpStream()
    with contextlib.ExitStack() as scope:
        copy, offer, argv, unpacked = producer(scope, req, src, db_password, tls, stream)
        uploaded = _pipe_and_upload(
            client,
            req,
            src,
            argv,
            offer,
            compress_argv,
            data_key,
            stream,
            reader,
            secrets,
            on_part,
            unpacked.stdin if unpacked is not None else None,
        )
        if unpacked is not None:
            mariadb_digests(req, src, stream, unpacked)

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
    copy_tee=None,
):
    """The producer's bytes (`argv`'s stdout, or the donor's `offer`) through `stream` into the
    compressor, its output uploaded as `data_key` (encrypted with req.key); the upload completes
    only once every process ended well. A donor's stream goes to `copy_tee` too (closed at its
    end; mariadb_copy_tables). Returns what upload.upload_stream returned."""
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
            pump = threading.Thread(
                target=stream.pump_copy, args=(offer, comp.stdin, reader, copy_tee), daemon=True
            )
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
