"""Backup handlers against the real kube-apiserver (no kopf loop: the controller's methods are called
directly, with the clock passed in). Jobs are created for real; their completion is written into the
Job status by the test (there is no kubelet in the control-plane harness)."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
import yaml
from kubernetes import client

from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.backup.controller import BackupController
from tests.support.backup_objects import get, make_backup, make_stored_backup
from tests.support.crds import serve_project_crds
from tests.support.operator_account import operator_api
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane
UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def crds(control_plane):
    return serve_project_crds(control_plane.api_client(), BACKUP_PLURAL)


@pytest.fixture
def ctl(control_plane, crds, namespace):
    """The controller as the operator's ServiceAccount in the test's namespace (the chart's rules)."""
    return BackupController(operator_api(control_plane, namespace), image="localhost/mysql-operator:test")


def make_cluster(objs, ns, schedule="0 3 * * *", retention=None):
    backup = {
        "storage": {
            "s3": {
                "bucket": "backups",
                "endpoint": "http://127.0.0.1:1",
                "forcePathStyle": True,
                "credentialsSecret": {"name": "s3"},
            }
        },
        "schedule": schedule,
    }
    if retention:
        backup["retention"] = retention
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": "shop"},
        "spec": {"flavor": "mariadb", "instances": 2, "backup": backup},
    }
    return objs.create_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, body)


def finish_job(control_plane, ns, job, ok: bool, result: dict):
    """Stand in for the kubelet (the harness has none): the Pod's terminated state and message."""
    batch = client.BatchV1Api(control_plane.api_client())
    core = client.CoreV1Api(control_plane.api_client())
    pods = wait_for(
        lambda: core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items,
        30,
        f"the Job controller to create the Pod of {job}",
    )
    pod = pods[0]
    now = dt.datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    core.patch_namespaced_pod_status(
        pod.metadata.name,
        ns,
        {
            "status": {
                "phase": "Succeeded" if ok else "Failed",
                "containerStatuses": [
                    {
                        "name": "backup",
                        "image": "x",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": 0 if ok else 1,
                                "message": json.dumps(result),
                                "startedAt": now,
                                "finishedAt": now,
                            }
                        },
                    }
                ],
            }
        },
    )

    # the real Job controller turns the Pod's outcome into the Job's (backoffLimit 0: one failure fails it)
    def finished():
        st = batch.read_namespaced_job_status(job, ns).status
        return st.succeeded if ok else st.failed

    wait_for(finished, 60, f"the Job controller to mark {job} {'complete' if ok else 'failed'}")


def events_for(control_plane, ns, name):
    core = client.CoreV1Api(control_plane.api_client())
    return [
        (e.reason, e.type) for e in core.list_namespaced_event(ns).items if e.involved_object.name == name
    ]


