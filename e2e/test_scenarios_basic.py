"""Scenarios 1 and 3 with the operator installed by its chart (a Pod), once per flavor (MySQL 9.7,
MariaDB 10.11; the test id names it): a 3-instance cluster becomes Ready, serves writes through -rw
and reads through -ro, `kubectl get` shows the right columns; a switchover by editing
spec.primary."""

from __future__ import annotations

import pymysql
import pytest

from e2e.evidence import label_patches
from e2e.helpers import (
    FLAVORS,
    MARIADB_11_8,
    Cluster,
    cluster_spec,
    create_writes_table,
    kubectl,
    query,
    record,
    replica_state,
    stopwatch,
    try_query,
)
from mysql_operator.manifests import ROLE_LABEL
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("flavor", FLAVORS)
def test_three_instances_ready_rw_ro_and_kubectl_columns(local_cluster, scenario_namespace, flavor):
    api = local_cluster.api_client()
    c = Cluster(api, scenario_namespace, "basic")
    elapsed = stopwatch()
    c.create(cluster_spec(3, flavor))
    st = c.wait_ready(300, instances=3)
    record(f"cluster creation to Ready (3 instances, {flavor})", elapsed(), scenario="1")
    assert st["currentPrimary"] == "basic-0"
    assert [i["role"] for i in st["instances"]] == ["primary", "replica", "replica"]

    rw, pw = create_writes_table(c)
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (1), (2), (3)")
    assert query(rw, "app", pw, "SELECT @@hostname, @@read_only")[0] == ("basic-0", 0)

    ro = c.service_ip("ro")

    host, read_only, count = wait_for(
        lambda: (r := replica_state(ro, "app", pw)) and r[2] == 3 and r, 60, "the 3 rows readable through -ro"
    )
    assert host in ("basic-1", "basic-2") and read_only == 1
    with pytest.raises(pymysql.MySQLError):
        query(ro, "app", pw, "INSERT INTO app.writes VALUES (4)")

    # what `kubectl get mysqlclusters` (and the short names) show
    for resource in ("mysqlclusters", "myc"):
        r = kubectl(local_cluster.kubeconfig, "get", resource, "-n", scenario_namespace)
        assert r.returncode == 0, r.stderr
        header, *rows = r.stdout.strip().splitlines()
        assert header.split() == ["NAME", "INSTANCES", "READY", "PRIMARY", "PHASE", "AGE"], r.stdout
        assert len(rows) == 1
        name, instances, ready, primary, ph, age = rows[0].split()
        assert (name, instances, ready, primary, ph) == ("basic", "3", "3", "basic-0", "Ready"), r.stdout
        assert age[-1] in "smhd" and age[:-1].replace("m", "").isdigit(), age
    print(r.stdout)


def test_mariadb_11_8_smoke(local_cluster, scenario_namespace):
    """MariaDB 11.8 (the newest LTS; Debian sid's packages, image mariadb:11.8): a
    2-instance cluster becomes Ready, replicates over TLS, serves -rw and -ro."""
    c = Cluster(local_cluster.api_client(), scenario_namespace, "m118")
    elapsed = stopwatch()
    c.create(cluster_spec(2, "mariadb", version="11.8", image=MARIADB_11_8))
    c.wait_ready(300, instances=2)
    record("cluster creation to Ready (2 instances, mariadb 11.8)", elapsed(), scenario="1")
    rw, pw = create_writes_table(c)
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (1), (2)")
    version, read_only = query(rw, "app", pw, "SELECT VERSION(), @@read_only")[0]
    assert version.startswith("11.8.") and read_only == 0, version
    replica = c.pod(1).status.pod_ip
    wait_for(
        lambda: replica_state(replica, "app", pw) == ("m118-1", 1, 2), 60, "m118-1 read-only with both rows"
    )
    assert c.roles() == {"m118-0": "primary", "m118-1": "replica"}


@pytest.mark.causes("Switchover")
@pytest.mark.parametrize("flavor", FLAVORS)
def test_switchover_by_editing_spec_primary(local_cluster, scenario_namespace, flavor):
    api = local_cluster.api_client()
    c = Cluster(api, scenario_namespace, "swo")
    c.create(cluster_spec(3, flavor))
    c.wait_ready(300, instances=3, primary="swo-0")
    rw, pw = create_writes_table(c)
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (1)")

    elapsed = stopwatch()
    c.patch_spec({"primary": 2})
    st = c.wait_ready(120, "switchover to swo-2 done", instances=3, primary="swo-2")
    wait_for(
        lambda: (r := try_query(rw, "app", pw, "SELECT @@hostname, @@read_only")) and r[0] == ("swo-2", 0),
        60,
        "-rw routes to swo-2, writable",
    )
    query(rw, "app", pw, "INSERT INTO app.writes VALUES (2)")
    record(
        f"switchover (spec.primary edit to Ready and -rw writable on the new primary, {flavor})",
        elapsed(),
        scenario="3",
    )
    assert c.roles() == {"swo-0": "replica", "swo-1": "replica", "swo-2": "primary"}, st
    assert [r[0] for r in query(rw, "app", pw, "SELECT id FROM app.writes ORDER BY id")] == [1, 2]
    # the old primary is a read-only replica that has the write made after the switchover
    old = c.pod(0).status.pod_ip
    wait_for(lambda: replica_state(old, "app", pw) == ("swo-0", 1, 2), 60, "swo-0 read-only with both rows")
    assert c.events("Switchover"), "a Switchover Event on the MySQLCluster"
    # once given the primary's role, swo-2 kept it: -rw never lost its endpoint after the
    # promotion (the pass's end took the label its promotion had given and gave it back)
    history = label_patches(local_cluster, scenario_namespace, ROLE_LABEL)
    given = next(k for k, (_, pod, role) in enumerate(history) if (pod, role) == ("swo-2", "primary"))
    after = [(when[11:23], role) for when, pod, role in history[given:] if pod == "swo-2"]
    assert all(role == "primary" for _, role in after), f"swo-2's role label patches: {after}"
