"""`mysql-operator check-install`: what the chart's `helm test` runs (a Pod of the operator's image
with its ServiceAccount, reading only): the operator answers - the holder of its Lease renews it -
and the cluster's CRDs are this chart's - each carries the sha256 of the chart's file in
mysql.operator.dev/crd-digest, written when the operator applied it (k8s/crds.py).

    problems = check(api, "mysql-operator", lease="mysql-operator", crds={"mysqlclusters.mysql.operator.dev": "<sha256>"})
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from mysql_operator.k8s.crds import DIGEST_ANNOTATION
from mysql_operator.leader import observe


def crd_problems(expected: Mapping[str, str], live: Mapping[str, Mapping[str, str] | None]) -> list[str]:
    """Pure: each expected CRD (name -> the chart's digest) against the live CRDs' annotations
    (None: no such CRD)."""
    out = []
    for name, digest in sorted(expected.items()):
        annotations = live.get(name)
        if annotations is None:
            out.append(f"CRD {name} is not installed")
        elif annotations.get(DIGEST_ANNOTATION) != digest:
            have = annotations.get(DIGEST_ANNOTATION) or "none"
            out.append(
                f"CRD {name} is not this chart's (digest {have[:12]}, the chart's {digest[:12]}): the operator "
                "applies it at start (crds.apply); its log says why it did not"
            )
    return out


def lease_renewed(read: Callable[[], Any], wait: float, every: float = 1.0, sleep=time.sleep) -> str | None:
    """Effect: the Lease's holder, once its record changed within `wait` seconds (it renews every
    2 s; leader.observe tells a changed record); None when nobody renewed it."""
    first = observe(None, read(), 0.0)
    waited = 0.0
    while waited < wait:
        sleep(every)
        waited += every
        seen = observe(first, read(), waited)
        if seen is not first and seen.holder:
            return seen.holder
    return None


def check(api, namespace: str, lease: str | None, crds: Mapping[str, str], wait: float = 15.0) -> list[str]:
    """Effect: the problems found (empty: the install is sound); what was fine is printed."""
    from kubernetes import client

    problems = []
    if lease:
        coord = client.CoordinationV1Api(api)
        holder = lease_renewed(lambda: coord.read_namespaced_lease(lease, namespace), wait)
        if holder is None:
            problems.append(
                f"nobody renewed the Lease {namespace}/{lease} in {wait:.0f} s: the operator does not run"
            )
        else:
            print(f"ok: the operator {holder} holds and renews the Lease {namespace}/{lease}")
    if crds:
        ext = client.ApiextensionsV1Api(api)
        live = {}
        for name in crds:
            found = ext.list_custom_resource_definition(field_selector=f"metadata.name={name}").items
            live[name] = (found[0].metadata.annotations or {}) if found else None
        found_problems = crd_problems(crds, live)
        problems += found_problems
        if not found_problems:
            print(f"ok: the {len(crds)} CRDs are this chart's")
    return problems
