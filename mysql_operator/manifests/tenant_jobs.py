"""Pure builders: the frame of every Job that works on a tenant's bytes - no API token, restricted
containers, the client-tools sidecar of the cluster's server image, the cluster's CA bundle,
scratch space, and the S3 and encryption settings as environment variables from Secret
references, never as arguments. Tenant bytes never reach the operator process, which holds the
API credentials (`tenant_job`)."""

from __future__ import annotations

from typing import Any, Sequence


from ..api import GROUP, S3, Encryption, MySQLBackup, MySQLCluster
from . import common as k
from .scripts import CLIENT_TOOLS_SH


CLUSTER_LABEL = f"{GROUP}/cluster"
ENV_DB_PASSWORD = "MYSQL_OPERATOR_DB_PASSWORD"
ENV_SEED_TOKEN = "MYSQL_OPERATOR_SEED_TOKEN"  # backup/restore_mariadb_physical.py: SEED_TOKEN_ENV
ENV_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENV_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_ENCRYPTION_KEY = "MYSQL_OPERATOR_ENCRYPTION_KEY"
ENV_SSE_C_KEY = "MYSQL_OPERATOR_SSE_C_KEY"  # s3.serverSideEncryption type SSE-C
TERMINATION_LOG = "/dev/termination-log"
RUN_AS = 65532  # the operator image's user
CLIENT_TOOLS_DIR = "/run/mysql-operator/client-tools"  # shared by a Job's container and its sidecar
# a physical copy's data, on the node's disk (shared too): backups and restores of method physical
SCRATCH_DIR = "/var/lib/mysql-operator/scratch"
DEFAULT_DEADLINE_SECONDS = 6 * 3600


def job_name(backup: MySQLBackup) -> str:
    name = f"{backup.name}-backup"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def encryption_parts(e: Encryption | None, field_path: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The arguments and environment of a Job that encrypts or decrypts with the key of `e`
    (nothing without encryption). The key reaches the Job only from its Secret, as the others do."""
    if e is None:
        return [], []
    return (
        ["--encryption-key-from", e.describe(field_path)],
        [secret_env(ENV_ENCRYPTION_KEY, e.secret, e.key)],
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
        "securityContext": restricted_container(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, ca_mount, shared, *mounts],
    }


def restricted_container() -> dict[str, Any]:
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
        "securityContext": restricted_container(),
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
        secret_env(ENV_ACCESS_KEY, cs.name, cs.access_key_id_key),
        secret_env(ENV_SECRET_KEY, cs.name, cs.secret_access_key_key),
    ]
    sse = s3.sse
    if sse is not None:
        args += ["--sse", sse.type]
        if sse.kms_key_id:
            args += ["--sse-kms-key-id", sse.kms_key_id]
        if sse.customer_key is not None:
            args += ["--sse-c-key-from", sse.customer_key.describe("s3.serverSideEncryption")]
            env.append(secret_env(ENV_SSE_C_KEY, sse.customer_key.secret, sse.customer_key.key))
    return args, env
