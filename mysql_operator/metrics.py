"""Prometheus metrics of the operator, served on --metrics-port (env METRICS_PORT) at /metrics.

mysql_operator_reconciles_total{namespace,cluster,outcome}        ok | error
mysql_operator_reconcile_errors_total{namespace,cluster,cause}    passes that raised, by exception type
mysql_operator_reconcile_duration_seconds{namespace,cluster}      histogram
mysql_operator_cluster_phase{namespace,cluster,phase}             1 for the current phase
mysql_operator_actions_total{namespace,cluster,action,ok}         replication steps taken
mysql_operator_cluster_primary{namespace,cluster,instance}        1 for the current primary
mysql_operator_cluster_instances{namespace,cluster,role}          instances by status role
mysql_operator_replica_lag_seconds{namespace,cluster,instance}    each replica's lag, as last observed
mysql_operator_primary_changes_total{namespace,cluster,kind,forced,reason}  Failover | Switchover
                                                                  promotions; reason: PrimaryUnreachable,
                                                                  PrimaryRestarted, PrimaryNotWritable |
                                                                  Requested, PrimaryRemoved
mysql_operator_last_failover_duration_seconds{namespace,cluster}  lost primary first seen down -> promoted
mysql_operator_last_backup_timestamp_seconds{namespace,cluster}   last successful backup (Unix time)
mysql_operator_last_backup_size_bytes{namespace,cluster}          its compressed size
mysql_operator_last_backup_duration_seconds{namespace,cluster}    its Job's start -> stored
mysql_operator_last_scheduled_backup_timestamp_seconds{namespace,cluster}  the schedule's newest run's
                                                                  fire time (with spec.backup.schedule)
mysql_operator_backups_total{namespace,cluster,outcome}           finished backups: Succeeded | Failed
mysql_operator_cluster_condition{namespace,cluster,type}          1 when the condition is True, else 0
                                                                  (Ready, Available, Progressing, Degraded,
                                                                  Restorable, ...)
mysql_operator_drill_succeeded{namespace,cluster}                 the last restore drill: 1 passed, 0 failed
                                                                  (absent while the first one runs)
mysql_operator_drill_last_success_timestamp_seconds{namespace,cluster}  when the last drill that passed ended
mysql_operator_drill_rto_seconds{namespace,cluster}               the last passed drill: start -> serving
mysql_operator_drill_rpo_seconds{namespace,cluster}               ... what it lacked of the source, seconds
mysql_operator_drill_missing_transactions{namespace,cluster}      ... and transactions
mysql_operator_drill_restore_bytes_per_second{namespace,cluster}  ... its restore's throughput

A Prometheus scraping this endpoint must keep these labels (`honor_labels: true`; the chart's
ServiceMonitor sets it): `namespace` and `instance` are the cluster's, not the operator Pod's.

Every label is bounded: namespaces and clusters exist, instances are at most spec.instances,
roles, kinds and causes come from the code. A deleted cluster's gauges go away.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter as Tally
from typing import Any, Callable, Mapping, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from mysql_operator.topology import FAILOVER_CAUSES, SWITCHOVER_CAUSES

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
RECONCILE_ERRORS = Counter(
    "mysql_operator_reconcile_errors",
    "Passes that raised, by exception type",
    ["namespace", "cluster", "cause"],
    registry=REGISTRY,
)
PASS_OVERDUE = Gauge(
    "mysql_operator_pass_overdue",
    "1 while the cluster's pass has run past its deadline (--pass-deadline-seconds), else 0",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
PASSES_OVERDUE = Counter(
    "mysql_operator_passes_overdue",
    "Passes that ran past their deadline (each was let run on, off the shared pass slots)",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
PRIMARY = Gauge(
    "mysql_operator_cluster_primary",
    "1 for the instance that is the cluster's primary",
    ["namespace", "cluster", "instance"],
    registry=REGISTRY,
)
INSTANCES = Gauge(
    "mysql_operator_cluster_instances",
    "Instances by the role the status reports (primary, replica, lagging, held-out, unknown, ...)",
    ["namespace", "cluster", "role"],
    registry=REGISTRY,
)
LAG = Gauge(
    "mysql_operator_replica_lag_seconds",
    "Seconds a replica is behind its source, as last observed",
    ["namespace", "cluster", "instance"],
    registry=REGISTRY,
)
PRIMARY_CHANGES = Counter(
    "mysql_operator_primary_changes",
    "Failovers and switchovers that promoted a new primary",
    ["namespace", "cluster", "kind", "forced", "reason"],
    registry=REGISTRY,
)
FAILOVER_SECONDS = Gauge(
    "mysql_operator_last_failover_duration_seconds",
    "From the first failed observation of the lost primary to the promotion of the new one",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
LAST_BACKUP = Gauge(
    "mysql_operator_last_backup_timestamp_seconds",
    "When the cluster's last successful backup completed (Unix time: alert on time() - this)",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
LAST_BACKUP_SIZE = Gauge(
    "mysql_operator_last_backup_size_bytes",
    "Size of the cluster's last successful backup as stored (compressed)",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
LAST_BACKUP_DURATION = Gauge(
    "mysql_operator_last_backup_duration_seconds",
    "How long the cluster's last successful backup took, from its Job's start to stored",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
LAST_SCHEDULED = Gauge(
    "mysql_operator_last_scheduled_backup_timestamp_seconds",
    "The fire time of the schedule's newest run (Unix time; only with spec.backup.schedule): a "
    "last successful backup older than this for long is a late backup",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
BACKUPS = Counter(
    "mysql_operator_backups",
    "Backups that finished, by outcome (Succeeded, Failed)",
    ["namespace", "cluster", "outcome"],
    registry=REGISTRY,
)
CONDITION = Gauge(
    "mysql_operator_cluster_condition",
    "1 when the cluster's condition (Ready, Available, Progressing, Degraded) is True, else 0",
    ["namespace", "cluster", "type"],
    registry=REGISTRY,
)
DRILL_GAUGES = {
    "drill_succeeded": Gauge(
        "mysql_operator_drill_succeeded",
        "The cluster's last restore drill: 1 when it passed, 0 when it failed (spec.backup.drill)",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
    "drill_last_success": Gauge(
        "mysql_operator_drill_last_success_timestamp_seconds",
        "When the cluster's last restore drill that passed ended (Unix time: alert on time() - this)",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
    "drill_rto": Gauge(
        "mysql_operator_drill_rto_seconds",
        "The last passed restore drill: seconds from its start until the restored server served",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
    "drill_rpo": Gauge(
        "mysql_operator_drill_rpo_seconds",
        "The last passed restore drill: 0 when it held every transaction the source had at its "
        "start, else the seconds from its newest restored write to that start",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
    "drill_missing": Gauge(
        "mysql_operator_drill_missing_transactions",
        "The last passed restore drill: transactions the source had at its start that it lacked",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
    "drill_throughput": Gauge(
        "mysql_operator_drill_restore_bytes_per_second",
        "The last passed restore drill: bytes of the backup loaded per second of its restore",
        ["namespace", "cluster"],
        registry=REGISTRY,
    ),
}
_GAUGES = {
    **DRILL_GAUGES,
    "phase": PHASE,
    "primary": PRIMARY,
    "instances": INSTANCES,
    "lag": LAG,
    "last_backup": LAST_BACKUP,
    "last_backup_size": LAST_BACKUP_SIZE,
    "last_backup_duration": LAST_BACKUP_DURATION,
    "last_scheduled": LAST_SCHEDULED,
    "condition": CONDITION,
}
# per cluster and gauge: the label values (after namespace, cluster) set last time
_series: dict[tuple[str, str], dict[str, set[tuple[str, ...]]]] = {}


def cluster_series(status: Mapping[str, Any]) -> dict[str, dict[tuple[str, ...], float]]:
    """Pure: each gauge's series (label values after namespace and cluster -> value) from a
    MySQLCluster's status."""
    entries = status.get("instances") or []
    roles = Tally((str(e.get("role", "unknown")),) for e in entries)
    out: dict[str, dict[tuple[str, ...], float]] = {
        "phase": {(status["phase"],): 1} if status.get("phase") else {},
        "primary": {(status["currentPrimary"],): 1} if status.get("currentPrimary") else {},
        "instances": {labels: float(n) for labels, n in roles.items()},
        "lag": {(e["name"],): float(e["lagSeconds"]) for e in entries if e.get("lagSeconds") is not None},
        "last_backup": {},
        "last_backup_size": {},
        "last_backup_duration": {},
        "last_scheduled": {},
        "condition": {
            (str(c["type"]),): 1.0 if c.get("status") == "True" else 0.0
            for c in status.get("conditions") or []
            if c.get("type")
        },
    }
    last = status.get("lastBackup") or {}
    completed, started = _timestamp(last.get("completedAt")), _timestamp(last.get("startedAt"))
    if completed is not None:
        out["last_backup"] = {(): completed}
        if started is not None and started <= completed:
            out["last_backup_duration"] = {(): completed - started}
    scheduled = _timestamp((status.get("lastScheduledBackup") or {}).get("scheduledAt"))
    if scheduled is not None:
        out["last_scheduled"] = {(): scheduled}
    if isinstance(last.get("sizeBytes"), int):
        out["last_backup_size"] = {(): float(last["sizeBytes"])}
    out.update(_drill_series(status.get("drill") or {}))
    return out


