"""The rolling update's effects: read the StatefulSet's revisions and the Pods, delete the one
Pod the plan names. The plan itself (which Pod, when, the primary last) is rolling.py."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.k8s import objects as k
from mysql_operator.pods import pod_ordinal, pod_views


log = logging.getLogger(__name__)


def roll_pods(
    cluster_name: str,
    pods: Iterable[Mapping[str, Any]],
    observed: Iterable[t.InstanceState],
    primary: str | None,
) -> list[rolling.RollPod]:
    """Pure: what mysql_operator/rolling.py needs from the listed Pods and the observed servers."""
    by_name = {i.name: i for i in observed}
    views = pod_views(cluster_name, pods)
    out = []
    for p in pods:
        meta = p.get("metadata") or {}
        ordinal = pod_ordinal(meta.get("name", ""), cluster_name)
        if ordinal is None:
            continue
        v, i = views[ordinal], by_name.get(meta["name"])
        replicating = bool(
            i and i.reachable and primary and i.source == primary and i.io_running and i.sql_running
        )
        out.append(
            rolling.RollPod(
                v.name,
                ordinal,
                (meta.get("labels") or {}).get(rolling.REVISION_LABEL),
                ready=v.ready,
                deleting=v.deleting,
                replicating=replicating,
                stuck=v.waiting,
            )
        )
    return out


def roll_desired(
    pinned: str | None, roll: rolling.RollStep | None, revision: str | None, pods: Iterable[Mapping[str, Any]]
) -> str | None:
    """Pure: the primary the engine should aim for during a roll. A SwitchTo moves it; a primary
    pinned by spec.primary to a Pod still on the old revision is not switched back to until
    that Pod was updated (else the roll would bounce the primary back before restarting it)."""
    if isinstance(roll, rolling.SwitchTo):
        return roll.name
    if pinned is None or roll is None or isinstance(roll, rolling.Done):
        return pinned
    pinned_pod = next((p for p in pods if (p.get("metadata") or {}).get("name") == pinned), None)
    if pinned_pod is None or revision is None:
        return pinned
    current = ((pinned_pod.get("metadata") or {}).get("labels") or {}).get(rolling.REVISION_LABEL)
    return pinned if current == revision else None


def roll_step(
    reads, c: MySQLCluster, listed, observed, primary
) -> tuple[rolling.RollStep | None, str | None]:
    """Effect: read the StatefulSet's update revision (`reads.statefulset`); the next roll step
    (None: no roll)."""
    if primary is None:
        return None, None
    sts = reads.statefulset(c.namespace, m.statefulset_name(c))
    if sts is None:
        return None, None
    revision = rolling.update_revision(sts)
    if revision is None:
        return None, None
    return rolling.next_step(
        roll_pods(c.name, listed, observed, primary), revision, primary, c.spec.instances
    ), revision


def roll_delete(api, body, decision, roll) -> str | None:
    """Effect: delete the outdated Pod, only when the topology is settled (Healthy): never during
    a failover, a switchover or while a replica is being configured. Returns the deleted Pod's
    name (None: none was)."""
    if not isinstance(roll, rolling.DeletePod) or not isinstance(decision, t.Healthy):
        return None
    return _restart(api, body, roll, "RollingUpdate", "restarting")


def replace_stuck(api, reads, body, c: MySQLCluster, listed) -> str | None:
    """Effect: delete the outdated Pod that does not run (rolling.replace_stuck), at any point of
    the cluster's life (a first Pod that cannot pull its image has no primary to wait for).
    Returns the deleted Pod's name (None: none was)."""
    sts = reads.statefulset(c.namespace, m.statefulset_name(c))
    step = rolling.replace_stuck(roll_pods(c.name, listed, (), None), rolling.update_revision(sts))
    return None if step is None else _restart(api, body, step, "ReplacedStuckPod", "replacing")


def _restart(api, body, step: rolling.DeletePod, reason: str, doing: str) -> str | None:
    """Effect: the Pod deleted (its StatefulSet starts it again with the current template on the
    same volume), a Normal Event saying why."""
    meta = body["metadata"]
    try:
        client.CoreV1Api(api).delete_namespaced_pod(step.name, meta["namespace"])
    except ApiException as e:
        if e.status != 404:
            raise
        return None
    k.post_events(api, body, [("Normal", reason, f"{doing} {step.name}: {step.reason}")])
    log.info("%s/%s %s: %s %s: %s", meta["namespace"], meta["name"], reason, doing, step.name, step.reason)
    return step.name
