"""spec.restore decisions and the status a restore holds the cluster in (pure)."""

from __future__ import annotations

import pytest

from mysql_operator import restoring as r
from mysql_operator.api.types import S3, SecretKeys

RUNNING_REC = {"phase": "Running", "source": "mysqlbackup/b", "startedAt": "2026-01-01T00:00:00Z"}


DONE_OK = {"ok": True, "message": "restored into db-0, db-1 in 3.1s", "gtidPosition": "0-1-9"}
DONE_BAD = {"ok": False, "message": "db-1: the dump reads a local file"}


@pytest.mark.parametrize(
    "wants, record, primary, not_ready, job, expected",
    [
        (False, None, None, ["db-1"], None, r.Proceed),  # no restore asked
        (False, None, "db-0", [], None, r.Proceed),
        (True, None, None, ["db-1", "db-2"], None, r.WaitForInstances),  # every instance first
        (True, None, None, [], None, r.Start),
        (
            True,
            RUNNING_REC,
            None,
            [],
            r.JOB_RUNNING,
            r.InProgress,
        ),  # the Job runs (operator restarts change nothing)
        (True, RUNNING_REC, None, [], DONE_OK, r.Finished),
        (True, RUNNING_REC, None, [], DONE_BAD, r.Finished),
        (True, RUNNING_REC, None, [], None, r.Failed),  # the Job is gone: never Ready
        (True, {"phase": "Failed", "message": "x"}, None, [], None, r.Failed),
        (True, {"phase": "Succeeded"}, "db-0", [], None, r.Proceed),  # done: the engine adopts
        (True, None, "db-0", [], None, r.Failed),  # never over a serving cluster
    ],
)
def test_decide(wants, record, primary, not_ready, job, expected):
    assert isinstance(r.decide(wants, record, primary, not_ready, job), expected)


def test_failed_messages_say_what_to_do():
    assert "create it again" in r.decide(True, RUNNING_REC, None, [], None).message
    assert (
        r.decide(True, {"phase": "Failed", "message": "sha256 mismatch"}, None, [], None).message
        == "sha256 mismatch"
    )
    assert "db-2" in r.decide(True, None, None, ["db-2"], None).reason
    assert r.decide(True, RUNNING_REC, None, [], DONE_BAD).result == DONE_BAD


def test_overlay_of_a_finished_job_is_restoring_until_adopted_or_failed_with_its_message():
    assert r.overlay_status(BASE, r.Finished(DONE_OK), RUNNING_REC, "T1")["phase"] == "Restoring"
    st = r.overlay_status(BASE, r.Finished(DONE_BAD), {"phase": "Failed"}, "T1")
    assert st["phase"] == "Failed" and conds(st)["Ready"]["message"] == DONE_BAD["message"]


def test_describe_source():
    s3 = S3(bucket="bk", credentials_secret=SecretKeys("s"), prefix="/team/", path="/shop/2026/")
    assert r.describe_source("nightly", None) == "mysqlbackup/nightly"
    assert r.describe_source(None, s3) == "s3://bk/team/shop/2026"


@pytest.mark.parametrize(
    "body, fragment",
    [
        (None, "does not exist"),
        ({"status": {"phase": "Running"}}, "is Running, not Succeeded"),
        ({"status": {}}, "not finished"),
    ],
)
def test_backup_location_refuses_with_the_field_and_the_fix(body, fragment):
    with pytest.raises(ValueError) as e:
        r.backup_location(body, "b1")
    assert "spec.restore.fromBackup.name" in str(e.value) and fragment in str(e.value)


def test_backup_location_of_a_succeeded_backup():
    assert r.backup_location({"status": {"phase": "Succeeded", "location": "s3://b/k/"}}, "b1") == "s3://b/k/"


BASE = {
    "phase": "Pending",
    "conditions": [
        {"type": t, "status": s, "reason": "x", "message": "", "lastTransitionTime": "T0"}
        for t, s in (
            ("Ready", "False"),
            ("Available", "False"),
            ("Progressing", "True"),
            ("Degraded", "False"),
        )
    ],
}


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
    ready_before = {
        **BASE,
        "conditions": [dict(c, status="True") if c["type"] == "Ready" else c for c in BASE["conditions"]],
    }
    st = r.overlay_status(ready_before, r.Failed("checksum mismatch"), {"phase": "Failed"}, "T1")
    c = conds(st)
    assert st["phase"] == "Failed"
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == (
        "False",
        "RestoreFailed",
        "checksum mismatch",
    )
    assert c["Ready"]["lastTransitionTime"] == "T1"
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("True", "RestoreFailed")
    assert c["Progressing"]["status"] == "False"


def test_overlay_proceed_only_carries_the_record():
    st = r.overlay_status(BASE, r.Proceed(), {"phase": "Succeeded"}, "T1")
    assert st["phase"] == "Pending" and st["restore"] == {"phase": "Succeeded"}
    assert st["conditions"] == BASE["conditions"]
