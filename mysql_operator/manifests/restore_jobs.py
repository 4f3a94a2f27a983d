"""Pure builders: the Job that restores a new cluster at creation (`mysql-operator backup
restore-into ...`), and for a physical copy its Service, NetworkPolicy and TLS volume (the
cluster's instances fetch the copy from it)."""

from __future__ import annotations

from typing import Any


from ..api import S3, MySQLCluster
from . import common as k
from .tenant_jobs import (
    CLIENT_TOOLS_DIR,
    CLUSTER_LABEL,
    DEFAULT_DEADLINE_SECONDS,
    ENV_DB_PASSWORD,
    ENV_SEED_TOKEN,
    SCRATCH_DIR,
    ca_bundle_volume,
    client_tools_sidecar,
    client_tools_volume,
    encryption_parts,
    s3_parts,
    scratch_volume,
    secret_env,
    tenant_job,
)


COMPONENT_RESTORE = "restore"
# MySQL: the restore Job's sidecar serves a physical copy for the instances to clone, at the name
# of the headless Service restore_service makes, with the certificate of Secret restore_tls_secret_name
RESTORE_TLS_DIR = "/etc/mysql-operator/restore-tls"
LOAD_WORKERS = 4  # client sessions loading a dump at once
RESTORE_CHECKS_DIR = "/etc/mysql-operator/restore-checks"  # spec.restore.checksConfigMap's keys


def restore_job_name(c: MySQLCluster) -> str:
    name = f"{c.name}-restore"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def restore_job(
    c: MySQLCluster,
    s3: S3,
    path: str,
    image: str,
    *,
    image_pull_policy: str = "IfNotPresent",
    tools_repository: str = k.TOOLS_REPOSITORY,
    deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
) -> dict[str, Any]:
    """The Job that restores spec.restore into every instance of a new cluster
    (`mysql-operator backup restore-into`); the caller adds the owner reference to the cluster.
    `path` is a MySQLBackup's status.location or spec.restore.s3.path. It loads as the restore
    account (created at init only for spec.restore), which drops itself when done."""
    args = [
        "backup",
        "restore-into",
        *s3_parts(s3)[0],
        "--path",
        path,
        "--user",
        k.RESTORE_USER,
        "--drop-account",
        "--tls-ca",
        k.CA_BUNDLE,
    ]
    if c.spec.database:
        args += ["--app-database", c.spec.database.name]
        if c.spec.database.user:  # the definer of every stored object the dump loads
            args += ["--app-user", c.spec.database.user]
    for i in range(c.spec.instances):
        args += ["--target", f"{k.pod_name(c, i)}={k.pod_host(c, i)}:{k.PORT}"]
    # the instance restore_gate records as the primary once the restore succeeded
    args += ["--primary", k.pod_name(c, c.spec.primary if c.spec.primary is not None else 0)]
    args += ["--client-tools-dir", CLIENT_TOOLS_DIR, *stop_args(c)]
    if c.spec.restore and c.spec.restore.check_tables:
        args.append("--check-tables")
    checks = user_checks_volume(c)
    if checks:
        name = c.spec.restore.checks_config_map if c.spec.restore else ""
        args += [
            "--checks-dir",
            RESTORE_CHECKS_DIR,
            "--checks-from",
            f"spec.restore.checksConfigMap {name!r}",
        ]
    enc_args, enc_env = encryption_parts(
        c.spec.restore and c.spec.restore.encryption, "spec.restore.encryption"
    )
    # The backup may be physical (its manifest says so; the Job reads it): the copy is then served,
    # with a certificate of the cluster's CA, at the restore Service's name. MySQL: by a server
    # the sidecar runs on the copy unpacked into the scratch folder, for the instances to clone
    # (the certificate is the sidecar's only); MariaDB: by the Job itself, streamed from the
    # bucket, to the instances' seed init containers (the operator asks them once the port answers)
    # A dump is loaded by LOAD_WORKERS sessions at once, its pieces spooled in the same scratch
    # folder (backup/restore_pieces.py): the Job's container's, on the node's disk
    scratch = scratch_volume(c)
    shared: list[tuple[dict[str, Any], dict[str, Any]]] = []  # what the sidecar mounts too
    donor_tls: list[tuple[dict[str, Any], dict[str, Any]]] = []  # the sidecar's only
    volumes = [ca_bundle_volume(c), client_tools_volume(), *checks]
    args += ["--donor-host", restore_dns_names(c)[0], "--donor-port", str(restore_port(c))]
    args += ["--donor-tls-dir", RESTORE_TLS_DIR, "--scratch-dir", SCRATCH_DIR]
    args += ["--load-workers", str(LOAD_WORKERS)]
    if c.spec.flavor == "mysql":
        shared, donor_tls = scratch, [restore_tls_volume(c)]
    else:
        volumes.append(restore_tls_volume(c))
    job = tenant_job(
        c,
        restore_job_name(c),
        COMPONENT_RESTORE,
        "restore",
        image,
        args + enc_args,
        [
            secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.RESTORE_PASSWORD_KEY),
            *s3_parts(s3)[1],
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        deadline_seconds=deadline_seconds,
        volumes=[*volumes, *scratch],
        sidecars=[client_tools_sidecar(c, tools_repository, *(m for _, m in shared + donor_tls))],
        sidecar_volumes=[v for v, _ in donor_tls],
    )
    if c.spec.flavor == "mariadb":  # ready while it serves a copy: what the operator waits for
        (ctr,) = job["spec"]["template"]["spec"]["containers"]
        # served only to a requester sending the new cluster's operator password, as its instances'
        # seed init containers do (backup/copy_serving.py: CopyServer)
        ctr["env"].append(secret_env(ENV_SEED_TOKEN, k.credentials_secret_name(c), k.OPERATOR_PASSWORD_KEY))
        ctr["ports"] = [{"name": "copy", "containerPort": k.SEED_PORT, "protocol": "TCP"}]
        ctr["readinessProbe"] = {"tcpSocket": {"port": k.SEED_PORT}, "periodSeconds": 2}
    return job


