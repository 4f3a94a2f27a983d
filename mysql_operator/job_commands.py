"""What the Jobs and the binlog archiver run (`mysql-operator backup run|restore-into|delete-data|
keep-evidence|archive-binlogs`, parsed by cli_jobs.py). None holds API credentials: each reads its
secrets from its environment (never argv), and reports in its termination message (`_finish`),
which the operator reads from the Pod's status."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from mysql_operator import clock
from mysql_operator.api import S3, SSE_C, SecretKeys, ServerSideEncryption
from mysql_operator.backup.archiver_health import Health
from mysql_operator.manifests.tenant_jobs import (
    ENV_ACCESS_KEY,
    ENV_DB_PASSWORD,
    ENV_ENCRYPTION_KEY,
    ENV_SECRET_KEY,
    ENV_SSE_C_KEY,
)


def _key_from(args):
    """The encryption key the Job was given (None without --encryption-key-from). CryptoError
    naming the Secret when the environment lacks it or it is not a 256-bit key."""
    from mysql_operator.backup.crypto import CryptoError, parse_key

    if not args.encryption_key_from:
        return None
    text = os.environ.get(ENV_ENCRYPTION_KEY, "")
    if not text:
        raise CryptoError(f"{args.encryption_key_from} is empty: it must hold the encryption key")
    return parse_key(text, args.encryption_key_from)


def s3_from(args) -> S3:
    return S3(
        bucket=args.bucket,
        credentials_secret=SecretKeys("env"),
        prefix=args.prefix,
        endpoint=args.endpoint,
        region=args.region,
        force_path_style=args.force_path_style,
        sse=ServerSideEncryption(args.sse, args.sse_kms_key_id) if args.sse else None,
    )


def s3_credentials(args, env: dict[str, str]):
    """The S3 credentials of a Job, with the SSE-C key when --sse SSE-C (CryptoError naming its
    Secret when that is not a 256-bit key)."""
    from mysql_operator.backup import storage
    from mysql_operator.backup.crypto import parse_key

    customer_key = None
    if args.sse == SSE_C:
        customer_key = parse_key(env[ENV_SSE_C_KEY], args.sse_c_key_from or "the SSE-C key").secret
    return storage.Credentials(env[ENV_ACCESS_KEY], env[ENV_SECRET_KEY], customer_key)


def _with_sse_key(args, names) -> tuple[str, ...]:
    """The environment variables a Job needs: `names`, and the SSE-C key with --sse SSE-C."""
    return (*names, ENV_SSE_C_KEY) if args.sse == SSE_C else tuple(names)


def _secrets(env: dict[str, str]) -> list[str]:
    """What messages must never show of a Job's environment: all but the access key id."""
    return [v for name, v in env.items() if name != ENV_ACCESS_KEY]


def _job_environment(
    args, names=(ENV_DB_PASSWORD, ENV_ACCESS_KEY, ENV_SECRET_KEY)
) -> tuple[dict[str, str] | None, int]:
    """The secrets a Job's command reads from its environment (with the SSE-C key when --sse
    SSE-C), or (None, exit status) once the missing ones were reported."""
    names = _with_sse_key(args, names)
    missing = [v for v in names if not os.environ.get(v)]
    if missing:
        return None, _finish(
            args, {"ok": False, "message": f"environment variables missing: {', '.join(missing)}"}
        )
    return {v: os.environ[v] for v in names}, 0


def cmd_delete_data(args) -> int:
    from mysql_operator.backup import storage
    from mysql_operator.redaction import redact

    env, status = _job_environment(args, (ENV_ACCESS_KEY, ENV_SECRET_KEY))
    if env is None:
        return status
    s3 = s3_from(args)
    folder = args.folder.strip("/")
    if not folder:
        return _finish(args, {"ok": False, "message": "--folder is empty: refusing to delete a whole bucket"})
    try:
        client = storage.make_client(s3, s3_credentials(args, env))
        deleted = storage.delete_folder(client, s3, folder)
    except Exception as e:  # noqa: BLE001 - every failure becomes the status message
        return _finish(args, {"ok": False, "message": redact(str(e) or type(e).__name__, _secrets(env))})
    return _finish(
        args,
        {
            "ok": True,
            "deleted": deleted,
            "message": f"deleted {deleted} objects under {storage.describe(s3, folder)}",
        },
    )


