"""The whole product on the local one-node cluster: the operator runs on the host (as a process,
authenticated as a ServiceAccount with the declared RBAC) and drives real MariaDB Pods.

A 3-instance cluster becomes Ready; writes go through the -rw Service and reads through the -ro
Service from the host (kube-proxy makes ClusterIPs reachable); deleting the primary Pod fails over
with no acknowledged write lost; editing spec.primary (via `mysql-operator switchover`) switches over.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path

import pymysql
import pytest
from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator.api import GROUP, VERSION
from e2e.helpers import IMAGE, PULL, writer_to
from e2e.host_cluster import NAME, PLURAL
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[1]


def _status(api, ns) -> dict:
    return (
        client.CustomObjectsApi(api)
        .get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)
        .get("status")
        or {}
    )


def _connect(host, user, password, database=None, timeout=2):
    return pymysql.connect(
        host=host,
        port=3306,
        user=user,
        password=password,
        database=database,
        connect_timeout=timeout,
        read_timeout=5,
        write_timeout=5,
        autocommit=True,
    )


def _query(host, user, password, sql, database=None):
    conn = _connect(host, user, password, database)
    with conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


@pytest.mark.causes("Failover", "Reseed", "Switchover")  # primary Pod deleted under writes; CLI switchover
def test_operator_runs_a_replicated_mariadb_cluster(host_operator, local_cluster):
    ns, api, log_path, proc = host_operator
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {
        "flavor": "mariadb",
        "image": IMAGE,
        **PULL,
        "instances": 3,
        "database": {"name": "app", "user": "app"},
        "storage": {"size": "256Mi", "storageClassName": "standard"},
        "replication": {"failover": {"delaySeconds": 2}},
    }
    t0 = time.monotonic()
    objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLCluster",
            "metadata": {"name": NAME},
            "spec": spec,
        },
    )
    st = wait_for(lambda: (s := _status(api, ns)).get("phase") == "Ready" and s, 420, "phase Ready")
    print(
        f"\n3-instance cluster Ready {time.monotonic() - t0:.1f}s after creation; primary {st['currentPrimary']}"
    )
    # (usually shop-0; with the 2 s failover delay set here a loaded node may already have failed
    # over once: whichever it is, exactly one primary and it is the recorded one)
    primary = st["currentPrimary"]
    assert st["readyInstances"] == 3
    assert {i["name"]: i["role"] for i in st["instances"]} == {
        f"{NAME}-{n}": "primary" if f"{NAME}-{n}" == primary else "replica" for n in (0, 1, 2)
    }

    secret = core.read_namespaced_secret(f"{NAME}-credentials", ns).data
    app_pw = base64.b64decode(secret[m.APP_PASSWORD_KEY]).decode()
    rw = core.read_namespaced_service(f"{NAME}-rw", ns).spec.cluster_ip
    ro = core.read_namespaced_service(f"{NAME}-ro", ns).spec.cluster_ip

    # writes via -rw, reads via -ro (a read-only replica), from the host
    # the Service's endpoints follow the role label through the endpoint controller and kube-proxy
    wait_for(lambda: _query(rw, "app", app_pw, "SELECT 1"), 60, "-rw answering")
    _query(rw, "app", app_pw, "CREATE TABLE app.writes (id INT PRIMARY KEY)")
    _query(rw, "app", app_pw, "INSERT INTO app.writes VALUES (0)")
    assert _query(rw, "app", app_pw, "SELECT @@hostname, @@global.read_only")[0] == (primary, 0)
    seen = []

    def replica_read():
        conn = _connect(ro, "app", app_pw)  # one connection (one server), two statements:
        with conn, conn.cursor() as cur:  # MariaDB 10.11 answers @@read_only=0 next to COUNT(*)
            cur.execute("SELECT @@hostname, @@global.read_only")
            host, read_only = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM app.writes")
            row = (host, read_only, cur.fetchone()[0])
        seen.append((round(time.monotonic() - t0, 2), *row))
        return row[2] == 1 and row[1] == 1 and row

    try:
        host, read_only, count = wait_for(replica_read, 60, "the row readable through -ro")
    finally:
        print(f"-ro reads (seconds since creation, host, read_only, rows): {seen[:5]} ... {seen[-3:]}")
    writable_replica_reads = [s for s in seen if s[2] != 1]
    print(f"-ro reads until the row arrived: {seen}")
    assert host != primary
    assert not writable_replica_reads, f"-ro answered from a writable server: {writable_replica_reads}"
    with pytest.raises(pymysql.MySQLError):
        _query(ro, "app", app_pw, "INSERT INTO app.writes VALUES (-1)")

    # failover: delete the primary Pod under write load
    writer = writer_to(rw, "app", app_pw)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 50, 60, "50 acknowledged writes before the failure")
    old = st["currentPrimary"]
    t1 = time.monotonic()
    core.delete_namespaced_pod(old, ns, grace_period_seconds=0)
    st = wait_for(
        lambda: (s := _status(api, ns)).get("currentPrimary") not in (None, old) and s,
        120,
        "a new primary recorded",
    )
    acked_at_failure = len(writer.acked)
    wait_for(lambda: len(writer.acked) > acked_at_failure + 20, 120, "writes accepted by the new primary")
    print(
        f"failover: {old} -> {st['currentPrimary']}, writes accepted again "
        f"{time.monotonic() - t1:.1f}s after the delete"
    )
    writer.stop(10)
    new = st["currentPrimary"]
    rows = {r[0] for r in _query(rw, "app", app_pw, "SELECT id FROM app.writes")}
    lost = [n for n in writer.ids if n not in rows]
    print(f"{len(writer.acked)} writes acknowledged, {writer.failures} failed attempts, {len(lost)} lost")
    assert not lost, f"acknowledged writes lost: {lost[:20]}"
    assert _query(rw, "app", app_pw, "SELECT @@hostname")[0][0] == new

    # the old primary comes back as a read-only replica; the cluster is Ready again
    st = wait_for(lambda: (s := _status(api, ns)).get("phase") == "Ready" and s, 300, "Ready after failover")
    roles = {i["name"]: i["role"] for i in st["instances"]}
    assert roles[old] == "replica" and roles[new] == "primary"
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={NAME}").items
    assert any(e.reason == "Failover" for e in events)

    # switchover by editing spec.primary (through the CLI)
    target = next(n for n in (0, 1, 2) if f"{NAME}-{n}" != new)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysql_operator.cli",
            "switchover",
            NAME,
            "--to",
            str(target),
            "-n",
            ns,
            "--kubeconfig",
            local_cluster.kubeconfig,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr
    t2 = time.monotonic()

    def switched():
        s = _status(api, ns)
        roles = {i["name"]: i["role"] for i in s.get("instances") or []}
        want = {f"{NAME}-{n}": "primary" if n == target else "replica" for n in (0, 1, 2)}
        return (
            s.get("phase") == "Ready"
            and s.get("currentPrimary") == f"{NAME}-{target}"
            and roles == want
            and s
        )

    st = wait_for(switched, 120, "switchover done, roles moved and Ready")
    print(f"switchover {new} -> {NAME}-{target} done (Ready) in {time.monotonic() - t2:.1f}s")
    host = wait_for(
        lambda: _query(rw, "app", app_pw, "SELECT @@hostname")[0][0] == f"{NAME}-{target}",
        30,
        "-rw routes to the new primary",
    )
    assert host
    assert _query(rw, "app", app_pw, "SELECT COUNT(*) FROM app.writes")[0][0] >= len(writer.acked)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysql_operator.cli",
            "status",
            NAME,
            "-n",
            ns,
            "--kubeconfig",
            local_cluster.kubeconfig,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    print(out.stdout)
    assert f"phase Ready, primary {NAME}-{target}" in out.stdout

    log = log_path.read_text(errors="replace")
    assert "orbidden" not in log
    for pw in (base64.b64decode(v).decode() for v in secret.values()):
        assert pw not in log
