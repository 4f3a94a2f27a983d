"""Operator metrics: what a Prometheus scrape shows after reconciles."""

from __future__ import annotations

import datetime as dt

import socket
import urllib.request

import pytest

from mysql_operator import metrics
from mysql_operator.status import Result
from mysql_operator.members import Step


def sample(name, **labels):
    return metrics.REGISTRY.get_sample_value(name, labels)


def test_reconcile_outcomes_phase_and_steps_are_counted():
    ns, c = "m1", "shop"
    metrics.observed(ns, c, lambda: Result(phase="Pending"))
    metrics.observed(
        ns,
        c,
        lambda: Result(
            phase="Ready",
            steps=[
                Step("shop-0", "promote"),
                Step("shop-1", "replicate"),
                Step("shop-2", "replicate", ok=False),
            ],
        ),
    )
    with pytest.raises(RuntimeError):
        metrics.observed(ns, c, lambda: (_ for _ in ()).throw(RuntimeError("boom")))

    assert sample("mysql_operator_reconciles_total", namespace=ns, cluster=c, outcome="ok") == 2
    assert sample("mysql_operator_reconciles_total", namespace=ns, cluster=c, outcome="error") == 1
    assert sample("mysql_operator_reconcile_duration_seconds_count", namespace=ns, cluster=c) == 3
    assert sample("mysql_operator_cluster_phase", namespace=ns, cluster=c, phase="Ready") == 1
    assert sample("mysql_operator_cluster_phase", namespace=ns, cluster=c, phase="Pending") is None
    assert sample("mysql_operator_actions_total", namespace=ns, cluster=c, action="replicate", ok="true") == 1
    assert (
        sample("mysql_operator_actions_total", namespace=ns, cluster=c, action="replicate", ok="false") == 1
    )

    metrics.forget(ns, c)
    assert sample("mysql_operator_cluster_phase", namespace=ns, cluster=c, phase="Ready") is None


def test_a_reconcile_that_waited_for_another_is_not_counted_twice():
    metrics.observed("m2", "shop", lambda: None)
    assert sample("mysql_operator_reconciles_total", namespace="m2", cluster="shop", outcome="ok") is None


def test_metrics_are_served_over_http():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics.serve(port, addr="127.0.0.1")
    metrics.observed("m3", "web", lambda: Result(phase="Ready"))
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'mysql_operator_cluster_phase{cluster="web",namespace="m3",phase="Ready"} 1.0' in body


STATUS = {
    "phase": "Degraded",
    "currentPrimary": "shop-1",
    "instances": [
        {"name": "shop-0", "role": "replica", "lagSeconds": 2},
        {"name": "shop-1", "role": "primary"},
        {"name": "shop-2", "role": "lagging", "lagSeconds": 75},
    ],
    "lastBackup": {"name": "nightly", "completedAt": "2026-11-25T03:00:00Z"},
}


def test_is_my_cluster_ok_primary_roles_lag_and_last_backup_from_the_status():
    ns, c = "m4", "shop"
    metrics.observed(ns, c, lambda: Result(phase="Degraded", status=STATUS))
    assert sample("mysql_operator_cluster_primary", namespace=ns, cluster=c, instance="shop-1") == 1
    assert sample("mysql_operator_cluster_instances", namespace=ns, cluster=c, role="replica") == 1
    assert sample("mysql_operator_cluster_instances", namespace=ns, cluster=c, role="lagging") == 1
    assert sample("mysql_operator_replica_lag_seconds", namespace=ns, cluster=c, instance="shop-2") == 75
    assert sample("mysql_operator_replica_lag_seconds", namespace=ns, cluster=c, instance="shop-1") is None
    assert sample("mysql_operator_last_backup_timestamp_seconds", namespace=ns, cluster=c) == 1795575600

    # the primary moved and shop-2 caught up: the old series go, the new ones come
    moved = {
        "phase": "Ready",
        "currentPrimary": "shop-0",
        "instances": [
            {"name": "shop-0", "role": "primary"},
            {"name": "shop-1", "role": "replica", "lagSeconds": 0},
            {"name": "shop-2", "role": "replica", "lagSeconds": 0},
        ],
    }
    metrics.observed(ns, c, lambda: Result(phase="Ready", status=moved))
    assert sample("mysql_operator_cluster_primary", namespace=ns, cluster=c, instance="shop-1") is None
    assert sample("mysql_operator_cluster_primary", namespace=ns, cluster=c, instance="shop-0") == 1
    assert sample("mysql_operator_cluster_instances", namespace=ns, cluster=c, role="lagging") is None
    assert sample("mysql_operator_cluster_instances", namespace=ns, cluster=c, role="replica") == 2
    assert sample("mysql_operator_replica_lag_seconds", namespace=ns, cluster=c, instance="shop-0") is None
    assert sample("mysql_operator_last_backup_timestamp_seconds", namespace=ns, cluster=c) is None
    assert sample("mysql_operator_last_scheduled_backup_timestamp_seconds", namespace=ns, cluster=c) is None

    metrics.forget(ns, c)
    for name, labels in [
        ("mysql_operator_cluster_primary", {"instance": "shop-0"}),
        ("mysql_operator_cluster_instances", {"role": "replica"}),
        ("mysql_operator_replica_lag_seconds", {"instance": "shop-1"}),
        ("mysql_operator_cluster_phase", {"phase": "Ready"}),
    ]:
        assert sample(name, namespace=ns, cluster=c, **labels) is None, name


