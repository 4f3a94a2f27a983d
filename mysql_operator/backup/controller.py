"""BackupController: MySQLBackup and backup schedules/retention as plain methods over the
Kubernetes API, callable without kopf (handlers/backups.py maps kopf's events to them; tests call
them directly). Decisions are the pure functions of backup.schedule and backup.retention.

- start: a MySQLBackup -> a Job running `mysql-operator backup run` (one at a time per cluster:
  another one waits in phase Pending); track: the Job's result (its termination message) into
  status, and the cluster's status.lastBackup; Events on start, success and failure. Here.
- tick (ScheduleController, backup/schedule_controller.py, which BackupController extends): a
  cluster with spec.backup.schedule -> MySQLBackups on schedule, whatever the previous runs'
  outcome; status.nextScheduledBackup / status.lastScheduledBackup; expired backups (retention)
  removed, never the newest successful one.
- data_deleted (DataDeletion, backup/data_deletion.py, which ScheduleController extends): a
  MySQLBackup annotated delete-data=true takes its S3 objects with it.
- What they share (settings, reads and status patches of the objects, Events): BackupObjects,
  backup/backup_objects.py.

The operator never talks to a tenant's S3 endpoint nor reads a tenant's bucket: backups, restores
and deletes of a backup's objects run in Jobs without API credentials (manifests.backup_jobs).
"""

from __future__ import annotations

import kopf

from kubernetes.client.exceptions import ApiException

from mysql_operator import clock, metrics
from mysql_operator.api import (
    BACKUP_PLURAL,
    CLUSTER_PLURAL,
    SpecError,
    parse_backup,
)
from mysql_operator.backup.schedule_controller import ScheduleController
from mysql_operator.k8s import jobs
from mysql_operator.k8s.objects import read_secret_data
from mysql_operator.manifests import (
    BACKUP_PASSWORD_KEY,
    applied_credentials_secret_name,
    credentials_secret_name,
    owned,
)
from mysql_operator.manifests.backup_jobs import backup_job
from mysql_operator.manifests.tenant_jobs import job_name
from mysql_operator import reasons as R
from mysql_operator.backup.backup_status import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    backup_status,
    cluster_in_effect,
    job_outcome,
    key_problem,
    storage_for,
)


