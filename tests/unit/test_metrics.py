"""Operator metrics: what a Prometheus scrape shows after reconciles."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from mysql_operator import metrics
from mysql_operator.status import Result
from mysql_operator.replication import Step


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
