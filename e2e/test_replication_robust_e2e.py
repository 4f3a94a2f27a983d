"""Replication robustness on the local cluster, with the operator from this checkout (the
`host_operator` fixture of e2e/conftest.py): the Ready condition is honest (-rw accepts a
connection the moment it is True), and a steady cluster under write load is never repointed."""

from __future__ import annotations

import base64

import pymysql
import pytest
from kubernetes import client

from e2e.helpers import IMAGE, PULL, connect, writer_to
from e2e.host_cluster import NAME, PLURAL
from mysql_operator import manifests as m
from mysql_operator.api import GROUP, VERSION
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def _ready_condition(objs, ns) -> bool:
    st = objs.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME).get("status") or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])


def test_ready_means_rw_accepts_and_no_repoint_churn_under_writes(host_operator):
    ns, api, log_path, proc = host_operator
    objs, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    spec = {
        "flavor": "mariadb",
        "image": IMAGE,
        **PULL,
        "instances": 3,
        "database": {"name": "app", "user": "app"},
        "storage": {"size": "256Mi", "storageClassName": "standard"},
    }
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
    # what `kubectl wait --for=condition=Ready` does: poll the condition
    wait_for(lambda: _ready_condition(objs, ns), 420, "condition Ready=True", interval=0.2)
    pw = base64.b64decode(
        core.read_namespaced_secret(f"{NAME}-credentials", ns).data[m.APP_PASSWORD_KEY]
    ).decode()
    rw = core.read_namespaced_service(f"{NAME}-rw", ns).spec.cluster_ip
    # Ready is honest: the first connection through -rw is accepted, no retry
    try:
        conn = connect(rw, "app", pw, "app")
    except pymysql.MySQLError as e:
        pytest.fail(f"Ready=True but -rw refused the first connection: {e}")
    with conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE app.writes (id INT PRIMARY KEY)")
        cur.execute("SELECT @@read_only")
        assert cur.fetchone()[0] == 0

    # steady state under writes: no replica is repointed (no "Replicate" after bootstrap)
    def replicate_lines() -> int:
        return log_path.read_text(errors="replace").count(" Replicate: ")

    before = replicate_lines()
    secret = core.read_namespaced_secret(f"{NAME}-credentials", ns).data
    op_pw = base64.b64decode(secret[m.OPERATOR_PASSWORD_KEY]).decode()
    replica_ip = core.read_namespaced_pod(f"{NAME}-1", ns).status.pod_ip
    primary = objs.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)["status"]["currentPrimary"]
    primary_ip = core.read_namespaced_pod(primary, ns).status.pod_ip
    w = writer_to(rw, "app", pw)
    w.start()
    try:
        for k in range(1, 6):
            # what a network blip does: the primary drops the replica's binlog stream, so the
            # replica's IO thread reconnects by itself (error, then "Connecting") while rows arrive.
            # (A STOP/START of the IO thread is not this: replication stopped is repaired, rightly.)
            with connect(primary_ip, m.OPERATOR_USER, op_pw) as c2, c2.cursor() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE command LIKE 'Binlog Dump%%' AND host LIKE %s",
                    (f"{replica_ip}:%",),
                )
                streams = [row[0] for row in cur.fetchall()]
                assert streams, f"no binlog stream from {primary} to {NAME}-1"
                for sid in streams:
                    cur.execute("KILL %s", (sid,))
            wait_for(lambda k=k: len(w.acked) >= 1000 * k, 120, f"{1000 * k} writes acknowledged")
    finally:
        w.stop()
    assert replicate_lines() == before, log_path.read_text(errors="replace")[-4000:]
    assert w.failures == 0
    assert "Traceback" not in log_path.read_text(errors="replace"), "the operator raised"
    print(f"\n{len(w.acked)} writes under steady state; Replicate events: {before} (bootstrap only)")
