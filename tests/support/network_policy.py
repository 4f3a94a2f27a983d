"""NetworkPolicies for tests: the chart's, label-selector matching, whether one admits a connection."""

from __future__ import annotations

from tests.support.chart import of_kind, render


def policies(values: dict) -> list[dict]:
    return of_kind(render(values), "NetworkPolicy")


def matches(selector: dict, labels: dict) -> bool:
    """Kubernetes label-selector semantics (matchLabels + In/NotIn/Exists/DoesNotExist)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def admitted(
    policy: dict, pod_namespace: str, pod_labels: dict, namespace_labels: dict, port: int = 3306
) -> bool:
    """Whether a Pod (labels, namespace) may open a connection to `port` of a selected Pod."""
    ns = policy["metadata"]["namespace"]
    for rule in policy["spec"]["ingress"]:
        if not any(p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in rule["ports"]):
            continue
        if not rule.get("from"):  # no peers: every source
            return True
        for peer in rule["from"]:
            if "namespaceSelector" in peer:
                ns_ok = matches(peer["namespaceSelector"], namespace_labels)
            else:
                ns_ok = pod_namespace == ns
            pod_ok = matches(peer.get("podSelector", {}), pod_labels)
            if ns_ok and pod_ok:
                return True
    return False
