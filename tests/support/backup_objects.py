"""MySQLBackup objects as the tests make them on the real API server (no Job ran: the status is
written as the controller would)."""

from __future__ import annotations

from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION


def make_backup(objs, ns, name, cluster="shop", storage=None, **spec):
    return objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        BACKUP_PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": name},
            "spec": {"clusterRef": {"name": cluster}, **({"storage": storage} if storage else {}), **spec},
        },
    )


def make_stored_backup(objs, ns, name, completed_at):
    """A MySQLBackup that succeeded at `completed_at` and stored objects (status.location)."""
    make_backup(objs, ns, name)
    objs.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        BACKUP_PLURAL,
        name,
        {
            "status": {
                "phase": "Succeeded",
                "completedAt": completed_at,
                "location": f"s3://backups/shop/{name}",
            }
        },
    )


def get(objs, ns, plural, name):
    return objs.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