class BackupController(ScheduleController):
    def _backup_status(self, body: dict, fields: dict) -> dict:
        """Write a MySQLBackup's status (backup_status: fields, size, conditions); returns it."""
        meta = body["metadata"]
        status = backup_status(fields, body.get("status") or {}, meta.get("generation"), clock.stamp())
        self._patch_status(BACKUP_PLURAL, meta["namespace"], meta["name"], status)
        return status

    def start(self, body: dict) -> dict:
        """Create the Job for a new MySQLBackup. Returns the status to set."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            backup = parse_backup(body)
        except SpecError as e:
            return self._fail(body, str(e))
        cluster_body = self._get(CLUSTER_PLURAL, ns, backup.cluster_name)
        if cluster_body is None:
            return self._fail(
                body,
                f"MySQLCluster {backup.cluster_name!r} not found in {ns}: fix spec.clusterRef.name, then "
                "create the MySQLBackup again",
            )
        s3 = storage_for(body, cluster_body)
        if s3 is None:
            return self._fail(
                body,
                "no storage: set spec.storage.s3 on the MySQLBackup or "
                f"spec.backup.storage.s3 on MySQLCluster {backup.cluster_name!r}",
            )
        others = [
            o["metadata"]["name"]
            for o in self.backups_of(ns, backup.cluster_name)
            if o["metadata"]["name"] != name and (o.get("status") or {}).get("phase") == RUNNING
        ]
        if others:
            return self._backup_status(
                body,
                {
                    "phase": PENDING,
                    "message": f"waiting for {', '.join(others)} to finish (one backup of a cluster at a time)",
                },
            )
        cluster = cluster_in_effect(cluster_body)
        lacking = (
            self._lacks_backup_password(cluster)
            or key_problem(
                self._secret_data,
                ns,
                cluster.spec.backup and cluster.spec.backup.encryption,
                "spec.backup.encryption",
            )
            or key_problem(
                self._secret_data,
                ns,
                s3.sse and s3.sse.customer_key,
                "spec.storage.s3.serverSideEncryption"
                if backup.s3 is not None
                else f"MySQLCluster {backup.cluster_name} spec.backup.storage.s3.serverSideEncryption",
            )
        )
        if lacking:
            return self._fail(body, lacking)
        rotating = self._backup_password_rotating(cluster)
        if rotating:
            return self._backup_status(body, {"phase": PENDING, "message": rotating})
        job = owned(
            backup_job(
                cluster,
                backup,
                s3,
                self.image,
                image_pull_policy=cluster.spec.image_pull_policy,
                tools_repository=self.tools_repository,
            ),
            body,
        )
        jobs.create_job(self.api, job)
        status = self._backup_status(
            body, {"phase": RUNNING, "startedAt": clock.stamp(), "message": f"Job {job_name(backup)} started"}
        )
        self.event(
            body,
            "MySQLBackup",
            R.BACKUP_STARTED,
            f"backup of {backup.cluster_name} started (Job {job_name(backup)})",
        )
        return status

    def _secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's decoded data as the API server has it now (None: absent)."""
        return read_secret_data(self.api, namespace, name)

    def _lacks_backup_password(self, cluster) -> str | None:
        """Why the backup account cannot be used: a Secret of the user's (spec.credentials) from
        before backup-password existed. The generated Secret always gets the key."""
        if cluster.spec.credentials is None:
            return None
        name = credentials_secret_name(cluster)
        try:
            data = self.core.read_namespaced_secret(name, cluster.namespace).data or {}
        except ApiException as e:
            raise kopf.TemporaryError(f"credentials Secret {name!r}: {e.reason}", delay=30) from None
        if data.get(BACKUP_PASSWORD_KEY):
            return None
        return (
            f"Secret {name!r} (spec.credentials) has no key {BACKUP_PASSWORD_KEY}: add one; the "
            f"operator then creates the backup account (read-only) that backups use"
        )

    def _backup_password_rotating(self, cluster) -> str | None:
        """Why the backup waits: backup-password was changed in the credentials Secret and the
        servers do not have it yet (the operator applies a rotation within seconds, then records
        it in the applied-credentials Secret); a Job started now would log in with a password
        the servers refuse."""
        secrets = (credentials_secret_name(cluster), applied_credentials_secret_name(cluster))
        desired, applied = (self._secret_value(cluster.namespace, s, BACKUP_PASSWORD_KEY) for s in secrets)
        if applied is None or desired == applied:
            return None
        return f"waiting for the new {BACKUP_PASSWORD_KEY} of Secret {secrets[0]!r} to reach the servers"

    def _secret_value(self, namespace: str, name: str, key: str) -> str | None:
        try:
            data = self.core.read_namespaced_secret(name, namespace).data or {}
        except ApiException as e:
            if e.status == 404:
                return None
            raise kopf.TemporaryError(f"Secret {name!r}: {e.reason}", delay=30) from None
        return data.get(key)

    def _fail(self, body: dict, message: str) -> dict:
        meta = body["metadata"]
        ref = ((body.get("spec") or {}).get("clusterRef") or {}).get("name")
        if isinstance(ref, str):
            metrics.backup_finished(meta["namespace"], ref, FAILED)
        status = self._backup_status(
            body, {"phase": FAILED, "completedAt": clock.stamp(), "message": message}
        )
        self.event(body, "MySQLBackup", R.BACKUP_FAILED, message, warning=True)
        return status

    def track(self, body: dict) -> dict | None:
        """Follow a Running/Pending backup; returns the new status once it changed."""
        meta, status = body["metadata"], body.get("status") or {}
        ns, name = meta["namespace"], meta["name"]
        if status.get("phase") == PENDING:
            return self.start(body) if self._get(BACKUP_PLURAL, ns, name) else None
        backup = parse_backup(body)
        job, pods = jobs.read_job(self.api, ns, job_name(backup))
        outcome = job_outcome(job, pods)
        if outcome is None:
            return None
        phase, fields = outcome
        metrics.backup_finished(ns, backup.cluster_name, phase)
        new = self._backup_status(
            body, {"phase": phase, "completedAt": fields.pop("completedAt", clock.stamp()), **fields}
        )
        cluster_body = self._get(CLUSTER_PLURAL, ns, backup.cluster_name)
        if phase == SUCCEEDED:
            self.event(body, "MySQLBackup", R.BACKUP_SUCCEEDED, new["message"])
            if cluster_body is not None:
                self._cluster_status(
                    ns,
                    backup.cluster_name,
                    {
                        "lastBackup": {
                            "name": name,
                            "startedAt": new.get("startedAt"),
                            "completedAt": new["completedAt"],
                            "sizeBytes": new.get("sizeBytes"),
                            "location": new.get("location"),
                            "sha256": new.get("sha256"),
                            "gtidPosition": new.get("gtidPosition"),
                        }
                    },
                )
        else:
            self.event(body, "MySQLBackup", R.BACKUP_FAILED, new["message"], warning=True)
            if cluster_body is not None:
                self.event(
                    cluster_body,
                    "MySQLCluster",
                    R.BACKUP_FAILED,
                    f"backup {name} failed: {new['message']}",
                    warning=True,
                )
        return new
