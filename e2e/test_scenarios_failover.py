"""Scenarios 2 and 6 with the operator installed by its chart (a Pod): the primary fails under a
write load with acknowledged-row accounting (its Pod force-deleted; separately its container
killed through containerd; and once with the operator's own Pod deleted in the middle of the
failover). A new primary serves writes, no acknowledged row is lost, the old primary rejoins as a
read-only replica with every row. The Pod-delete and kill scenarios run per flavor (MySQL 9.7,
MariaDB 10.11; the test id names it).

MySQL truncates nothing when a crashed primary restarts: a commit that was waiting for its
semi-sync acknowledgement (never acknowledged to its client) stays in that server's binary log, so
the old primary may come back holding a transaction of its own the new primary lacks. The operator
then records that transaction (a ConfigMap and a Reseed Event name its GTID) and re-seeds the old
primary with a CLONE of a healthy replica (errantPolicy Reseed, the default with semi-sync): it
rejoins as a replica without it. Those runs also check the record when it happened."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from kubernetes import client

from mysql_operator.topology import FAILOVER_CAUSES
from e2e.conftest import OPERATOR_NAMESPACE
from e2e.failover import failover_under_load
from e2e.helpers import (
    FLAVORS,
    Cluster,
    writer_to,
    cluster_spec,
    create_writes_table,
    lost_rows,
    operator_metrics,
    query,
    record,
    signal_server,
    signal_servers,
)
from tests.support.crds import cluster_crd_before_issue_45
from tests.support.wait import wait_for

# every test here takes the primary away (an old primary holding an unacknowledged commit of its own is
# re-seeded when it comes back)
pytestmark = [pytest.mark.cluster, pytest.mark.causes("Failover", "Reseed")]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_failover_when_the_primary_pod_is_force_deleted(local_cluster, scenario_namespace, flavor):
    """The StatefulSet recreates the Pod within seconds, on the same volume: its server restarted,
    so the operator promotes a replica holding everything it has and the new Pod rejoins."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "fo-pod")

    def delete_pod(name: str) -> None:
        c.core.delete_namespaced_pod(name, c.namespace, grace_period_seconds=0)

    old, new = failover_under_load(c, delete_pod, "primary Pod force-deleted", flavor=flavor)
    if new == old:
        return  # MySQL kept the restarted primary: no failover to count
    # the operator's metrics say what happened (scraped from the chart's metrics Service)
    labels = {("namespace", c.namespace), ("cluster", c.name)}

    def metric(name: str, **extra: str) -> float | None:
        return operator_metrics(c.api, OPERATOR_NAMESPACE).get((name, frozenset(labels | set(extra.items()))))

    wait_for(
        lambda: metric("mysql_operator_cluster_primary", instance=new) == 1,
        30,
        f"the primary metric on {new}",
    )
    assert metric("mysql_operator_cluster_primary", instance=old) is None
    # a deleted Pod is a primary unreachable for a while, or one restarted before it was missed
    failovers = {
        reason: metric("mysql_operator_primary_changes_total", kind="Failover", forced="false", reason=reason)
        for reason in FAILOVER_CAUSES
    }
    assert sum(v or 0 for v in failovers.values()) >= 1, failovers
    seconds = metric("mysql_operator_last_failover_duration_seconds")
    assert seconds is not None and 0 < seconds < 60, seconds
    record(f"last_failover_duration_seconds metric (primary Pod force-deleted, {flavor})", seconds)
    assert metric("mysql_operator_cluster_instances", role="primary") == 1


