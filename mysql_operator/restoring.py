"""Restore at creation (`spec.restore`): every wanted instance is loaded from the same verified
backup BEFORE replication is set up; only then is a primary recorded and the replication engine
adopts the instances (promote the primary, attach the replicas).

Why every instance and not "primary, then seed the replicas from it": the load goes outside the
binary log and sets the server's GTID position to the backup's. Loading the same
checksum-verified object into each new, empty instance gives every instance exactly the primary's
data at exactly the same GTID position - what a dump of the primary would give - without a second
dump/copy mechanism. Nothing can write in between: the engine is held off (no instance is
writable, no Pod carries a role label, so no Service routes to any of them). Replicas then
replicate everything the primary writes after the restore.

The load runs in a Job in the cluster's namespace (`mysql-operator backup restore-into`), never in
the operator: a dump and a bucket are a tenant's bytes, and the Job's Pod carries no API
credentials (manifests.tenant_jobs.tenant_job). The operator records phase Running BEFORE it
creates the Job, then follows the Job: its result (the Pod's termination message) becomes
status.restore. An operator restart meanwhile changes nothing: the Job runs on, and the next
operator reads its result.

Never a half-restored Ready cluster: while a restore runs the phase is Restoring and Ready is
False (reason Restoring); a failure (any instance) is phase Failed, Ready False reason
RestoreFailed, a Warning Event, and the engine stays held off.

Pure functions (table-tested in tests/unit/test_restoring.py); the gate's pass is restore_gate.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from mysql_operator.api import S3
from mysql_operator import reasons as R

RUNNING, SUCCEEDED, FAILED = "Running", "Succeeded", "Failed"


# ------------------------------------------------------------------------------------ decisions
@dataclass(frozen=True)
class Proceed:
    """No restore to do (none asked, or it succeeded): reconcile as usual."""


@dataclass(frozen=True)
class WaitForInstances:
    reason: str


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class InProgress:
    pass


@dataclass(frozen=True)
class Failed:
    message: str


RestoreAction = Proceed | WaitForInstances | Start | InProgress | Failed


@dataclass(frozen=True)
class Finished:
    """The restore Job ended: record its result (`ok`, `message`, ...) as the outcome."""

    result: Mapping[str, Any]


RestoreAction = Proceed | WaitForInstances | Start | InProgress | Finished | Failed

JOB_RUNNING = "running"  # decide()'s `job` while the restore Job has not finished


def decide(
    wants_restore: bool,
    record: Mapping[str, Any] | None,
    current_primary: str | None,
    not_ready: Sequence[str],
    job: Mapping[str, Any] | str | None,
) -> RestoreAction:
    """What to do about spec.restore this loop.

    record: status.restore; not_ready: wanted instances whose Pod is not Ready yet; job: the
    restore Job's result once it finished (k8s.jobs.job_result), JOB_RUNNING while it runs, None
    when there is no such Job."""
    if not wants_restore:
        return Proceed()
    phase = (record or {}).get("phase")
    if phase == SUCCEEDED:
        return Proceed()
    if phase == FAILED:
        return Failed(record.get("message") or "the restore failed")
    if phase == RUNNING:
        if job == JOB_RUNNING:
            return InProgress()
        if job is None:
            return Failed(
                "the restore Job disappeared before it finished: the instances may hold a "
                "partial load, so this cluster never becomes Ready; delete the MySQLCluster "
                "and its PersistentVolumeClaims and create it again"
            )
        return Finished(job)
    if current_primary is not None:
        # a primary was recorded without a restore record: never load over a serving cluster
        return Failed(
            "spec.restore: the cluster already has a primary and no restore record; a "
            "restore only goes into a new cluster: create a new MySQLCluster"
        )
    if not_ready:
        return WaitForInstances("restore waits for every instance: " + ", ".join(not_ready) + " not Ready")
    return Start()


def describe_source(from_backup: str | None, s3: S3 | None) -> str:
    if from_backup is not None:
        return f"mysqlbackup/{from_backup}"
    assert s3 is not None
    prefix = f"{s3.prefix.strip('/')}/" if s3.prefix.strip("/") else ""
    return f"s3://{s3.bucket}/{prefix}{(s3.path or '').strip('/')}"


def backup_location(backup_body: Mapping[str, Any] | None, name: str) -> str:
    """The Succeeded MySQLBackup's status.location; ValueError with the fix otherwise."""
    if backup_body is None:
        raise ValueError(
            f"spec.restore.fromBackup.name: MySQLBackup {name} does not exist in this "
            "namespace: name an existing backup, or use spec.restore.s3"
        )
    status = backup_body.get("status") or {}
    if status.get("phase") != SUCCEEDED or not status.get("location"):
        raise ValueError(
            f"spec.restore.fromBackup.name: MySQLBackup {name} is "
            f"{status.get('phase') or 'not finished'}, not Succeeded: restore from a "
            "backup that succeeded"
        )
    return status["location"]


def record(
    phase: str, source: str, started: str, completed: str | None = None, message: str = "", **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": phase, "source": source, "startedAt": started, "message": message}
    if completed is not None:
        out["completedAt"] = completed
    out.update(extra)
    return out


def overlay_status(
    status: Mapping[str, Any], action: RestoreAction, restore_record: Mapping[str, Any] | None, now: str
) -> dict[str, Any]:
    """Pure: the cluster status while a restore holds it: phase Restoring/Failed, Ready and
    Available False (reason Restoring/RestoreFailed), Degraded True on failure, status.restore."""
    out = dict(status)
    if restore_record:
        out["restore"] = dict(restore_record)
    if isinstance(action, Proceed):
        return out
    if isinstance(action, Finished):
        action = InProgress() if action.result.get("ok") else Failed(str(action.result.get("message")))
    failed = isinstance(action, Failed)
    reason = R.RESTORE_FAILED if failed else R.RESTORING
    if isinstance(action, Failed):
        message = action.message
    elif isinstance(action, WaitForInstances):
        message = action.reason
    else:
        message = f"restoring {(restore_record or {}).get('source', 'the backup')} into every instance"
    wanted = {
        "Ready": "False",
        "Available": "False",
        "Progressing": "False" if failed else "True",
        "Degraded": "True" if failed else "False",
    }
    out["phase"] = "Failed" if failed else "Restoring"
    conds = []
    for c in out.get("conditions") or []:
        c = dict(c)
        if c.get("type") in wanted:
            if c.get("status") != wanted[c["type"]]:
                c["lastTransitionTime"] = now
            c.update(
                status=wanted[c["type"]],
                reason=reason,
                message="" if c["type"] == "Degraded" and not failed else message,
            )
        conds.append(c)
    out["conditions"] = conds
    return out
