"""kopf wiring for MySQLDatabase, MySQLUser and MySQLGrant: their watch events feed the cluster's
SQL objects (mysql_operator/sql_objects.py) and wake the cluster's pass, which applies them."""

from __future__ import annotations

import kopf

from mysql_operator.api import GROUP, VERSION
from mysql_operator.api.sql import PLURALS
from mysql_operator.handlers.cluster import reconciler


def _on_event(event, body, **_):
    r = reconciler()
    if event.get("type") == "DELETED":
        r.sql.gone(body)
        return
    key = r.sql.seen(body)
    if key is None:
        return
    namespace, cluster = key
    found = r.reads.cluster(namespace, cluster)
    if found is None or found["metadata"].get("deletionTimestamp"):
        state = "does not exist" if found is None else "is being deleted"
        r.sql.without_cluster(
            namespace,
            cluster,
            f"MySQLCluster {cluster} {state} in namespace {namespace}: create it or fix spec.clusterRef.name",
        )
        return
    r.nudge(namespace, cluster)


def register() -> None:
    for plural in PLURALS.values():
        kopf.on.event(GROUP, VERSION, plural, id=f"sql-objects-{plural}")(_on_event)
