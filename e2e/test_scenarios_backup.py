"""Scenario 5 with the operator installed by its chart (a Pod), per flavor (MySQL 9.7, MariaDB
10.11; the test id names it): an on-demand MySQLBackup to the MinIO beside the cluster, restored
into a NEW cluster through spec.restore.fromBackup with CHECKSUM TABLE equal on every table; and a
scheduled backup (spec.backup.schedule every minute). The dump and the load run with the tools of
the cluster's own server image (the Jobs' client-tools sidecar). Backups are encrypted
(spec.backup.encryption; plain ones run in e2e/test_restore_roll.py): the bucket holds no readable byte, the restore names the key, and a
restore with another key fails saying so."""

from __future__ import annotations

import base64
import os
import time
import uuid

import pytest

from e2e.helpers import (
    BACKUPS,
    FLAVORS,
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    query,
    record,
    scenario_namespace,
    stopwatch,
    try_query,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster
MAGIC = b"MOPENC\x00\x01"  # the first bytes of an encrypted object (mysql_operator/backup/crypto.py)

TABLES = {
    "customers": "CREATE TABLE app.customers (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(64),"
    " email VARCHAR(128) UNIQUE, created DATETIME(6), balance DECIMAL(12,2))",
    "orders": "CREATE TABLE app.orders (id BIGINT PRIMARY KEY, customer INT, note TEXT,"
    " payload BLOB, total DOUBLE, KEY (customer))",
    "empty_one": "CREATE TABLE app.empty_one (id INT PRIMARY KEY)",
}


@pytest.fixture(scope="module")
def backup_namespace(local_cluster, operator_release):
    with scenario_namespace(local_cluster.api_client(), "e2e-bk") as ns:
        yield ns


@pytest.fixture(scope="module", params=FLAVORS)
def backup_source(request, local_cluster, backup_namespace, s3_beside_cluster):
    """A 2-instance cluster of the flavor with data, backing up to its own bucket every minute.
    Yields (cluster, bucket, flavor)."""
    flavor = request.param
    api = local_cluster.api_client()
    c = Cluster(api, backup_namespace, f"bk-{flavor}")
    bucket = f"e2e-{uuid.uuid4().hex[:10]}"
    s3_beside_cluster.create_bucket(bucket)
    c.core.create_namespaced_secret(
        backup_namespace,
        {
            "metadata": {"name": f"s3-{flavor}"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    c.core.create_namespaced_secret(
        backup_namespace,
        {
            "metadata": {"name": f"key-{flavor}"},
            "stringData": {"encryption-key": base64.b64encode(os.urandom(32)).decode()},
        },
    )
    encryption = {"encryption": {"keySecret": {"name": f"key-{flavor}"}}}
    c.create(
        cluster_spec(
            2,
            flavor,
            backup={
                **encryption,
                "storage": {
                    "s3": {
                        "bucket": bucket,
                        "prefix": "bk",
                        "endpoint": s3_beside_cluster.endpoint,
                        "region": "us-east-1",
                        "forcePathStyle": True,
                        "credentialsSecret": {"name": f"s3-{flavor}"},
                    }
                },
                "schedule": "* * * * *",
            },
        )
    )
    c.wait_ready(300, instances=2)
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
    for ddl in TABLES.values():
        query(rw, "app", pw, ddl)
    for i in range(1, 301):
        query(
            rw,
            "app",
            pw,
            "INSERT INTO app.customers (name, email, created, balance) VALUES (%s, %s, NOW(6), %s)",
            args=(f"name-{i} ü", f"c{i}@example.test", i * 1.25),
        )
    query(
        rw,
        "app",
        pw,
        "INSERT INTO app.orders SELECT id * 10, id, REPEAT('x', id), "
        "UNHEX(SHA2(id, 256)), id / 3 FROM app.customers",
    )  # MySQL 9.7 has no MD5()
    yield c, bucket, flavor


def checksums(host: str, password: str) -> dict[str, int]:
    tables = [
        r[0]
        for r in query(
            host,
            "app",
            password,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'app' ORDER BY table_name",
        )
    ]
    assert tables, "no tables in app"
    rows = query(host, "app", password, "CHECKSUM TABLE " + ", ".join(f"app.`{t}`" for t in tables))
    return {name: value for name, value in rows}


def _backup_phase(c: Cluster, name: str) -> str | None:
    b = c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, BACKUPS, name)
    return (b.get("status") or {}).get("phase")


def _objects(s3, bucket: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in listed.get("Contents") or []]


def test_on_demand_backup_succeeds_to_s3(local_cluster, backup_namespace, backup_source, s3_beside_cluster):
    c, bucket, flavor = backup_source
    manual = f"manual-{flavor}"
    elapsed = stopwatch()
    c.objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        c.namespace,
        BACKUPS,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": manual},
            "spec": {"clusterRef": {"name": c.name}},
        },
    )
    phase = wait_for(
        lambda: _backup_phase(c, manual) in ("Succeeded", "Failed") and _backup_phase(c, manual),
        300,
        f"{manual} finished",
    )
    record(f"on-demand backup (MySQLBackup created to Succeeded, {flavor})", elapsed(), scenario="5")
    st = c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, BACKUPS, manual)["status"]
    assert phase == "Succeeded", st.get("message")
    assert st.get("sizeBytes", 0) > 0 and st.get("location")
    keys = [k for k in _objects(s3_beside_cluster, bucket) if k.startswith(f"bk/{c.name}/{manual}/")]
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == ["backup.sql.zst.enc", "manifest.json"]
    assert len(st.get("encryptionKeyId", "")) == 16
    for key in keys:
        data = s3_beside_cluster.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        assert b"name-1" not in data and b"example.test" not in data and b"customers" not in data
    data_key = next(k for k in keys if k.endswith(".enc"))
    head = s3_beside_cluster.client().get_object(Bucket=bucket, Key=data_key, Range="bytes=0-7")
    assert head["Body"].read() == MAGIC


