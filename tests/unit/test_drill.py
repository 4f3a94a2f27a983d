"""Restore drills' decisions (backup/drill.py): when one starts, how a running one ends (passed,
failed, timed out, its cluster gone), and that a throwaway cluster never outlives its drill."""

from __future__ import annotations

import datetime as dt

import pytest

from mysql_operator.backup import drill
from mysql_operator.backup.drill import FAILED, RUNNING, SUCCEEDED, Throwaway, View

NOW = dt.datetime(2026, 12, 6, 4, 0, 30, tzinfo=dt.timezone.utc)
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def view(**kw) -> View:
    base = dict(
        now=NOW,
        cluster="shop",
        flavor="mysql",
        schedule="0 4 * * *",
        timeout_seconds=3600,
        created_at=NOW - dt.timedelta(days=3),
        record={},
        throwaway=None,
        newest_backup="shop-202612060300",
        source_gtid=f"{UUID}:1-100",
        binlogs=True,
    )
    base.update(kw)
    return View(**base)


def running(**kw) -> dict:
    return {
        "phase": RUNNING,
        "cluster": "shop-drill",
        "backup": "shop-202612060300",
        "startedAt": "2026-12-06T04:00:00Z",
        "scheduledAt": "2026-12-06T04:00:00Z",
        "sourceGtid": f"{UUID}:1-100",
        "pointInTime": "latest",
        **kw,
    }


def test_a_due_schedule_starts_a_drill_of_the_newest_backup_recording_it_first():
    d = drill.decide(view())
    assert isinstance(d, drill.Start) and d.backup == "shop-202612060300"
    assert d.record == running(startedAt="2026-12-06T04:00:30Z")


def test_nothing_starts_before_the_fire_time_or_twice_for_one():
    d = drill.decide(view(now=NOW - dt.timedelta(minutes=5)))
    assert isinstance(d, drill.Idle) and d.next_run == dt.datetime(2026, 12, 6, 4, 0, tzinfo=dt.timezone.utc)
    done = running(phase=SUCCEEDED)
    assert isinstance(drill.decide(view(record=done)), drill.Idle)


def test_a_request_starts_one_at_once_and_keeps_the_schedules_place():
    done = running(phase=SUCCEEDED)
    d = drill.decide(view(record=done, request="r1"))
    assert isinstance(d, drill.Start) and d.record["request"] == "r1"
    assert d.record["scheduledAt"] == done["scheduledAt"]  # the schedule does not fire again for it
    assert isinstance(drill.decide(view(record={**done, "request": "r1"}, request="r1")), drill.Idle)


def test_without_a_successful_backup_the_drill_is_recorded_failed_saying_so():
    d = drill.decide(view(newest_backup=None))
    assert isinstance(d, drill.Idle)
    assert d.record["phase"] == FAILED and "no backup of the cluster has succeeded" in d.record["message"]


def test_a_throwaway_cluster_left_from_an_ended_drill_is_removed_before_another_starts():
    left = Throwaway("Ready", {"phase": SUCCEEDED})
    assert isinstance(drill.decide(view(record=running(phase=SUCCEEDED), throwaway=left)), drill.Remove)
    assert isinstance(drill.decide(view(record={}, throwaway=left)), drill.Remove)


RESTORED = {
    "phase": SUCCEEDED,
    "durationSeconds": 40.0,
    "bytesLoaded": 400_000_000,
    "gtidPosition": f"{UUID}:1-100",
    "backupCompletedAt": "2026-12-06T03:01:00Z",
    "tablesChecked": {"tables": 12, "rows": 3400},
    "pointInTime": {"lastReplayedEventAt": "2026-12-06T03:59:58Z"},
    "phases": {"verify": 1.0, "load": 30.0, "settle": 0.5, "checkTables": 6.0, "replay": 2.5},
}


def test_a_restored_serving_cluster_passes_with_its_rto_rpo_and_checks():
    later = NOW + dt.timedelta(seconds=60)
    d = drill.decide(view(now=later, record=running(), throwaway=Throwaway("Ready", RESTORED)))
    assert isinstance(d, drill.Finish) and d.passed
    r = d.record
    assert r["phase"] == SUCCEEDED and r["rtoSeconds"] == 90.0 and r["restoreSeconds"] == 40.0
    assert r["bytesPerSecond"] == 10_000_000 and r["missingTransactions"] == 0 and r["rpoSeconds"] == 0.0
    assert r["tablesChecked"] == {"tables": 12, "rows": 3400} and r["phases"] == RESTORED["phases"]
    assert "12 tables, 3400 rows as backed up" in d.message and "user checks" not in d.message
    assert "checksPassed" not in r
    checked = {**RESTORED, "checksPassed": ["orders", "totals"]}
    d = drill.decide(view(now=later, record=running(), throwaway=Throwaway("Ready", checked)))
    assert d.record["checksPassed"] == ["orders", "totals"] and "2 user checks passed" in d.message


def test_the_rto_ends_when_the_restored_cluster_began_to_serve_not_when_a_pass_saw_it():
    later = NOW + dt.timedelta(seconds=60)  # the drill started at 04:00:00
    serving = Throwaway("Ready", RESTORED, ready_since=NOW + dt.timedelta(seconds=10))
    d = drill.decide(view(now=later, record=running(), throwaway=serving))
    assert isinstance(d, drill.Finish) and d.record["rtoSeconds"] == 40.0
    assert "restored and serving in 40s" in d.message
    # a Ready condition from before the drill started is not this restore's: the pass's time
    stale = Throwaway("Ready", RESTORED, ready_since=NOW - dt.timedelta(seconds=60))
    d = drill.decide(view(now=later, record=running(), throwaway=stale))
    assert d.record["rtoSeconds"] == 90.0