def user_checks_volume(c: MySQLCluster) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """spec.restore.checksConfigMap mounted read-only at RESTORE_CHECKS_DIR (none when unset).
    Optional: a ConfigMap that is missing leaves the folder empty, which the Job reports as
    "no check in it" instead of its Pod never starting."""
    name = c.spec.restore.checks_config_map if c.spec.restore else None
    if not name:
        return []
    volume = {"name": "user-checks", "configMap": {"name": name, "optional": True}}
    return [(volume, {"name": "user-checks", "mountPath": RESTORE_CHECKS_DIR, "readOnly": True})]


def restore_port(c: MySQLCluster) -> int:
    """Where the restore Job serves a physical copy: MySQL's server port (CLONE), MariaDB's
    re-seed port (sh/seed.sh receive)."""
    return k.PORT if c.spec.flavor == "mysql" else k.SEED_PORT


def restore_tls_secret_name(c: MySQLCluster) -> str:
    return f"{restore_job_name(c)}-tls"


def restore_dns_names(c: MySQLCluster) -> list[str]:
    """The names of the restore Service (restore_service), the first the one the instances use:
    what the restore Job's certificate is issued for."""
    svc = restore_job_name(c)
    return [f"{svc}.{c.namespace}.svc", svc, f"{svc}.{c.namespace}", f"{svc}.{c.namespace}.svc.cluster.local"]


def restore_service(c: MySQLCluster) -> dict[str, Any]:
    """The headless Service that names the restore Job's Pod (restore_dns_names[0]) from the moment
    it has an address (not only once Ready): the instances reach the copy it serves there and
    verify its certificate for that name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": k.metadata(c, restore_job_name(c), COMPONENT_RESTORE),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {CLUSTER_LABEL: c.name, "app.kubernetes.io/component": COMPONENT_RESTORE},
            "ports": [{"name": "copy", "port": restore_port(c), "targetPort": restore_port(c)}],
        },
    }


def restore_network_policy(c: MySQLCluster) -> dict[str, Any]:
    """The restore Job's Pod admits connections only to its copy port (restore_port) and only
    from its cluster's servers (the Pods of this namespace labelled as this cluster's database):
    a Pod of another namespace cannot reach the copy, whatever certificate it holds. (The kubelet's
    readiness check is admitted by NetworkPolicy implementations whatever a policy says.)"""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": k.metadata(c, restore_job_name(c), COMPONENT_RESTORE),
        "spec": {
            "podSelector": {
                "matchLabels": {CLUSTER_LABEL: c.name, "app.kubernetes.io/component": COMPONENT_RESTORE}
            },
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "ports": [{"protocol": "TCP", "port": restore_port(c)}],
                    "from": [{"podSelector": {"matchLabels": k.selector_labels(c)}}],
                }
            ],
        },
    }


def restore_tls_volume(c: MySQLCluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """The restore Job's certificate and key (Secret restore_tls_secret_name: tls.crt, tls.key,
    ca.crt), for the server its sidecar runs."""
    return (
        {"name": "restore-tls", "secret": {"secretName": restore_tls_secret_name(c)}},
        {"name": "restore-tls", "mountPath": RESTORE_TLS_DIR, "readOnly": True},
    )


def stop_args(c: MySQLCluster) -> list[str]:
    """The restore Job's point-in-time recovery stop (spec.restore.pointInTime or gtid), if any."""
    r = c.spec.restore
    if r is None or not (r.point_in_time or r.gtid):
        return []
    if r.gtid:
        return ["--stop-gtid", r.gtid]
    return ["--stop-latest"] if r.point_in_time == "latest" else ["--stop-at", str(r.point_in_time)]
