"""Pure builders: the Jobs that work on a tenant's bytes in the operator image - one backup
(`mysql-operator backup run ...`), a restore at creation (`mysql-operator backup restore-into ...`) -
deleting a backup's objects (`mysql-operator backup delete-data ...`) - and the MySQLBackup a
schedule creates. Tenant bytes never reach the operator process, which holds
the API credentials (see `tenant_job`).

Secrets reach the Job as environment variables from Secret references, never in arguments. The Jobs
that talk to the servers mount the cluster's CA certificate (public, Secret <name>-ca-bundle) and
connect over TLS verifying it and the servers' host names (`--tls-ca`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

from kubernetes.utils.quantity import parse_quantity

from ..api import API_VERSION, BACKUP_KIND, GROUP, S3, Encryption, MySQLBackup, MySQLCluster
from ..backup import storage
from . import common as k
from .scripts import CLIENT_TOOLS_SH

COMPONENT_BACKUP = "backup"
COMPONENT_RESTORE = "restore"
CLUSTER_LABEL = f"{GROUP}/cluster"
SCHEDULED_AT_ANNOTATION = f"{GROUP}/scheduled-at"  # fire time a scheduled MySQLBackup was created for
DELETE_DATA_ANNOTATION = f"{GROUP}/delete-data"  # "true": deleting the MySQLBackup deletes its objects
ENV_DB_PASSWORD = "MYSQL_OPERATOR_DB_PASSWORD"
ENV_SEED_TOKEN = "MYSQL_OPERATOR_SEED_TOKEN"  # backup/restore_mariadb_physical.py: SEED_TOKEN_ENV
ENV_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENV_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_ENCRYPTION_KEY = "MYSQL_OPERATOR_ENCRYPTION_KEY"
ENV_SSE_C_KEY = "MYSQL_OPERATOR_SSE_C_KEY"  # s3.serverSideEncryption type SSE-C
# MySQL: the restore Job's sidecar serves a physical copy for the instances to clone, at the name
# of the headless Service restore_service makes, with the certificate of Secret restore_tls_secret_name
RESTORE_TLS_DIR = "/etc/mysql-operator/restore-tls"
TERMINATION_LOG = "/dev/termination-log"
RUN_AS = 65532  # the operator image's user
CLIENT_TOOLS_DIR = "/run/mysql-operator/client-tools"  # shared by a Job's container and its sidecar
# a physical copy's data, on the node's disk (shared too): backups and restores of method physical
SCRATCH_DIR = "/var/lib/mysql-operator/scratch"
DEFAULT_DEADLINE_SECONDS = 6 * 3600


def job_name(backup: MySQLBackup) -> str:
    name = f"{backup.name}-backup"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def backup_part_size(c: MySQLCluster) -> int:
    """The upload part size of a backup of `c`: chosen from spec.storage.size (a copy or dump of
    an instance's data is expected to be no larger than its volume) so that S3's 10,000 parts hold
    it with a margin (storage.part_size_for)."""
    return storage.part_size_for(int(parse_quantity(c.spec.storage.size)))


def backup_memory_limit(part_size: int) -> str:
    """The backup container's memory limit: 512Mi with 16 MiB parts, more by the part buffers a
    larger part size adds (storage.upload_memory)."""
    extra = storage.upload_memory(part_size) - storage.upload_memory(storage.DEFAULT_PART_SIZE)
    return f"{512 + max(extra, 0) // storage.MIB}Mi"


def backup_args(
    c: MySQLCluster, backup: MySQLBackup, s3: S3, *, compression: str = "zstd", part_size_mib: int = 16
) -> list[str]:
    """`mysql-operator backup run` arguments: every server of the cluster is a candidate source
    (the Job picks a healthy replica, else the primary, when it starts)."""
    args = [
        "backup",
        "run",
        "--namespace",
        c.namespace,
        "--cluster",
        c.name,
        "--backup",
        backup.name,
        *s3_parts(s3)[0],
        "--compression",
        compression,
        "--part-size-mib",
        str(part_size_mib),
        "--user",
        k.BACKUP_USER,
        "--tls-ca",
        k.CA_BUNDLE,
    ]
    for i in range(c.spec.instances):
        args += ["--source", f"{k.pod_name(c, i)}={k.pod_host(c, i)}:{k.PORT}"]
    if physical(c, backup):  # MySQL copies into a scratch folder; MariaDB's copy is streamed
        args += ["--method", "physical"] + (
            ["--scratch-dir", SCRATCH_DIR] if c.spec.flavor == "mysql" else []
        )
    return args + ["--client-tools-dir", CLIENT_TOOLS_DIR]


def physical(c: MySQLCluster, backup: MySQLBackup) -> bool:
    """Whether the backup is a physical copy: its spec.method, else the cluster's spec.backup.method."""
    if backup.method is not None:
        return backup.method == "physical"
    return c.spec.backup is not None and c.spec.backup.method == "physical"


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def encryption_parts(e: Encryption | None, field_path: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The arguments and environment of a Job that encrypts or decrypts with the key of `e`
    (nothing without encryption). The key reaches the Job only from its Secret, as the others do."""
    if e is None:
        return [], []
    return (
        ["--encryption-key-from", e.describe(field_path)],
        [_secret_env(ENV_ENCRYPTION_KEY, e.secret, e.key)],
    )


def ca_bundle_volume(c: MySQLCluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volume and mount of the cluster's CA certificate (Secret <name>-ca-bundle, key ca.crt,
    at k.CA_BUNDLE), read-only: the Jobs that talk to the servers verify them with it."""
    key = k.CA_BUNDLE.rsplit("/", 1)[1]
    volume = {
        "name": "ca-bundle",
        "secret": {"secretName": k.ca_bundle_secret_name(c), "items": [{"key": key, "path": key}]},
    }
    return volume, {"name": "ca-bundle", "mountPath": k.CA_BUNDLE_DIR, "readOnly": True}


def backup_job(
    c: MySQLCluster,
    backup: MySQLBackup,
    s3: S3,
    image: str,
    *,
    image_pull_policy: str = "IfNotPresent",
    tools_repository: str = k.TOOLS_REPOSITORY,
    compression: str = "zstd",
    part_size_mib: int | None = None,
    deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
) -> dict[str, Any]:
    """The Job for one MySQLBackup (the caller adds the owner reference to the MySQLBackup). Its
    upload part size: `part_size_mib`, else backup_part_size (its memory limit grows with it)."""
    if part_size_mib is None:
        part_size_mib = backup_part_size(c) // storage.MIB
    enc_args, enc_env = encryption_parts(c.spec.backup and c.spec.backup.encryption, "spec.backup.encryption")
    scratch = scratch_volume(c) if physical(c, backup) and c.spec.flavor == "mysql" else []
    job = tenant_job(
        c,
        job_name(backup),
        COMPONENT_BACKUP,
        "backup",
        image,
        backup_args(c, backup, s3, compression=compression, part_size_mib=part_size_mib) + enc_args,
        [
            _secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.BACKUP_PASSWORD_KEY),
            *s3_parts(s3)[1],
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        deadline_seconds=deadline_seconds,
        volumes=[ca_bundle_volume(c), client_tools_volume(), *scratch],
        sidecars=[client_tools_sidecar(c, tools_repository, *(m for _, m in scratch))],
    )
    (container,) = [x for x in job["spec"]["template"]["spec"]["containers"] if x["name"] == "backup"]
    container["resources"]["limits"]["memory"] = backup_memory_limit(part_size_mib * storage.MIB)
    return job


def scratch_volume(c: MySQLCluster) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The folder a physical copy is made in (backup) or unpacked into (restore), shared by the
    Job's container and its sidecar: on the node's disk, as large as an instance's data volume
    (a copy of its data fits). Not the in-memory client-tools folder, which holds the option
    files with passwords."""
    return [
        (
            {"name": "scratch", "emptyDir": {"sizeLimit": c.spec.storage.size}},
            {"name": "scratch", "mountPath": SCRATCH_DIR},
        )
    ]


def client_tools_volume() -> tuple[dict[str, Any], dict[str, Any]]:
    """The folder a Job's container shares with its client-tools sidecar (FIFOs, option files)."""
    return (
        {"name": "client-tools", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "client-tools", "mountPath": CLIENT_TOOLS_DIR},
    )


def tools_image(c: MySQLCluster, repository: str = k.TOOLS_REPOSITORY) -> str:
    """The image of the Jobs' client-tools container: spec.toolsImage, else the project's tool
    image for the flavor and the servers' series (`repository`:FLAVOR-SERIES), else (a series it
    builds none for) the server image."""
    if c.spec.tools_image:
        return c.spec.tools_image
    if c.spec.server_series in k.TOOLS_SERIES[c.spec.flavor]:
        return f"{repository}:{c.spec.flavor}-{c.spec.server_series}"
    return c.spec.image_ref


def client_tools_sidecar(c: MySQLCluster, tools_repository: str, *mounts: dict[str, Any]) -> dict[str, Any]:
    """A Job's `client-tools` container: the servers' tool image (tools_image) runs the dump tool
    or the client the Job's container asks for (backup/sidecar.py; script CLIENT_TOOLS_SH), so the
    tools match the servers' series. A native sidecar (an init container that keeps running): it
    ends with the Pod. No environment: a password reaches it only in a per-run option file."""
    _, ca_mount = ca_bundle_volume(c)
    _, shared = client_tools_volume()
    return {
        "name": "client-tools",
        "image": tools_image(c, tools_repository),
        "imagePullPolicy": c.spec.image_pull_policy,
        "restartPolicy": "Always",
        "command": ["/bin/bash", "-c", CLIENT_TOOLS_SH, "client-tools.sh", CLIENT_TOOLS_DIR],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": _restricted_container(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, ca_mount, shared, *mounts],
    }


def _restricted_container() -> dict[str, Any]:
    """The restricted Pod Security Standard, as the operator image's user, read-only root."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def tenant_job(
    c: MySQLCluster,
    name: str,
    component: str,
    container_name: str,
    image: str,
    args: list[str],
    env: list[dict[str, Any]],
    *,
    image_pull_policy: str = "IfNotPresent",
    deadline_seconds: int = DEFAULT_DEADLINE_SECONDS,
    volumes: Sequence[tuple[dict[str, Any], dict[str, Any]]] = (),
    sidecars: Sequence[dict[str, Any]] = (),
    sidecar_volumes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A Job that works on a tenant's bytes (dumps, bucket contents) in the cluster's namespace.

    Such work never runs in the operator: the Pod carries no ServiceAccount token
    (`automountServiceAccountToken: false`), meets the `restricted` Pod Security Standard, and
    reports its outcome as JSON in its termination message, which the operator reads from the
    Pod's status. Run once (`backoffLimit: 0`), failed after `deadline_seconds`. `volumes`: more
    (volume, mount) pairs besides the in-memory /tmp (read-only Secrets, see ca_bundle_volume);
    `sidecar_volumes`: volumes only `sidecars` mount."""
    labels, template = tenant_pod(
        c,
        component,
        container_name,
        image,
        args,
        env,
        image_pull_policy=image_pull_policy,
        volumes=volumes,
        sidecars=sidecars,
        sidecar_volumes=sidecar_volumes,
        restart_policy="Never",
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": c.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,  # a failure is reported, not silently retried
            "activeDeadlineSeconds": deadline_seconds,  # a hung run fails, never "succeeds"
            "template": template,
        },
    }


def tenant_pod(
    c: MySQLCluster,
    component: str,
    container_name: str,
    image: str,
    args: list[str],
    env: list[dict[str, Any]],
    *,
    image_pull_policy: str,
    volumes: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    sidecars: Sequence[dict[str, Any]],
    restart_policy: str,
    sidecar_volumes: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, str], dict[str, Any]]:
    """The labels and Pod template of a Job or Deployment that works on a tenant's bytes (see
    tenant_job): no ServiceAccount token, restricted Pod Security, the cluster's scheduling."""
    labels = {**k.labels(c, component), CLUSTER_LABEL: c.name}
    container = {
        "name": container_name,
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "args": list(args),
        "env": [*env, {"name": "TMPDIR", "value": "/tmp"}],
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": _restricted_container(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *(m for _, m in volumes)],
    }
    return labels, {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": restart_policy,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            **({"initContainers": [dict(x) for x in sidecars]} if sidecars else {}),
            "containers": [container],
            "volumes": [
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                *(v for v, _ in volumes),
                *sidecar_volumes,
            ],
            **({"nodeSelector": dict(c.spec.node_selector)} if c.spec.node_selector else {}),
            **({"tolerations": [dict(t) for t in c.spec.tolerations]} if c.spec.tolerations else {}),
            **(
                {"imagePullSecrets": [{"name": n} for n in c.spec.image_pull_secrets]}
                if c.spec.image_pull_secrets
                else {}
            ),
        },
    }


