"""Two operator replicas (the chart's Deployment scaled to 2, leader election on its Lease): the
primary's container is killed under write load, and once the operator has noticed, the active
operator's Pod is force-deleted. The standby takes the Lease over, finishes the failover, no
acknowledged row is lost, and the takeover time is recorded."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE
from e2e.failover import failover_under_load
from e2e.helpers import Cluster, ready_pods, record, signal_server
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator

LEASE = "mysql-operator"  # the chart's full name for release mysql-operator


@pytest.mark.causes("Failover", "Reseed")  # the primary SIGKILLed under writes
def test_the_active_operator_killed_in_the_middle_of_a_failover_is_replaced_by_the_standby(
    local_cluster, scenario_namespace
):
    api = local_cluster.api_client()
    core, apps, coord = client.CoreV1Api(api), client.AppsV1Api(api), client.CoordinationV1Api(api)
    dep = apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items[0]
    apps.patch_namespaced_deployment_scale(dep.metadata.name, OPERATOR_NAMESPACE, {"spec": {"replicas": 2}})
    c = Cluster(api, scenario_namespace, "ha")
    takeover: list[float] = []
    try:
        wait_for(lambda: len(ready_pods(core, OPERATOR_NAMESPACE)) == 2, 180, "two operator Pods running")
        leader = wait_for(
            lambda: coord.read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec.holder_identity,
            60,
            "a Lease holder",
        )
        assert leader in ready_pods(core, OPERATOR_NAMESPACE)

        def kill_primary_then_the_active_operator(name: str) -> float:
            signal_server(local_cluster, c, name, "SIGKILL")
            t = time.monotonic()
            wait_for(lambda: c.status().get("phase") != "Ready", 60, "the operator noticed the outage")
            holder = coord.read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec.holder_identity
            core.delete_namespaced_pod(holder, OPERATOR_NAMESPACE, grace_period_seconds=0)
            deleted = time.monotonic()

            def taken_over() -> bool:
                now = coord.read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec.holder_identity
                return bool(now) and now != holder

            wait_for(taken_over, 120, "the standby holds the Lease", interval=0.2)
            takeover.append(time.monotonic() - deleted)
            return t

        failover_under_load(
            c,
            kill_primary_then_the_active_operator,
            "primary container SIGKILLed, then the active operator Pod of 2 force-deleted",
            flavor="mysql",
        )
    finally:
        apps.patch_namespaced_deployment_scale(
            dep.metadata.name, OPERATOR_NAMESPACE, {"spec": {"replicas": 1}}
        )
        wait_for(lambda: len(ready_pods(core, OPERATOR_NAMESPACE)) == 1, 180, "back to one operator Pod")
    assert takeover, "the active operator was deleted"
    record("operator takeover (active Pod force-deleted to the standby holding the Lease)", takeover[0])
