"""MySQLBackups in the e2e scenarios: one created for a cluster, and its phase; a restore drill
asked for and waited for."""

from __future__ import annotations

from e2e.helpers import BACKUPS, GROUP, VERSION, Cluster
from tests.support.wait import wait_for


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


def ask_for_drill(c: Cluster, token: str) -> None:
    """A restore drill of `c` asked for (the drill-request annotation, set to `token`)."""
    c.objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        c.namespace,
        "mysqlclusters",
        c.name,
        {"metadata": {"annotations": {"mysql.operator.dev/drill-request": token}}},
    )


def drill_ended(c: Cluster, token: str, timeout: float) -> dict:
    """status.drill once the drill asked for with `token` ended (Succeeded or Failed)."""

    def ended():
        d = c.status().get("drill") or {}
        return d if d.get("request") == token and d.get("phase") in ("Succeeded", "Failed") else None

    return wait_for(ended, timeout, f"the drill {token} ended", describe=c.describe)


def drill(c: Cluster, token: str, timeout: float) -> dict:
    """Ask for a drill and wait for its end; returns status.drill."""
    ask_for_drill(c, token)
    return drill_ended(c, token, timeout)