def test_schedule_keeps_creating_runs_after_failures_and_reports_them(control_plane, ctl, crds, namespace):
    """A failing storage: each run fails (reported: status, Events) and the next fire time still gets
    its run; once storage works again the next run succeeds and becomes status.lastBackup."""
    cluster = make_cluster(crds, namespace, schedule="*/10 * * * *")
    created = dt.datetime.strptime(cluster["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC
    )
    base = created.replace(second=0, microsecond=0) - dt.timedelta(minutes=created.minute % 10)
    runs = []
    for i, ok in enumerate([False, False, True]):
        now = base + dt.timedelta(minutes=10 * (i + 1), seconds=5)
        done = ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)
        name = done["created"]
        assert name == f"shop-{(base + dt.timedelta(minutes=10 * (i + 1))):%Y%m%d%H%M}", done
        # a second tick in the same minute creates nothing more
        assert ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)["created"] is None
        status = ctl.start(get(crds, namespace, BACKUP_PLURAL, name))
        assert status["phase"] == "Running"
        # while it runs, the next fire time does not start a concurrent backup
        later = ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now + dt.timedelta(minutes=10))
        assert later["created"] is None and "still running" in later["decision"].reason
        result = (
            {
                "ok": True,
                "location": f"s3://backups/shop/{name}",
                "sizeBytes": 123,
                "sha256": "ab" * 32,
                "gtidPosition": "0-1-9",
                "sourceInstance": "shop-1",
                "startedAt": "2025-01-01T00:00:00Z",
                "completedAt": "2025-01-01T00:01:00Z",
            }
            if ok
            else {"ok": False, "message": "cannot reach the S3 endpoint http://127.0.0.1:1"}
        )
        finish_job(control_plane, namespace, f"{name}-backup", ok, result)
        wait_for(lambda: ctl.track(get(crds, namespace, BACKUP_PLURAL, name)), 30, f"{name} to finish")
        runs.append(get(crds, namespace, BACKUP_PLURAL, name))

    assert [r["status"]["phase"] for r in runs] == ["Failed", "Failed", "Succeeded"]
    assert runs[0]["status"]["message"] == "cannot reach the S3 endpoint http://127.0.0.1:1"
    ok = runs[2]["status"]
    assert ok["sha256"] == "ab" * 32 and ok["gtidPosition"] == "0-1-9" and ok["sourceInstance"] == "shop-1"
    assert ok["location"].startswith("s3://backups/shop/")
    # conditions as a Job's (kubectl wait --for=condition=Complete), the size in words
    conditions = [{c["type"]: (c["status"], c["reason"]) for c in r["status"]["conditions"]} for r in runs]
    assert conditions[0] == {"Complete": ("False", "BackupFailed"), "Failed": ("True", "BackupFailed")}
    assert conditions[2] == {"Complete": ("True", "BackupSucceeded"), "Failed": ("False", "BackupSucceeded")}
    assert (ok["sizeBytes"], ok["size"]) == (123, "123 B")
    c = get(crds, namespace, CLUSTER_PLURAL, "shop")
    assert c["status"]["lastBackup"]["name"] == runs[2]["metadata"]["name"]
    # the newest run's fire time (what the late-backup alert compares the last backup with)
    ctl.tick(c, now=base + dt.timedelta(minutes=35))
    scheduled = get(crds, namespace, CLUSTER_PLURAL, "shop")["status"]["lastScheduledBackup"]
    assert scheduled["scheduledAt"] == f"{base + dt.timedelta(minutes=30):%Y-%m-%dT%H:%M:%SZ}", scheduled
    # the schedule removed: the status announces no next run
    crds.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, CLUSTER_PLURAL, "shop", {"spec": {"backup": {"schedule": None}}}
    )
    ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=base + dt.timedelta(minutes=36))
    status = get(crds, namespace, CLUSTER_PLURAL, "shop")["status"]
    assert "nextScheduledBackup" not in status and "lastScheduledBackup" not in status, status
    assert ("BackupFailed", "Warning") in events_for(control_plane, namespace, "shop")
    assert ("BackupFailed", "Warning") in events_for(control_plane, namespace, runs[0]["metadata"]["name"])
    assert ("BackupSucceeded", "Normal") in events_for(control_plane, namespace, runs[2]["metadata"]["name"])
    # the Job is owned by its MySQLBackup (deleted with it)
    job = client.BatchV1Api(control_plane.api_client()).read_namespaced_job(
        f"{runs[2]['metadata']['name']}-backup", namespace
    )
    assert job.metadata.owner_references[0].kind == "MySQLBackup"


def test_second_backup_of_a_cluster_waits_for_the_running_one(control_plane, ctl, crds, namespace):
    make_cluster(crds, namespace)
    for n in ("one", "two"):
        make_backup(crds, namespace, n)
    assert ctl.start(get(crds, namespace, BACKUP_PLURAL, "one"))["phase"] == "Running"
    second = ctl.start(get(crds, namespace, BACKUP_PLURAL, "two"))
    assert second["phase"] == "Pending" and "one" in second["message"]
    finish_job(control_plane, namespace, "one-backup", False, {"ok": False, "message": "boom"})
    wait_for(lambda: ctl.track(get(crds, namespace, BACKUP_PLURAL, "one")), 30, "one to finish")
    assert ctl.track(get(crds, namespace, BACKUP_PLURAL, "two"))["phase"] == "Running"


