"""The users' backup commands: `mysql-operator backup create|list|describe|delete` and
`mysql-operator restore` (also `kubectl mysql ...`). They talk to the Kubernetes API as kubectl
does (the current kubeconfig and context, or the in-cluster config).

The main CLI calls `register(subparsers)`; each parser sets `func(args) -> int`. What the Jobs run
under `backup` (hidden from --help) is cli_jobs.py's.
"""

from __future__ import annotations

import copy
from typing import Any

from mysql_operator import clock
from mysql_operator.cli_jobs import register_jobs
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
    print_table,
)
from mysql_operator.api import (
    API_VERSION,
    BACKUP_KIND,
    BACKUP_PLURAL,
    CLUSTER_KIND,
    CLUSTER_PLURAL,
    FLAVOR_SPELLINGS,
    GROUP,
    VERSION,
)
from mysql_operator.manifests.backup_jobs import DELETE_DATA_ANNOTATION
from mysql_operator.manifests.tenant_jobs import CLUSTER_LABEL


def register(subparsers, common=None, listing=None, dry=None, internal: bool = True) -> None:
    """The backup commands and restore; `common`, `listing` and `dry` are the parents giving the
    flags every user command takes (cli_common's, made here when not given); `internal`: also
    what the Jobs run, hidden from --help."""
    common, listing = common or common_flags(), listing or common_flags(listing=True)
    dry = dry or dry_run_flag()
    b = subparsers.add_parser("backup", help="logical and physical backups to S3")
    bs = b.add_subparsers(dest="backup_command", required=True, metavar="COMMAND")
    if internal:
        register_jobs(bs)
    _register_user(subparsers, bs, common, listing, dry)


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
    if flavor:  # --flavor mysql|mariadb, spelled as the API spells it (MySQL, MariaDB)
        spec["flavor"] = next((k for k, v in FLAVOR_SPELLINGS.items() if v == flavor.lower()), flavor)
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
