"""What the backup controller's parts share over the Kubernetes API: its settings (the Jobs'
image, the client-tools repository, where a cluster's status goes) and the MySQLBackups and
MySQLClusters read, listed, their status patched, their Events posted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s.jobs import job_image, tools_repository
from mysql_operator.k8s.objects import post_events


@dataclass
class BackupObjects:
    api: k8s.ApiClient
    image: str = field(default_factory=job_image)
    tools_repository: str = field(default_factory=tools_repository)  # the client-tools container's
    # where what a cluster's status says of its backups goes (lastBackup, the schedule's runs):
    # in the operator the cluster's pass publishes it (Reconciler.report), its status's one
    # writer; None: patched here (tools, tests that run the controller alone)
    report: Callable[[str, str, dict], None] | None = None

    @property
    def custom(self):
        return k8s.CustomObjectsApi(self.api)

    @property
    def core(self):
        return k8s.CoreV1Api(self.api)

    @property
    def batch(self):
        return k8s.BatchV1Api(self.api)

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

    def backups_of(self, namespace: str, cluster: str) -> list[dict]:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"]
        return [o for o in items if (o.get("spec") or {}).get("clusterRef", {}).get("name") == cluster]
