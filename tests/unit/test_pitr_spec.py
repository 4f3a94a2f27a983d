"""spec.backup.binlogs (parsing, the archiver Deployment, its SQL account) and spec.restore's
point-in-time recovery (parsing, the restore Job's stop) - pure."""

from __future__ import annotations

import json

import copy

import pytest

from mysql_operator import credentials as creds
from mysql_operator import manifests as m
from mysql_operator.api import SpecError, parse
from mysql_operator.db import accounts
from mysql_operator.manifests.archiver import BINLOG_SPOOL, binlog_archiver
from mysql_operator.manifests.restore_jobs import restore_job
from mysql_operator.manifests.tenant_jobs import CLIENT_TOOLS_DIR
from tests.support.archiving import cluster


def test_archiving_is_off_unless_asked_and_waits_ten_seconds_by_default():
    assert binlog_archiver(parse(cluster()), "op:1") is None
    c = parse(cluster(binlogs={"enabled": True}))
    assert c.spec.backup.binlogs.enabled and c.spec.backup.binlogs.max_delay_seconds == 10


@pytest.mark.parametrize(
    "binlogs, field",
    [
        ({"enabled": True, "maxDelaySeconds": 0}, "spec.backup.binlogs.maxDelaySeconds"),
        ({"enabled": "yes"}, "spec.backup.binlogs.enabled"),
    ],
)
def test_bad_binlog_settings_name_the_field(binlogs, field):
    with pytest.raises(SpecError) as e:
        parse(cluster(binlogs=binlogs))
    assert str(e.value).startswith(field), str(e.value)


def test_archiving_without_storage_is_refused_saying_where_they_would_go():
    body = cluster(binlogs={"enabled": True})
    del body["spec"]["backup"]["storage"]
    with pytest.raises(SpecError) as e:
        parse(body)
    assert str(e.value).startswith("spec.backup.binlogs.enabled") and "spec.backup.storage" in str(e.value)


def test_the_archiver_is_one_tokenless_restricted_pod_streaming_every_server():
    c = parse(cluster(binlogs={"enabled": True, "maxDelaySeconds": 3}))
    dep = binlog_archiver(c, "op:1", image_pull_policy="Never")
    assert dep["kind"] == "Deployment" and dep["metadata"]["name"] == "shop-binlog-archiver"
    # never two streams uploading the same files, not even during an update
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Always"
    (main,) = pod["containers"]
    assert main["image"] == "op:1" and main["imagePullPolicy"] == "Never"
    assert main["securityContext"]["readOnlyRootFilesystem"] and main["securityContext"]["runAsNonRoot"]
    args = main["args"]
    assert args[:2] == ["backup", "archive-binlogs"]
    assert args[args.index("--max-delay") + 1] == "3" and args[args.index("--user") + 1] == m.BINLOG_USER
    # the archive's folder is claimed by this cluster: one re-created under its name is refused
    assert args[args.index("--cluster") + 1] == "shop" and args[args.index("--cluster-uid") + 1] == "u1"
    sources = [args[i + 1] for i, a in enumerate(args) if a == "--source"]
    assert sources == [f"shop-{i}={m.pod_host(c, i)}:3306" for i in range(3)]
    # the password and the S3 keys come from Secrets, never from arguments
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in main["env"] if "valueFrom" in e}
    assert env["MYSQL_OPERATOR_DB_PASSWORD"] == {"name": "shop-credentials", "key": m.BINLOG_PASSWORD_KEY}
    assert env["AWS_SECRET_ACCESS_KEY"]["name"] == "s3"
    # the stream runs in the servers' tool image's sidecar and writes into the spool both mount
    (tools,) = pod["initContainers"]
    assert tools["image"] == "localhost/mysql-operator-tools:mariadb-10.11"
    assert tools["command"][-1] == CLIENT_TOOLS_DIR
    spool = {"name": "spool", "mountPath": BINLOG_SPOOL}
    assert spool in tools["volumeMounts"] and spool in main["volumeMounts"]
    assert args[args.index("--spool") + 1] == BINLOG_SPOOL
    # the selector leaves out the version label: a server upgrade must not need a new Deployment
    assert "app.kubernetes.io/version" not in dep["spec"]["selector"]["matchLabels"]


