"""The restore gate's pass (restore_plan.plan_restore, pure): what it writes and in which order,
its Events and the status of a held cluster; and its writes carried out through a recording
KubeOps (the record before the Job, a refused Job recorded as the restore's failure)."""

from __future__ import annotations

from typing import Any, Mapping

import pytest
from kubernetes.client.rest import ApiException

from mysql_operator import restore_gate as g

from mysql_operator import restore_plan
from mysql_operator import restoring
from mysql_operator.api import parse
from mysql_operator.api.types import S3, SecretKeys
from mysql_operator.backup.restore_types import Source
from mysql_operator.pods import pod_views

from mysql_operator.writes import Call, DeletePod, PatchStatus
from tests.support.fakes import RecordingKube
from tests.support.specs import body

OWNER = {"apiVersion": "x/v1", "kind": "MySQLCluster", "metadata": {"name": "shop", "uid": "u-1"}}
NOW = "2026-12-01T10:00:00Z"
RUNNING = {"phase": "Running", "source": "mysqlbackup/nightly", "startedAt": "2026-12-01T09:59:00Z"}
PASSWORD = "s3cr3t-pw"


def cluster(flavor: str = "mariadb", primary: int | None = None):
    spec: dict[str, Any] = {"flavor": flavor, "instances": 3, "restore": {"fromBackup": {"name": "nightly"}}}
    if primary is not None:
        spec["primary"] = primary
    return parse(body(spec, "shop", generation=1))