def delete_job_name(backup_name: str) -> str:
    name = f"{backup_name}-delete"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def delete_data_job(
    c: MySQLCluster,
    backup_name: str,
    s3: S3,
    folder: str,
    image: str,
    *,
    image_pull_policy: str = "IfNotPresent",
) -> dict[str, Any]:
    """The Job that deletes one backup's objects (`mysql-operator backup delete-data`): retention
    and deleting a MySQLBackup talk to a tenant's S3 endpoint only from here, with the S3
    credentials and nothing else. The caller adds the owner reference to the MySQLBackup."""
    s3a, s3env = s3_parts(s3)
    return tenant_job(
        c,
        delete_job_name(backup_name),
        COMPONENT_BACKUP,
        "delete",
        image,
        ["backup", "delete-data", *s3a, "--folder", folder],
        s3env,
        image_pull_policy=image_pull_policy,
        deadline_seconds=3600,
    )


EVIDENCE_DIR = "/run/mysql-operator/evidence"  # the record's ConfigMap, in the export Job


def evidence_job(
    c: MySQLCluster, evidence: str, s3: S3, image: str, *, image_pull_policy: str = "IfNotPresent"
) -> dict[str, Any]:
    """The Job that copies a re-seed's record of discarded transactions (the ConfigMap
    `evidence`, mounted read-only) to the backup bucket, under <prefix>/evidence/<evidence>/
    (`mysql-operator backup keep-evidence`): the bucket is the tenant's, so only this tokenless
    Pod talks to it. The caller makes the ConfigMap its owner."""
    name = f"{evidence}-export"
    enc_args, enc_env = encryption_parts(c.spec.backup and c.spec.backup.encryption, "spec.backup.encryption")
    s3a, s3env = s3_parts(s3)
    return tenant_job(
        c,
        name if len(name) <= 63 else name[:63].rstrip("-"),
        COMPONENT_BACKUP,
        "keep-evidence",
        image,
        ["backup", "keep-evidence", *s3a, "--source", EVIDENCE_DIR, "--name", evidence, *enc_args],
        [*s3env, *enc_env],
        image_pull_policy=image_pull_policy,
        deadline_seconds=600,
        volumes=[
            (
                {"name": "evidence", "configMap": {"name": evidence, "defaultMode": 0o444}},
                {"name": "evidence", "mountPath": EVIDENCE_DIR, "readOnly": True},
            )
        ],
    )