def test_the_archiver_encrypts_with_the_backup_key():
    c = parse(cluster(binlogs={"enabled": True}, encryption={"keySecret": {"name": "bk"}}))
    main = binlog_archiver(c, "op:1")["spec"]["template"]["spec"]["containers"][0]
    assert "--encryption-key-from" in main["args"]
    assert {
        "name": "MYSQL_OPERATOR_ENCRYPTION_KEY",
        "valueFrom": {"secretKeyRef": {"name": "bk", "key": "encryption-key"}},
    } in main["env"]


@pytest.mark.parametrize("flavor, listing", [("mariadb", "BINLOG MONITOR"), ("mysql", "REPLICATION CLIENT")])
def test_the_binlog_account_streams_lists_and_rotates_and_reads_no_data(flavor, listing):
    (g,) = accounts.binlog_grants(flavor)
    assert g.target == "*.*" and set(g.privileges) == {"REPLICATION SLAVE", listing, "RELOAD"}
    assert not g.grant_option
    # the operator can give it only what it holds itself
    held = {p for p, _ in accounts.operator_privileges(flavor)}
    assert set(g.privileges) <= held


def test_the_binlog_password_is_generated_optional_and_rotated():
    c = parse(cluster(binlogs={"enabled": True}))
    secret = m.credentials_secret(c, lambda key: f"pw-{key}")
    assert m.BINLOG_PASSWORD_KEY in secret["data"]
    assert m.BINLOG_PASSWORD_KEY in creds.optional_keys(c)
    rotated = creds.rotation_accounts(c, (m.BINLOG_PASSWORD_KEY,), {m.BINLOG_PASSWORD_KEY: "new"})
    assert rotated[m.BINLOG_PASSWORD_KEY].user == m.BINLOG_USER


def test_turning_archiving_off_removes_the_deployment_from_what_is_wanted():
    body = cluster(binlogs={"enabled": True})
    assert binlog_archiver(parse(body), "op") is not None
    off = copy.deepcopy(body)
    off["spec"]["backup"]["binlogs"]["enabled"] = False
    assert binlog_archiver(parse(off), "op") is None


def restoring(flavor="mysql", **restore):
    body = cluster(flavor)
    body["spec"]["restore"] = {"fromBackup": {"name": "nightly"}, **restore}
    return body


@pytest.mark.parametrize(
    "given, job_args",
    [
        ({"pointInTime": "2026-11-26T10:42:17Z"}, ["--stop-at", "2026-11-26T10:42:17Z"]),
        ({"pointInTime": "2026-11-26T11:42:17+01:00"}, ["--stop-at", "2026-11-26T10:42:17Z"]),
        ({"pointInTime": "latest"}, ["--stop-latest"]),
        (
            {"gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3"},
            [
                "--stop-gtid",
                "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3",
            ],
        ),
        ({"gtid": "0-1-42,1-2-7"}, ["--stop-gtid", "0-1-42,1-2-7"]),
        ({}, []),
    ],
)
def test_the_restore_job_replays_to_the_point_asked_for_in_utc(given, job_args):
    c = parse(restoring(**given))
    args = restore_job(c, c.spec.backup.s3, "shop/nightly", "img")["spec"]["template"]["spec"]["containers"][
        0
    ]["args"]
    stops = [a for a in args if a.startswith("--stop")]
    assert stops == [a for a in job_args if a.startswith("--stop")]
    if len(job_args) == 2:
        assert args[args.index(job_args[0]) + 1] == job_args[1]


@pytest.mark.parametrize(
    "given, field, says",
    [
        ({"pointInTime": "2026-11-26T10:42:17.250Z"}, "spec.restore.pointInTime", "whole seconds"),
        ({"pointInTime": "yesterday"}, "spec.restore.pointInTime", "RFC 3339"),
        ({"pointInTime": "2026-02-30T10:00:00Z"}, "spec.restore.pointInTime", "not a valid date"),
        ({"gtid": "not-a-gtid"}, "spec.restore.gtid", "SELECT @@gtid_executed"),
        ({"gtid": "0-1-42", "pointInTime": "latest"}, "spec.restore.gtid", "not both"),
    ],
)
def test_a_bad_point_in_time_names_the_field_and_the_form(given, field, says):
    with pytest.raises(SpecError) as e:
        parse(restoring(**given))
    assert str(e.value).startswith(field) and says in str(e.value), str(e.value)