def test_failovers_and_switchovers_are_counted_by_reason_when_they_promoted_with_the_failover_duration():
    ns, c = "m5", "shop"
    promoted = [Step("shop-1", "fence"), Step("shop-1", "promote")]

    def failover(**kw):
        return Result(phase="FailingOver", decision="Failover", steps=promoted, **kw)

    metrics.observed(ns, c, lambda: failover(failover_seconds=4.5, cause="PrimaryUnreachable"))
    metrics.observed(
        ns,
        c,
        lambda: Result(
            phase="Ready", decision="Switchover", steps=[Step("shop-2", "promote")], cause="PrimaryRemoved"
        ),
    )
    metrics.observed(ns, c, lambda: failover(forced=True, cause="PrimaryUnreachable"))
    metrics.observed(ns, c, lambda: failover(cause="PrimaryRestarted"))
    # a failover whose promotion failed, and a pass that only decided: not counted
    metrics.observed(
        ns,
        c,
        lambda: Result(
            phase="Degraded",
            decision="Failover",
            steps=[Step("shop-1", "promote", ok=False)],
            cause="PrimaryUnreachable",
        ),
    )
    metrics.observed(ns, c, lambda: Result(phase="Ready", decision="Healthy"))

    def changes(kind, forced, reason):
        return sample(
            "mysql_operator_primary_changes_total",
            namespace=ns,
            cluster=c,
            kind=kind,
            forced=forced,
            reason=reason,
        )

    assert [
        changes("Failover", "false", "PrimaryUnreachable"),
        changes("Failover", "true", "PrimaryUnreachable"),
        changes("Failover", "false", "PrimaryRestarted"),
        changes("Failover", "false", "PrimaryNotWritable"),
        changes("Switchover", "false", "PrimaryRemoved"),
        changes("Switchover", "false", "Requested"),
    ] == [1, 1, 1, 0, 1, 0]
    assert sample("mysql_operator_last_failover_duration_seconds", namespace=ns, cluster=c) == 4.5


def test_reconcile_errors_are_counted_by_cause():
    with pytest.raises(TimeoutError):
        metrics.observed("m6", "shop", lambda: (_ for _ in ()).throw(TimeoutError("slow")))
    assert (
        sample("mysql_operator_reconcile_errors_total", namespace="m6", cluster="shop", cause="TimeoutError")
        == 1
    )