@pytest.mark.parametrize("flavor", FLAVORS)
def test_failover_when_the_primary_container_is_killed(local_cluster, scenario_namespace, flavor):
    """The kubelet restarts the killed container in place at once: the same as a crash."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "fo-kill")

    def container(name: str):
        return next(s for s in c.pod(name).status.container_statuses if s.name == "mysqld")

    def kill(name: str) -> None:
        signal_server(local_cluster, c, name, "SIGKILL")

    failover_under_load(c, kill, "primary container SIGKILLed", flavor=flavor)
    assert container(f"{c.name}-0").restart_count >= 1, "the same Pod was restarted in place (not recreated)"


@pytest.mark.exclusive  # deletes the chart's operator Pod
@pytest.mark.parametrize("flavor", FLAVORS)
def test_operator_pod_deleted_in_the_middle_of_a_failover(local_cluster, scenario_namespace, flavor):
    """The primary hangs (SIGSTOP: it stays down however long the failover takes); once the
    operator has noticed the outage its Pod is deleted; the replacement operator finishes the
    failover and restarts the hung server (its Pod deleted: it cannot be made read-only otherwise;
    the test kills it if it is still there): crash recovery drops the commit it was holding for a
    semi-sync acknowledgement (init_rpl_role=SLAVE), and it rejoins as a replica. (Resumed with SIGCONT
    instead, that unacknowledged commit completes and the server is held out as errant, which is
    the documented outcome, tested on real servers in tests/integration/test_replication.py.)"""
    api = local_cluster.api_client()
    c = Cluster(api, scenario_namespace, "fo-op")
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    deleted: list[str] = []

    def delete_operator() -> None:
        # the operator noticed the outage (status left Ready) and has not finished the failover
        wait_for(lambda: c.status().get("phase") != "Ready", 60, "the operator noticed the outage")
        for pod in core.list_namespaced_pod(OPERATOR_NAMESPACE).items:
            core.delete_namespaced_pod(pod.metadata.name, OPERATOR_NAMESPACE, grace_period_seconds=0)
            deleted.append(pod.metadata.name)

    def hang_primary_then_delete_operator(name: str) -> float:
        hung = signal_server(local_cluster, c, name, "SIGSTOP")
        t = time.monotonic()
        try:
            delete_operator()
            wait_for(
                lambda: c.status().get("currentPrimary") not in (None, name),
                240,
                "the new operator to fail over",
            )
        finally:
            signal_server(local_cluster, c, name, "SIGKILL", hung)  # unless the operator restarted it
        return t

    try:
        failover_under_load(
            c, hang_primary_then_delete_operator, "primary hung, then the operator Pod deleted", flavor=flavor
        )
    finally:

        def operator_back():
            pods = core.list_namespaced_pod(OPERATOR_NAMESPACE).items
            return [
                p
                for p in pods
                if p.metadata.name not in deleted
                and p.status.container_statuses
                and all(s.ready for s in p.status.container_statuses)
            ]

        wait_for(operator_back, 180, "a new operator Pod ready")
    assert deleted, "the operator Pod was deleted"
    dep = apps.list_namespaced_deployment(OPERATOR_NAMESPACE).items[0]
    assert dep.status.ready_replicas == 1


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_primary_and_a_replica_hung_together_hold_the_failover_until_it_is_forced(
    local_cluster, scenario_namespace, flavor
):
    """Semi-sync, 3 instances, one acknowledgement: the primary and one replica hang at once. The
    replica left cannot be shown to hold every acknowledged commit (the hung one may have
    acknowledged the last ones alone), so nothing is promoted: Degraded FailoverHeld saying why
    and how to force it, with a Warning Event. The force-failover annotation then promotes it;
    status.forcedFailover records who asked, a FailoverForced Event says so, the annotation goes."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "fo-held")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary="fo-held-0")
    hung = ["fo-held-1", "fo-held-0"]
    stopped_containers = signal_servers(local_cluster, c, hung, "SIGSTOP")
    try:
        stopped = time.monotonic()

        def held():
            d = next((x for x in c.status().get("conditions") or [] if x["type"] == "Degraded"), {})
            return d if (d.get("status"), d.get("reason")) == ("True", "FailoverHeld") else None

        degraded = wait_for(held, 60, "Degraded FailoverHeld", interval=0.5, describe=c.describe)
        record(f"primary and a replica hung to FailoverHeld in status ({flavor})", time.monotonic() - stopped)
        assert "only 1 of 2 replicas answer (fo-held-2)" in degraded["message"], degraded["message"]
        assert "mysql.operator.dev/force-failover" in degraded["message"]
        assert any(e.type == "Warning" for e in c.events("FailoverHeld"))
        assert c.status()["currentPrimary"] == "fo-held-0" and c.status()["phase"] == "Unavailable"
        assert c.roles().get("fo-held-2") != "primary"

        c.objs.patch_namespaced_custom_object(
            "mysql.operator.dev",
            "v1alpha1",
            c.namespace,
            "mysqlclusters",
            c.name,
            {"metadata": {"annotations": {"mysql.operator.dev/force-failover": "e2e: alice, ticket 42"}}},
        )
        forced = time.monotonic()
        st = wait_for(
            lambda: (s := c.status()).get("forcedFailover") and s,
            60,
            "status.forcedFailover",
            interval=0.5,
            describe=c.describe,
        )
        record(
            f"force-failover annotation to the forced promotion recorded ({flavor})",
            time.monotonic() - forced,
        )
        ff = st["forcedFailover"]
        assert (ff["from"], ff["to"], ff["requestedBy"]) == (
            "fo-held-0",
            "fo-held-2",
            "e2e: alice, ticket 42",
        )
        assert st["currentPrimary"] == "fo-held-2"
        assert any(e.type == "Warning" for e in c.events("FailoverForced"))
        wait_for(
            lambda: (
                "mysql.operator.dev/force-failover" not in (c.body()["metadata"].get("annotations") or {})
            ),
            30,
            "the annotation removed",
        )
        rw, pw = c.service_ip("rw"), c.password()
        wait_for(
            lambda: query(rw, "app", pw, "SELECT @@hostname")[0][0] == "fo-held-2", 60, "-rw on fo-held-2"
        )
    finally:
        signal_servers(local_cluster, c, hung, "SIGCONT", stopped_containers)


def _condition(status: dict, ctype: str) -> dict:
    return next((x for x in status.get("conditions") or [] if x["type"] == ctype), {})


@pytest.mark.parametrize("flavor", ["mysql"])
def test_a_refused_spec_edit_does_not_stop_a_failover(local_cluster, scenario_namespace, flavor):
    """Issue 45: an edit the operator refuses - a backup schedule at hour 25, admitted by the CRD
    before issue 45 (as objects stored then still hold) - patched onto a running cluster under
    writes, then its primary's container killed. The
    failover happens as usual on the last spec that parsed; the refusal is the SpecValid
    condition and a Warning Event naming spec.backup.schedule, never the phase; Available is never
    False for the primary-down alert's 30 s. Fixed, the edit is applied."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "fo-spec")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary=f"{c.name}-0")
    old = c.status()["currentPrimary"]
    rw, pw = create_writes_table(c)
    samples: list[tuple[float, str | None]] = []  # (when, Available's status)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            try:
                samples.append((time.monotonic(), _condition(c.status(), "Available").get("status")))
            except client.ApiException:
                continue

    writer = writer_to(rw, "app", pw)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, 60, "50 acknowledged writes")
        # stored before the CRD refused an hour 25 (issue 45): the parser always did
        with cluster_crd_before_issue_45(local_cluster.api_client(), scenario_namespace):
            c.patch_spec(
                {
                    "backup": {
                        "schedule": "0 25 * * *",
                        "storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}},
                    }
                }
            )
        wait_for(
            lambda: _condition(c.status(), "SpecValid").get("status") == "False",
            60,
            "SpecValid False",
            describe=c.describe,
        )
        threading.Thread(target=sample, daemon=True).start()
        t0, wall0 = time.monotonic(), time.time()
        signal_server(local_cluster, c, old, "SIGKILL")

        def failed_over(s: dict) -> bool:  # (MySQL may keep a restarted primary: primarySince moves)
            since = s.get("primarySince")
            moved = bool(since) and datetime.fromisoformat(since).timestamp() > wall0
            return s.get("currentPrimary") not in (None, old) or moved

        wait_for(lambda: failed_over(c.status()), 180, "a failover recorded", describe=c.describe)
        at = len(writer.acked)
        wait_for(
            lambda: len(writer.acked) > at + 20, 120, "writes accepted after the kill", describe=c.describe
        )
        to_write = writer.first_ack_after_outage(t0)
    finally:
        writer.stop()
        stop.set()
    assert to_write is not None, "writes never failed: the primary was not disrupted"
    record(
        f"failover (primary SIGKILLed after a refused spec edit, {flavor}) to first accepted write", to_write
    )
    lost = lost_rows(rw, pw, writer)
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
    st = c.status()
    assert st["phase"] not in ("Invalid", "Failed"), st["phase"]
    said = _condition(st, "SpecValid")
    assert said.get("status") == "False" and said["message"].startswith("spec.backup.schedule"), said
    assert any(
        e.type == "Warning" and "spec.backup.schedule" in (e.message or "") for e in c.events("InvalidSpec")
    ), [e.message for e in c.events()]
    longest, since = 0.0, None
    for at, available in samples:
        since = (since or at) if available != "True" else None
        longest = max(longest, at - since) if since is not None else longest
    record(f"Available not True after a refused edit and a primary kill ({flavor})", longest)
    assert samples and longest < 30, (longest, samples[-10:])
    c.patch_spec({"backup": None})  # the fix: the cluster takes the current generation again
    c.wait_ready(420, "Ready for the fixed spec", instances=3)
    assert _condition(c.status(), "SpecValid").get("status") == "True"
