"""Prometheus metrics of the operator, served on --metrics-port (env METRICS_PORT) at /metrics.

mysql_operator_reconciles_total{namespace,cluster,outcome}        ok | error
mysql_operator_reconcile_duration_seconds{namespace,cluster}      histogram
mysql_operator_cluster_phase{namespace,cluster,phase}             1 for the current phase
mysql_operator_actions_total{namespace,cluster,action,ok}         replication steps taken
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

T = TypeVar("T")

REGISTRY = CollectorRegistry()
RECONCILES = Counter(
    "mysql_operator_reconciles",
    "Reconciles of a MySQLCluster",
    ["namespace", "cluster", "outcome"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "mysql_operator_reconcile_duration_seconds",
    "Time one reconcile took",
    ["namespace", "cluster"],
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
PHASE = Gauge(
    "mysql_operator_cluster_phase",
    "1 for the cluster's current phase",
    ["namespace", "cluster", "phase"],
    registry=REGISTRY,
)
ACTIONS = Counter(
    "mysql_operator_actions",
    "Replication steps taken (bootstrap, fence, promote...)",
    ["namespace", "cluster", "action", "ok"],
    registry=REGISTRY,
)
_phases: dict[tuple[str, str], str] = {}


def serve(port: int, addr: str = "0.0.0.0") -> None:
    start_http_server(port, addr=addr, registry=REGISTRY)


def observed(namespace: str, cluster: str, reconcile: Callable[[], T]) -> T:
    """Run one reconcile and record its outcome, duration, phase and steps."""
    t0 = time.monotonic()
    try:
        result = reconcile()
    except Exception:
        RECONCILES.labels(namespace, cluster, "error").inc()
        raise
    finally:
        DURATION.labels(namespace, cluster).observe(time.monotonic() - t0)
    if result is None:  # another reconcile of this cluster was running: it counts itself
        return result
    RECONCILES.labels(namespace, cluster, "ok").inc()
    previous = _phases.get((namespace, cluster))
    if previous is not None and previous != result.phase:
        PHASE.remove(namespace, cluster, previous)
    _phases[(namespace, cluster)] = result.phase
    PHASE.labels(namespace, cluster, result.phase).set(1)
    for step in result.steps:
        ACTIONS.labels(namespace, cluster, step.action, str(step.ok).lower()).inc()
    return result


def forget(namespace: str, cluster: str) -> None:
    """A deleted cluster's phase series goes away (counters stay, as Prometheus expects)."""
    phase = _phases.pop((namespace, cluster), None)
    if phase is not None:
        PHASE.remove(namespace, cluster, phase)
