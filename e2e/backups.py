"""MySQLBackups in the e2e scenarios: one created for a cluster, and its phase."""

from __future__ import annotations

from e2e.helpers import BACKUPS, GROUP, VERSION, Cluster


def backup_phase_of(c: Cluster, name: str) -> str | None:
    b = c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, BACKUPS, name)
    return (b.get("status") or {}).get("phase")


def create_backup(c: Cluster, name: str, method: str | None = None) -> None:
    c.objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        c.namespace,
        BACKUPS,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": name},
            "spec": {"clusterRef": {"name": c.name}, **({"method": method} if method else {})},
        },
    )
