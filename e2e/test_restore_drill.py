"""Issue 49 on the local cluster, per flavor, with the chart's operator: restore drills. A
1-instance cluster with data, a logical backup (encrypted), rows written after it and archived
(spec.backup.binlogs), then a drill asked for (`mysql-operator drill --wait`, which sets the
drill-request annotation): the newest backup and every archived binary log restored into the
throwaway cluster <cluster>-drill, its tables checked against what the backup recorded and the
user's checks (a ConfigMap) run, RTO and RPO in status.drill and in the operator's metrics,
condition Restorable True, and the throwaway cluster, its anchor Job and its volume gone. Then
each drill fails, naming what was wrong, and leaves nothing behind: the backup's data object
changed in the bucket (one byte; Restorable turns False, the metric says 0); the archived binary
logs' objects gone from the bucket; the throwaway cluster's restore Job killed mid-drill."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.backups import ask_for_drill, backup_phase_of, create_backup, drill, drill_ended
from e2e.conftest import OPERATOR_NAMESPACE
from e2e.helpers import (
    FLAVORS,
    Cluster,
    cluster_spec,
    operator_metrics,
    query,
    record,
    try_query,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster


def _gone(read) -> bool:
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def _throwaway_gone(c: Cluster) -> None:
    name = f"{c.name}-drill"
    wait_for(
        lambda: (
            _gone(
                lambda: c.objs.get_namespaced_custom_object(
                    "mysql.operator.dev", "v1alpha1", c.namespace, "mysqlclusters", name
                )
            )
            and _gone(lambda: client.BatchV1Api(c.api).read_namespaced_job(name, c.namespace))
            and _gone(lambda: c.core.read_namespaced_persistent_volume_claim(f"data-{name}-0", c.namespace))
        ),
        180,
        f"{name}, its anchor Job and its volume gone",
    )


def _restorable(c: Cluster) -> dict:
    return next((x for x in c.status().get("conditions") or [] if x["type"] == "Restorable"), {})


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_drill_restores_the_newest_backup_and_its_binlogs_and_a_damaged_backup_fails_it(
    local_cluster, scenario_namespace, s3_beside_cluster, flavor
):
    ns, api = scenario_namespace, local_cluster.api_client()
    c = Cluster(api, ns, f"dr-{flavor}")
    bucket = f"e2e-{uuid.uuid4().hex[:10]}"
    s3_beside_cluster.create_bucket(bucket)
    c.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    c.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "key"},
            "stringData": {"encryption-key": base64.b64encode(os.urandom(32)).decode()},
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
    storage = {
        "s3": {
            "bucket": bucket,
            "prefix": "bk",
            "endpoint": s3_beside_cluster.endpoint,
            "forcePathStyle": True,
            "credentialsSecret": {"name": "s3"},
        }
    }
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

    # the first one asked for with the CLI, which waits for its outcome
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
    assert r.returncode == 0 and "Succeeded: restored and serving" in r.stdout, r.stdout + r.stderr
    d = c.status()["drill"]

    assert d["phase"] == "Succeeded", d.get("message")
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
    _throwaway_gone(c)
    labels = {("namespace", ns), ("cluster", c.name)}

    def metric(name: str) -> float | None:
        return operator_metrics(api, OPERATOR_NAMESPACE).get((name, frozenset(labels)))

    wait_for(lambda: metric("mysql_operator_drill_succeeded") == 1, 60, "the drill metric 1")
    assert metric("mysql_operator_drill_rto_seconds") == d["rtoSeconds"]
    assert metric("mysql_operator_drill_last_success_timestamp_seconds") > 0

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

    d = drill(c, "second", 900)

    assert d["phase"] == "Failed" and "corrupted" in d["message"], d
    assert any(e.reason == "RestoreDrillFailed" and e.type == "Warning" for e in c.events())
    wait_for(
        lambda: _restorable(c).get("status") == "False", 60, "condition Restorable False", describe=c.describe
    )
    wait_for(lambda: metric("mysql_operator_drill_succeeded") == 0, 60, "the drill metric 0")
    _throwaway_gone(c)

    # the byte put back; every archived binary log's object gone from the bucket (their index
    # entries kept, as a lifecycle rule leaves them): the next drill fails naming one, before loading
    body[len(body) // 2] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=data, Body=bytes(body))
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
    _throwaway_gone(c)
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
    _throwaway_gone(c)
