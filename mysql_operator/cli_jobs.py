"""The arguments of what the Jobs and the binlog archiver run, under `mysql-operator backup`
(hidden from --help: users run cli_backup.py's commands); the commands are job_commands.py's."""

from __future__ import annotations


from mysql_operator.cli_common import hide
from mysql_operator.job_commands import (
    cmd_archive_binlogs,
    cmd_delete_data,
    cmd_keep_evidence,
    cmd_restore_into,
    cmd_run,
)
from mysql_operator.manifests.tenant_jobs import ENV_ENCRYPTION_KEY, ENV_SSE_C_KEY, TERMINATION_LOG


def register_jobs(bs) -> None:
    """The Jobs' commands under `backup` (hidden from --help)."""
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
    run.add_argument(
        "--copy-digests",
        action="store_true",
        help="a MySQL physical backup: record its tables (row counts, digests) from a dump of the copy, "
        "for restore drills to compare with (a logical backup always records them)",
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
        "--check-tables",
        action="store_true",
        help="a logical backup: compare the loaded tables with those it recorded (before any replay)",
    )
    into.add_argument(
        "--load-workers",
        type=int,
        default=1,
        metavar="N",
        help="a dump is loaded by N client sessions at once, its pieces spooled in --scratch-dir (1: one session)",
    )
    into.add_argument(
        "--checks-dir",
        metavar="DIR",
        help="the user's checks, a ConfigMap mounted here (NAME.sql, NAME.expected): run on the primary at the end",
    )
    into.add_argument(
        "--checks-from",
        metavar="TEXT",
        default="the checks ConfigMap",
        help="what --checks-dir is, as errors name it (e.g. spec.restore.checksConfigMap 'orders-checks')",
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