def test_restore_into_a_new_cluster_has_equal_checksums(local_cluster, backup_namespace, backup_source):
    c, _, flavor = backup_source
    manual = f"manual-{flavor}"
    wait_for(lambda: _backup_phase(c, manual) == "Succeeded", 300, f"{manual} Succeeded")
    rw, pw = c.service_ip("rw"), c.password()
    source = checksums(rw, pw)

    elapsed = stopwatch()
    restore = {"fromBackup": {"name": manual}, "encryption": {"keySecret": {"name": f"key-{flavor}"}}}
    restored = Cluster(c.api, c.namespace, f"restored-{flavor}").create(
        cluster_spec(2, flavor, restore=restore)
    )
    restored.wait_ready(300, instances=2)
    r_rw, r_pw = restored.service_ip("rw"), restored.password()
    wait_for(lambda: try_query(r_rw, "app", r_pw, "SELECT 1"), 60, "the restored cluster's -rw answering")
    got = checksums(r_rw, r_pw)
    record(
        f"restore (new cluster from MySQLBackup to Ready with the data, {flavor})", elapsed(), scenario="5"
    )
    assert got == source
    # the replica of the restored cluster has the data too
    replica = restored.pod(1).status.pod_ip
    assert checksums(replica, r_pw) == source


def test_a_restore_waits_for_its_key_then_refuses_another_key(local_cluster, backup_namespace, backup_source):
    """The key's Secret does not exist yet: the restore waits, saying so in the status and a Warning
    Event; once it exists (with a key the backup was not made with) the restore fails saying so."""
    c, _, flavor = backup_source
    manual = f"manual-{flavor}"
    wait_for(lambda: _backup_phase(c, manual) == "Succeeded", 300, f"{manual} Succeeded")
    wrong = Cluster(c.api, c.namespace, f"wrong-key-{flavor}").create(
        cluster_spec(
            1,
            flavor,
            restore={
                "fromBackup": {"name": manual},
                "encryption": {"keySecret": {"name": f"other-key-{flavor}"}},
            },
        )
    )
    where = f"Secret 'other-key-{flavor}' key 'encryption-key' (spec.restore.encryption.keySecret)"
    events = wait_for(lambda: wrong.events("RestoreWaiting"), 300, "a RestoreWaiting Warning Event")
    assert events[0].type == "Warning" and events[0].message.startswith(f"{where}: the Secret does not exist")
    ready = next(x for x in wrong.status().get("conditions") or [] if x["type"] == "Ready")
    assert ready["status"] == "False" and where in ready["message"]
    c.core.create_namespaced_secret(
        c.namespace,
        {
            "metadata": {"name": f"other-key-{flavor}"},
            "stringData": {"encryption-key": base64.b64encode(os.urandom(32)).decode()},
        },
    )
    record_ = wait_for(
        lambda: (wrong.status().get("restore") or {}).get("phase") == "Failed" and wrong.status()["restore"],
        300,
        "the restore with another key Failed",
    )
    assert "was encrypted with the key whose id is" in record_.get("message", ""), record_
    assert wrong.status().get("phase") != "Healthy"


def test_a_scheduled_backup_runs(local_cluster, backup_namespace, backup_source):
    c, _, flavor = backup_source
    t0 = time.monotonic()

    def scheduled_succeeded():
        items = c.objs.list_namespaced_custom_object(GROUP, VERSION, c.namespace, BACKUPS)["items"]
        done = [
            b
            for b in items
            if not b["metadata"]["name"].startswith("manual-")
            and b["spec"]["clusterRef"]["name"] == c.name
            and (b.get("status") or {}).get("phase") == "Succeeded"
        ]
        return done

    done = wait_for(scheduled_succeeded, 200, "a scheduled MySQLBackup Succeeded")
    print(
        f"scheduled backup {done[0]['metadata']['name']} succeeded "
        f"{time.monotonic() - t0:.0f}s after this test started"
    )
    assert done[0]["spec"]["clusterRef"]["name"] == c.name
    last = c.status().get("lastBackup") or {}
    assert last, "status.lastBackup of the cluster is set"