def test_the_archiver_is_ready_only_while_its_passes_archive_from_the_primary():
    from mysql_operator.backup.archiver_health import Health

    now = [100.0]
    h = Health(grace=30)
    h.clock = lambda: now[0]
    assert not h.healthy(), "not before its first good pass"
    h.passed(True)
    now[0] = 129.0
    h.passed(False)  # no primary, a failed upload: the last good pass still counts a while
    assert h.healthy()
    now[0] = 131.0
    assert not h.healthy(), "30 s without a good pass: not ready"
    dep = binlog_archiver(parse(cluster(binlogs={"enabled": True})), "op")
    (main,) = dep["spec"]["template"]["spec"]["containers"]
    assert main["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["ports"][0]["name"] == "metrics", "the PodMonitor scrapes the port named metrics"
    assert main["args"][main["args"].index("--health-port") + 1] == str(main["ports"][0]["containerPort"])


def test_the_archive_delay_is_the_age_of_the_oldest_transaction_the_bucket_lacks():
    from prometheus_client.parser import text_string_to_metric_families

    from mysql_operator.backup.binlog_archive import Segment, Step
    from mysql_operator.backup.archiver_health import Health

    now = [100.0]
    h = Health(grace=30, max_delay=5)
    h.clock = lambda: now[0]
    h.oldest = h.carried = now[0]
    now[0] = 103.0
    assert h.delay() == 3.0, "from the start while no pass said what is archived"
    h.passed(True, Step("primary"))
    assert h.delay() == 0.0, "the bucket holds all the primary wrote"
    h.passed(True, Step("primary", behind_since=103.0))  # a transaction in the file being written
    now[0] = 106.0
    h.passed(True, Step("primary", behind_since=103.0, rotated=True))
    assert h.delay() == 3.0
    now[0] = 107.0
    uploaded = Segment.__new__(Segment)
    h.passed(True, Step("primary", [uploaded], behind_since=106.5))  # a write after the rotation
    assert h.delay() == 0.5, "under writes: the oldest pending one counts, not the first ever"

    h.passed(False)  # the primary went away with that transaction pending
    now[0] = 117.0
    h.passed(False)
    assert h.delay() == 10.5, "grows while nothing is archived"
    h.passed(True, Step("primary", behind_since=117.0))  # the new primary: nothing uploaded yet
    assert h.delay() == 10.5, "what was pending stays pending until a pass uploads"
    samples = {
        s.name: s.value for f in text_string_to_metric_families(h.metrics().decode()) for s in f.samples
    }
    assert samples == {
        "mysql_binlog_archive_delay_seconds": 10.5,
        "mysql_binlog_archive_max_delay_seconds": 5.0,
        "mysql_binlog_archive_streaming": 1.0,
    }
    now[0] = 119.0
    h.passed(True, Step("primary", [uploaded], behind_since=118.0))
    assert h.delay() == 1.0


def test_the_status_says_whether_the_binary_logs_are_archived_and_warns_when_it_stops():
    from mysql_operator.instance_status import archiver_state
    from mysql_operator.status import build_status
    from mysql_operator.status_events import archiving_events
    from mysql_operator.summary import Summary

    def status(archiver, previous=None):
        s = Summary(
            instances=2,
            ready=2,
            primary="shop-0",
            primary_serving=True,
            primary_in_service=True,
            binlog_archiver=archiver,
        )
        return build_status(s, previous or {}, "2026-11-26T10:00:00Z")

    def cond(st):
        return next((c for c in st["conditions"] if c["type"] == "BinlogArchiving"), None)

    assert cond(status(None)) is None, "no condition while archiving is off"
    assert archiver_state("shop-binlog-archiver", {"readyReplicas": 1}).why == ""
    assert "does not exist yet" in archiver_state("shop-binlog-archiver", None).why
    up = status(archiver_state("shop-binlog-archiver", {"readyReplicas": 1}))
    assert (cond(up)["status"], cond(up)["reason"]) == ("True", "Archiving")
    why = archiver_state("shop-binlog-archiver", {"replicas": 1})
    down = status(why, up)
    assert (cond(down)["status"], cond(down)["reason"]) == ("False", "ArchiverNotReady")
    assert "kubectl logs deploy/shop-binlog-archiver -c archiver" in cond(down)["message"]
    # a Warning once when it stops; none while it first starts, none while it stays down
    assert archiving_events(up, down) == [("Warning", "BinlogArchivingStopped", cond(down)["message"])]
    assert archiving_events({}, status(why)) == [] and archiving_events(down, status(why, down)) == []
    assert down["phase"] == "Ready", "the databases serve: archiving is reported, not the cluster's phase"


def _archiver_pod(last=None, waiting=None, name="archiver"):
    cs = {"name": name, "state": {"waiting": waiting} if waiting else {"running": {}}}
    if last is not None:
        cs["lastState"] = {"terminated": last}
    return {"status": {"phase": "Running", "containerStatuses": [cs]}}


TOO_OLD = (
    "mysqlbinlog 9.6.0 in the tool image reg.example/tools:old is older than the server (mysql 9.7.4): "
    "it may not read the binary logs the server writes, so none is archived. Fix spec.toolsImage: ..."
)


@pytest.mark.parametrize(
    "pod, expected",
    [
        # the archiver's report (its termination message), also while the back-off waits
        (_archiver_pod({"exitCode": 1, "message": json.dumps({"ok": False, "message": TOO_OLD})}), TOO_OLD),
        (
            _archiver_pod(
                {"exitCode": 1, "message": json.dumps({"ok": False, "message": TOO_OLD})},
                {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"},
            ),
            TOO_OLD,
        ),
        # no report: its log's last lines (FallbackToLogsOnError), else the exit status
        (
            _archiver_pod({"exitCode": 2, "message": "Traceback ...\nOSError: boom\n"}),
            "Traceback ... OSError: boom",
        ),
        (
            _archiver_pod({"exitCode": 137, "reason": "OOMKilled"}),
            "its last run ended with exit status 137 (OOMKilled)",
        ),
        # an image that cannot be pulled: the kubelet's words
        (
            _archiver_pod(None, {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}),
            'archiver ImagePullBackOff: Back-off pulling image "x"',
        ),
        # none: it runs, it ended well, or the trouble is another container's last run
        (_archiver_pod(), ""),
        (_archiver_pod({"exitCode": 0, "message": "bye"}), ""),
        (_archiver_pod({"exitCode": 1, "message": "x"}, name="client-tools"), ""),
    ],
)
def test_an_archiver_pods_trouble_is_in_its_own_words(pod, expected):
    from mysql_operator.instance_status import archiver_pod_trouble

    assert archiver_pod_trouble(pod) == expected


def test_an_archiver_that_cannot_run_is_named_in_the_condition_and_a_warning_once():
    """A tool image too old (the archiver's report) or an image that cannot be pulled: the
    condition BinlogArchiving says why with reason ArchiverFailing, and a Warning Event says it
    once per episode, also when archiving never ran; when the Pod is ready, archiving is on."""
    from mysql_operator.instance_status import archiver_state
    from mysql_operator.status import build_status
    from mysql_operator.status_events import archiving_events
    from mysql_operator.summary import Summary

    def status(archiver, previous=None):
        s = Summary(instances=2, ready=2, primary="shop-0", primary_serving=True, binlog_archiver=archiver)
        return build_status(s, previous or {}, "2026-11-26T10:00:00Z")

    def cond(st):
        return next(c for c in st["conditions"] if c["type"] == "BinlogArchiving")

    starting = status(archiver_state("shop-binlog-archiver", {"replicas": 1}))
    failing = status(archiver_state("shop-binlog-archiver", {"replicas": 1}, TOO_OLD), starting)
    assert (cond(failing)["status"], cond(failing)["reason"]) == ("False", "ArchiverFailing")
    assert (
        cond(failing)["message"]
        == f"the archiver Pod (Deployment shop-binlog-archiver) cannot archive: {TOO_OLD}"
    )
    assert archiving_events(starting, failing) == [("Warning", "ArchiverFailing", cond(failing)["message"])]
    again = status(archiver_state("shop-binlog-archiver", {"replicas": 1}, TOO_OLD), failing)
    assert archiving_events(failing, again) == [], "once per episode"
    # the Pod is ready (a fixed spec.toolsImage): archiving, whatever an old Pod said
    fixed = status(archiver_state("shop-binlog-archiver", {"readyReplicas": 1}, TOO_OLD), again)
    assert (cond(fixed)["status"], cond(fixed)["reason"]) == ("True", "Archiving")