def _drill_series(d: Mapping[str, Any]) -> dict[str, dict[tuple[str, ...], float]]:
    """The drill gauges from status.drill (the measures only while they are the last passed one's)."""
    out: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in DRILL_GAUGES}
    if d.get("phase") in ("Succeeded", "Failed"):
        out["drill_succeeded"] = {(): 1.0 if d["phase"] == "Succeeded" else 0.0}
    elif d.get("lastSucceededAt"):  # one runs: the one before passed
        out["drill_succeeded"] = {(): 1.0}
    success = _timestamp(d.get("lastSucceededAt"))
    if success is not None:
        out["drill_last_success"] = {(): success}
    if d.get("phase") == "Succeeded":
        for name, key in (
            ("drill_rto", "rtoSeconds"),
            ("drill_rpo", "rpoSeconds"),
            ("drill_missing", "missingTransactions"),
            ("drill_throughput", "bytesPerSecond"),
        ):
            if isinstance(d.get(key), (int, float)) and not isinstance(d.get(key), bool):
                out[name] = {(): float(d[key])}
    return out


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def backup_finished(namespace: str, cluster: str, outcome: str) -> None:
    BACKUPS.labels(namespace, cluster, outcome).inc()


def _publish(namespace: str, cluster: str, series: Mapping[str, Mapping[tuple[str, ...], float]]) -> None:
    if (namespace, cluster) not in _series:
        # counters exist at 0 from the cluster's first pass: increase() over a window then
        # counts the first failover or backup too (a series born at 1 has no increase)
        for kind, causes in (("Failover", FAILOVER_CAUSES), ("Switchover", SWITCHOVER_CAUSES)):
            for cause in causes:
                PRIMARY_CHANGES.labels(namespace, cluster, kind, "false", cause)
        for outcome in ("Succeeded", "Failed"):
            BACKUPS.labels(namespace, cluster, outcome)
    known = _series.setdefault((namespace, cluster), {})
    for name, gauge in _GAUGES.items():
        now = series.get(name, {})
        for labels in known.get(name, set()) - set(now):
            gauge.remove(namespace, cluster, *labels)
        for labels, value in now.items():
            gauge.labels(namespace, cluster, *labels).set(value)
        known[name] = set(now)


