"""Password rotation with the operator installed by its chart: each password of the generated
credentials Secret (app, replication, operator, root) is changed in the Secret under write load.
The operator applies it (ALTER USER through the primary, replicas repointed for the replication
account) with no failed write and no failover; the old password is refused afterwards and the new
one accepted, root's included (on MySQL the operator's account holds SYSTEM_USER for it)."""

from __future__ import annotations

import time
import uuid

import pymysql
import pytest
from kubernetes import client

from e2e.helpers import (
    FLAVORS,
    Cluster,
    cluster_spec,
    connect,
    create_writes_table,
    kubectl,
    lost_rows,
    query,
    record,
)
from mysql_operator import manifests as m
from tests.support.wait import wait_for
from tests.support.writer import Writer, failures_said

pytestmark = pytest.mark.cluster

KEYS = (m.APP_PASSWORD_KEY, m.REPLICATION_PASSWORD_KEY, m.OPERATOR_PASSWORD_KEY, m.ROOT_PASSWORD_KEY)
SOCKET = "/run/mysql-operator/mysqld.sock"


def _logs_in(host: str, user: str, password: str) -> bool:
    try:
        connect(host, user, password, timeout=3).close()
        return True
    except pymysql.MySQLError:
        return False


def _root_logs_in(local_cluster, c: Cluster, pod: str, password: str, flavor: str) -> bool:
    """root is local-only: the server's own client in its container, the password on stdin."""
    tool = "mysql" if flavor == "mysql" else "mariadb"
    script = f'read -r p; MYSQL_PWD="$p" {tool} --socket={SOCKET} -uroot -N -e "SELECT 1"'
    r = kubectl(
        local_cluster.kubeconfig,
        "-n",
        c.namespace,
        "exec",
        "-i",
        pod,
        "-c",
        "mysqld",
        "--",
        "bash",
        "-c",
        script,
        input=password + "\n",
    )
    return r.returncode == 0 and r.stdout.strip() == "1"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_each_password_rotated_under_writes_without_a_failed_write_or_a_failover(
    local_cluster, scenario_namespace, flavor
):
    api = local_cluster.api_client()
    core = client.CoreV1Api(api)
    c = Cluster(api, scenario_namespace, "rot").create(cluster_spec(3, flavor))
    primary = c.wait_ready(300, instances=3)["currentPrimary"]
    rw, app_password = create_writes_table(c)
    current = {"app": app_password}
    # a refused password fails at once; 5 s, not 1: a commit that waits for its semi-sync
    # acknowledgement on a machine saturated by other tests is not a failure of the rotation
    writer = Writer(
        lambda _: connect(rw, "app", current["app"], "app", timeout=5),
        "INSERT INTO app.writes (id) VALUES (%s)",
        pause=0.05,
    )
    writer.start()
    primary_ip = c.pod(primary).status.pod_ip
    secret = f"{c.name}-credentials"
    try:
        for key in KEYS:
            old, new = c.password(key), f"rot-{uuid.uuid4().hex[:24]}"
            started = time.monotonic()
            core.patch_namespaced_secret(secret, c.namespace, {"stringData": {key: new}})
            version = core.read_namespaced_secret(secret, c.namespace).metadata.resource_version
            wait_for(
                lambda version=version: c.status().get("appliedCredentialsVersion") == version,
                120,
                f"{key} applied (status.appliedCredentialsVersion {version})",
                describe=c.describe,
            )
            record(f"rotation of {key} (Secret changed to applied, {flavor})", time.monotonic() - started)
            if key == m.APP_PASSWORD_KEY:
                current["app"] = new
                assert _logs_in(rw, "app", new) and not _logs_in(rw, "app", old)
            elif key == m.OPERATOR_PASSWORD_KEY:
                assert _logs_in(primary_ip, m.OPERATOR_USER, new)
                assert not _logs_in(primary_ip, m.OPERATOR_USER, old)
            elif key == m.REPLICATION_PASSWORD_KEY:
                assert _logs_in(primary_ip, m.REPLICATION_USER, new)
                assert not _logs_in(primary_ip, m.REPLICATION_USER, old)
            else:
                assert _root_logs_in(local_cluster, c, primary, new, flavor)
                assert not _root_logs_in(local_cluster, c, primary, old, flavor)
            acked = len(writer.acked)
            wait_for(lambda acked=acked: len(writer.acked) > acked + 20, 60, f"writes go on after {key}")
    finally:
        writer.stop()
    assert not writer.failure_times, f"{len(writer.failure_times)} failed writes:\n{failures_said(writer)}"
    assert c.status()["currentPrimary"] == primary and not c.events("Failover"), "no failover"
    assert not lost_rows(rw, current["app"], writer)
    # the replicas still replicate (over a connection made with the new replication password)
    total = query(rw, "app", current["app"], "SELECT COUNT(*) FROM app.writes")[0][0]
    for pod in c.pods():
        if pod.metadata.name == primary:
            continue
        ip = pod.status.pod_ip
        wait_for(
            lambda ip=ip: query(ip, "app", current["app"], "SELECT COUNT(*) FROM app.writes")[0][0] >= total,
            60,
            f"{pod.metadata.name} has every row",
        )
    c.wait_ready(120, "Ready after the rotations", instances=3, primary=primary)
    record(f"rotations under writes ({flavor}): failed writes, failovers", 0, unit="count")
