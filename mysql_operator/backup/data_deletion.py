"""DataDeletion: a MySQLBackup's objects in the bucket deleted by a Job (`backup delete-data`,
owned by the MySQLBackup), at most DELETE_JOBS_AT_ONCE of a cluster's at once; the operator never
talks to a tenant's S3 endpoint itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mysql_operator import reasons as R
from mysql_operator.backup.backup_objects import BackupObjects
from mysql_operator.backup.backup_status import cluster_in_effect, storage_for
from mysql_operator.api import CLUSTER_PLURAL
from mysql_operator.k8s import jobs
from mysql_operator.manifests import owned
from mysql_operator.manifests.backup_jobs import delete_data_job, delete_job_name

# A cluster's delete Jobs running at once. Retention expiring many backups at one pass (keepLast
# lowered, a schedule's backlog) or many MySQLBackups deleted together start the rest as these end:
# each Job is a Pod starting a Python process, and a burst of them starved every database Pod on
# a small node for 30 s (their CPU requests far above a server's)
DELETE_JOBS_AT_ONCE = 2


@dataclass
class DataDeletion(BackupObjects):
    # (namespace, cluster) -> the delete Jobs this process started there (DELETE_JOBS_AT_ONCE)
    _deleting: dict[tuple[str, str], set[str]] = field(default_factory=dict, repr=False)
    _deleting_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