def test_a_backup_waits_while_its_accounts_new_password_is_not_on_the_servers(
    control_plane, ctl, crds, namespace
):
    """backup-password changed in the credentials Secret, not yet applied (the record of what the
    servers have still holds the old one): a Job now would be refused at login, so the backup
    waits, saying why, and starts once the rotation is recorded."""
    core = client.CoreV1Api(control_plane.api_client())
    make_cluster(crds, namespace)
    for name, password in (("shop-credentials", "new"), ("shop-credentials-applied", "old")):
        core.create_namespaced_secret(
            namespace, {"metadata": {"name": name}, "stringData": {"backup-password": password}}
        )
    make_backup(crds, namespace, "during")
    status = ctl.start(get(crds, namespace, BACKUP_PLURAL, "during"))
    assert (status["phase"], status["message"]) == (
        "Pending",
        "waiting for the new backup-password of Secret 'shop-credentials' to reach the servers",
    )
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {
        "Complete": ("False", "BackupPending"),
        "Failed": ("False", "BackupPending"),
    }
    assert not client.BatchV1Api(control_plane.api_client()).list_namespaced_job(namespace).items
    core.patch_namespaced_secret(
        "shop-credentials-applied", namespace, {"stringData": {"backup-password": "new"}}
    )
    assert ctl.track(get(crds, namespace, BACKUP_PLURAL, "during"))["phase"] == "Running"


def test_backup_of_a_missing_cluster_fails_with_a_clear_message(ctl, crds, namespace):
    make_backup(crds, namespace, "orphan", "nope")
    status = ctl.start(get(crds, namespace, BACKUP_PLURAL, "orphan"))
    assert (
        status["phase"] == "Failed"
        and status["message"]
        == f"MySQLCluster 'nope' not found in {namespace}: fix spec.clusterRef.name, "
        "then create the MySQLBackup again"
    ), status["message"]
    assert get(crds, namespace, BACKUP_PLURAL, "orphan")["status"]["phase"] == "Failed"


def test_a_physical_backup_of_a_mariadb_cluster_runs_a_job_that_streams_the_copy(
    control_plane, ctl, crds, namespace
):
    """A MySQLBackup's own spec.method physical on a MariaDB cluster: its Job asks an instance's
    seed-donor sidecar for the copy (--method physical), with no scratch folder."""
    make_cluster(crds, namespace)  # MariaDB
    make_backup(crds, namespace, "copy", method="physical")
    assert ctl.start(get(crds, namespace, BACKUP_PLURAL, "copy"))["phase"] == "Running"
    (job,) = client.BatchV1Api(control_plane.api_client()).list_namespaced_job(namespace).items
    args = job.spec.template.spec.containers[0].args
    assert args[args.index("--method") + 1] == "physical" and "--scratch-dir" not in args


def test_backup_with_a_user_secret_lacking_backup_password_fails_saying_so(
    control_plane, ctl, crds, namespace
):
    """Backups run as the read-only backup account; a Secret of the user's from before it existed
    fails the backup naming the key, and no Job is created (it could only wait for the key)."""
    core = client.CoreV1Api(control_plane.api_client())
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "mine"},
            "stringData": {"root-password": "r", "operator-password": "o", "replication-password": "p"},
        },
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": "shop"},
        "spec": {
            "flavor": "mariadb",
            "instances": 1,
            "credentials": {"secretName": "mine"},
            "backup": {"storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}}},
        },
    }
    crds.create_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, body)
    for n in ("before", "after"):
        make_backup(crds, namespace, n)
    status = ctl.start(get(crds, namespace, BACKUP_PLURAL, "before"))
    assert status["phase"] == "Failed" and "has no key backup-password" in status["message"]
    assert not client.BatchV1Api(control_plane.api_client()).list_namespaced_job(namespace).items
    core.patch_namespaced_secret("mine", namespace, {"stringData": {"backup-password": "b"}})
    assert ctl.start(get(crds, namespace, BACKUP_PLURAL, "after"))["phase"] == "Running"


