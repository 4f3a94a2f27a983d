"""Issue 49 on the local cluster, per flavor (the tests: e2e/test_restore_drill.py, MySQL, and
e2e/test_restore_drill_mariadb.py), with the chart's operator and a real Prometheus
scraping it: restore drills. A 1-instance cluster with data, a logical backup (encrypted), rows
written after it and archived (spec.backup.binlogs), then a drill on the cluster's schedule
(spec.backup.drill.schedule, a fire time a minute ahead): the newest backup and every archived
binary log restored into the throwaway cluster <cluster>-drill, its tables checked against what the
backup recorded and the user's checks (a ConfigMap) run, RTO and RPO in status.drill and, equal, in
the metrics Prometheus scrapes, condition Restorable True, and the throwaway cluster, its anchor
Job and its volume gone. Then each drill fails, naming what was wrong, and leaves nothing behind:
the backup's data object changed in the bucket (one byte; asked for with `mysql-operator drill
--wait`, which exits 1 printing the message; Restorable turns False and MySQLRestoreDrillFailed
fires in Prometheus); a table's data deleted from the backup (its dump's INSERTs, the object
sealed again and its manifest made to match: the table check names the table); the archived binary
logs' objects gone from the bucket; the throwaway cluster's restore Job killed mid-drill. Last, a
physical backup (a cluster with drills: its tables recorded from the copy) passes a drill that
checks them."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import os
import subprocess
import sys


from e2e.backups import (
    ask_for_drill,
    backup_phase_of,
    create_backup,
    drill,
    drill_ended,
    s3_storage,
    throwaway_gone,
)
from e2e.helpers import (
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    query,
    record,
    try_query,
)
from e2e.prometheus_scrape import config, short_rules
from mysql_operator.backup.crypto import Key
from mysql_operator.backup.manifest import Manifest
from tests.support import prometheus as prom
from tests.support.backups import edited_dump, without_inserts
from tests.support.wait import wait_for


def drill_scenario(local_cluster, namespace: str, s3_beside_cluster, tmp_path, flavor: str) -> None:
    """The scenario above for `flavor` (e2e/test_restore_drill*.py: one module per flavor, so that
    `--dist loadfile` runs them side by side), with a real Prometheus of its own."""
    prom.ensure_built()
    p = prom.Prometheus(
        tmp_path / "prometheus", config(local_cluster.kubeconfig, namespace), short_rules()
    ).start()
    try:
        _scenario(local_cluster, namespace, s3_beside_cluster, p, flavor)
    finally:
        p.stop()


def clock_of(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _restorable(c: Cluster) -> dict:
    return next((x for x in c.status().get("conditions") or [] if x["type"] == "Restorable"), {})


def _scenario(local_cluster, ns: str, s3_beside_cluster, p: prom.Prometheus, flavor: str) -> None:
    api = local_cluster.api_client()
    c = Cluster(api, ns, f"dr-{flavor}")
    storage = s3_storage(c, s3_beside_cluster, "bk")
    secret = os.urandom(32)  # the backups' encryption key
    c.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "key"},
            "stringData": {"encryption-key": base64.b64encode(secret).decode()},
        },
    )
    # the user's own checks of the restored data: what the backup alone holds (the archive may
    # lag the newest rows), read back as the client prints it
    c.core.create_namespaced_config_map(
        ns,
        {
            "metadata": {"name": "checks"},
            "data": {
                "backed-up.sql": "SELECT COUNT(*), MIN(id), MAX(id) FROM app.items WHERE id <= 200",
                "backed-up.expected": "200\t1\t200\n",
                "text.sql": "SELECT note FROM app.items WHERE id = 7",
                "text.expected": "it's 7 ü\n",
            },
        },
    )
    bucket = storage["s3"]["bucket"]
    c.create(
        cluster_spec(
            1,
            flavor,
            backup={
                "storage": storage,
                "encryption": {"keySecret": {"name": "key"}},
                "binlogs": {"enabled": True, "maxDelay": "2s"},
                "drill": {"timeout": "10m", "checksConfigMap": {"name": "checks"}},
            },
        )
    )
    c.wait_ready(300, instances=1)
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
    query(rw, "app", pw, "CREATE TABLE app.items (id INT PRIMARY KEY, note VARCHAR(64))")
    query(rw, "app", pw, "CREATE TABLE app.empty_one (id INT PRIMARY KEY)")
    for i in range(1, 201):
        query(rw, "app", pw, "INSERT INTO app.items VALUES (%s, %s)", args=(i, f"it's {i} ü"))
    create_backup(c, "base")
    wait_for(
        lambda: backup_phase_of(c, "base") == "Succeeded", 300, "the backup Succeeded", describe=c.describe
    )
    for i in range(201, 251):  # after the backup: only the archived binary logs hold them
        query(rw, "app", pw, "INSERT INTO app.items VALUES (%s, %s)", args=(i, "after"))

    # the first one on the schedule: a fire time once a day, the next whole minute at least 20 s
    # away (none before it; the rest of the test asks for its drills)
    fire = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=80)).replace(second=0, microsecond=0)
    c.objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "mysqlclusters",
        c.name,
        {"spec": {"backup": {"drill": {"schedule": f"{fire.minute} {fire.hour} * * *"}}}},
    )
    stamp = fire.strftime("%Y-%m-%dT%H:%M:%SZ")

    def scheduled_ended() -> dict | None:
        d = c.status().get("drill") or {}
        return d if d.get("scheduledAt") == stamp and d.get("phase") in ("Succeeded", "Failed") else None

    d = wait_for(scheduled_ended, 1000, f"the drill scheduled for {stamp} ended", describe=c.describe)

    assert d["phase"] == "Succeeded", d.get("message")
    assert clock_of(d["startedAt"]) >= fire, d  # not before its time
    assert d["backup"] == "base" and d["pointInTime"] == "latest"
    assert d["tablesChecked"] == {"tables": 2, "rows": 200}, d  # as the backup recorded them
    assert d["rtoSeconds"] > 0 and d["restoreSeconds"] > 0 and d["bytesPerSecond"] > 0
    assert d["missingTransactions"] >= 0 and "rpoSeconds" in d
    # where the restore spent its time: the backup verified and loaded, the tables checked, the
    # binary logs replayed
    assert set(d["phases"]) == {"verify", "load", "settle", "checkTables", "replay", "userChecks"}, d[
        "phases"
    ]
    assert d["checksPassed"] == ["backed-up", "text"], d
    record(
        f"restore drill RTO (1 instance, a small backup + binlogs, {flavor})", d["rtoSeconds"], scenario="49"
    )
    record(
        f"restore drill missing transactions ({flavor})", d["missingTransactions"], unit="tx", scenario="49"
    )
    assert any(e.reason == "RestoreDrillSucceeded" for e in c.events())
    wait_for(
        lambda: _restorable(c).get("status") == "True", 60, "condition Restorable True", describe=c.describe
    )
    throwaway_gone(c)

    # what the drill measured, as the real Prometheus scrapes it from the operator
    sel = f'namespace="{ns}",cluster="{c.name}"'
    for name, key in (
        ("mysql_operator_drill_rto_seconds", "rtoSeconds"),
        ("mysql_operator_drill_rpo_seconds", "rpoSeconds"),
        ("mysql_operator_drill_missing_transactions", "missingTransactions"),
        ("mysql_operator_drill_restore_bytes_per_second", "bytesPerSecond"),
    ):
        wait_for(lambda: p.value(f"{name}{{{sel}}}") == d[key], 60, f"Prometheus: {name} as status says")
    assert p.value(f"mysql_operator_drill_succeeded{{{sel}}}") == 1
    assert p.value(f"mysql_operator_drill_last_success_timestamp_seconds{{{sel}}}") >= fire.timestamp()

    # one byte of the backup's data object changed in the bucket: the next drill fails, naming it
    s3 = s3_beside_cluster.client()
    (data,) = [
        o["Key"]
        for o in s3.list_objects_v2(Bucket=bucket, Prefix="bk/")["Contents"]
        if "/base/backup." in o["Key"]
    ]
    body = bytearray(s3.get_object(Bucket=bucket, Key=data)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=data, Body=bytes(body))

    # asked for with the CLI, which waits for its outcome: exit 1, the message
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysql_operator.cli",
            "drill",
            c.name,
            "-n",
            ns,
            "--wait",
            "--timeout",
            "900",
            "--kubeconfig",
            local_cluster.kubeconfig,
        ],
        capture_output=True,
        text=True,
        timeout=960,
    )
    assert r.returncode == 1 and "Failed: " in r.stdout, r.stdout + r.stderr
    d = c.status()["drill"]
    assert d["phase"] == "Failed" and "corrupted" in d["message"] and d["message"] in r.stdout, d
    assert any(e.reason == "RestoreDrillFailed" and e.type == "Warning" for e in c.events())
    wait_for(
        lambda: _restorable(c).get("status") == "False", 60, "condition Restorable False", describe=c.describe
    )
    wait_for(
        lambda: p.query(f'ALERTS{{alertname="MySQLRestoreDrillFailed",alertstate="firing",{sel}}}'),
        120,
        "Prometheus: MySQLRestoreDrillFailed firing",
    )
    throwaway_gone(c)

    # the byte put back, then a table's data deleted from the backup: its dump without the
    # INSERTs of app.items, compressed and encrypted again, its manifest's checksum and sizes made
    # to match (as a backup damaged before it was sealed): the drill's table check names the table
    body[len(body) // 2] ^= 0xFF
    manifest_key = data.rsplit("/", 1)[0] + "/manifest.json"
    manifest = s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
    packed, size = edited_dump(bytes(body), Key(secret), lambda dump: without_inserts(dump, b"items"))
    s3.put_object(Bucket=bucket, Key=data, Body=packed)
    m = Manifest.from_json(manifest)
    s3.put_object(
        Bucket=bucket,
        Key=manifest_key,
        Body=dataclasses.replace(
            m, compressed_size=len(packed), uncompressed_size=size, sha256=hashlib.sha256(packed).hexdigest()
        ).to_json(),
    )

    d = drill(c, "tables", 900)

    assert d["phase"] == "Failed" and "app.items: 0 rows restored, the backup has 200" in d["message"], d
    throwaway_gone(c)

    # the backup put back whole; every archived binary log's object gone from the bucket (their
    # index entries kept, as a lifecycle rule leaves them): the next drill fails naming one, before
    # loading
    s3.put_object(Bucket=bucket, Key=data, Body=bytes(body))
    s3.put_object(Bucket=bucket, Key=manifest_key, Body=manifest)
    archived = {
        o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"bk/{c.name}/binlogs/")["Contents"]
        if not o["Key"].endswith(".json")
    }
    assert archived
    for key in archived:
        s3.delete_object(Bucket=bucket, Key=key)

    d = drill(c, "third", 900)

    assert d["phase"] == "Failed" and "is missing from the bucket" in d["message"], d
    assert any(key in d["message"] for key in archived), d["message"]
    throwaway_gone(c)
    for key, content in archived.items():
        s3.put_object(Bucket=bucket, Key=key, Body=content)

    # the throwaway cluster's restore Job killed mid-drill (its Pod deleted as soon as it exists;
    # a check that sleeps keeps it from ending first): the drill fails, and the throwaway cluster
    # goes all the same
    c.core.patch_namespaced_config_map(
        "checks", ns, {"data": {"slow.sql": "SELECT SLEEP(600)", "slow.expected": "0\n"}}
    )
    restore_job = f"{c.name}-drill-restore"
    ask_for_drill(c, "fourth")
    (pod,) = wait_for(
        lambda: c.core.list_namespaced_pod(ns, label_selector=f"job-name={restore_job}").items,
        300,
        f"the Pod of {restore_job}",
        describe=c.describe,
    )
    c.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)

    d = drill_ended(c, "fourth", 900)
    assert d["phase"] == "Failed", d
    throwaway_gone(c)

    # a physical backup (MySQL's CLONE, MariaDB's mariadb-backup) of a cluster with drills records
    # its tables from the copy: the next drill restores it, checks them, then replays
    c.core.patch_namespaced_config_map("checks", ns, {"data": {"slow.sql": None, "slow.expected": None}})
    create_backup(c, "copy", "physical")
    wait_for(
        lambda: backup_phase_of(c, "copy") == "Succeeded",
        300,
        "the physical backup Succeeded",
        describe=c.describe,
    )

    d = drill(c, "physical", 900)

    assert d["phase"] == "Succeeded", d.get("message")
    assert d["backup"] == "copy" and d["tablesChecked"] == {"tables": 2, "rows": 250}, d
    assert {"checkTables", "replay", "userChecks"} <= set(d["phases"]), d["phases"]
    assert d["checksPassed"] == ["backed-up", "text"], d
    record(
        f"restore drill RTO (1 instance, a physical backup + binlogs, {flavor})",
        d["rtoSeconds"],
        scenario="49",
    )
    throwaway_gone(c)
