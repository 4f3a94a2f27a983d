"""BackupController: MySQLBackup and backup schedules/retention as plain methods over the
Kubernetes API, callable without kopf (handlers/backups.py maps kopf's events to them; tests call
them directly). Decisions are the pure functions of backup.schedule and backup.retention.

- start: a MySQLBackup -> a Job running `mysql-operator backup run` (one at a time per cluster:
  another one waits in phase Pending); track: the Job's result (its termination message) into
  status; Events on start, success and failure.
- tick: a cluster with spec.backup.schedule -> MySQLBackups on schedule, whatever the previous
  runs' outcome; status.lastBackup / status.lastScheduledBackup; expired backups (retention)
  removed, never the newest successful one.
- data_deleted: a MySQLBackup annotated delete-data=true takes its S3 objects with it.

The operator never talks to a tenant's S3 endpoint nor reads a tenant's bucket: backups, restores
and deletes of a backup's objects run in Jobs without API credentials (manifests.backup_jobs).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

import kopf
from dataclasses import dataclass, field
from typing import Any, Callable

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from mysql_operator import clock, metrics
from mysql_operator.k8s.objects import post_events
from mysql_operator.api import (
    BACKUP_PLURAL,
    CLUSTER_PLURAL,
    GROUP,
    VERSION,
    SpecError,
    parse_backup,
)
from mysql_operator.backup import retention, schedule
from mysql_operator.k8s import jobs
from mysql_operator.k8s.jobs import job_image, tools_repository
from mysql_operator.manifests import (
    BACKUP_PASSWORD_KEY,
    applied_credentials_secret_name,
    credentials_secret_name,
    owned,
)
from mysql_operator.manifests.backup_jobs import (
    SCHEDULED_AT_ANNOTATION,
    backup_job,
    delete_data_job,
    delete_job_name,
    scheduled_backup,
)
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

log = logging.getLogger(__name__)

ACTIVE = (None, PENDING, RUNNING)


# A cluster's delete Jobs running at once. Retention expiring many backups at one pass (keepLast
# lowered, a schedule's backlog) or many MySQLBackups deleted together start the rest as these end:
# each Job is a Pod starting a Python process, and a burst of them starved every database Pod on
# a small node for 30 s (their CPU requests far above a server's)
DELETE_JOBS_AT_ONCE = 2


@dataclass
class BackupController:
    api: k8s.ApiClient
    image: str = field(default_factory=job_image)
    tools_repository: str = field(default_factory=tools_repository)  # the client-tools container's
    # where what a cluster's status says of its backups goes (lastBackup, the schedule's runs):
    # in the operator the cluster's pass publishes it (Reconciler.report), its status's one
    # writer; None: patched here (tools, tests that run the controller alone)
    report: Callable[[str, str, dict], None] | None = None
    # (namespace, cluster) -> the delete Jobs this process started there (DELETE_JOBS_AT_ONCE)
    _deleting: dict[tuple[str, str], set[str]] = field(default_factory=dict, repr=False)
    _deleting_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def custom(self):
        return k8s.CustomObjectsApi(self.api)

    @property
    def core(self):
        return k8s.CoreV1Api(self.api)

    @property
    def batch(self):
        return k8s.BatchV1Api(self.api)

    # ------------------------------------------------------------------ helpers
    def event(self, obj: dict, kind: str, reason: str, message: str, warning: bool = False) -> None:
        post_events(
            self.api,
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": obj["metadata"]},
            [("Warning" if warning else "Normal", reason, message)],
        )

    def _get(self, plural: str, namespace: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _cluster_status(self, namespace: str, name: str, fields: dict) -> None:
        if self.report is not None:
            self.report(namespace, name, fields)
        else:
            self._patch_status(CLUSTER_PLURAL, namespace, name, fields)

    def _patch_status(self, plural: str, namespace: str, name: str, status: dict) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, name, {"status": status}
        )

    def _backup_status(self, body: dict, fields: dict) -> dict:
        """Write a MySQLBackup's status (backup_status: fields, size, conditions); returns it."""
        meta = body["metadata"]
        status = backup_status(fields, body.get("status") or {}, meta.get("generation"), clock.stamp())
        self._patch_status(BACKUP_PLURAL, meta["namespace"], meta["name"], status)
        return status

    def backups_of(self, namespace: str, cluster: str) -> list[dict]:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"]
        return [o for o in items if (o.get("spec") or {}).get("clusterRef", {}).get("name") == cluster]

    # ------------------------------------------------------------------ one backup
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
                self.api, ns, cluster.spec.backup and cluster.spec.backup.encryption, "spec.backup.encryption"
            )
            or key_problem(
                self.api,
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

    # ------------------------------------------------------------------ schedule + retention
    def tick(self, cluster_body: dict, now: dt.datetime | None = None) -> dict:
        """One schedule/retention pass for a cluster. Returns what it did (for logs and tests)."""
        now = now or clock.now()
        meta = cluster_body["metadata"]
        ns, cname = meta["namespace"], meta["name"]
        cluster = cluster_in_effect(cluster_body)
        bk = cluster.spec.backup
        done: dict[str, Any] = {"created": None, "deleted": []}
        if bk is None:
            return done
        backups = self.backups_of(ns, cname)
        stale = {"nextScheduledBackup", "lastScheduledBackup"} & set(cluster_body.get("status") or {})
        if not bk.schedule and stale:  # a schedule removed: no next run to announce
            self._cluster_status(ns, cname, dict.fromkeys(stale))
        if bk.schedule:
            scheduled = [
                clock.parse((o["metadata"].get("annotations") or {}).get(SCHEDULED_AT_ANNOTATION))
                for o in backups
            ]
            last = max((t for t in scheduled if t), default=None)
            created_at = clock.parse(meta.get("creationTimestamp")) or now
            active = [
                o["metadata"]["name"] for o in backups if (o.get("status") or {}).get("phase") in ACTIVE
            ]
            d = schedule.decide(now, bk.schedule, last, created_at, active)
            done["decision"] = d
            if d.create_for is not None:
                name = schedule.backup_name(cname, d.create_for)
                try:
                    self.custom.create_namespaced_custom_object(
                        GROUP, VERSION, ns, BACKUP_PLURAL, scheduled_backup(cluster, name, d.create_for)
                    )
                    done["created"] = name
                except ApiException as e:
                    if e.status != 409:
                        raise
            newest = max(((t, o) for t, o in zip(scheduled, backups) if t), default=None, key=lambda x: x[0])
            status = {"nextScheduledBackup": clock.stamp(d.next_run)}
            # scheduledAt: the fire time it ran for (the metric an alert on a late backup uses)
            if done["created"]:
                status["lastScheduledBackup"] = {
                    "name": done["created"],
                    "phase": PENDING,
                    "scheduledAt": clock.stamp(d.create_for),
                }
            elif newest is not None:
                o = newest[1]
                s = o.get("status") or {}
                status["lastScheduledBackup"] = {
                    "name": o["metadata"]["name"],
                    "phase": s.get("phase", PENDING),
                    "message": s.get("message", ""),
                    "scheduledAt": clock.stamp(newest[0]),
                }
            self._cluster_status(ns, cname, status)
        if bk.retention.keep_last is not None or bk.retention.max_age is not None:
            infos = [
                retention.BackupInfo(
                    o["metadata"]["name"],
                    (o.get("status") or {}).get("phase"),
                    clock.parse((o.get("status") or {}).get("completedAt"))
                    or clock.parse(o["metadata"].get("creationTimestamp"))
                    or now,
                )
                for o in backups
            ]
            for name in retention.expired(infos, now, bk.retention.keep_last, bk.retention.max_age_seconds):
                body = next(o for o in backups if o["metadata"]["name"] == name)
                if not self.data_deleted(body, cluster_body):
                    done.setdefault("deleting", []).append(name)  # its delete Job runs: next pass
                    continue
                self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, name)
                done["deleted"].append(name)
        return done

    def _may_start_delete(self, ns: str, cluster: str, job: str) -> bool:
        """Whether the delete Job `job` may start now: fewer than DELETE_JOBS_AT_ONCE of the ones
        this process started for the cluster still run (each read again; a restarted operator
        knows none, and starts at most that many more). Recorded as started when it may."""
        with self._deleting_lock:
            running = {
                other
                for other in self._deleting.get((ns, cluster), set())
                if other != job and jobs.job_result(*jobs.read_job(self.api, ns, other)) is None
            }
            if len(running) >= DELETE_JOBS_AT_ONCE:
                self._deleting[(ns, cluster)] = running
                return False
            self._deleting[(ns, cluster)] = running | {job}
            return True

    def data_deleted(self, body: dict, cluster_body: dict | None = None) -> bool:
        """True once the backup's objects are gone (or it never stored any). Otherwise a delete
        Job (`backup delete-data`, owned by the MySQLBackup) does it: the operator never talks to
        a tenant's S3 endpoint itself. A failed Job is reported (Warning Event) and removed, so
        the next call tries again."""
        meta = body["metadata"]
        ns = meta["namespace"]
        if cluster_body is None:
            cluster_body = self._get(CLUSTER_PLURAL, ns, body["spec"]["clusterRef"]["name"])
        s3 = storage_for(body, cluster_body)
        location = (body.get("status") or {}).get("location")
        if s3 is None or not location:
            return True  # never stored anything (failed before the upload, or no storage)
        folder = location[len(f"s3://{s3.bucket}/") :] if location.startswith(f"s3://{s3.bucket}/") else None
        if not folder:
            return True
        name = delete_job_name(meta["name"])
        found, pods = jobs.read_job(self.api, ns, name)
        if found is None:
            if cluster_body is None:
                self.event(
                    body,
                    "MySQLBackup",
                    R.BACKUP_DELETE_FAILED,
                    f"cannot delete {location}: its cluster "
                    f"{body['spec']['clusterRef']['name']} is gone (the delete Job runs with the "
                    "cluster's scheduling); delete the objects by hand",
                    warning=True,
                )
                return True
            cluster = cluster_in_effect(cluster_body)
            if not self._may_start_delete(ns, cluster.name, name):
                return False  # the cluster's other delete Jobs first: a later pass starts it
            jobs.create_job(
                self.api,
                owned(
                    delete_data_job(
                        cluster,
                        meta["name"],
                        s3,
                        folder,
                        self.image,
                        image_pull_policy=cluster.spec.image_pull_policy,
                    ),
                    body,
                ),
            )
            return False
        result = jobs.job_result(found, pods, f"the delete Job {name}")
        if result is None:
            return False
        if result["ok"]:
            return True
        self.event(
            body,
            "MySQLBackup",
            R.BACKUP_DELETE_FAILED,
            f"deleting {location}: {result['message']}",
            warning=True,
        )
        self.batch.delete_namespaced_job(name, ns, propagation_policy="Background")
        return False
