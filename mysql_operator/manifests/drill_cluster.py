"""The throwaway cluster of a restore drill (backup/drill.py): one instance of the source's flavor,
version, image and server configuration, its storage as large as the source's, restoring the
source's backup (every archived binary log after it when they are archived, its tables checked),
its own generated Secrets, no backups of its own, deleted with its volumes.

The operator never deletes a MySQLCluster (its RBAC has no such verb). The throwaway cluster is
owned by its anchor: a suspended Job (it never runs a Pod) owned by the source cluster. Deleting
the anchor (background propagation) has the garbage collector delete the throwaway cluster, and
deleting the source deletes both."""

from __future__ import annotations

from typing import Any

from mysql_operator.api import GROUP, VERSION
from mysql_operator.backup.drill import DRILL_OF_LABEL, throwaway_name

# copied as the user wrote them: what decides whether the backup restores and how the server runs
COPIED = (
    "flavor",
    "version",
    "image",
    "imagePullPolicy",
    "imagePullSecrets",
    "toolsImage",
    "config",
    "storage",
    "database",
    "tls",
    "nodeSelector",
    "tolerations",
)
# what the drill's server asks for when spec.backup.drill.resources says nothing: a bounded share
DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


ANCHOR_ANNOTATION = "mysql.operator.dev/purpose"


def anchor_job(source: dict[str, Any], image: str) -> dict[str, Any]:
    """The drill's anchor: suspended, never started; what owns the throwaway cluster."""
    meta = source["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": throwaway_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {DRILL_OF_LABEL: meta["name"]},
            "annotations": {
                ANCHOR_ANNOTATION: "owns the restore drill's throwaway cluster: never runs; deleting it "
                "deletes that cluster"
            },
            "ownerReferences": [_owner(f"{GROUP}/{VERSION}", "MySQLCluster", meta["name"], meta["uid"])],
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {DRILL_OF_LABEL: meta["name"]}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "anchor", "image": image, "command": ["true"]}],
                },
            },
        },
    }


def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": False}


def drill_cluster(source: dict[str, Any], backup: str, binlogs: bool, anchor_uid: str) -> dict[str, Any]:
    meta, spec = source["metadata"], source.get("spec") or {}
    drill = (spec.get("backup") or {}).get("drill") or {}
    restore: dict[str, Any] = {"fromBackup": {"name": backup}, "checkTables": True}
    if binlogs:
        restore["pointInTime"] = "latest"
    if drill.get("checksConfigMap"):  # the same namespace's: the throwaway cluster's restore Job mounts it
        restore["checksConfigMap"] = drill["checksConfigMap"]
    encryption = (spec.get("backup") or {}).get("encryption")
    if encryption:
        restore["encryption"] = encryption
    body_spec = {k: spec[k] for k in COPIED if k in spec}
    body_spec.update(
        {
            "instances": 1,
            "resources": drill.get("resources") or DEFAULT_RESOURCES,
            "restore": restore,
            "deletionPolicy": "Delete",
        }
    )
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {
            "name": throwaway_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {DRILL_OF_LABEL: meta["name"]},
            "ownerReferences": [_owner("batch/v1", "Job", throwaway_name(meta["name"]), anchor_uid)],
        },
        "spec": body_spec,
    }