def cmd_keep_evidence(args) -> int:
    from pathlib import Path

    from mysql_operator.backup import storage
    from mysql_operator.backup.crypto import seal
    from mysql_operator.redaction import redact

    env, status = _job_environment(args, (ENV_ACCESS_KEY, ENV_SECRET_KEY))
    if env is None:
        return status
    s3 = s3_from(args)
    folder = storage.join_key(s3.prefix, "evidence", args.name)
    # a mounted ConfigMap: one file per key (the "..data" entries are the kubelet's)
    files = sorted(f for f in Path(args.source).iterdir() if not f.name.startswith("..") and f.is_file())
    try:
        key = _key_from(args)
        client = storage.make_client(s3, s3_credentials(args, env))
        for f in files:
            name, body, kind = f.name, f.read_bytes(), "text/plain"
            if (
                key is not None
            ):  # the discarded transactions are the tenant's data: encrypted like its backups
                name, body, kind = f"{name}.enc", seal(key, body), "application/octet-stream"
            storage.put_bytes(client, s3, storage.join_key(folder, name), body, kind)
    except Exception as e:  # noqa: BLE001 - every failure becomes the status message
        return _finish(args, {"ok": False, "message": redact(str(e) or type(e).__name__, _secrets(env))})
    return _finish(
        args, {"ok": True, "message": f"kept {len(files)} files at {storage.describe(s3, folder)}"}
    )


def cmd_restore_into(args) -> int:
    from mysql_operator.backup.restore_types import Donor, RestoreError, Source, Target
    from mysql_operator.backup.restore_job import restore_all
    from mysql_operator.backup.user_checks import read_folder
    from mysql_operator.redaction import redact

    env, status = _job_environment(args)
    if env is None:
        return status
    try:  # before any instance is touched
        checks = read_folder(args.checks_dir, args.checks_from) if args.checks_dir else ()
    except RestoreError as e:
        return _finish(args, {"ok": False, "message": str(e)})
    targets = {}
    for text in args.target:
        name, host, port = _parse_source(text)
        targets[name] = Target(
            host,
            port,
            args.user,
            env[ENV_DB_PASSWORD],
            tls_ca=args.tls_ca,
            tools_dir=args.client_tools_dir,
            definer=args.app_user,
            load_workers=max(1, args.load_workers),
            spool=args.scratch_dir,
        )
    try:
        result = restore_all(
            targets,
            Source(s3_from(args), args.path, _key_from(args), _stop_from(args)),
            s3_credentials(args, env),
            args.app_database,
            drop_account=args.drop_account,
            primary=args.primary,
            check_tables=args.check_tables,
            checks=checks,
            donor=(
                Donor(args.donor_host, args.donor_port, args.scratch_dir, args.donor_tls_dir)
                if args.donor_host and args.donor_port
                else None
            ),
        )
    except Exception as e:  # noqa: BLE001 - every failure becomes the status message
        result = {"ok": False, "message": str(e) or type(e).__name__}
    result["message"] = redact(str(result.get("message", "")), _secrets(env))
    return _finish(args, result)


def _stop_from(args):
    """The point-in-time recovery stop the restore Job was given (None: the backup as it is)."""
    from mysql_operator.backup.pitr import Stop

    if args.stop_at:
        try:
            when = clock.parse(args.stop_at)
        except ValueError:
            when = None
        if when is None:
            raise SystemExit(f"--stop-at {args.stop_at!r}: use RFC 3339 in UTC, e.g. 2026-11-26T10:42:17Z")
        return Stop(at=int(when.timestamp()))
    if args.stop_gtid:
        return Stop(gtid=args.stop_gtid)
    return Stop() if args.stop_latest else None


def _parse_source(text: str):
    name, sep, addr = text.partition("=")
    host, _, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SystemExit(f"{text!r}: use NAME=HOST:PORT")
    return name, host, int(port)