def test_conditions_last_backup_size_and_duration_and_finished_backups():
    ns, c = "m7", "shop"
    status = {
        "currentPrimary": "shop-0",
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Available", "status": "True"},
            {"type": "Degraded", "status": "True"},
        ],
        "lastBackup": {
            "startedAt": "2026-11-26T01:00:00Z",
            "completedAt": "2026-11-26T01:02:05Z",
            "sizeBytes": 123456,
        },
        "lastScheduledBackup": {"name": "shop-202611260100", "scheduledAt": "2026-11-26T01:00:00Z"},
    }
    metrics.observed(ns, c, lambda: Result(phase="Degraded", status=status))
    assert sample("mysql_operator_last_scheduled_backup_timestamp_seconds", namespace=ns, cluster=c) == (
        dt.datetime(2026, 11, 26, 1, tzinfo=dt.timezone.utc).timestamp()
    )
    assert sample("mysql_operator_cluster_condition", namespace=ns, cluster=c, type="Ready") == 0
    assert sample("mysql_operator_cluster_condition", namespace=ns, cluster=c, type="Available") == 1
    assert sample("mysql_operator_cluster_condition", namespace=ns, cluster=c, type="Degraded") == 1
    assert sample("mysql_operator_last_backup_duration_seconds", namespace=ns, cluster=c) == 125
    assert sample("mysql_operator_last_backup_size_bytes", namespace=ns, cluster=c) == 123456

    # a status without them (an older backup record has no startedAt): the series go
    later = {"conditions": [{"type": "Available", "status": "False"}], "lastBackup": {"completedAt": "x"}}
    metrics.observed(ns, c, lambda: Result(phase="FailingOver", status=later))
    assert sample("mysql_operator_cluster_condition", namespace=ns, cluster=c, type="Available") == 0
    assert sample("mysql_operator_cluster_condition", namespace=ns, cluster=c, type="Ready") is None
    assert sample("mysql_operator_last_backup_duration_seconds", namespace=ns, cluster=c) is None
    assert sample("mysql_operator_last_backup_size_bytes", namespace=ns, cluster=c) is None
    assert sample("mysql_operator_last_backup_timestamp_seconds", namespace=ns, cluster=c) is None

    before = sample("mysql_operator_backups_total", namespace=ns, cluster=c, outcome="Failed") or 0
    metrics.backup_finished(ns, c, "Failed")
    metrics.backup_finished(ns, c, "Succeeded")
    assert sample("mysql_operator_backups_total", namespace=ns, cluster=c, outcome="Failed") == before + 1
    assert sample("mysql_operator_backups_total", namespace=ns, cluster=c, outcome="Succeeded") == 1


def test_counters_exist_at_zero_from_a_clusters_first_pass():
    ns, c = "m8", "fresh"
    metrics.observed(ns, c, lambda: Result(phase="Bootstrapping", status={}))
    for kind, reason in (("Failover", "PrimaryUnreachable"), ("Switchover", "Requested")):
        assert (
            sample(
                "mysql_operator_primary_changes_total",
                namespace=ns,
                cluster=c,
                kind=kind,
                forced="false",
                reason=reason,
            )
            == 0
        )
    assert sample("mysql_operator_backups_total", namespace=ns, cluster=c, outcome="Succeeded") == 0
    assert sample("mysql_operator_backups_total", namespace=ns, cluster=c, outcome="Failed") == 0


def test_the_last_drills_outcome_and_measures_and_they_go_while_another_runs():
    ns, c = "m9", "shop"
    passed = {
        "phase": "Succeeded",
        "completedAt": "2026-12-06T04:01:30Z",
        "lastSucceededAt": "2026-12-06T04:01:30Z",
        "rtoSeconds": 90.0,
        "rpoSeconds": 0.0,
        "missingTransactions": 0,
        "bytesPerSecond": 10_000_000,
    }
    metrics.observed(ns, c, lambda: Result(phase="Ready", status={"drill": passed}))
    assert sample("mysql_operator_drill_succeeded", namespace=ns, cluster=c) == 1
    assert sample("mysql_operator_drill_rto_seconds", namespace=ns, cluster=c) == 90
    assert sample("mysql_operator_drill_rpo_seconds", namespace=ns, cluster=c) == 0
    assert sample("mysql_operator_drill_restore_bytes_per_second", namespace=ns, cluster=c) == 10_000_000
    assert sample("mysql_operator_drill_last_success_timestamp_seconds", namespace=ns, cluster=c) == (
        dt.datetime(2026, 12, 6, 4, 1, 30, tzinfo=dt.timezone.utc).timestamp()
    )
    running = {"phase": "Running", "lastSucceededAt": "2026-12-06T04:01:30Z"}
    metrics.observed(ns, c, lambda: Result(phase="Ready", status={"drill": running}))
    assert sample("mysql_operator_drill_succeeded", namespace=ns, cluster=c) == 1  # the one before
    assert sample("mysql_operator_drill_rto_seconds", namespace=ns, cluster=c) is None
    failed = {**running, "phase": "Failed", "message": "the restore failed"}
    metrics.observed(ns, c, lambda: Result(phase="Ready", status={"drill": failed}))
    assert sample("mysql_operator_drill_succeeded", namespace=ns, cluster=c) == 0
    assert sample("mysql_operator_drill_last_success_timestamp_seconds", namespace=ns, cluster=c) is not None
