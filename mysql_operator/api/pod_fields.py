"""The spec fields that shape the servers' Pods: resources, image pull Secrets, tolerations, node
selector, labels and annotations (each checked as Kubernetes would, named by its path)."""

from __future__ import annotations

from typing import Any, Mapping

from kubernetes.utils.quantity import parse_quantity

from .types import (
    RESERVED_LABELS,
    RESERVED_PREFIX,
    SpecError,
    DNS_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    valid_label_key,
)
from .fields import (
    read_object,
    read_str,
    read_str_map,
)


def read_resources(value: Any, path: str) -> dict[str, dict[str, str]]:
    d = read_object(value, path, {"limits", "requests"})
    out: dict[str, dict[str, str]] = {}
    for kind in ("limits", "requests"):
        if not d.get(kind):
            continue
        if not isinstance(d[kind], dict):
            raise SpecError(f"{path}.{kind}", "must be a map of resource name to quantity")
        entries = {}
        for res, q in sorted(d[kind].items()):
            try:
                parse_quantity(q)
            except ValueError:
                raise SpecError(f"{path}.{kind}.{res}", f"{q!r} is not a quantity (e.g. 500m, 2Gi)") from None
            entries[res] = str(q)
        out[kind] = entries
    for res, q in out.get("requests", {}).items():
        limit = out.get("limits", {}).get(res)
        if limit is not None and parse_quantity(q) > parse_quantity(limit):
            raise SpecError(
                f"{path}.requests.{res}",
                f"{q} exceeds the limit {limit}: requests must not exceed limits for the same "
                "resource (the API refuses such a Pod): lower the request or raise the limit",
            )
    return out


def read_pull_secrets(value: Any, path: str) -> tuple[str, ...]:
    """[{name: <Secret>}, ...] (core/v1 LocalObjectReference), as the Pod API takes it."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > 8:
        raise SpecError(path, "must be a list of at most 8 {name: <Secret>} entries")
    names = []
    for n, ref in enumerate(value):
        if not isinstance(ref, dict) or set(ref) != {"name"}:
            raise SpecError(f"{path}[{n}]", "must be {name: <Secret>}")
        name = read_str(
            ref, "name", f"{path}[{n}]", required=True, pattern=DNS_SUBDOMAIN_RE, hint="a Secret name"
        )
        names.append(name)
    return tuple(n for n in names if n)


def read_tolerations(value: Any, path: str) -> tuple[Mapping[str, Any], ...]:
    """The checks the Pod API makes and the CRD repeats (so a bad toleration is refused at admission)."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise SpecError(path, "must be a list of core/v1 Tolerations")
    for n, t in enumerate(value):
        op, where = t.get("operator", "Equal"), f"{path}[{n}]"
        if op == "Exists" and t.get("value"):
            raise SpecError(
                where,
                "a toleration with operator Exists matches every value: remove value, or use operator Equal",
            )
        if not t.get("key") and op != "Exists":
            raise SpecError(
                where,
                "a toleration without a key must have operator Exists: add a key or set operator Exists",
            )
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            raise SpecError(
                where,
                "tolerationSeconds only applies to effect NoExecute: remove it or set the effect to NoExecute",
            )
    return tuple(value)


def read_labels(d: dict, key: str, path: str) -> dict[str, str]:
    labels = read_str_map(d, key, path, max_len=63)
    for k, v in labels.items():
        if not valid_label_key(k):
            raise SpecError(
                f"{path}.{key}.{k}",
                "is not a valid label key: use [prefix/]name, the name "
                "up to 63 letters, digits, '-', '_' or '.'",
            )
        if k in RESERVED_LABELS or k.startswith(RESERVED_PREFIX):
            raise SpecError(
                f"{path}.{key}.{k}", "is a label the operator sets and selects on: choose another key"
            )
        if not LABEL_VALUE_RE.fullmatch(v):
            raise SpecError(f"{path}.{key}.{k}", f"{v!r} is not a valid label value")
    return labels


def read_node_selector(s: dict, path: str) -> dict[str, str]:
    selector = read_str_map(s, "nodeSelector", path, max_len=63)
    for k, v in selector.items():
        if not valid_label_key(k) or not LABEL_VALUE_RE.fullmatch(v):
            raise SpecError(f"{path}.nodeSelector.{k}", "must be a valid node label key and value")
    return selector


def read_annotations(s: dict, path: str) -> dict[str, str]:
    annotations = read_str_map(s, "podAnnotations", path)
    for k in annotations:
        if k.startswith(RESERVED_PREFIX):
            raise SpecError(
                f"{path}.podAnnotations.{k}", "is an annotation the operator owns: choose another key"
            )
    return annotations