def serve(port: int, addr: str = "0.0.0.0") -> None:
    start_http_server(port, addr=addr, registry=REGISTRY)


def observed(namespace: str, cluster: str, reconcile: Callable[[], T]) -> T:
    """Run one reconcile and record its outcome, duration, phase and steps."""
    t0 = time.monotonic()
    try:
        result = reconcile()
    except Exception as e:
        RECONCILES.labels(namespace, cluster, "error").inc()
        RECONCILE_ERRORS.labels(namespace, cluster, type(e).__name__).inc()
        raise
    finally:
        DURATION.labels(namespace, cluster).observe(time.monotonic() - t0)
    if result is None:  # another reconcile of this cluster was running: it counts itself
        return result
    RECONCILES.labels(namespace, cluster, "ok").inc()
    _publish(namespace, cluster, cluster_series({"phase": result.phase, **result.status}))
    for step in result.steps:
        ACTIONS.labels(namespace, cluster, step.action, str(step.ok).lower()).inc()
    change = primary_change(result)
    if change is not None:
        PRIMARY_CHANGES.labels(namespace, cluster, *change).inc()
    if result.failover_seconds is not None:
        FAILOVER_SECONDS.labels(namespace, cluster).set(result.failover_seconds)
    return result


def primary_change(result: Any) -> tuple[str, str, str] | None:
    """Pure: (kind, forced, reason) when the pass promoted a new primary by failover or
    switchover."""
    if result.decision not in ("Failover", "Switchover"):
        return None
    if not any(s.action == "promote" and s.ok for s in result.steps):
        return None
    return result.decision, str(bool(result.forced)).lower(), result.cause


def pass_overdue(namespace: str, cluster: str, overdue: bool) -> None:
    """The cluster's pass ran past its deadline (True: counted) or that pass ended (False)."""
    if overdue:
        PASSES_OVERDUE.labels(namespace, cluster).inc()
    PASS_OVERDUE.labels(namespace, cluster).set(1 if overdue else 0)


def forget(namespace: str, cluster: str) -> None:
    """A deleted cluster's gauges go away (counters stay, as Prometheus expects)."""
    _publish(namespace, cluster, {})
    _series.pop((namespace, cluster), None)
    try:
        PASS_OVERDUE.remove(namespace, cluster)
    except KeyError:
        pass  # never overdue
    try:
        FAILOVER_SECONDS.remove(namespace, cluster)
    except KeyError:
        pass  # it never failed over