def test_what_the_restore_lacks_of_the_source_bounds_the_rpo():
    restored = {**RESTORED, "gtidPosition": f"{UUID}:1-97"}
    d = drill.decide(view(record=running(), throwaway=Throwaway("Ready", restored)))
    assert isinstance(d, drill.Finish) and d.passed
    assert d.record["missingTransactions"] == 3 and d.record["rpoSeconds"] == 2.0  # 03:59:58 -> 04:00:00


@pytest.mark.parametrize(
    "throwaway, message",
    [
        (None, "was deleted before the drill ended"),
        (Throwaway("Ready", {}, deleting=True), "was deleted before the drill ended"),
        (Throwaway("Failed", {"phase": FAILED, "message": "shop.orders: 0 rows restored"}), "shop.orders"),
    ],
)
def test_a_drill_whose_restore_failed_or_whose_cluster_went_fails_naming_why(throwaway, message):
    d = drill.decide(view(record=running(), throwaway=throwaway))
    assert isinstance(d, drill.Finish) and not d.passed
    assert d.record["phase"] == FAILED and message in d.record["message"] and message in d.message


def test_a_drill_past_its_timeout_fails_saying_where_it_was():
    late = NOW + dt.timedelta(seconds=3601)
    d = drill.decide(view(now=late, record=running(), throwaway=Throwaway("Restoring", {"phase": RUNNING})))
    assert isinstance(d, drill.Finish) and not d.passed
    assert "within 3600s (phase Restoring, restore Running)" in d.record["message"]
    assert isinstance(drill.decide(view(record=running(), throwaway=Throwaway("Restoring", {}))), drill.Idle)


@pytest.mark.parametrize(
    "flavor, source, restored, missing",
    [
        ("mysql", f"{UUID}:1-100", f"{UUID}:1-100", 0),
        ("mysql", f"{UUID}:1-100", f"{UUID}:1-90", 10),
        ("mariadb", "0-1-100,0-2-140", "0-2-140", 0),  # one history: the highest seq_no per domain
        ("mariadb", "0-2-140,1-1-5", "0-2-130", 15),
        ("mysql", "not a gtid", "", -1),
    ],
)
def test_missing_transactions(flavor, source, restored, missing):
    assert drill.missing_transactions(flavor, source, restored) == missing


SOURCE = {
    "metadata": {"name": "shop", "namespace": "prod", "uid": "u-1", "labels": {"team": "a"}},
    "spec": {
        "flavor": "MariaDB",
        "version": "11.8",
        "instances": 3,
        "storage": {"size": "20Gi", "storageClassName": "fast"},
        "database": {"name": "app", "user": "app"},
        "credentials": {"secretName": "shop-creds"},
        "service": {"type": "LoadBalancer"},
        "backup": {"encryption": {"keySecret": {"name": "k"}}, "drill": {"schedule": "0 4 * * *"}},
        "config": "[mysqld]\nlower_case_table_names=1\n",
        "primary": 2,
    },
}


def test_the_throwaway_cluster_is_one_instance_like_the_source_owned_by_its_anchor_job():
    from mysql_operator.manifests.drill_cluster import DEFAULT_RESOURCES, anchor_job, drill_cluster

    job = anchor_job(SOURCE, "operator:1")
    assert job["metadata"]["name"] == "shop-drill" and job["spec"]["suspend"] is True
    assert (
        job["metadata"]["ownerReferences"][0] | {"kind": "MySQLCluster", "uid": "u-1"}
        == (job["metadata"]["ownerReferences"][0])
    )
    c = drill_cluster(SOURCE, "shop-202612060300", True, "job-uid")
    spec = c["spec"]
    assert c["metadata"]["labels"] == {drill.DRILL_OF_LABEL: "shop"}
    assert [(o["kind"], o["uid"]) for o in c["metadata"]["ownerReferences"]] == [("Job", "job-uid")]
    assert (
        spec["instances"] == 1
        and spec["deletionPolicy"] == "Delete"
        and spec["resources"] == DEFAULT_RESOURCES
    )
    assert spec["restore"] == {
        "fromBackup": {"name": "shop-202612060300"},
        "checkTables": True,
        "pointInTime": "latest",
        "encryption": {"keySecret": {"name": "k"}},
    }
    # what the restore and the server need, copied; nothing that reaches clients or other objects
    assert {k: spec[k] for k in ("flavor", "version", "storage", "database", "config")} == {
        k: SOURCE["spec"][k] for k in ("flavor", "version", "storage", "database", "config")
    }
    assert not {"credentials", "service", "backup", "primary"} & set(spec)
    assert "pointInTime" not in drill_cluster(SOURCE, "b", False, "u")["spec"]["restore"]


def test_starts_says_when_decide_would_start_one_so_backups_are_listed_only_then():
    assert drill.starts(view(newest_backup=None))
    assert not drill.starts(view(now=NOW - dt.timedelta(minutes=5)))
    assert not drill.starts(view(record=running()))
    assert not drill.starts(view(throwaway=Throwaway("Ready", {})))
