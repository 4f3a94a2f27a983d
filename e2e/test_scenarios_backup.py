"""Scenario 5 with the operator installed by its chart (a Pod), per flavor (MySQL 9.7, MariaDB
10.11; the test id names it): an on-demand MySQLBackup to the MinIO beside the cluster, restored
into a NEW cluster through spec.restore.fromBackup with CHECKSUM TABLE equal on every table; and a
scheduled backup (spec.backup.schedule every minute). MySQL's on-demand and base backups are
physical (MySQLBackup spec.method: a CLONE copy of a replica, served by the restore Job for the new
instances to clone); the others are dumps. The dump, the load and the copies run with the tools of
the cluster's own server image (the Jobs' client-tools sidecar). Backups are encrypted
(spec.backup.encryption; plain ones run in e2e/test_restore_roll.py): the bucket holds no readable byte, the restore names the key, and a
restore with another key fails saying so. The binary logs are archived continuously
(spec.backup.binlogs, the <cluster>-binlog-archiver Deployment): a commit reaches the bucket
encrypted within seconds; and, rows written all along, a base backup, a failover, a time T, a
DELETE of every row: a new cluster restored to T (spec.restore.pointInTime) holds exactly the
rows committed up to T."""

from __future__ import annotations

import base64
import os
import time
import uuid

import pytest

from e2e.backups import backup_phase_of, create_backup
from e2e.helpers import (
    BACKUPS,
    FLAVORS,
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    connect,
    delete_clusters,
    query,
    record,
    scenario_namespace,
    signal_server,
    stopwatch,
    try_query,
)
from tests.support.wait import wait_for
from tests.support.writer import Writer

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
                "binlogs": {"enabled": True, "maxDelaySeconds": 2},
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
    # this flavor's clusters and backups go before the next flavor's tests: left running, their
    # servers stalled on the loaded CI node and said FailoverHeld in another test's window
    delete_clusters(api, backup_namespace, named=lambda name: flavor in name.split("-"))


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


def method_of(flavor: str) -> str:
    """The method of the on-demand and base backups (their spec.method; the scheduled ones are
    the cluster's, logical): physical copies (MySQL's CLONE, MariaDB's mariadb-backup)."""
    return "physical"


PHYSICAL_KIND = {"mysql": "tar", "mariadb": "xbstream"}  # the data object a physical copy is


def _objects(s3, bucket: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in listed.get("Contents") or []]


def test_on_demand_backup_succeeds_to_s3(local_cluster, backup_namespace, backup_source, s3_beside_cluster):
    c, bucket, flavor = backup_source
    manual, method = f"manual-{flavor}", method_of(flavor)
    elapsed = stopwatch()
    create_backup(c, manual, method)
    phase = wait_for(
        lambda: backup_phase_of(c, manual) in ("Succeeded", "Failed") and backup_phase_of(c, manual),
        300,
        f"{manual} finished",
    )
    record(
        f"on-demand backup (MySQLBackup created to Succeeded, {flavor}, {method})", elapsed(), scenario="5"
    )
    st = c.objs.get_namespaced_custom_object(GROUP, VERSION, c.namespace, BACKUPS, manual)["status"]
    assert phase == "Succeeded", st.get("message")
    assert st.get("sizeBytes", 0) > 0 and st.get("location") and st.get("method") == method
    keys = [k for k in _objects(s3_beside_cluster, bucket) if k.startswith(f"bk/{c.name}/{manual}/")]
    kind = PHYSICAL_KIND[flavor] if method == "physical" else "sql"
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == [f"backup.{kind}.zst.enc", "manifest.json"]
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
    wait_for(lambda: backup_phase_of(c, manual) == "Succeeded", 300, f"{manual} Succeeded")
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
        f"restore (new cluster from MySQLBackup to Ready with the data, {flavor}, {method_of(flavor)})",
        elapsed(),
        scenario="5",
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
    wait_for(lambda: backup_phase_of(c, manual) == "Succeeded", 300, f"{manual} Succeeded")
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

    def says_so() -> dict | None:
        ready = next((x for x in wrong.status().get("conditions") or [] if x["type"] == "Ready"), {})
        return ready if ready.get("status") == "False" and where in ready.get("message", "") else None

    # a pass posts the Event that says why before the status that says what: wait for the status
    wait_for(says_so, 30, "Ready False naming the key's Secret", describe=wrong.describe)
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
    # published by the cluster's next pass (its status's one writer), a second or so later
    last = wait_for(lambda: c.status().get("lastBackup"), 30, "status.lastBackup of the cluster set")
    assert last.get("name") and last.get("completedAt"), last