def restore_job_name(c: MySQLCluster) -> str:
    name = f"{c.name}-restore"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def s3_parts(s3: S3) -> tuple[list[str], list[dict[str, Any]]]:
    """The S3 arguments shared by the Jobs' commands (location, server-side encryption) and the
    environment holding the secrets they need: the credentials and an SSE-C key, from their
    Secrets, never in arguments."""
    args = ["--bucket", s3.bucket, "--prefix", s3.prefix or ""]
    if s3.endpoint:
        args += ["--endpoint", s3.endpoint]
    if s3.region:
        args += ["--region", s3.region]
    if s3.force_path_style:
        args.append("--force-path-style")
    cs = s3.credentials_secret
    env = [
        _secret_env(ENV_ACCESS_KEY, cs.name, cs.access_key_id_key),
        _secret_env(ENV_SECRET_KEY, cs.name, cs.secret_access_key_key),
    ]
    sse = s3.sse
    if sse is not None:
        args += ["--sse", sse.type]
        if sse.kms_key_id:
            args += ["--sse-kms-key-id", sse.kms_key_id]
        if sse.customer_key is not None:
            args += ["--sse-c-key-from", sse.customer_key.describe("s3.serverSideEncryption")]
            env.append(_secret_env(ENV_SSE_C_KEY, sse.customer_key.secret, sse.customer_key.key))
    return args, env


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
    enc_args, enc_env = encryption_parts(
        c.spec.restore and c.spec.restore.encryption, "spec.restore.encryption"
    )
    # The backup may be physical (its manifest says so; the Job reads it): the copy is then served,
    # with a certificate of the cluster's CA, at the restore Service's name. MySQL: by a server
    # the sidecar runs on the copy unpacked into the scratch folder, for the instances to clone
    # (the certificate is the sidecar's only); MariaDB: by the Job itself, streamed from the
    # bucket, to the instances' seed init containers (the operator asks them once the port answers)
    scratch: list[tuple[dict[str, Any], dict[str, Any]]] = []
    donor_tls: list[tuple[dict[str, Any], dict[str, Any]]] = []  # the sidecar's only
    volumes = [ca_bundle_volume(c), client_tools_volume()]
    args += ["--donor-host", restore_dns_names(c)[0], "--donor-port", str(restore_port(c))]
    args += ["--donor-tls-dir", RESTORE_TLS_DIR]
    if c.spec.flavor == "mysql":
        scratch, donor_tls = scratch_volume(c), [restore_tls_volume(c)]
        args += ["--scratch-dir", SCRATCH_DIR]
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
            _secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.RESTORE_PASSWORD_KEY),
            *s3_parts(s3)[1],
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        deadline_seconds=deadline_seconds,
        volumes=[*volumes, *scratch],
        sidecars=[client_tools_sidecar(c, tools_repository, *(m for _, m in scratch + donor_tls))],
        sidecar_volumes=[v for v, _ in donor_tls],
    )
    if c.spec.flavor == "mariadb":  # ready while it serves a copy: what the operator waits for
        (ctr,) = job["spec"]["template"]["spec"]["containers"]
        # served only to a requester sending the new cluster's operator password, as its instances'
        # seed init containers do (backup/restore_mariadb_physical.py: CopyServer)
        ctr["env"].append(_secret_env(ENV_SEED_TOKEN, k.credentials_secret_name(c), k.OPERATOR_PASSWORD_KEY))
        ctr["ports"] = [{"name": "copy", "containerPort": k.SEED_PORT, "protocol": "TCP"}]
        ctr["readinessProbe"] = {"tcpSocket": {"port": k.SEED_PORT}, "periodSeconds": 2}
    return job


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