def pod(name: str, ready: bool = True, started: str | None = "2026-12-01T09:00:00Z", uid: str = "") -> dict:
    return {
        "metadata": {"name": name, "uid": uid or f"uid-{name}"},
        "status": {
            "phase": "Running",
            **({"startTime": started} if started else {}),
            "containerStatuses": [{"name": "mysql", "ready": ready}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def plan(
    seen: restore_plan.RestoreSeen, listed=None, previous=None, c=None, **kw
) -> restore_plan.RestorePlan:
    c = c or cluster()
    listed = [pod(f"shop-{i}") for i in range(3)] if listed is None else listed
    views = pod_views("shop", listed)
    return restore_plan.plan_restore(
        c,
        OWNER,
        seen,
        previous or {},
        views,
        listed,
        sum(1 for v in views.values() if v.ready),
        [PASSWORD],
        kw.pop("secret_error", None),
        "operator:test",
        "localhost/tools",
        NOW,
        **kw,
    )


def source() -> Source:
    return Source(S3(bucket="b", credentials_secret=SecretKeys("s3")), "shop/2026")


def kinds(writes) -> list[str]:
    return [w.name if isinstance(w, Call) else type(w).__name__ for w in writes]


def test_a_restore_starts_with_its_record_written_before_the_job_exists():
    p = plan(restore_plan.RestoreSeen(None, None, source=source()))
    assert p.held and not p.writes
    assert kinds(p.start) == ["PatchStatus", "restore certificate", "Apply", "Apply", "CreateJob"]
    assert p.start[0].fields["restore"]["phase"] == "Running"
    assert p.start[0].fields["restore"]["startedAt"] == NOW
    # the Service that names the Job's Pod, and the NetworkPolicy that opens its port to this
    # cluster's servers only, both before the Job
    assert [w.obj["kind"] for w in p.start[2:4]] == ["Service", "NetworkPolicy"]
    assert p.start[4].obj["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert [e[1] for e in p.events] == ["RestoreStarted"]
    assert p.status["phase"] == "Restoring" and p.status["restore"]["phase"] == "Running" and p.changed


def test_a_refused_job_fails_the_restore_with_the_reason_and_nothing_else_is_written():
    p = plan(
        restore_plan.RestoreSeen(None, None, source=source()),
        start_error=f"creating the restore Job: {PASSWORD} Forbidden",
    )
    assert not p.start and kinds(p.writes) == ["drop restore account"]  # the init step made it
    assert p.status["phase"] == "Failed" and p.status["restore"]["phase"] == "Failed"
    assert [e[1] for e in p.events] == ["RestoreFailed"]
    assert PASSWORD not in str(p.status) and PASSWORD not in str(p.events)


def test_a_source_that_cannot_be_used_fails_at_once_naming_the_field():
    why = "spec.restore.fromBackup.name: MySQLBackup nightly does not exist in this namespace"
    p = plan(restore_plan.RestoreSeen(None, None, source_error=why))
    assert not p.start and p.status["phase"] == "Failed"
    assert p.status["restore"]["message"] == why
    ready = {c["type"]: c for c in p.status["conditions"]}["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "RestoreFailed"


def test_a_missing_key_waits_and_says_so_once():
    why = "spec.restore.encryption: Secret k lacks key"
    first = plan(restore_plan.RestoreSeen(None, None, source=source(), key_problem=why))
    assert not first.start and first.status["phase"] == "Restoring"
    assert first.events == (("Warning", "RestoreWaiting", why),)
    again = plan(
        restore_plan.RestoreSeen(None, None, source=source(), key_problem=why), previous=first.status
    )
    assert not again.events and not again.changed


def test_it_waits_for_every_instance_before_it_reads_or_starts_anything():
    listed = [pod("shop-0"), pod("shop-1", ready=False)]
    p = plan(restore_plan.RestoreSeen(None, None), listed=listed)
    assert p.held and not p.start and not p.events
    assert "shop-1, shop-2 not Ready" in {c["type"]: c for c in p.status["conditions"]}["Ready"]["message"]


@pytest.mark.parametrize("primary, recorded", [(None, "shop-0"), (2, "shop-2")])
def test_a_finished_restore_records_the_primary_the_engine_adopts(primary, recorded):
    checked = {"tables": 12, "rows": 3400}
    phases = {"verify": 0.5, "load": 12.0, "settle": 0.2, "checkTables": 4.0}
    done = {
        "ok": True,
        "message": "restored into 3 instances",
        "gtidPosition": "0-1-9",
        "tablesChecked": checked,
        "phases": phases,
    }
    p = plan(
        restore_plan.RestoreSeen(RUNNING, done), previous={"restore": RUNNING}, c=cluster(primary=primary)
    )
    assert p.status["restore"]["tablesChecked"] == checked  # spec.restore.checkTables: what was compared
    assert p.status["restore"]["phases"] == phases  # where it spent its time
    assert p.status["currentPrimary"] == recorded
    assert p.status["restore"] | {"completedAt": NOW} == p.status["restore"]
    assert p.status["restore"]["phase"] == "Succeeded" and p.status["restore"]["gtidPosition"] == "0-1-9"
    assert [e[1] for e in p.events] == ["RestoreSucceeded"]
    # the next pass finds it Succeeded: the gate lets the pass go on
    assert not plan(restore_plan.RestoreSeen(p.status["restore"], None), previous=p.status).held


def test_a_job_gone_while_running_is_recorded_failed_once():
    p = plan(restore_plan.RestoreSeen(RUNNING, None), previous={"restore": RUNNING})
    assert p.status["restore"]["phase"] == "Failed" and "disappeared" in p.status["restore"]["message"]
    assert [e[1] for e in p.events] == ["RestoreFailed"]
    again = plan(restore_plan.RestoreSeen(p.status["restore"], None), previous=p.status)
    assert again.held and not again.events and not again.changed


def test_mariadb_instances_are_asked_for_the_copy_once_and_only_older_pods_restart():
    listed = [
        pod("shop-0", started="2026-12-01T09:00:00Z"),
        pod("shop-1", started="2026-12-01T11:00:00Z"),  # started after the request
        pod("shop-2", started=None),  # not running yet
    ]
    first = plan(restore_plan.RestoreSeen(RUNNING, restoring.JOB_RUNNING, job_serving=True), listed=listed)
    assert kinds(first.writes) == ["Apply", "PatchStatus", "DeletePod"]
    cm = first.writes[0].obj
    assert cm["kind"] == "ConfigMap" and set(cm["data"]) == {"shop-0", "shop-1", "shop-2"}
    assert first.writes[1].fields["restore"]["copiesRequestedAt"] == NOW
    assert first.writes[2] == DeletePod("shop-0", "uid-shop-0")
    assert [e[1] for e in first.events] == ["RestoreCopying"]
    # the next pass (or an operator restart): the request stands; a Pod still older restarts
    record = first.writes[1].fields["restore"]
    again = plan(restore_plan.RestoreSeen(record, restoring.JOB_RUNNING, job_serving=True), listed=listed)
    assert kinds(again.writes) == ["DeletePod"] and not again.events


@pytest.mark.parametrize("flavor, serving", [("mysql", True), ("mariadb", False)])
def test_no_copy_is_asked_for_before_the_job_serves_one_or_for_mysql(flavor, serving):
    seen = restore_plan.RestoreSeen(RUNNING, restoring.JOB_RUNNING, job_serving=serving)
    p = plan(seen, c=cluster(flavor), previous={"restore": RUNNING})
    assert p.held and not p.writes and p.status["phase"] == "Restoring"


DEADLINE = {"ok": False, "message": "the restore Job shop-restore failed: DeadlineExceeded"}


@pytest.mark.parametrize(
    "job",
    [
        pytest.param({"ok": True, "message": "restored"}, id="succeeded"),
        pytest.param({"ok": False, "message": "ERROR 1227 at line 306"}, id="failed"),
        pytest.param(DEADLINE, id="deadline-exceeded"),
        pytest.param(None, id="job-deleted"),
    ],
)
def test_the_restore_account_is_dropped_in_the_pass_that_records_the_end_whatever_ended_it(job):
    p = plan(restore_plan.RestoreSeen(RUNNING, job), previous={"restore": RUNNING})
    assert p.status["restore"]["phase"] in ("Succeeded", "Failed")
    assert kinds(p.writes) == ["drop restore account"]
    # carried out before the record (the status, written after the writes): a drop that fails
    # fails the pass, which plans it again; once recorded, never again
    again = plan(restore_plan.RestoreSeen(p.status["restore"], None), previous=p.status)
    assert not again.writes


def test_no_drop_while_the_restore_runs_or_waits():
    assert not plan(
        restore_plan.RestoreSeen(RUNNING, restoring.JOB_RUNNING), previous={"restore": RUNNING}
    ).writes
    assert not plan(restore_plan.RestoreSeen(None, None, source=source())).writes


def test_the_drop_is_carried_out_through_the_callable_in_its_place():
    done = []
    writes = [restore_plan.DROP_RESTORE_ACCOUNT, PatchStatus({"restore": {"phase": "Failed"}})]
    kube = RecordingKube()
    g.carry_out(None, kube, cluster(), OWNER, writes, lambda: done.append(len(kube.calls)))
    assert done == [0] and [c[0] for c in kube.calls] == ["status"]


class Refusing(RecordingKube):
    def create_job(self, job: Mapping[str, Any]) -> None:
        super().create_job(job)
        raise ApiException(status=403, reason="Forbidden")


def test_the_writes_are_carried_out_in_order_and_a_refused_job_is_reported():
    p = plan(restore_plan.RestoreSeen(None, None, source=source()))
    writes = [w for w in p.start if w != restore_plan.RESTORE_CERTIFICATE]  # that one needs the API
    kube = Refusing()
    assert g.start(None, kube, cluster(), OWNER, writes) == "creating the restore Job: Forbidden"
    assert [c[0] for c in kube.calls] == ["status", "apply", "apply", "job"]
    kube = RecordingKube()
    assert g.start(None, kube, cluster(), OWNER, writes) is None
