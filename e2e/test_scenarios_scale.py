"""Scenario 4 with the operator installed by its chart (a Pod): scale 3 -> 5 -> 3 (no running
server restarts; new replicas join with the data; removed ones leave; the primary is never
removed: it is switched away first), and a spec edit that changes the Pods rolls the replicas
first and the primary last, through a switchover. Both per flavor (MySQL 9.7, MariaDB 10.11; the
test id names it)."""

from __future__ import annotations

import threading
import time

import pytest

from e2e.helpers import (
    FLAVORS,
    Cluster,
    writer_to,
    cluster_spec,
    create_writes_table,
    lost_rows,
    query,
    replica_state,
    try_query,
)
from tests.support.wait import wait_for

# both move the primary: by spec.primary and away from a removed instance; before a roll restarts it
pytestmark = [pytest.mark.cluster, pytest.mark.causes("Switchover")]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_scale_3_to_5_to_3_keeps_data_and_never_removes_the_primary(
    local_cluster, scenario_namespace, flavor
):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "sc")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary="sc-0")
    rw, pw = create_writes_table(c)
    query(rw, "app", pw, "INSERT INTO app.writes (id) VALUES " + ",".join(f"({-i})" for i in range(1, 101)))

    # 3 -> 5: the new replicas join and have every row; the first three keep running (MySQL: 5
    # instances wait for 2 acknowledgements, set on the primary at runtime, not in my.cnf)
    running = {p.metadata.name: p.metadata.uid for p in c.pods()}
    c.patch_spec({"instances": 5})
    st = c.wait_ready(300, "5 instances Ready", instances=5, primary="sc-0")
    assert sorted(i["role"] for i in st["instances"]) == ["primary"] + ["replica"] * 4
    assert {
        n: u for n, u in ((p.metadata.name, p.metadata.uid) for p in c.pods()) if n in running
    } == running, "scaling restarted a running server"
    if flavor == "mysql":
        wait_for(
            lambda: query(rw, "app", pw, "SELECT @@rpl_semi_sync_source_wait_for_replica_count")[0][0] == 2,
            60,
            "the primary's commits wait for 2 acknowledgements",
        )
    for n in (3, 4):
        ip = c.pod(n).status.pod_ip
        wait_for(
            lambda: replica_state(ip, "app", pw) == (f"sc-{n}", 1, 100),
            60,
            f"sc-{n} read-only with the 100 rows",
        )

    # the primary moves to the highest ordinal, then the cluster shrinks back to 3 without it
    c.patch_spec({"primary": 4})
    c.wait_ready(120, "switchover to sc-4", instances=5, primary="sc-4")
    writer = writer_to(rw, "app", pw)
    writer.start()
    seen: list[tuple[str | None, frozenset]] = []
    try:
        wait_for(lambda: len(writer.acked) >= 20, 60, "writes through -rw on sc-4")
        c.patch_spec({"instances": 3, "primary": None})

        def shrunk():
            s = c.status()
            pods = frozenset(p.metadata.name for p in c.pods() if not p.metadata.deletion_timestamp)
            seen.append((s.get("currentPrimary"), pods))
            # status lists a removed instance until its Pod is gone (terminating counts)
            return (
                pods == {"sc-0", "sc-1", "sc-2"}
                and s.get("phase") == "Ready"
                and s.get("readyInstances") == 3
                and [i["name"] for i in s.get("instances", [])] == ["sc-0", "sc-1", "sc-2"]
                and s
            )

        st = wait_for(shrunk, 300, "back to 3 Pods, Ready, the primary among them", describe=c.describe)
        at_end = len(writer.acked)
        wait_for(lambda: len(writer.acked) > at_end + 10, 60, "writes accepted after the scale down")
    finally:
        writer.stop()
    removed_while_primary = [(p, pods) for p, pods in seen if p is not None and p not in pods]
    assert not removed_while_primary, (
        f"the primary's Pod went away while it was primary: {removed_while_primary[:3]}"
    )
    assert st["currentPrimary"] in ("sc-0", "sc-1", "sc-2")
    assert [i["name"] for i in st["instances"]] == ["sc-0", "sc-1", "sc-2"]
    lost = lost_rows(rw, pw, writer)
    assert not lost, f"acknowledged writes lost during the scale down: {lost[:20]}"
    assert c.events("Switchover"), "the primary left sc-4 through a switchover"
    # the data volumes of the removed instances stay (whenScaled: Retain, the documented default)
    pvcs = {p.metadata.name for p in c.core.list_namespaced_persistent_volume_claim(c.namespace).items}
    assert {"data-sc-3", "data-sc-4"} <= pvcs, pvcs


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_spec_edit_rolls_replicas_first_and_the_primary_last_through_a_switchover(
    local_cluster, scenario_namespace, flavor
):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "roll")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary="roll-0")
    c.patch_spec({"primary": 1})  # a primary in the middle: ordinal order alone cannot put it last
    c.wait_ready(120, "switchover to roll-1", instances=3, primary="roll-1")
    rw, pw = create_writes_table(c)
    before = {p.metadata.name: p.metadata.uid for p in c.pods()}
    failovers_before = len(c.events("Failover"))

    restarted: dict[str, tuple[float, str | None]] = {}  # pod -> (when it went down, primary then)
    stop = threading.Event()

    def watch():
        primary = "roll-1"
        while not stop.is_set():
            try:
                primary = c.status().get("currentPrimary") or primary
                pods = {p.metadata.name: p for p in c.pods()}
            except Exception:  # noqa: BLE001 - the API is polled again
                stop.wait(0.3)
                continue
            for name, uid in before.items():
                p = pods.get(name)
                gone = p is None or p.metadata.uid != uid or p.metadata.deletion_timestamp
                if gone and name not in restarted:
                    restarted[name] = (time.monotonic(), primary)
            stop.wait(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        c.patch_spec({"config": {"myCnf": "max_connections = 211\n"}})
        wait_for(lambda: len(restarted) == 3, 300, "every Pod restarted by the roll")
        c.wait_ready(300, "Ready after the roll", instances=3)
    finally:
        stop.set()
        watcher.join(5)
    for n in range(3):
        ip = c.pod(n).status.pod_ip
        assert (
            wait_for(lambda: try_query(ip, "app", pw, "SELECT @@max_connections"), 60, f"roll-{n} answering")[
                0
            ][0]
            == 211
        )
    order = sorted(restarted, key=lambda n: restarted[n][0])
    assert order[-1] == "roll-1", f"the primary's Pod was not restarted last: {order}"
    when, primary_then = restarted["roll-1"]
    assert primary_then != "roll-1", "roll-1 was still the primary when its Pod was restarted"
    assert len(c.events("Failover")) == failovers_before, "the roll caused a failover"
