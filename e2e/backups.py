"""MySQLBackups in the e2e scenarios: a bucket for a namespace's backups, one backup created for
a cluster, and its phase; a restore drill asked for and waited for, and its throwaway cluster
waited out."""

from __future__ import annotations

import uuid

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.helpers import BACKUPS, GROUP, VERSION, Cluster
from tests.support.wait import wait_for


def s3_storage(c: Cluster, s3, prefix: str) -> dict:
    """A new bucket of the cluster's S3 server and the Secret `s3` with its key pair in c's
    namespace: spec.backup.storage naming them."""
    bucket = f"e2e-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(bucket)
    c.core.create_namespaced_secret(
        c.namespace,
        {
            "metadata": {"name": "s3"},
            "stringData": {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key},
        },
    )
    return {
        "s3": {
            "bucket": bucket,
            "prefix": prefix,
            "endpoint": s3.endpoint,
            "forcePathStyle": True,
            "credentialsSecret": {"name": "s3"},
        }
    }


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


def _gone(read) -> bool:
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def throwaway_gone(c: Cluster) -> None:
    """Wait until the drill's throwaway cluster, its anchor Job and its volume are gone."""
    name = f"{c.name}-drill"
    wait_for(
        lambda: (
            _gone(
                lambda: c.objs.get_namespaced_custom_object(
                    GROUP, VERSION, c.namespace, "mysqlclusters", name
                )
            )
            and _gone(lambda: client.BatchV1Api(c.api).read_namespaced_job(name, c.namespace))
            and _gone(lambda: c.core.read_namespaced_persistent_volume_claim(f"data-{name}-0", c.namespace))
        ),
        180,
        f"{name}, its anchor Job and its volume gone",
    )