def test_each_commit_reaches_the_binlog_archive_within_seconds(backup_source, s3_beside_cluster):
    """The archiver Pod (tokenless) streams the primary's binary logs: a commit is in an archived
    file, encrypted, seconds later (maxDelaySeconds 2, plus the upload). Last in the module: its
    rows come after every backup the restores compare with."""
    import json

    from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet

    c, bucket, flavor = backup_source
    parse = MySQLGtidSet.parse if flavor == "mysql" else MariaDBGtids.parse
    pods = c.core.list_namespaced_pod(
        c.namespace,
        label_selector=f"app.kubernetes.io/instance={c.name},app.kubernetes.io/component=binlog-archiver",
    ).items
    assert len(pods) == 1 and pods[0].spec.automount_service_account_token is False

    def archiving():
        cond = next((x for x in c.status().get("conditions") or [] if x["type"] == "BinlogArchiving"), {})
        return cond.get("status") == "True" and cond

    # the archiver Pod's readiness, as the operator last applied its Deployment (every minute)
    wait_for(archiving, 150, "status condition BinlogArchiving True", interval=2)
    rw, pw = c.service_ip("rw"), c.password()
    s3 = s3_beside_cluster.client()
    folder = f"bk/{c.name}/binlogs/"

    def archived():
        held = parse("")
        for key in _objects(s3_beside_cluster, bucket):
            if key.startswith(folder) and key.endswith(".json"):
                held = held.union(
                    parse(json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())["gtids_after"])
                )
        return held

    lags = []
    for i in range(3):
        query(rw, "app", pw, "INSERT INTO app.empty_one VALUES (%s)", args=(1000 + i,))
        sql = "SELECT @@gtid_executed" if flavor == "mysql" else "SELECT @@gtid_binlog_pos"
        committed = parse(str(query(rw, "app", pw, sql)[0][0]).replace("\n", ""))
        elapsed = stopwatch()
        wait_for(
            lambda: archived().contains(committed), 120, "the commit in the binlog archive", interval=0.5
        )
        lags.append(elapsed())
    record(
        f"commit to its binary log archived, worst of 3 (maxDelaySeconds 2, {flavor})",
        max(lags),
        scenario="5",
    )
    # the folder is claimed by this cluster (its uid: not a secret, so not encrypted)
    owner = json.loads(s3.get_object(Bucket=bucket, Key=folder + "owner")["Body"].read())
    assert owner == {"cluster": c.name, "uid": c.body()["metadata"]["uid"]}
    keys = [
        k
        for k in _objects(s3_beside_cluster, bucket)
        if k.startswith(folder) and not k.endswith(".json") and k != folder + "owner"
    ]
    assert keys and all(k.endswith(".enc") for k in keys)
    head = s3.get_object(Bucket=bucket, Key=keys[0], Range="bytes=0-7")
    assert head["Body"].read() == MAGIC


def _archive_index(s3, bucket: str, cluster: str) -> list[dict]:
    import json

    client = s3.client()
    return [
        json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        for key in _objects(s3, bucket)
        if key.startswith(f"bk/{cluster}/binlogs/") and key.endswith(".json")
    ]


