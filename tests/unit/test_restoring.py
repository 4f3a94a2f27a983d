"""spec.restore decisions and the status a restore holds the cluster in (pure)."""

from __future__ import annotations

import threading

import pytest

from mysql_operator import restoring as r
from mysql_operator.api.spec import S3, SecretKeys

RUNNING_REC = {"phase": "Running", "source": "mysqlbackup/b", "startedAt": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize("wants, record, primary, not_ready, here, expected", [
    (False, None, None, ["db-1"], False, r.Proceed),              # no restore asked
    (False, None, "db-0", [], False, r.Proceed),
    (True, None, None, ["db-1", "db-2"], False, r.WaitForInstances),  # every instance first
    (True, None, None, [], False, r.Start),
    (True, RUNNING_REC, None, [], True, r.InProgress),
    (True, RUNNING_REC, None, [], False, r.Failed),                # interrupted: never Ready
    (True, {"phase": "Failed", "message": "x"}, None, [], False, r.Failed),
    (True, {"phase": "Succeeded"}, "db-0", [], False, r.Proceed),  # done: the engine adopts
    (True, None, "db-0", [], False, r.Failed),                      # never over a serving cluster
])
def test_decide(wants, record, primary, not_ready, here, expected):
    assert isinstance(r.decide(wants, record, primary, not_ready, here), expected)


def test_interrupted_and_failed_messages_say_what_to_do():
    assert "create it again" in r.decide(True, RUNNING_REC, None, [], False).message
    assert r.decide(True, {"phase": "Failed", "message": "sha256 mismatch"}, None, [], False).message == "sha256 mismatch"
    assert "db-2" in r.decide(True, None, None, ["db-2"], False).reason


def test_describe_source():
    s3 = S3(bucket="bk", credentials_secret=SecretKeys("s"), prefix="/team/", path="/shop/2026/")
    assert r.describe_source("nightly", None) == "mysqlbackup/nightly"
    assert r.describe_source(None, s3) == "s3://bk/team/shop/2026"


@pytest.mark.parametrize("body, fragment", [
    (None, "does not exist"),
    ({"status": {"phase": "Running"}}, "is Running, not Succeeded"),
    ({"status": {}}, "not finished"),
])
def test_backup_location_refuses_with_the_field_and_the_fix(body, fragment):
    with pytest.raises(ValueError) as e:
        r.backup_location(body, "b1")
    assert "spec.restore.fromBackup.name" in str(e.value) and fragment in str(e.value)


def test_backup_location_of_a_succeeded_backup():
    assert r.backup_location({"status": {"phase": "Succeeded", "location": "s3://b/k/"}}, "b1") == "s3://b/k/"


BASE = {"phase": "Pending", "conditions": [
    {"type": t, "status": s, "reason": "x", "message": "", "lastTransitionTime": "T0"}
    for t, s in (("Ready", "False"), ("Available", "False"), ("Progressing", "True"), ("Degraded", "False"))]}


def conds(status):
    return {c["type"]: c for c in status["conditions"]}


def test_overlay_while_restoring_ready_false_reason_restoring():
    st = r.overlay_status(BASE, r.InProgress(), RUNNING_REC, "T1")
    c = conds(st)
    assert st["phase"] == "Restoring" and st["restore"] == RUNNING_REC
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "Restoring")
    assert "mysqlbackup/b" in c["Ready"]["message"]
    assert c["Degraded"]["status"] == "False" and c["Progressing"]["status"] == "True"
    assert c["Ready"]["lastTransitionTime"] == "T0"  # status unchanged: time kept


def test_overlay_on_failure_degraded_and_never_ready():
    ready_before = {**BASE, "conditions": [dict(c, status="True") if c["type"] == "Ready" else c
                                           for c in BASE["conditions"]]}
    st = r.overlay_status(ready_before, r.Failed("checksum mismatch"), {"phase": "Failed"}, "T1")
    c = conds(st)
    assert st["phase"] == "Failed"
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == ("False", "RestoreFailed", "checksum mismatch")
    assert c["Ready"]["lastTransitionTime"] == "T1"
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "RestoreFailed")
    assert c["Progressing"]["status"] == "False"


def test_overlay_proceed_only_carries_the_record():
    st = r.overlay_status(BASE, r.Proceed(), {"phase": "Succeeded"}, "T1")
    assert st["phase"] == "Pending" and st["restore"] == {"phase": "Succeeded"}
    assert st["conditions"] == BASE["conditions"]


def test_runner_loads_every_instance_and_reports_each_failure_once():
    loaded, outcome, done = [], [], threading.Event()

    def load(name):
        loaded.append(name)
        if name == "db-2":
            raise RuntimeError("sha256 mismatch")

    def finish(ok, message, seconds):
        outcome.append((ok, message))
        done.set()

    runner = r.Runner()
    assert runner.start(r.Job(("ns", "db"), ("db-0", "db-1", "db-2"), load, finish))
    runner.wait(("ns", "db"), timeout=30)
    assert done.is_set() and not runner.running(("ns", "db"))
    assert sorted(loaded) == ["db-0", "db-1", "db-2"]
    assert outcome == [(False, "db-2: sha256 mismatch")]


def test_runner_success_message_names_the_instances():
    outcome = []
    runner = r.Runner()
    runner.start(r.Job(("ns", "db"), ("db-0", "db-1"), lambda n: None, lambda ok, m, s: outcome.append((ok, m))))
    runner.wait(("ns", "db"), timeout=30)
    assert outcome and outcome[0][0] and "db-0, db-1" in outcome[0][1]