def test_backup_with_an_unusable_encryption_key_fails_naming_the_field_and_no_job_is_made(
    control_plane, ctl, crds, namespace
):
    """The key Secret is checked before the Job: a missing Secret, a missing key, a value that is
    not 32 base64 bytes each fail the MySQLBackup at once (with a Warning Event), never quoting the
    value; a good key gives a Job that reads it from the Secret."""
    core = client.CoreV1Api(control_plane.api_client())
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": "shop"},
        "spec": {
            "flavor": "mariadb",
            "instances": 1,
            "backup": {
                "storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}},
                "encryption": {"keySecret": {"name": "backup-key"}},
            },
        },
    }
    crds.create_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, body)
    where = "Secret 'backup-key' key 'encryption-key' (spec.backup.encryption.keySecret)"

    def attempt(name: str) -> dict:
        make_backup(crds, namespace, name)
        return ctl.start(get(crds, namespace, BACKUP_PLURAL, name))

    status = attempt("no-secret")
    assert status["phase"] == "Failed" and status["message"].startswith(f"{where}: the Secret does not exist")
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "backup-key"}, "stringData": {"other": "x"}}
    )
    status = attempt("no-key")
    assert (
        status["message"] == f"{where}: the Secret has no key 'encryption-key': add it or set keySecret.key"
    )
    core.patch_namespaced_secret(
        "backup-key", namespace, {"stringData": {"encryption-key": "hunter2-hunter2"}}
    )
    status = attempt("short-key")
    assert status["phase"] == "Failed" and "openssl rand -base64 32" in status["message"]
    assert "hunter2" not in status["message"]
    assert ("BackupFailed", "Warning") in events_for(control_plane, namespace, "short-key")
    assert not client.BatchV1Api(control_plane.api_client()).list_namespaced_job(namespace).items

    good = base64.b64encode(bytes(range(32))).decode()
    core.patch_namespaced_secret("backup-key", namespace, {"stringData": {"encryption-key": good}})
    assert attempt("good")["phase"] == "Running"
    (job,) = client.BatchV1Api(control_plane.api_client()).list_namespaced_job(namespace).items
    env = {e.name: e.value_from for e in job.spec.template.spec.containers[0].env}
    ref = env["MYSQL_OPERATOR_ENCRYPTION_KEY"].secret_key_ref
    assert (ref.name, ref.key) == ("backup-key", "encryption-key")
    assert good not in json.dumps(client.ApiClient().sanitize_for_serialization(job))


