"""Pure builders: the Job that runs one backup (`mysql-operator backup run ...`) in the operator
image, so backups never load the operator process, and the MySQLBackup a schedule creates.

Secrets reach the Job as environment variables from Secret references, never in arguments.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..api import API_VERSION, BACKUP_KIND, GROUP, S3, MySQLBackup, MySQLCluster
from . import common as k

COMPONENT_BACKUP = "backup"
CLUSTER_LABEL = f"{GROUP}/cluster"
SCHEDULED_AT_ANNOTATION = f"{GROUP}/scheduled-at"  # fire time a scheduled MySQLBackup was created for
DELETE_DATA_ANNOTATION = f"{GROUP}/delete-data"  # "true": deleting the MySQLBackup deletes its objects
ENV_DB_PASSWORD = "MYSQL_OPERATOR_DB_PASSWORD"
ENV_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENV_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
TERMINATION_LOG = "/dev/termination-log"
RUN_AS = 65532  # the operator image's user
DEFAULT_DEADLINE_SECONDS = 6 * 3600


def job_name(backup: MySQLBackup) -> str:
    name = f"{backup.name}-backup"
    return name if len(name) <= 63 else name[:63].rstrip("-")


def backup_args(c: MySQLCluster, backup: MySQLBackup, s3: S3, *, compression: str = "zstd",
                part_size_mib: int = 16) -> list[str]:
    """`mysql-operator backup run` arguments: every server of the cluster is a candidate source
    (the Job picks a healthy replica, else the primary, when it starts)."""
    args = ["backup", "run", "--namespace", c.namespace, "--cluster", c.name, "--backup", backup.name,
            "--bucket", s3.bucket, "--prefix", s3.prefix or "", "--compression", compression,
            "--part-size-mib", str(part_size_mib), "--user", k.OPERATOR_USER]
    if s3.endpoint:
        args += ["--endpoint", s3.endpoint]
    if s3.region:
        args += ["--region", s3.region]
    if s3.force_path_style:
        args.append("--force-path-style")
    for i in range(c.spec.instances):
        args += ["--source", f"{k.pod_name(c, i)}={k.pod_host(c, i)}:{k.PORT}"]
    return args


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def backup_job(c: MySQLCluster, backup: MySQLBackup, s3: S3, image: str, *,
               image_pull_policy: str = "IfNotPresent", compression: str = "zstd",
               part_size_mib: int = 16, deadline_seconds: int = DEFAULT_DEADLINE_SECONDS) -> dict[str, Any]:
    """The Job for one MySQLBackup (the caller adds the owner reference to the MySQLBackup)."""
    labels = {**k.labels(c, COMPONENT_BACKUP), CLUSTER_LABEL: c.name}
    cs = s3.credentials_secret
    container = {
        "name": "backup",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "args": backup_args(c, backup, s3, compression=compression, part_size_mib=part_size_mib),
        "env": [
            _secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.OPERATOR_PASSWORD_KEY),
            _secret_env(ENV_ACCESS_KEY, cs.name, cs.access_key_id_key),
            _secret_env(ENV_SECRET_KEY, cs.name, cs.secret_access_key_key),
            {"name": "TMPDIR", "value": "/tmp"},
        ],
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(backup), "namespace": c.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,  # a failed backup is reported, not silently retried
            "activeDeadlineSeconds": deadline_seconds,  # a hung backup fails, never "succeeds"
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
                    **({"nodeSelector": dict(c.spec.node_selector)} if c.spec.node_selector else {}),
                    **({"tolerations": [dict(t) for t in c.spec.tolerations]} if c.spec.tolerations else {}),
                },
            },
        },
    }


def scheduled_backup(c: MySQLCluster, name: str, fire_time: dt.datetime) -> dict[str, Any]:
    """The MySQLBackup a schedule creates for `fire_time` (uses the cluster's storage).
    Deliberately NOT owned by the cluster: deleting a cluster never deletes its backups. Scheduled
    backups' data is deleted with them (retention removes both)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": c.namespace,
        "labels": {**k.labels(c, COMPONENT_BACKUP), CLUSTER_LABEL: c.name},
        "annotations": {SCHEDULED_AT_ANNOTATION: fire_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        DELETE_DATA_ANNOTATION: "true"},
    }
    return {"apiVersion": API_VERSION, "kind": BACKUP_KIND, "metadata": meta,
            "spec": {"clusterRef": {"name": c.name}}}
