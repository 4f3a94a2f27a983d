"""`mysql-operator backup run|restore-into|delete-data|create|list|describe|delete`, `mysql-operator restore`.

The main CLI calls `register(subparsers)`; each parser sets `func(args) -> int`.
`backup run`, `backup restore-into` and `backup delete-data` are what the Jobs execute (no API
credentials: they read secrets from their environment and report in their termination message);
the others talk to the Kubernetes API like kubectl does (current kubeconfig and context, or
in-cluster config).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import Any

from mysql_operator import clock
from mysql_operator.units import human_size
from mysql_operator.cli_common import (
    NOT_FOUND,
    USAGE,
    CommandError,
    as_list,
    common_flags,
    connect,
    dry_run_flag,
    emit,
    hide,
    print_table,
)
from mysql_operator.api import (
    API_VERSION,
    BACKUP_KIND,
    BACKUP_PLURAL,
    CLUSTER_KIND,
    CLUSTER_PLURAL,
    GROUP,
    S3,
    SSE_C,
    SecretKeys,
    ServerSideEncryption,
    VERSION,
)
from mysql_operator.manifests.backup_jobs import (
    CLUSTER_LABEL,
    DELETE_DATA_ANNOTATION,
    ENV_ACCESS_KEY,
    ENV_DB_PASSWORD,
    ENV_ENCRYPTION_KEY,
    ENV_SECRET_KEY,
    ENV_SSE_C_KEY,
    TERMINATION_LOG,
)


def register(subparsers, common=None, listing=None, dry=None, internal: bool = True) -> None:
    """The backup commands and restore; `common`, `listing` and `dry` are the parents giving the
    flags every user command takes (cli_common's, made here when not given); `internal`: also
    what the Jobs run, hidden from --help."""
    common, listing = common or common_flags(), listing or common_flags(listing=True)
    dry = dry or dry_run_flag()
    b = subparsers.add_parser("backup", help="logical and physical backups to S3")
    bs = b.add_subparsers(dest="backup_command", required=True, metavar="COMMAND")
    if internal:
        _register_jobs(bs)
    _register_user(subparsers, bs, common, listing, dry)


def _register_jobs(bs) -> None:
    run = bs.add_parser("run", help="take one backup now (what the backup Job runs)")
    run.add_argument("--namespace", required=True)
    run.add_argument("--cluster", required=True)
    run.add_argument("--backup", required=True, help="MySQLBackup name (the folder in the bucket)")
    _s3_arguments(run)
    run.add_argument("--compression", default="zstd", choices=("zstd", "gzip"))
    run.add_argument(
        "--method",
        default="logical",
        choices=("logical", "physical"),
        help="logical: the dump tool; physical: MySQL CLONE into the client-tools sidecar, sent as tar",
    )
    run.add_argument("--part-size-mib", type=int, default=16)
    run.add_argument("--user", default="mysql-operator-backup")
    run.add_argument(
        "--source",
        action="append",
        required=True,
        metavar="NAME=HOST:PORT",
        help="a server to consider; repeat for each (a healthy replica is preferred)",
    )
    _tls_argument(run)
    _client_tools_argument(run, scratch=True)
    _encryption_argument(run)
    run.add_argument("--termination-log", default=TERMINATION_LOG)
    run.set_defaults(func=cmd_run)

    into = bs.add_parser(
        "restore-into",
        help="restore a backup into every instance of a new cluster (what the restore Job runs)",
    )
    _s3_arguments(into)
    into.add_argument(
        "--path", required=True, help="the backup's folder, manifest or data key, or s3://bucket/folder"
    )
    into.add_argument("--user", required=True, help="the SQL account that loads the dump")
    into.add_argument(
        "--app-database", help="spec.database.name (created empty at init: dropped before loading)"
    )
    into.add_argument("--app-user", help="spec.database.user: the definer every stored object of a dump gets")
    into.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="NAME=HOST:PORT",
        help="an instance to restore into; repeat for each",
    )
    into.add_argument(
        "--primary",
        metavar="NAME",
        help="the --target the new cluster starts with as its primary (default: the first): it gets "
        "the source's events' statuses, the others have them replica-side disabled",
    )
    into.add_argument(
        "--drop-account",
        action="store_true",
        help="the --user account drops itself on every instance at the end",
    )
    into.add_argument(
        "--donor-host", help="a physical backup: the name the instances clone the copy from (this Pod's)"
    )
    into.add_argument("--donor-port", type=int, help="... and the port the copy is served on")
    into.add_argument(
        "--donor-tls-dir",
        help="... and the folder of its certificate (tls.crt, tls.key, ca.crt), the sidecar's",
    )
    stop = into.add_mutually_exclusive_group()
    stop.add_argument(
        "--stop-at", metavar="RFC3339", help="then replay the archived binary logs up to this second (UTC)"
    )
    stop.add_argument("--stop-gtid", metavar="SET", help="then replay them up to this GTID set (inclusive)")
    stop.add_argument("--stop-latest", action="store_true", help="then replay every archived binary log")
    _tls_argument(into)
    _client_tools_argument(into, scratch=True)
    _encryption_argument(into)
    into.add_argument("--termination-log", default=TERMINATION_LOG)
    into.set_defaults(func=cmd_restore_into)

    dd = bs.add_parser("delete-data", help="delete one backup's objects (what the delete Job runs)")
    _s3_arguments(dd)
    dd.add_argument("--folder", required=True, help="the backup's folder in the bucket")
    dd.add_argument("--termination-log", default=TERMINATION_LOG)
    dd.set_defaults(func=cmd_delete_data)

    ev = bs.add_parser(
        "keep-evidence",
        help="copy a re-seed's record of discarded transactions to the bucket (what its Job runs)",
    )
    _s3_arguments(ev)
    ev.add_argument("--source", required=True, help="the folder holding the record (its ConfigMap)")
    ev.add_argument("--name", required=True, help="the record's name: it goes to <prefix>/evidence/<name>/")
    _encryption_argument(ev)
    ev.add_argument("--termination-log", default=TERMINATION_LOG)
    ev.set_defaults(func=cmd_keep_evidence)

    ab = bs.add_parser(
        "archive-binlogs",
        help="stream the primary's binary logs to the bucket, following failovers (what the "
        "binlog-archiver Deployment runs)",
    )
    ab.add_argument("--cluster", required=True, help="the folder in the bucket: <prefix>/<cluster>/binlogs")
    ab.add_argument(
        "--cluster-uid", default="", help="the cluster's uid: the folder is refused if another cluster's"
    )
    _s3_arguments(ab)
    ab.add_argument("--user", default="mysql-operator-binlog")
    ab.add_argument(
        "--source", action="append", required=True, metavar="NAME=HOST:PORT", help="a server; repeat for each"
    )
    ab.add_argument("--max-delay", type=float, default=10.0, help="seconds a transaction waits at most")
    ab.add_argument(
        "--spool", required=True, help="a folder (shared with the sidecar) for the files streamed"
    )
    ab.add_argument(
        "--health-port",
        type=int,
        default=0,
        help="answer GET /healthz on this port: 200 while archiving, 503 otherwise (0: no server)",
    )
    ab.add_argument("--tools-image", default="", help="the sidecar's image (named in messages)")
    ab.add_argument("--termination-log", default=TERMINATION_LOG)
    _tls_argument(ab)
    _client_tools_argument(ab)
    _encryption_argument(ab)
    ab.set_defaults(func=cmd_archive_binlogs)
    hide(bs, "run", "restore-into", "delete-data", "keep-evidence", "archive-binlogs")


def _register_user(subparsers, bs, common, listing, dry) -> None:
    create = bs.add_parser("create", parents=[common, dry], help="create a MySQLBackup of a cluster")
    create.add_argument("cluster")
    create.add_argument("--name", help="MySQLBackup name (default: <cluster>-<timestamp>)")
    create.add_argument(
        "--delete-data-with-backup",
        action="store_true",
        help="deleting this MySQLBackup also deletes its objects in S3",
    )
    create.set_defaults(func=cmd_create)

    ls = bs.add_parser("list", parents=[listing], help="list MySQLBackups (-A: of every namespace)")
    ls.add_argument("--cluster", help="only this cluster's")
    ls.set_defaults(func=cmd_list)

    desc = bs.add_parser("describe", parents=[common], help="show one MySQLBackup's status")
    desc.add_argument("name")
    desc.set_defaults(func=cmd_describe)

    delete = bs.add_parser("delete", parents=[common], help="delete a MySQLBackup")
    delete.add_argument("name")
    delete.set_defaults(func=cmd_delete)

    r = subparsers.add_parser(
        "restore",
        parents=[common, dry],
        help="create a new cluster restored from a MySQLBackup, or from its bucket alone",
    )
    r.add_argument("backup", nargs="?", help="MySQLBackup name (or --from-bucket)")
    r.add_argument("--into", required=True, metavar="CLUSTER", help="name of the new MySQLCluster")
    r.add_argument("--instances", type=int, help="default: as the backed-up cluster (--from-bucket: 1)")
    bucket = r.add_argument_group(
        "from the bucket alone (the backed-up cluster and its MySQLBackup may be gone): spec.restore.s3"
    )
    bucket.add_argument(
        "--from-bucket",
        metavar="URL",
        help="s3://BUCKET/[PREFIX/]CLUSTER/BACKUP: the backup's folder (a MySQLBackup's status.location)",
    )
    bucket.add_argument("--s3-credentials-secret", metavar="SECRET", help="Secret with the S3 access keys")
    bucket.add_argument("--s3-endpoint", metavar="URL", help="e.g. https://minio.example:9000 (default: AWS)")
    bucket.add_argument("--s3-region", metavar="REGION")
    bucket.add_argument("--s3-force-path-style", action="store_true")
    bucket.add_argument(
        "--flavor", choices=("mysql", "mariadb"), help="the backed-up server's (default mysql)"
    )
    bucket.add_argument("--version", dest="server_version", metavar="X.Y", help="the backed-up server's")
    bucket.add_argument(
        "--encryption-key-secret",
        metavar="SECRET",
        help="the backups' encryption key (spec.backup.encryption)",
    )
    pit = r.add_mutually_exclusive_group()
    pit.add_argument(
        "--point-in-time",
        metavar="RFC3339|latest",
        help="then replay the source's archived binary logs up to this second (spec.restore.pointInTime)",
    )
    pit.add_argument("--gtid", metavar="SET", help="then replay them up to this GTID set (spec.restore.gtid)")
    r.set_defaults(func=cmd_restore)


# ----------------------------------------------------------------------------- the Jobs' commands


def _s3_arguments(p) -> None:
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", default="")
    p.add_argument("--endpoint")
    p.add_argument("--region")
    p.add_argument("--force-path-style", action="store_true")
    p.add_argument("--sse", metavar="TYPE", help="s3.serverSideEncryption: SSE-S3, SSE-KMS or SSE-C")
    p.add_argument("--sse-kms-key-id", metavar="ID", help="the KMS key of SSE-KMS (default: the bucket's)")
    p.add_argument(
        "--sse-c-key-from",
        metavar="WHERE",
        help=f"SSE-C: the key is in ${ENV_SSE_C_KEY}; WHERE names its Secret in messages",
    )


def _client_tools_argument(p, scratch: bool = False) -> None:
    """--client-tools-dir; with `scratch`, also the folder a physical copy is made in."""
    p.add_argument(
        "--client-tools-dir",
        metavar="PATH",
        help="a folder shared with the Job's client-tools sidecar, which runs the dump tool and "
        "the client of the cluster's server image (without it: this image's tools)",
    )
    if scratch:
        p.add_argument(
            "--scratch-dir",
            metavar="PATH",
            help="a physical backup: the folder (shared with the client-tools sidecar, with room "
            "for the whole data) its copy is made in or unpacked into; default: --client-tools-dir",
        )


def _tls_argument(p) -> None:
    p.add_argument(
        "--tls-ca",
        metavar="PATH",
        help="the cluster's CA certificate: connect over TLS, verifying the servers' certificate "
        "and host name (without it: plaintext)",
    )


def _encryption_argument(p) -> None:
    p.add_argument(
        "--encryption-key-from",
        metavar="WHERE",
        help=f"encrypt (or decrypt) with the key in ${ENV_ENCRYPTION_KEY}; WHERE names its Secret "
        'in messages (e.g. "Secret backup-key, key encryption-key")',
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


def _s3_from(args) -> S3:
    return S3(
        bucket=args.bucket,
        credentials_secret=SecretKeys("env"),
        prefix=args.prefix,
        endpoint=args.endpoint,
        region=args.region,
        force_path_style=args.force_path_style,
        sse=ServerSideEncryption(args.sse, args.sse_kms_key_id) if args.sse else None,
    )


def _s3_credentials(args, env: dict[str, str]):
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
    s3 = _s3_from(args)
    folder = args.folder.strip("/")
    if not folder:
        return _finish(args, {"ok": False, "message": "--folder is empty: refusing to delete a whole bucket"})
    try:
        client = storage.make_client(s3, _s3_credentials(args, env))
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
    s3 = _s3_from(args)
    folder = storage.join_key(s3.prefix, "evidence", args.name)
    # a mounted ConfigMap: one file per key (the "..data" entries are the kubelet's)
    files = sorted(f for f in Path(args.source).iterdir() if not f.name.startswith("..") and f.is_file())
    try:
        key = _key_from(args)
        client = storage.make_client(s3, _s3_credentials(args, env))
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
    from mysql_operator.backup.restore import Donor, Source, Target
    from mysql_operator.backup.restore_job import restore_all
    from mysql_operator.redaction import redact

    env, status = _job_environment(args)
    if env is None:
        return status
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
        )
    try:
        result = restore_all(
            targets,
            Source(_s3_from(args), args.path, _key_from(args), _stop_from(args)),
            _s3_credentials(args, env),
            args.app_database,
            drop_account=args.drop_account,
            primary=args.primary,
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
    from mysql_operator.backup.run import BackupRequest, Candidate, run_backup

    env, status = _job_environment(args)
    if env is None:
        return status
    s3 = _s3_from(args)
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
    )
    try:
        req = dataclasses.replace(req, key=_key_from(args))
        m = run_backup(req, _s3_credentials(args, env), env[ENV_DB_PASSWORD])
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
    s3 = _s3_from(args)
    client = storage.make_client(s3, _s3_credentials(args, env))
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


class Health:
    """The archiver's readiness (GET /healthz: a pass archived from the primary within `grace`
    seconds) and metrics (GET /metrics, Prometheus' text format, for the chart's PodMonitor):

    - mysql_binlog_archive_delay_seconds (gauge): how long the oldest transaction the primary
      wrote and the bucket lacks has waited (as first seen by a pass; 0 when the bucket holds
      all). Under writes it stays near max_delay plus an upload; it grows while nothing is
      archived (no primary, uploads failing): what was pending stays pending from then on, until
      a pass from a primary uploads again or finds nothing left to archive;
    - mysql_binlog_archive_max_delay_seconds (gauge): spec.backup.binlogs.maxDelaySeconds;
    - mysql_binlog_archive_streaming (gauge): 1 while ready (as /healthz)."""

    def __init__(self, grace: float, max_delay: float = 10.0):
        import time

        self.grace, self.max_delay, self.clock = grace, max_delay, time.monotonic
        self.ok_at: float | None = None
        # the oldest transaction the bucket lacks, first seen then (None: it lacks none); from the
        # start until a pass says: nothing known is archived yet
        self.oldest: float | None = self.clock()
        self.carried: float | None = self.oldest  # pending across passes that archived nothing

    def passed(self, ok: bool, step=None) -> None:
        """After each pass (binlog_stream.follow): ok and its Step (binlog_archive.Step)."""
        now = self.clock()
        if ok:
            self.ok_at = now
        behind = step.behind_since if ok and step is not None else None
        if ok and (self.carried is None or behind is None or (step is not None and step.uploaded)):
            # the archive is contiguous: a pass that uploads covers the oldest transactions pending
            self.carried, self.oldest = None, behind
        elif not ok and self.carried is None:
            self.carried = self.oldest if self.oldest is not None else now
            self.oldest = self.carried

    def healthy(self) -> bool:
        return self.ok_at is not None and self.clock() - self.ok_at <= self.grace

    def delay(self) -> float:
        return 0.0 if self.oldest is None else self.clock() - self.oldest

    def metrics(self) -> bytes:
        from prometheus_client import CollectorRegistry, Gauge, generate_latest

        registry = CollectorRegistry()
        for name, doc, value in (
            (
                "delay_seconds",
                "Seconds since the bucket held every transaction the primary wrote",
                self.delay(),
            ),
            ("max_delay_seconds", "spec.backup.binlogs.maxDelaySeconds", self.max_delay),
            ("streaming", "1 while archiving from the primary (the Pod's readiness)", float(self.healthy())),
        ):
            Gauge(f"mysql_binlog_archive_{name}", doc, registry=registry).set(value)
        return generate_latest(registry)

    def serve(self, port: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the library's name
                status, kind = 200, "text/plain"
                if self.path == "/metrics":
                    body, kind = health.metrics(), "text/plain; version=0.0.4"
                elif self.path == "/healthz" and health.healthy():
                    body = b"archiving\n"
                else:
                    status, body = 503, b"not archiving: see this container's log\n"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # the probe every few seconds is no news
                pass

        server = ThreadingHTTPServer(("", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True, name="health").start()


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


def _finish(args, result: dict[str, Any]) -> int:
    text = json.dumps(result, sort_keys=True)
    print(text)
    try:
        with open(args.termination_log, "w") as f:  # read by the operator from the Pod's status
            f.write(text[:4000])
    except OSError:
        pass
    return 0 if result.get("ok") else 1


# ----------------------------------------------------------------------------- kubectl-like


def _api(args):
    from kubernetes import client

    api = client.CustomObjectsApi(connect(args))
    return api, args.namespace


def _now_name(cluster: str) -> str:
    return f"{cluster}-{clock.now():%Y%m%d%H%M%S}"


def backup_object(cluster: str, name: str, delete_data: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {CLUSTER_LABEL: cluster}}
    if delete_data:
        meta["annotations"] = {DELETE_DATA_ANNOTATION: "true"}
    return {
        "apiVersion": API_VERSION,
        "kind": BACKUP_KIND,
        "metadata": meta,
        "spec": {"clusterRef": {"name": cluster}},
    }


def cmd_create(args) -> int:
    api, ns = _api(args)
    name = args.name or _now_name(args.cluster)
    body = backup_object(args.cluster, name, args.delete_data_with_backup)
    body["metadata"]["namespace"] = ns
    if args.dry_run:
        emit(body, args.output)
        return 0
    created = api.create_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, body)
    print(f"mysqlbackup/{name} created in {ns}") if args.output == "table" else emit(created, args.output)
    return 0


def backup_rows(items: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["NAME", "CLUSTER", "PHASE", "STARTED", "COMPLETED", "SIZE", "GTID", "MESSAGE"]]
    for o in sorted(items, key=lambda o: o["metadata"].get("creationTimestamp") or ""):
        s = o.get("status") or {}
        rows.append(
            [
                o["metadata"]["name"],
                o.get("spec", {}).get("clusterRef", {}).get("name", ""),
                s.get("phase", "Pending"),
                s.get("startedAt", ""),
                s.get("completedAt", ""),
                s.get("size") or (human_size(s["sizeBytes"]) if isinstance(s.get("sizeBytes"), int) else ""),
                s.get("gtidPosition", ""),
                (s.get("message") or "")[:60],
            ]
        )
    return rows


def cmd_list(args) -> int:
    api, ns = _api(args)
    if args.all_namespaces:
        items = api.list_cluster_custom_object(GROUP, VERSION, BACKUP_PLURAL)["items"]
    else:
        items = api.list_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL)["items"]
    if args.cluster:  # by clusterRef: backups created with kubectl may lack the label
        items = [o for o in items if o.get("spec", {}).get("clusterRef", {}).get("name") == args.cluster]
    print_table(backup_rows(items)) if args.output == "table" else emit(as_list(items), args.output)
    return 0


def cmd_describe(args) -> int:
    api, ns = _api(args)
    o = api.get_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, args.name)
    if args.output != "table":
        emit(o, args.output)
        return 0
    import yaml

    print(
        yaml.safe_dump(
            {
                "name": o["metadata"]["name"],
                "namespace": ns,
                "spec": o.get("spec"),
                "status": o.get("status") or {},
            },
            sort_keys=False,
        )
    )
    return 0


def cmd_delete(args) -> int:
    api, ns = _api(args)
    gone = api.delete_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, args.name)
    print(f"mysqlbackup/{args.name} deleted") if args.output == "table" else emit(gone, args.output)
    return 0


def restored_cluster(
    source: dict[str, Any],
    backup_name: str,
    name: str,
    instances: int | None = None,
    point_in_time: str | None = None,
    gtid: str | None = None,
) -> dict[str, Any]:
    """Pure: a new MySQLCluster like `source` (same flavor, version, sizes) restored from the backup,
    with the key of the source's backup encryption. Without the source's schedule, primary choice
    and credentials Secret (the new cluster gets its own)."""
    spec = copy.deepcopy(source.get("spec") or {})
    for key in ("restore", "primary", "credentials"):
        spec.pop(key, None)
    if "backup" in spec:
        spec["backup"].pop("schedule", None)
    if instances is not None:
        spec["instances"] = instances
    spec["restore"] = {"fromBackup": {"name": backup_name}}
    if point_in_time:
        spec["restore"]["pointInTime"] = point_in_time
    if gtid:
        spec["restore"]["gtid"] = gtid
    encryption = (spec.get("backup") or {}).get("encryption")
    if encryption:  # the key the source's backups are made with (same namespace)
        spec["restore"]["encryption"] = copy.deepcopy(encryption)
    return {"apiVersion": API_VERSION, "kind": CLUSTER_KIND, "metadata": {"name": name}, "spec": spec}


def bucket_cluster(
    name: str,
    url: str,
    credentials_secret: str,
    endpoint: str | None = None,
    region: str | None = None,
    force_path_style: bool = False,
    instances: int | None = None,
    flavor: str | None = None,
    version: str | None = None,
    encryption_key_secret: str | None = None,
    point_in_time: str | None = None,
    gtid: str | None = None,
) -> dict[str, Any]:
    """Pure: a new MySQLCluster restored from a backup's folder in the bucket alone
    (spec.restore.s3), `url` s3://BUCKET/[PREFIX/]CLUSTER/BACKUP. ValueError naming the flag."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    parts = [p for p in key.split("/") if p]
    if not url.startswith("s3://") or not bucket or len(parts) < 2:
        raise ValueError(
            f"--from-bucket {url!r}: use s3://BUCKET/[PREFIX/]CLUSTER/BACKUP, the backup's folder "
            "(a MySQLBackup's status.location)"
        )
    s3: dict[str, Any] = {"bucket": bucket}
    if parts[:-2]:
        s3["prefix"] = "/".join(parts[:-2])
    s3 |= {"path": "/".join(parts[-2:]), "credentialsSecret": {"name": credentials_secret}}
    if endpoint:
        s3["endpoint"] = endpoint
    if region:
        s3["region"] = region
    if force_path_style:
        s3["forcePathStyle"] = True
    spec: dict[str, Any] = {"instances": instances or 1}
    if flavor:
        spec["flavor"] = flavor
    if version:
        spec["version"] = version
    spec["restore"] = {"s3": s3}
    if encryption_key_secret:
        spec["restore"]["encryption"] = {"keySecret": {"name": encryption_key_secret}}
    if point_in_time:
        spec["restore"]["pointInTime"] = point_in_time
    if gtid:
        spec["restore"]["gtid"] = gtid
    return {"apiVersion": API_VERSION, "kind": CLUSTER_KIND, "metadata": {"name": name}, "spec": spec}


def cmd_restore(args) -> int:
    if args.from_bucket:
        body = _from_bucket(args)  # usage errors before any connection
        api, ns = _api(args)
    else:
        if not args.backup:
            raise CommandError(
                "restore needs a MySQLBackup name or --from-bucket s3://BUCKET/[PREFIX/]CLUSTER/BACKUP",
                "give one",
                USAGE,
            )
        api, ns = _api(args)
        body = _from_backup(api, ns, args)
    body["metadata"]["namespace"] = ns
    if args.dry_run:
        emit(body, args.output)
        return 0
    created = api.create_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, body)
    if args.output != "table":
        emit(created, args.output)
        return 0
    source = args.from_bucket or f"mysqlbackup/{args.backup}"
    print(f"mysqlcluster/{args.into} created from {source}; it becomes Ready after the restore")
    return 0


def _from_bucket(args) -> dict[str, Any]:
    if args.backup:
        raise CommandError("give a MySQLBackup name or --from-bucket, not both", "drop one", USAGE)
    if not args.s3_credentials_secret:
        raise CommandError(
            "--from-bucket needs --s3-credentials-secret",
            "name the Secret holding AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in this namespace",
            USAGE,
        )
    try:
        return bucket_cluster(
            args.into,
            args.from_bucket,
            args.s3_credentials_secret,
            args.s3_endpoint,
            args.s3_region,
            args.s3_force_path_style,
            args.instances,
            args.flavor,
            args.server_version,
            args.encryption_key_secret,
            args.point_in_time,
            args.gtid,
        )
    except ValueError as e:
        raise CommandError(str(e), "fix --from-bucket", USAGE) from e


def _from_backup(api, ns: str, args) -> dict[str, Any]:
    from kubernetes.client.rest import ApiException

    b = api.get_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, args.backup)
    status = b.get("status") or {}
    if status.get("phase") != "Succeeded":
        raise CommandError(
            f"mysqlbackup/{args.backup} is {status.get('phase') or 'not finished'}, not Succeeded",
            "restore from a backup that succeeded (kubectl mysql backup list)",
        )
    source = b["spec"]["clusterRef"]["name"]
    try:
        cluster = api.get_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, source)
    except ApiException as e:
        if e.status != 404:
            raise
        raise CommandError(
            f"the backed-up MySQLCluster {ns}/{source} is gone",
            f"restore from the bucket alone: --from-bucket {status.get('location') or 's3://...'} "
            "--s3-credentials-secret SECRET [--s3-endpoint URL --flavor --version --instances]",
            NOT_FOUND,
        ) from e
    return restored_cluster(cluster, args.backup, args.into, args.instances, args.point_in_time, args.gtid)
