"""What a MySQLBackup's status says (`backup_status`: its fields and conditions), from its Job's
outcome (`job_outcome`) and the key it needs (`key_problem`); the cluster spec and storage a
backup uses. Pure."""

from __future__ import annotations


from typing import Any, Callable, Mapping

from kubernetes.client.exceptions import ApiException

from mysql_operator.units import human_size
from mysql_operator.api import (
    S3,
    Encryption,
    MySQLCluster,
    parse,
    parse_backup,
)
from mysql_operator.conditions import merge_conditions
from mysql_operator.spec_record import spec_in_effect
from mysql_operator.backup.crypto import CryptoError, parse_key
from mysql_operator.k8s.jobs import job_result
from mysql_operator import reasons as R


PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"

# conditions as a Job has them: Complete True once it succeeded, Failed True once it failed
# (phase -> Complete's status, Failed's status, both conditions' reason)
CONDITIONS = {
    PENDING: ("False", "False", R.BACKUP_PENDING),
    RUNNING: ("False", "False", R.BACKUP_RUNNING),
    SUCCEEDED: ("True", "False", R.BACKUP_SUCCEEDED),
    FAILED: ("False", "True", R.BACKUP_FAILED),
}


def backup_status(
    fields: dict[str, Any], previous: dict[str, Any], generation: int | None, now: str
) -> dict[str, Any]:
    """Pure: the MySQLBackup status to write: `fields` (phase and what comes with it), size
    (sizeBytes in words) and conditions Complete and Failed; a condition's lastTransitionTime
    moves only when its status changes."""
    complete, failed, reason = CONDITIONS[fields["phase"]]
    message = fields.get("message", "")
    new = [
        {"type": "Complete", "status": complete, "reason": reason, "message": message},
        {"type": "Failed", "status": failed, "reason": reason, "message": message},
    ]
    status = {
        **fields,
        "conditions": merge_conditions(previous.get("conditions") or [], new, now, generation),
    }
    if isinstance(fields.get("sizeBytes"), int):
        status["size"] = human_size(fields["sizeBytes"])
    return status


def cluster_in_effect(body: dict) -> MySQLCluster:
    """The cluster as the last spec of it that parsed has it (status.spec_in_effect), so an edit
    the parser refuses stops no scheduled backup; with none ever parsed, parse's SpecError."""
    _, c, _ = spec_in_effect(body)
    return c if c is not None else parse(body)


def storage_for(backup_body: dict, cluster_body: dict | None) -> S3 | None:
    """Pure: the backup's own storage, else its cluster's spec.backup.storage."""
    b = parse_backup(backup_body)
    if b.s3 is not None:
        return b.s3
    if cluster_body is None:
        return None
    c = cluster_in_effect(cluster_body)
    return c.spec.backup.s3 if c.spec.backup else None


def job_outcome(job: dict | None, pods: list[dict]) -> tuple[str, dict[str, Any]] | None:
    """Pure: (phase, status fields) once the Job finished, None while it runs."""
    result = job_result(job, pods, "the backup Job")
    if result is None:
        return None
    if result["ok"]:
        fields = {
            k: result[k]
            for k in (
                "location",
                "sizeBytes",
                "sha256",
                "gtidPosition",
                "encryptionKeyId",
                "sourceInstance",
                "method",
                "startedAt",
                "completedAt",
            )
            if k in result
        }
        return SUCCEEDED, {**fields, "message": f"backup stored at {result.get('location')}"}
    return FAILED, {"message": result["message"]}


def key_problem(
    read_secret: Callable[[str, str], Mapping[str, str] | None],
    namespace: str,
    enc: Encryption | None,
    field_path: str,
) -> str | None:
    """Why the encryption key `enc` names cannot be used (a missing Secret or key, not a 256-bit
    key), said before a Job is made: None when it can. The key is read (`read_secret`: a Secret's
    decoded data, None when absent), never kept or quoted."""
    if enc is None:
        return None
    where = enc.describe(field_path)
    try:
        data = read_secret(namespace, enc.secret)
    except ApiException as e:
        return f"{where}: cannot be read ({e.reason})"
    if data is None:
        return f"{where}: the Secret does not exist: create it with the key (`openssl rand -base64 32`)"
    if enc.key not in data:
        return f"{where}: the Secret has no key {enc.key!r}: add it or set keySecret.key"
    try:
        parse_key(data[enc.key], where)
    except CryptoError as e:
        return str(e)
    return None