def _stamp(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@pytest.mark.causes("Failover", "Reseed")  # the source's primary hung, then SIGKILLed
def test_point_in_time_restore_across_a_failover_has_exactly_the_rows_up_to_t(
    local_cluster, backup_source, s3_beside_cluster
):
    """Rows written all along; a base backup; the primary hangs and a replica takes over; T; every
    row DELETEd; more rows. Restored to T into a new cluster: exactly the rows committed up to T
    (ids and commit times), on both of its instances. Last in the module: it fails the source over."""
    c, bucket, flavor = backup_source
    rw, pw = c.service_ip("rw"), c.password()
    query(
        rw,
        "app",
        pw,
        "CREATE TABLE app.pitr (id INT PRIMARY KEY, at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    )
    writer = Writer(
        lambda _: connect(rw, "app", pw, "app", timeout=1),
        "INSERT INTO app.pitr (id) VALUES (%s)",
        pause=0.05,
    )
    writer.start()
    base = f"pitr-base-{flavor}"
    try:
        wait_for(lambda: len(writer.acked) >= 20, 60, "rows written before the base backup")
        create_backup(c, base, method_of(flavor))
        wait_for(lambda: backup_phase_of(c, base) == "Succeeded", 300, f"{base} Succeeded")
        old = c.status()["currentPrimary"]
        hung = signal_server(local_cluster, c, old, "SIGSTOP")  # hung: the replica is promoted
        try:
            wait_for(lambda: c.status().get("currentPrimary") not in (None, old), 180, "the failover")
        finally:
            signal_server(local_cluster, c, old, "SIGKILL", hung)
        after_failover = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= after_failover + 20, 120, "rows written on the new primary")
        t = writer.second_without_commits()
        wait_for(
            lambda: time.time() >= t + 2 and len(writer.acked) > after_failover + 30, 60, "writes after T"
        )
        snapshot = query(rw, "app", pw, "SELECT id, UNIX_TIMESTAMP(at) FROM app.pitr ORDER BY id")
        query(rw, "app", pw, "DELETE FROM app.pitr")  # the destructive statement, after T
        deleted = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= deleted + 10, 60, "rows written after the DELETE")
    finally:
        writer.stop_event.set()
        writer.join(10)
    expected = [(i, at) for i, at in snapshot if at <= t]
    assert len(expected) < len(snapshot) and expected[0][0] == 1, "rows before the base and after T"
    # the archive reaches past T (the restore would be refused before it, saying so)
    wait_for(
        lambda: (
            max((x["last_event_at"] for x in _archive_index(s3_beside_cluster, bucket, c.name)), default=0)
            > t
        ),
        120,
        "the binary log archive past T",
    )
    elapsed = stopwatch()
    restored = Cluster(c.api, c.namespace, f"pitr-{flavor}").create(
        cluster_spec(
            2,
            flavor,
            restore={
                "fromBackup": {"name": base},
                "pointInTime": _stamp(t),
                "encryption": {"keySecret": {"name": f"key-{flavor}"}},
            },
        )
    )
    restored.wait_ready(400, instances=2)
    record(
        f"point-in-time restore (new cluster to Ready, {method_of(flavor)} base + binlogs to T, {flavor})",
        elapsed(),
        scenario="5",
    )
    r_rw, r_pw = restored.service_ip("rw"), restored.password()
    wait_for(lambda: try_query(r_rw, "app", r_pw, "SELECT 1"), 60, "the restored cluster's -rw answering")
    sql = "SELECT id, UNIX_TIMESTAMP(at) FROM app.pitr ORDER BY id"
    got = [tuple(r) for r in query(r_rw, "app", r_pw, sql)]
    assert got == [tuple(r) for r in expected], f"{len(got)} rows restored, {len(expected)} committed up to T"
    replica = restored.pod(1).status.pod_ip
    assert wait_for(
        lambda: [tuple(r) for r in query(replica, "app", r_pw, sql)] == got and got, 60, "the replica equal"
    )
    record(
        f"rows restored to T, all committed up to T, none after ({flavor}; {len(snapshot)} before the DELETE)",
        len(got),
        unit="rows",
        scenario="5",
    )
    st = restored.status()["restore"]
    assert st["pointInTime"]["target"] == _stamp(t) and st["pointInTime"]["binlogFilesReplayed"] >= 1, st
    print(f"\n{flavor}: {len(expected)} of {len(snapshot)} rows up to {_stamp(t)}; {st['message']}")


def test_an_archiver_tool_image_without_the_binlog_tool_is_named_in_the_status_then_fixed(backup_source):
    """spec.toolsImage set to the other flavor's tool image (a real image of this project, without
    this flavor's binlog tool): the archiver stops before it streams, and within seconds the
    condition BinlogArchiving says why in the Pod's words (reason ArchiverFailing: the tool, the
    image, the exit status) with a Warning Event; toolsImage removed, archiving is back. Last in
    the module: the restores above need the archive whole."""
    c, bucket, flavor = backup_source
    from kubernetes import client

    archiver = client.AppsV1Api(c.api).read_namespaced_deployment(f"{c.name}-binlog-archiver", c.namespace)
    pod = archiver.spec.template.spec
    (sidecar,) = [x for x in (pod.init_containers or []) + pod.containers if x.name == "client-tools"]
    repository = sidecar.image.rsplit(":", 1)[0]
    other, tool = ("mariadb-11.8", "mysqlbinlog") if flavor == "mysql" else ("mysql-9.7", "mariadb-binlog")
    wrong = f"{repository}:{other}"

    def archiving():
        return next((x for x in c.status().get("conditions") or [] if x["type"] == "BinlogArchiving"), {})

    c.patch_spec({"toolsImage": wrong})
    elapsed = stopwatch()
    failing = wait_for(
        lambda: (a := archiving()).get("reason") == "ArchiverFailing" and a,
        180,
        "condition BinlogArchiving reason ArchiverFailing",
        interval=1,
        describe=c.describe,
    )
    record(f"a tool image without {tool} to condition ArchiverFailing ({flavor})", elapsed(), scenario="5")
    assert failing["status"] == "False"
    assert f"`{tool} --version` failed (tool image {wrong}) with exit status 127" in failing["message"], (
        failing
    )
    assert f"{tool} is not in this image" in failing["message"], failing
    wait_for(lambda: c.events("ArchiverFailing"), 30, "a Warning Event ArchiverFailing", describe=c.describe)
    (event,) = c.events("ArchiverFailing")
    assert event.type == "Warning" and wrong in event.message
    c.patch_spec({"toolsImage": None})
    wait_for(
        lambda: archiving().get("status") == "True",
        180,
        "condition BinlogArchiving True again",
        interval=2,
        describe=c.describe,
    )