def scheduled_backup(c: MySQLCluster, name: str, fire_time: dt.datetime) -> dict[str, Any]:
    """The MySQLBackup a schedule creates for `fire_time` (uses the cluster's storage).
    Deliberately NOT owned by the cluster: deleting a cluster never deletes its backups. Scheduled
    backups' data is deleted with them (retention removes both)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": c.namespace,
        "labels": {**k.labels(c, COMPONENT_BACKUP), CLUSTER_LABEL: c.name},
        "annotations": {
            SCHEDULED_AT_ANNOTATION: fire_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            DELETE_DATA_ANNOTATION: "true",
        },
    }
    return {
        "apiVersion": API_VERSION,
        "kind": BACKUP_KIND,
        "metadata": meta,
        "spec": {"clusterRef": {"name": c.name}},
    }


COMPONENT_BINLOGS = "binlog-archiver"
BINLOG_SPOOL = "/var/spool/mysql-operator/binlogs"  # the streamed files, shared with the sidecar
BINLOG_HEALTH_PORT = 8080  # GET /healthz: 200 while archiving (the Pod's readiness); GET /metrics


def binlog_archiver_name(c: MySQLCluster) -> str:
    return f"{c.name}-binlog-archiver"


def binlog_archiver(
    c: MySQLCluster,
    image: str,
    *,
    image_pull_policy: str = "IfNotPresent",
    tools_repository: str = k.TOOLS_REPOSITORY,
) -> dict[str, Any] | None:
    """The Deployment that archives the primary's binary logs (spec.backup.binlogs), or None
    when off: `mysql-operator backup archive-binlogs` in the operator image, the servers' tool
    image beside it running `mysqlbinlog`/`mariadb-binlog --read-from-remote-server
    --stop-never` into a disk spool both mount. A Pod of its own, so an operator upgrade never
    restarts a server; tenant bytes, so no token (see tenant_job). One Pod at most, also during
    an update (Recreate): two streams would upload the same files. The caller adds the owner
    reference to the MySQLCluster."""
    b = c.spec.backup
    if b is None or b.s3 is None or not b.binlogs.enabled:
        return None
    s3a, s3env = s3_parts(b.s3)
    enc_args, enc_env = encryption_parts(b.encryption, "spec.backup.encryption")
    args = [
        "backup",
        "archive-binlogs",
        "--cluster",
        c.name,
        *(["--cluster-uid", c.uid] if c.uid else []),
        *s3a,
        "--user",
        k.BINLOG_USER,
        "--max-delay",
        str(b.binlogs.max_delay_seconds),
        "--spool",
        BINLOG_SPOOL,
        "--health-port",
        str(BINLOG_HEALTH_PORT),
        "--tls-ca",
        k.CA_BUNDLE,
        "--client-tools-dir",
        CLIENT_TOOLS_DIR,
        *enc_args,
    ]
    for i in range(c.spec.instances):
        args += ["--source", f"{k.pod_name(c, i)}={k.pod_host(c, i)}:{k.PORT}"]
    spool = ({"name": "spool", "emptyDir": {}}, {"name": "spool", "mountPath": BINLOG_SPOOL})
    tools = client_tools_sidecar(c, tools_repository, spool[1])
    args += ["--tools-image", tools["image"]]
    labels, template = tenant_pod(
        c,
        COMPONENT_BINLOGS,
        "archiver",
        image,
        args,
        [
            _secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.BINLOG_PASSWORD_KEY),
            *s3env,
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        volumes=[ca_bundle_volume(c), client_tools_volume(), spool],
        sidecars=[tools],
        restart_policy="Always",
    )
    (main,) = template["spec"]["containers"]
    # named metrics: the chart's PodMonitor scrapes this port of the archiver as of the servers
    main["ports"] = [{"name": "metrics", "containerPort": BINLOG_HEALTH_PORT}]
    # not Ready while it does not archive (no primary, a failing upload): kubectl get deploy shows it
    main["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": "metrics"},
        "periodSeconds": 5,
        "failureThreshold": 2,
    }
    selector = {key: labels[key] for key in ("app.kubernetes.io/instance", "app.kubernetes.io/component")}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": binlog_archiver_name(c), "namespace": c.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }
