"""Restore into a new cluster and rolling updates, with the operator of this checkout running as
a host process (like e2e/test_operator_e2e.py), on the local cluster:

1. a populated 2-instance cluster is backed up (MySQLBackup -> Job -> the MinIO beside the
   cluster); a NEW 3-instance cluster created with spec.restore.fromBackup is Restoring (never
   Ready) until the restore succeeded, then Ready with CHECKSUM TABLE equal on every table, on
   the primary and on every replica;
2. editing spec.resources rolls the Pods one by one: the replicas restart before the primary's
   Pod, and the primary moves by switchover before its old Pod restarts.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from e2e.conftest import OPERATOR_NAMESPACE
from e2e.helpers import BACKUPS, GROUP, VERSION, Cluster, cluster_spec, query, try_query
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[1]


def alone(api) -> None:
    """This test's operator must be the only one serving the namespace: the chart's operator
    (paused by the fixture) comes back when another session helm-upgrades the release."""
    running = [
        p.metadata.name
        for p in client.CoreV1Api(api).list_namespaced_pod(OPERATOR_NAMESPACE).items
        if p.status.phase == "Running"
    ]
    if running:
        pytest.fail(
            f"the chart's operator ({', '.join(running)}) is running again (another session "
            "upgraded the release): two operators served this namespace; rerun alone"
        )


def failed_never_ready(api, c: Cluster, timeout: float) -> dict:
    """The status once the cluster's phase is Failed; it was never Ready on the way."""
    seen: list[str | None] = []

    def failed():
        alone(api)
        s = c.status()
        seen.append(s.get("phase"))
        return s.get("phase") == "Failed" and s

    s = wait_for(failed, timeout, f"phase Failed (seen {seen[-3:]})", interval=0.5)
    assert "Ready" not in seen
    return s


def restore_failed_event(c: Cluster) -> None:
    """The Warning Event is posted right after the status is written (seen in CI: the status
    already Failed, the Event a moment later): waited for, briefly."""
    wait_for(
        lambda: any(e.reason == "RestoreFailed" and e.type == "Warning" for e in c.events()),
        10,
        "a RestoreFailed Warning Event",
        interval=0.2,
    )


def checksums(host: str, password: str) -> dict[str, int]:
    tables = [
        r[0]
        for r in query(
            host,
            "app",
            password,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'app' AND table_type = 'BASE TABLE' ORDER BY 1",
        )
    ]
    assert tables, "no tables in app"
    return {
        n: v
        for n, v in query(host, "app", password, "CHECKSUM TABLE " + ", ".join(f"app.`{t}`" for t in tables))
    }


@pytest.mark.causes("Switchover")  # the roll moves the primary before restarting it
def test_restore_into_a_new_cluster_then_roll_replicas_first(host_operator, s3_beside_cluster):
    ns, api, _, _ = host_operator
    bucket = f"e2e-rr-{uuid.uuid4().hex[:8]}"
    s3_beside_cluster.create_bucket(bucket)
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )

    # -- a populated source cluster and its backup
    src = Cluster(api, ns, "src").create(
        cluster_spec(
            2,
            backup={
                "storage": {
                    "s3": {
                        "bucket": bucket,
                        "prefix": "bk",
                        "endpoint": s3_beside_cluster.endpoint,
                        "region": "us-east-1",
                        "forcePathStyle": True,
                        "credentialsSecret": {"name": "s3"},
                    }
                }
            },
        )
    )
    src.wait_ready(300, instances=2)
    rw, pw = src.service_ip("rw"), src.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "src -rw answering")
    query(
        rw,
        "app",
        pw,
        "CREATE TABLE app.customers (id INT PRIMARY KEY, name VARCHAR(64), balance DECIMAL(12,2))",
    )
    query(
        rw,
        "app",
        pw,
        "CREATE TABLE app.orders (id BIGINT PRIMARY KEY, customer INT, note TEXT, payload BLOB)",
    )
    query(rw, "app", pw, "CREATE TABLE app.empty_one (id INT PRIMARY KEY)")
    query(
        rw,
        "app",
        pw,
        "INSERT INTO app.customers SELECT seq, CONCAT('näme-', seq), seq * 1.25 FROM app.seq_1_to_2000",
    )
    query(
        rw,
        "app",
        pw,
        "INSERT INTO app.orders SELECT seq * 10, seq, REPEAT('x', seq % 500), UNHEX(MD5(seq)) "
        "FROM app.seq_1_to_2000",
    )
    want = checksums(rw, pw)
    src.objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        BACKUPS,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": "b1"},
            "spec": {"clusterRef": {"name": "src"}},
        },
    )

    def backup_phase():
        b = src.objs.get_namespaced_custom_object(GROUP, VERSION, ns, BACKUPS, "b1")
        return (b.get("status") or {}).get("phase") in ("Succeeded", "Failed") and b["status"]

    st = wait_for(backup_phase, 300, "backup b1 finished")
    assert st["phase"] == "Succeeded", st.get("message")

    # -- restore into a NEW cluster: never Ready before the restore succeeded
    # ... its tables checked against what the backup recorded of its dump (issue 49)
    dst = Cluster(api, ns, "dst").create(
        cluster_spec(3, restore={"fromBackup": {"name": "b1"}, "checkTables": True})
    )
    seen: list[tuple[str | None, str | None, str | None]] = []

    def restored_and_ready():
        alone(api)
        s = dst.status()
        ready = next((c for c in s.get("conditions") or [] if c["type"] == "Ready"), {})
        seen.append((s.get("phase"), ready.get("status"), (s.get("restore") or {}).get("phase")))
        return s.get("phase") == "Ready" and s.get("readyInstances") == 3 and s

    t0 = time.monotonic()
    final = wait_for(restored_and_ready, 600, f"dst restored and Ready (seen {seen[-3:]})", interval=0.5)
    to_ready = time.monotonic() - t0
    assert ("Restoring", "False", "Running") in seen, seen
    assert all(restore == "Succeeded" for phase, ready, restore in seen if ready == "True"), seen
    rec = final["restore"]
    assert rec["phase"] == "Succeeded" and rec["source"] == "mysqlbackup/b1" and rec["completedAt"]
    assert rec["tablesChecked"] == {"tables": 3, "rows": 4000}  # customers, orders, empty_one
    print(f"\nrestore into 3 instances: {rec['durationSeconds']}s; cluster created -> Ready: {to_ready:.1f}s")
    assert {e.reason for e in dst.events()} >= {"RestoreStarted", "RestoreSucceeded"}
    d_rw, d_pw = dst.service_ip("rw"), dst.password()
    wait_for(lambda: try_query(d_rw, "app", d_pw, "SELECT 1"), 60, "dst -rw answering")
    assert checksums(d_rw, d_pw) == want
    query(d_rw, "app", d_pw, "INSERT INTO app.empty_one VALUES (1)")  # replicated after the restore
    after = checksums(d_rw, d_pw)
    op_pw = dst.password("operator-password")
    for o in range(3):
        ip = dst.pod(o).status.pod_ip
        wait_for(lambda ip=ip: checksums(ip, d_pw) == after, 60, f"dst-{o} equal to the primary")
        # the restore account (ALL privileges, only to load the dump) is gone from every instance
        assert (
            query(
                ip,
                "mysql-operator",
                op_pw,
                "SELECT COUNT(*) FROM mysql.user WHERE user = 'mysql-operator-restore'",
            )[0][0]
            == 0
        )
    job = client.BatchV1Api(api).read_namespaced_job("dst-restore", ns)  # the load ran in a Job
    assert job.spec.template.spec.automount_service_account_token is False and job.status.succeeded == 1

    # -- rolling update: replicas first, the primary moved by switchover before its Pod restarts
    primary0 = final["currentPrimary"]
    uids = {p.metadata.name: p.metadata.uid for p in dst.pods()}
    restarted: list[str] = []
    primaries: list[str] = [primary0]
    dst.patch_spec({"resources": {"requests": {"cpu": "110m", "memory": "200Mi"}}})

    def rolled():
        alone(api)
        now = {p.metadata.name: p.metadata.uid for p in dst.pods()}
        for n, uid in now.items():
            if uid != uids.get(n) and n not in restarted:
                restarted.append(n)
        cur = dst.status().get("currentPrimary")
        if cur and cur != primaries[-1]:
            primaries.append(cur)
        s = dst.status()
        return (
            len(restarted) == 3
            and s.get("phase") == "Ready"
            and s.get("readyInstances") == 3
            and all(p.spec.containers[0].resources.requests.get("cpu") == "110m" for p in dst.pods())
        )

    wait_for(rolled, 600, f"the roll to finish (restarted {restarted}, primaries {primaries})", interval=0.5)
    print(f"roll: restarted {restarted}; primary {' -> '.join(primaries)}")
    assert restarted[-1] == primary0, f"the primary's Pod restarts last: {restarted}"
    assert len(primaries) >= 2 and primaries[1] != primary0, f"the primary moved by switchover: {primaries}"
    assert any(e.reason == "Switchover" for e in dst.events())
    assert len([e for e in dst.events() if e.reason == "RollingUpdate"]) >= 3
    assert checksums(dst.service_ip("rw"), d_pw) == after


def test_a_restore_from_a_missing_backup_fails_clearly_and_never_becomes_ready(host_operator):
    ns, api, _, _ = host_operator
    c = Cluster(api, ns, "nope").create(cluster_spec(1, restore={"fromBackup": {"name": "does-not-exist"}}))
    s = failed_never_ready(api, c, 300)
    ready = next(x for x in s["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "RestoreFailed")
    assert "spec.restore.fromBackup.name" in ready["message"] and "does-not-exist" in ready["message"]
    assert s["restore"]["phase"] == "Failed"
    restore_failed_event(c)
    assert "currentPrimary" not in s  # the engine never ran: nothing writable, no role labels
    assert not any((p.metadata.labels or {}).get("mysql.operator.dev/role") for p in c.pods())


def test_a_hostile_dump_reads_no_file_and_the_restore_fails_clearly(host_operator, s3_beside_cluster):
    """spec.restore.s3 pointing at a bucket the namespace owner controls, holding a valid backup
    whose SQL reads the ServiceAccount token path and /proc/self/environ with LOAD DATA LOCAL
    INFILE: the restore runs in a Job without a token, nothing is read, and the cluster says why."""
    from tests.support.backups import hostile_backup

    ns, api, _, _ = host_operator
    bucket = f"e2e-evil-{uuid.uuid4().hex[:8]}"
    s3_beside_cluster.create_bucket(bucket)
    hostile_backup(
        s3_beside_cluster,
        bucket,
        "evil",
        (
            "CREATE DATABASE loot;\nCREATE TABLE loot.t (v LONGTEXT);\n"
            "LOAD DATA LOCAL INFILE '/var/run/secrets/kubernetes.io/serviceaccount/token' INTO TABLE loot.t;\n"
            "LOAD DATA LOCAL INFILE '/proc/self/environ' INTO TABLE loot.t;\n"
        ),
    )
    client.CoreV1Api(api).create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "evil-s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    c = Cluster(api, ns, "evil").create(
        cluster_spec(
            2,
            restore={
                "s3": {
                    "bucket": bucket,
                    "prefix": "backups",
                    "path": "evil",
                    "endpoint": s3_beside_cluster.endpoint,
                    "region": "us-east-1",
                    "forcePathStyle": True,
                    "credentialsSecret": {"name": "evil-s3"},
                }
            },
        )
    )
    s = failed_never_ready(api, c, 600)
    ready = next(x for x in s["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "RestoreFailed")
    assert "LOAD DATA LOCAL INFILE" in ready["message"], ready["message"]
    restore_failed_event(c)
    assert "currentPrimary" not in s

    # the Job's Pod ran without any API credentials
    (pod,) = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector="job-name=evil-restore").items
    assert pod.spec.automount_service_account_token is False
    assert not any(v.projected for v in pod.spec.volumes or []), pod.spec.volumes
    # nothing was read into the tenant's table, and the servers refuse LOAD DATA LOCAL
    password = c.password("operator-password")
    for p in c.pods():
        ip = p.status.pod_ip
        assert query(ip, "mysql-operator", password, "SELECT @@local_infile")[0][0] == 0
        if query(
            ip,
            "mysql-operator",
            password,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'loot' AND table_name = 't'",
        )[0][0]:
            assert query(ip, "mysql-operator", password, "SELECT COUNT(*) FROM loot.t")[0][0] == 0