def test_a_backup_to_sse_c_storage_without_its_key_fails_naming_it_and_no_job_is_made(
    control_plane, ctl, crds, namespace
):
    """A MySQLBackup's own storage asks for SSE-C: its key Secret is checked before the Job as the
    client-side key is; once it exists the Job reads it from the Secret, never from its arguments."""
    make_cluster(crds, namespace)
    storage = {
        "s3": {
            "bucket": "other",
            "endpoint": "https://s3.example:9000",
            "credentialsSecret": {"name": "s3"},
            "serverSideEncryption": {"type": "SSE-C", "keySecret": {"name": "sse-key"}},
        }
    }
    make_backup(crds, namespace, "no-key", storage=storage)
    status = ctl.start(get(crds, namespace, BACKUP_PLURAL, "no-key"))
    where = "Secret 'sse-key' key 'sse-c-key' (spec.storage.s3.serverSideEncryption.keySecret)"
    assert status["phase"] == "Failed" and status["message"].startswith(f"{where}: the Secret does not exist")
    assert ("BackupFailed", "Warning") in events_for(control_plane, namespace, "no-key")
    batch = client.BatchV1Api(control_plane.api_client())
    assert not batch.list_namespaced_job(namespace).items

    good = base64.b64encode(bytes(range(32))).decode()
    client.CoreV1Api(control_plane.api_client()).create_namespaced_secret(
        namespace, {"metadata": {"name": "sse-key"}, "stringData": {"sse-c-key": good}}
    )
    make_backup(crds, namespace, "with-key", storage=storage)
    assert ctl.start(get(crds, namespace, BACKUP_PLURAL, "with-key"))["phase"] == "Running"
    (job,) = batch.list_namespaced_job(namespace).items
    (main,) = job.spec.template.spec.containers
    ref = {e.name: e.value_from for e in main.env}["MYSQL_OPERATOR_SSE_C_KEY"].secret_key_ref
    assert (ref.name, ref.key) == ("sse-key", "sse-c-key") and main.args[
        main.args.index("--sse") + 1
    ] == "SSE-C"
    assert good not in json.dumps(client.ApiClient().sanitize_for_serialization(job))


def test_retention_removes_old_backups_but_never_the_newest_success(ctl, crds, namespace):
    make_cluster(crds, namespace, retention={"keepLast": 1})
    for n, phase, when in (
        ("old", "Succeeded", "2025-01-01T00:00:00Z"),
        ("new", "Succeeded", "2025-01-02T00:00:00Z"),
        ("newer-failed", "Failed", "2025-01-03T00:00:00Z"),
        ("older-failed", "Failed", "2024-12-01T00:00:00Z"),
    ):
        make_backup(crds, namespace, n)
        crds.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, BACKUP_PLURAL, n, {"status": {"phase": phase, "completedAt": when}}
        )
    done = ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=dt.datetime(2025, 1, 3, 1, tzinfo=UTC))
    assert sorted(done["deleted"]) == ["old", "older-failed"]
    left = sorted(
        o["metadata"]["name"]
        for o in crds.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"]
        if not o["metadata"].get("deletionTimestamp")
    )
    assert "new" in left and "newer-failed" in left and "old" not in left


def test_retention_deletes_the_objects_through_a_job_before_the_backup(control_plane, ctl, crds, namespace):
    """The operator never talks to the tenant's S3: an expired backup that stored objects gets a
    delete Job (no API token, S3 credentials only); the MySQLBackup goes once the Job succeeded."""
    make_cluster(crds, namespace, retention={"keepLast": 1})
    for n, when in (("old", "2025-01-01T00:00:00Z"), ("new", "2025-01-02T00:00:00Z")):
        make_stored_backup(crds, namespace, n, when)
    now = dt.datetime(2025, 1, 3, 1, tzinfo=UTC)
    done = ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)
    assert done["deleted"] == [] and done["deleting"] == ["old"]
    job = client.BatchV1Api(control_plane.api_client()).read_namespaced_job("old-delete", namespace)
    pod = job.spec.template.spec
    assert pod.automount_service_account_token is False
    assert pod.containers[0].args[:2] == ["backup", "delete-data"]
    assert pod.containers[0].args[pod.containers[0].args.index("--folder") + 1] == "shop/old"
    assert job.metadata.owner_references[0].name == "old"  # goes with its MySQLBackup
    assert ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)["deleting"] == [
        "old"
    ]  # still running

    finish_job(control_plane, namespace, "old-delete", False, {"ok": False, "message": "AccessDenied"})
    assert ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)["deleting"] == ["old"]
    assert ("BackupDeleteFailed", "Warning") in events_for(control_plane, namespace, "old")
    assert get(crds, namespace, BACKUP_PLURAL, "old")  # kept: its objects are still there
    # the failed Job was removed: the next pass starts a new one
    batch = client.BatchV1Api(control_plane.api_client())
    wait_for(
        lambda: (
            ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)["deleting"] == ["old"]
            and batch.read_namespaced_job("old-delete", namespace).status.failed is None
        ),
        60,
        "a new delete Job for old",
    )
    finish_job(
        control_plane, namespace, "old-delete", True, {"ok": True, "deleted": 2, "message": "deleted 2"}
    )
    assert ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)["deleted"] == ["old"]


def test_retention_runs_at_most_two_delete_jobs_of_a_cluster_at_once(control_plane, ctl, crds, namespace):
    """Retention expiring five backups at one pass starts two delete Jobs, not five: each is a Pod
    starting a Python process, and a burst of them starved a small node's database Pods for 30 s
    (CI at eb2bae2). The others start as those end, and every expired backup goes in the end."""
    make_cluster(crds, namespace, retention={"keepLast": 1})
    names = [f"b{i}" for i in range(6)]
    for i, n in enumerate(names):
        make_stored_backup(crds, namespace, n, f"2025-01-0{i + 1}T00:00:00Z")
    now = dt.datetime(2025, 1, 9, tzinfo=UTC)
    batch = client.BatchV1Api(control_plane.api_client())

    def running() -> list[str]:
        return sorted(
            j.metadata.name
            for j in batch.list_namespaced_job(namespace).items
            if not (j.status.succeeded or j.status.failed)
        )

    def tick() -> dict:
        return ctl.tick(get(crds, namespace, CLUSTER_PLURAL, "shop"), now=now)

    assert sorted(tick()["deleting"]) == names[:5]  # b5, the newest, is kept
    first = running()
    assert len(first) == 2, first
    assert sorted(tick()["deleting"]) == names[:5] and running() == first  # none more while they run
    gone: list[str] = []
    for _ in range(5):  # one ends, the next starts: never more than two
        job = running()[0]
        finish_job(control_plane, namespace, job, True, {"ok": True, "deleted": 1, "message": "deleted 1"})
        done = tick()
        gone += done["deleted"]
        assert job.removesuffix("-delete") in done["deleted"], done
        assert len(running()) <= 2, running()
    assert sorted(gone) == names[:5] and running() == []
    left = [
        o["metadata"]["name"]
        for o in crds.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"]
        if not o["metadata"].get("deletionTimestamp")
    ]
    assert left == ["b5"]


def test_cli_backup_commands_use_the_kubeconfig_context_namespace(
    control_plane, crds, tmp_path, monkeypatch, capsys
):
    """`mysql-operator backup create|list` without -n act in the namespace of the kubeconfig's
    context: the current one, or the one --context names."""
    from mysql_operator.cli import main

    core = client.CoreV1Api(control_plane.api_client())
    for ns in ("cli-current", "cli-named"):
        core.create_namespace({"metadata": {"name": ns}})
    kc = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    base = next(c for c in kc["contexts"] if c["name"] == kc["current-context"])
    kc["contexts"] = [
        {"name": "current", "context": {**base["context"], "namespace": "cli-current"}},
        {"name": "named", "context": {**base["context"], "namespace": "cli-named"}},
    ]
    kc["current-context"] = "current"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    monkeypatch.setenv("KUBECONFIG", str(path))

    assert main(["backup", "create", "shop", "--name", "b-current"]) == 0
    assert main(["backup", "create", "shop", "--name", "b-named", "--context", "named"]) == 0
    assert "mysqlbackup/b-current created in cli-current" in capsys.readouterr().out
    for ns, name in (("cli-current", "b-current"), ("cli-named", "b-named")):
        got = crds.get_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, name)
        assert got["spec"]["clusterRef"]["name"] == "shop"
    assert main(["backup", "list", "--context", "named"]) == 0
    listed = capsys.readouterr().out
    assert "b-named" in listed and "b-current" not in listed
