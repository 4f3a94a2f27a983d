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
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from ..api import API_VERSION, BACKUP_KIND, GROUP, S3, MySQLBackup, MySQLCluster
from ..backup import upload
from . import common as k
from .tenant_jobs import (
    CLIENT_TOOLS_DIR,
    CLUSTER_LABEL,
    DEFAULT_DEADLINE_SECONDS,
    ENV_DB_PASSWORD,
    SCRATCH_DIR,
    ca_bundle_volume,
    client_tools_sidecar,
    client_tools_volume,
    encryption_parts,
    job_name,
    s3_parts,
    scratch_volume,
    secret_env,
    tenant_job,
)

COMPONENT_BACKUP = "backup"
SCHEDULED_AT_ANNOTATION = f"{GROUP}/scheduled-at"  # fire time a scheduled MySQLBackup was created for
DELETE_DATA_ANNOTATION = f"{GROUP}/delete-data"  # "true": deleting the MySQLBackup deletes its objects


def backup_part_size(c: MySQLCluster) -> int:
    """The upload part size of a backup of `c`: chosen from spec.storage.size (a copy or dump of
    an instance's data is expected to be no larger than its volume) so that S3's 10,000 parts hold
    it with a margin (upload.part_size_for)."""
    return upload.part_size_for(int(parse_quantity(c.spec.storage.size)))


def backup_memory_limit(part_size: int) -> str:
    """The backup container's memory limit: 512Mi with 16 MiB parts, more by the part buffers a
    larger part size adds (upload.upload_memory)."""
    extra = upload.upload_memory(part_size) - upload.upload_memory(upload.DEFAULT_PART_SIZE)
    return f"{512 + max(extra, 0) // upload.MIB}Mi"


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
    if physical(c, backup):
        args += ["--method", "physical"] + (
            ["--scratch-dir", SCRATCH_DIR] if needs_scratch(c, backup) else []
        )
        if drills(c):
            args.append("--copy-digests")  # what a drill checks the restored tables against
    return args + ["--client-tools-dir", CLIENT_TOOLS_DIR]


def drills(c: MySQLCluster) -> bool:
    return c.spec.backup is not None and c.spec.backup.drill is not None


def needs_scratch(c: MySQLCluster, backup: MySQLBackup) -> bool:
    """Whether the backup Job copies into a scratch folder: a MySQL physical copy (CLONE), and a
    MariaDB one unpacked for its table digests (a cluster with drills); else MariaDB's copy is
    only streamed."""
    return physical(c, backup) and (c.spec.flavor == "mysql" or drills(c))


def physical(c: MySQLCluster, backup: MySQLBackup) -> bool:
    """Whether the backup is a physical copy: its spec.method, else the cluster's spec.backup.method."""
    if backup.method is not None:
        return backup.method == "physical"
    return c.spec.backup is not None and c.spec.backup.method == "physical"


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
        part_size_mib = backup_part_size(c) // upload.MIB
    enc_args, enc_env = encryption_parts(c.spec.backup and c.spec.backup.encryption, "spec.backup.encryption")
    scratch = scratch_volume(c) if needs_scratch(c, backup) else []
    job = tenant_job(
        c,
        job_name(backup),
        COMPONENT_BACKUP,
        "backup",
        image,
        backup_args(c, backup, s3, compression=compression, part_size_mib=part_size_mib) + enc_args,
        [
            secret_env(ENV_DB_PASSWORD, k.credentials_secret_name(c), k.BACKUP_PASSWORD_KEY),
            *s3_parts(s3)[1],
            *enc_env,
        ],
        image_pull_policy=image_pull_policy,
        deadline_seconds=deadline_seconds,
        volumes=[ca_bundle_volume(c), client_tools_volume(), *scratch],
        sidecars=[client_tools_sidecar(c, tools_repository, *(m for _, m in scratch))],
    )
    (container,) = [x for x in job["spec"]["template"]["spec"]["containers"] if x["name"] == "backup"]
    container["resources"]["limits"]["memory"] = backup_memory_limit(part_size_mib * upload.MIB)
    return job


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