def cmd_run(args) -> int:
    from mysql_operator.backup.commands import Endpoint
    from mysql_operator.backup.backup_types import BackupRequest, Candidate
    from mysql_operator.backup.run import run_backup

    env, status = _job_environment(args)
    if env is None:
        return status
    s3 = s3_from(args)
    candidates = []
    for text in args.source:
        name, host, port = _parse_source(text)
        candidates.append(Candidate(name, Endpoint(host, port, args.user)))
    req = BackupRequest(
        cluster=args.cluster,
        namespace=args.namespace,
        backup=args.backup,
        s3=s3,
        candidates=tuple(candidates),
        compression=args.compression,
        part_size=args.part_size_mib * 1024 * 1024,
        tls_ca=args.tls_ca,
        tools_dir=args.client_tools_dir,
        method=args.method,
        scratch_dir=args.scratch_dir,
        copy_digests=args.copy_digests,
    )
    try:
        req = dataclasses.replace(req, key=_key_from(args))
        m = run_backup(req, s3_credentials(args, env), env[ENV_DB_PASSWORD])
    except Exception as e:  # noqa: BLE001 - every failure becomes the status message
        from mysql_operator.redaction import redact

        return _finish(args, {"ok": False, "message": redact(str(e) or type(e).__name__, _secrets(env))})
    return _finish(args, result_of(m, s3))


def cmd_archive_binlogs(args) -> int:
    """Runs until SIGTERM; what happens goes to stdout, one JSON line each (never a secret)."""
    import signal
    import threading
    from pathlib import Path

    from mysql_operator.backup import storage
    from mysql_operator.backup.binlog_archive import Store
    from mysql_operator.backup.binlog_stream import Follower, Server, ToolUnusable, follow
    from mysql_operator.backup.pitr import local_launch, sidecar_launch
    from mysql_operator.redaction import redact

    names = _with_sse_key(args, (ENV_DB_PASSWORD, ENV_ACCESS_KEY, ENV_SECRET_KEY))
    missing = [v for v in names if not os.environ.get(v)]
    if missing:
        print(json.dumps({"message": f"environment variables missing: {', '.join(missing)}"}), flush=True)
        return 1
    env = {v: os.environ[v] for v in names}
    s3 = s3_from(args)
    client = storage.make_client(s3, s3_credentials(args, env))
    servers = tuple(Server(*_parse_source(text)) for text in args.source)
    follower = Follower(
        servers,
        args.user,
        env[ENV_DB_PASSWORD],
        Path(args.spool),
        Store(client, s3, args.cluster, _key_from(args), owner=args.cluster_uid),
        max_delay=args.max_delay,
        launch=sidecar_launch(args.client_tools_dir, stdin=False) if args.client_tools_dir else local_launch,
        options_dir=args.client_tools_dir,
        tls_ca=args.tls_ca,
        tools_image=args.tools_image,
    )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    secrets = _secrets(env)
    health = Health(grace=max(30.0, 3 * args.max_delay), max_delay=args.max_delay)
    if args.health_port:
        health.serve(args.health_port)
    try:
        follow(
            follower,
            stopping,
            lambda line: print(json.dumps({"message": redact(line, secrets)}), flush=True),
            passed=health.passed,
        )
    except ToolUnusable as e:  # the Pod's termination message: the operator shows it in the status
        return _finish(args, {"ok": False, "message": redact(str(e), secrets)})
    return 0


def result_of(m, s3: S3) -> dict[str, Any]:
    """What the Job reports (its termination message) and the handler copies into status."""
    return {
        "ok": True,
        "location": f"s3://{s3.bucket}/{m.data_key.rsplit('/', 1)[0]}",
        "sizeBytes": m.compressed_size,
        "uncompressedBytes": m.uncompressed_size,
        "sha256": m.sha256,
        "gtidPosition": m.gtid_position or "",
        **({"encryptionKeyId": m.key_id} if m.key_id else {}),
        "sourceInstance": m.source_instance,
        "method": m.method,
        "startedAt": m.started_at,
        "completedAt": m.completed_at,
    }


TERMINATION_BYTES = 4000  # what the operator reads of the Pod's termination message


def _finish(args, result: dict[str, Any]) -> int:
    text = json.dumps(result, sort_keys=True)
    print(text)
    message = str(result.get("message", ""))
    while len(text.encode()) > TERMINATION_BYTES and message:  # whole JSON, the message shortened
        message = message[: len(message) * 3 // 4]
        text = json.dumps({**result, "message": message + " [...]"}, sort_keys=True)
    try:
        with open(args.termination_log, "w") as f:  # read by the operator from the Pod's status
            f.write(text[:TERMINATION_BYTES])
    except OSError:
        pass
    return 0 if result.get("ok") else 1
