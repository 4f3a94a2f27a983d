"""The end of a pass carried out: its Plan (status.plan, pure) written through KubeOps in the
Plan's order - the role labels taken away, the Events, the status, the role labels given."""

from __future__ import annotations

import logging
from typing import Any, Mapping


from mysql_operator import manifests as m
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.status import Plan

log = logging.getLogger(__name__)


def carry_out(kube: KubeOps, body: Mapping[str, Any], todo: Plan) -> None:
    """Effect: a Plan written through KubeOps, in its order."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    for pod, _ in todo.labels.take:
        kube.set_pod_label(ns, pod, m.ROLE_LABEL, None)
    if todo.events:
        kube.post_events(body, todo.events)
    if todo.changed:
        kube.patch_status(body, todo.status)
    for pod, value in todo.labels.give:  # (primary last: a Pod gone gets it in no one's place)
        kube.set_pod_label(ns, pod, m.ROLE_LABEL, value)
    for etype, reason, message in todo.events:
        log.log(
            logging.WARNING if etype == "Warning" else logging.INFO,
            "%s/%s %s: %s",
            ns,
            name,
            reason,
            message,
        )
