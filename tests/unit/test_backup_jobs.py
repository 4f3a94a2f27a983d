"""Pure builders and readers for backup Jobs, scheduled MySQLBackups, the CLI and Job outcomes."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json

import pytest

from mysql_operator.api import parse
from mysql_operator.cli_backup import register, restored_cluster
from mysql_operator.job_commands import result_of
from mysql_operator.backup.backup_status import job_outcome, storage_for
from mysql_operator.manifests.backup_jobs import (
    DELETE_DATA_ANNOTATION,
    SCHEDULED_AT_ANNOTATION,
    backup_job,
    scheduled_backup,
)
from mysql_operator.manifests.restore_jobs import (
    RESTORE_TLS_DIR,
    restore_dns_names,
    restore_job,
    restore_network_policy,
    restore_service,
)
from mysql_operator.manifests.tenant_jobs import CLIENT_TOOLS_DIR, SCRATCH_DIR, job_name, tools_image
from mysql_operator.manifests.common import selector_labels
from mysql_operator.manifests.servers import statefulset
from mysql_operator.manifests.scripts import CLIENT_TOOLS_SH
from mysql_operator.api import parse_backup
from tests.support.specs import body

S3 = {
    "bucket": "backups",
    "prefix": "prod",
    "endpoint": "http://minio.storage:9000",
    "forcePathStyle": True,
    "credentialsSecret": {"name": "s3-creds"},
}
CLUSTER = body(
    {
        "flavor": "mariadb",
        "instances": 3,
        "backup": {"storage": {"s3": S3}, "schedule": "0 3 * * *", "retention": {"keepLast": 7}},
    },
    "shop",
    "prod",
    uid="u1",
)
BACKUP = {
    "apiVersion": "mysql.operator.dev/v1alpha1",
    "kind": "MySQLBackup",
    "metadata": {"name": "shop-manual", "namespace": "prod", "uid": "u2"},
    "spec": {"clusterRef": {"name": "shop"}},
}


def _job():
    c, b = parse(CLUSTER), parse_backup(BACKUP)
    return backup_job(c, b, c.spec.backup.s3, "localhost/mysql-operator:0.1.0")


def test_job_runs_backup_run_with_every_server_as_candidate():
    job = _job()
    pod = job["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[:2] == ["backup", "run"]
    assert args.count("--source") == 3
    assert "shop-0=shop-0.shop-headless.prod.svc:3306" in args
    assert args[args.index("--bucket") + 1] == "backups" and "--force-path-style" in args
    assert args[args.index("--endpoint") + 1] == "http://minio.storage:9000"
    assert job["metadata"]["name"] == "shop-manual-backup"


def test_job_secrets_come_from_secret_refs_never_args():
    c = _job()["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in c["env"]}
    assert env["AWS_ACCESS_KEY_ID"] == {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}
    # the read-only backup account, never the operator's
    assert env["MYSQL_OPERATOR_DB_PASSWORD"] == {"name": "shop-credentials", "key": "backup-password"}
    assert c["args"][c["args"].index("--user") + 1] == "mysql-operator-backup"
    assert not any("password" in a.lower() or "secret" in a.lower() for a in c["args"])


def test_job_fails_visibly_never_retries_silently_and_is_restricted():
    job = _job()
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] > 0
    pod = job["spec"]["template"]["spec"]
    sc = pod["containers"][0]["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"


@pytest.mark.parametrize("kind", ["backup", "restore"])
def test_jobs_mount_the_ca_bundle_read_only_and_verify_the_servers_with_it(kind):
    c = parse(CLUSTER)
    job = _job() if kind == "backup" else restore_job(c, c.spec.backup.s3, "shop/shop-manual", "img")
    pod = job["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--tls-ca") + 1] == "/etc/mysql-operator/ca/ca.crt"
    assert {"name": "ca-bundle", "mountPath": "/etc/mysql-operator/ca", "readOnly": True} in pod[
        "containers"
    ][0]["volumeMounts"]
    assert {
        "name": "ca-bundle",
        "secret": {"secretName": "shop-ca-bundle", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    } in pod["volumes"]
    # /tmp, the CA, the folder shared with the client-tools sidecar (a restore Job: and the
    # certificate it serves a physical copy with, and the scratch folder its pieces are spooled in)
    assert pod["automountServiceAccountToken"] is False
    assert len(pod["volumes"]) == (3 if kind == "backup" else 5)


@pytest.mark.parametrize("kind", ["backup", "restore"])
def test_dumps_and_loads_run_in_a_sidecar_of_the_servers_tool_image(kind):
    c = parse(CLUSTER)
    job = _job() if kind == "backup" else restore_job(c, c.spec.backup.s3, "shop/shop-manual", "img")
    pod = job["spec"]["template"]["spec"]
    (tools,) = pod["initContainers"]
    # a native sidecar: it keeps running beside the Job's container and ends with the Pod
    assert tools["name"] == "client-tools" and tools["restartPolicy"] == "Always"
    assert tools["image"] == "localhost/mysql-operator-tools:mariadb-10.11"
    assert tools["imagePullPolicy"] == c.spec.image_pull_policy
    assert tools["command"][:3] == ["/bin/bash", "-c", CLIENT_TOOLS_SH]
    assert tools["command"][-1] == CLIENT_TOOLS_DIR
    assert tools["securityContext"] == pod["containers"][0]["securityContext"]  # one uid: shared 0600 files
    assert "env" not in tools  # no password, no S3 key: an option file per run
    args = pod["containers"][0]["args"]
    assert args[args.index("--client-tools-dir") + 1] == CLIENT_TOOLS_DIR
    shared = {"name": "client-tools", "mountPath": CLIENT_TOOLS_DIR}
    assert shared in tools["volumeMounts"] and shared in pod["containers"][0]["volumeMounts"]
    assert {"name": "ca-bundle", "mountPath": "/etc/mysql-operator/ca", "readOnly": True} in tools[
        "volumeMounts"
    ]


@pytest.mark.parametrize(
    "spec, repository, expected",
    [
        ({"flavor": "mysql", "version": "9.7.4"}, "r.example/tools", "r.example/tools:mysql-9.7"),
        ({"flavor": "mysql", "image": "r.example/mysql:9.7"}, "r.example/tools", "r.example/tools:mysql-9.7"),
        ({"flavor": "mariadb", "version": "11.8"}, "r.example/tools", "r.example/tools:mariadb-11.8"),
        ({"flavor": "mariadb"}, "r.example/tools", "r.example/tools:mariadb-10.11"),  # the default 10.11
        # a series the project builds no tool image for: the server image, as before
        ({"flavor": "mysql"}, "r.example/tools", "mysql:8.4"),
        ({"flavor": "mariadb", "image": "r.example/mariadb:11.4"}, "r.example/t", "r.example/mariadb:11.4"),
        # an image whose tag names no version: the flavor's default series
        ({"flavor": "mariadb", "image": "r.example/mariadb:prod"}, "t", "t:mariadb-10.11"),
        # the cluster's own choice wins
        ({"flavor": "mysql", "version": "9.7", "toolsImage": "mine/tools:1"}, "t", "mine/tools:1"),
    ],
)
def test_the_tool_image_is_the_servers_flavor_and_series_unless_the_cluster_names_one(
    spec, repository, expected
):
    c = parse({**CLUSTER, "spec": {"instances": 1, **spec}})
    assert tools_image(c, repository) == expected


def _mysql(method: str | None = None, size: str = "20Gi") -> dict:
    spec = {**CLUSTER["spec"], "flavor": "mysql", "storage": {"size": size}}
    if method:
        spec["backup"] = {**spec["backup"], "method": method}
    return {**CLUSTER, "spec": spec}


def _scratch(pod: dict) -> tuple[list, list, list]:
    """The scratch volume, its mounts in the Job's container and in the sidecar."""
    (tools,) = pod["initContainers"]
    return (
        [v for v in pod["volumes"] if v["name"] == "scratch"],
        [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "scratch"],
        [m for m in tools["volumeMounts"] if m["name"] == "scratch"],
    )


def test_a_physical_backup_copies_on_a_disk_folder_as_large_as_an_instances_volume():
    c, b = parse(_mysql("physical", "20Gi")), parse_backup(BACKUP)
    pod = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--method") + 1] == "physical"
    assert args[args.index("--scratch-dir") + 1] == SCRATCH_DIR
    volumes, main, sidecar = _scratch(pod)
    # on the node's disk (no medium: not memory), at most the size of the data it copies
    assert volumes == [{"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}}]
    assert main == sidecar == [{"name": "scratch", "mountPath": SCRATCH_DIR}]
    # the option files with passwords stay in memory, apart from the copy
    assert {"name": "client-tools", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in pod["volumes"]


@pytest.mark.parametrize("cluster_method", [None, "logical", "physical"])
@pytest.mark.parametrize("method", ["logical", "physical"])
def test_a_backups_own_method_overrides_the_clusters(cluster_method, method):
    c = parse(_mysql(cluster_method))
    b = parse_backup({**BACKUP, "spec": {**BACKUP["spec"], "method": method}})
    args = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--method" in args) == (method == "physical")
    b = parse_backup(BACKUP)  # none of its own: the cluster's
    args = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--method" in args) == (cluster_method == "physical")


@pytest.mark.parametrize("drill", [False, True])
@pytest.mark.parametrize("method", ["logical", "physical"])
@pytest.mark.parametrize("flavor", ["mysql", "mariadb"])
def test_a_physical_backup_records_its_tables_when_the_cluster_has_drills(flavor, method, drill):
    """A dump of the copy costs time (1.46 times a MySQL physical backup's): asked for only when a
    restore drill will compare with it; a logical backup records them from its own dump anyway.
    MariaDB's copy is then unpacked into the scratch folder as it streams (to be prepared and
    dumped); without drills it is only streamed."""
    spec = _mysql(method)
    spec["spec"]["flavor"] = flavor
    if drill:
        spec["spec"]["backup"] = {**spec["spec"]["backup"], "drill": {"schedule": "0 3 * * 0"}}
    c, b = parse(spec), parse_backup(BACKUP)
    pod = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert ("--copy-digests" in args) == (method == "physical" and drill)
    from mysql_operator.cli import build_parser

    assert build_parser().parse_args(args).copy_digests == (
        method == "physical" and drill
    )  # what the Job runs
    scratch = method == "physical" and (flavor == "mysql" or drill)
    assert ("--scratch-dir" in args) == scratch
    volumes, main, sidecar = _scratch(pod)
    assert bool(volumes) == bool(main) == bool(sidecar) == scratch


def test_a_physical_backup_of_mariadb_is_streamed_without_a_scratch_folder():
    """MariaDB's copy comes as a stream from the instance Pod's seed-donor sidecar: without drills
    nothing is copied into the Job's Pod."""
    c, b = parse(CLUSTER), parse_backup({**BACKUP, "spec": {**BACKUP["spec"], "method": "physical"}})
    pod = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--method") + 1] == "physical" and "--scratch-dir" not in args
    assert _scratch(pod) == ([], [], [])


@pytest.mark.parametrize("method", [None, "logical"])
def test_a_logical_backup_has_no_scratch_folder(method):
    c, b = parse(_mysql(method)), parse_backup(BACKUP)
    pod = backup_job(c, b, c.spec.backup.s3, "img")["spec"]["template"]["spec"]
    assert "--method" not in pod["containers"][0]["args"] and _scratch(pod) == ([], [], [])


def test_a_mysql_restore_job_can_serve_a_physical_copy_at_a_name_its_certificate_carries():
    """Whether the backup is physical, only its manifest says (the Job reads it): a MySQL
    restore Job can always serve one - at the restore Service's name, with a certificate for that
    name that only its sidecar (which runs the server) mounts - a MariaDB one never (its backups
    are logical)."""
    c = parse(_mysql(size="5Gi"))
    pod = restore_job(c, c.spec.backup.s3, "shop/shop-manual", "img")["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    args = ctr["args"]
    assert args[args.index("--donor-host") + 1] == "shop-restore.prod.svc" == restore_dns_names(c)[0]
    assert args[args.index("--donor-port") + 1] == "3306"
    assert args[args.index("--donor-tls-dir") + 1] == RESTORE_TLS_DIR
    assert args[args.index("--scratch-dir") + 1] == SCRATCH_DIR
    volumes, main, sidecar = _scratch(pod)
    assert volumes == [{"name": "scratch", "emptyDir": {"sizeLimit": "5Gi"}}] and main == sidecar != []
    (tools,) = pod["initContainers"]
    assert {"name": "restore-tls", "secret": {"secretName": "shop-restore-tls"}} in pod["volumes"]
    assert [m["mountPath"] for m in tools["volumeMounts"] if m["name"] == "restore-tls"] == [RESTORE_TLS_DIR]
    assert not any(m["name"] == "restore-tls" for m in ctr["volumeMounts"])  # the key: the sidecar's only

    svc = restore_service(c)
    assert svc["metadata"]["name"] == "shop-restore" and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True  # named before the Pod is Ready
    pod_labels = restore_job(c, c.spec.backup.s3, "x", "img")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    other = backup_job(c, parse_backup(BACKUP), c.spec.backup.s3, "img")["spec"]["template"]["metadata"]
    assert not svc["spec"]["selector"].items() <= other["labels"].items()  # a backup Job is not it


def test_a_mariadb_restore_job_serves_a_physical_copy_itself_and_is_ready_while_it_does():
    """MariaDB: the Job streams the copy from the bucket to the instances' seed init containers,
    on the re-seed port, with its certificate (in its own container: no server in the sidecar,
    which does not mount the scratch folder - only the Job's container spools a dump's pieces
    there); its port answering makes it ready, which the operator waits for."""
    c = parse(CLUSTER)
    pod = restore_job(c, c.spec.backup.s3, "shop/shop-manual", "img")["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    args = ctr["args"]
    assert args[args.index("--donor-host") + 1] == "shop-restore.prod.svc"
    assert args[args.index("--donor-port") + 1] == "3307"
    assert (
        args[args.index("--scratch-dir") + 1] == SCRATCH_DIR and args[args.index("--load-workers") + 1] == "4"
    )
    volumes, main, sidecar = _scratch(pod)
    assert (
        volumes == [{"name": "scratch", "emptyDir": {"sizeLimit": "10Gi"}}] and main != [] and sidecar == []
    )
    assert {"name": "restore-tls", "mountPath": RESTORE_TLS_DIR, "readOnly": True} in ctr["volumeMounts"]
    assert ctr["readinessProbe"]["tcpSocket"] == {"port": 3307}
    assert restore_service(c)["spec"]["ports"] == [{"name": "copy", "port": 3307, "targetPort": 3307}]
    # it serves the copy only to a requester sending the new cluster's operator password
    (token,) = [e for e in ctr["env"] if e["name"] == "MYSQL_OPERATOR_SEED_TOKEN"]
    assert token["valueFrom"] == {"secretKeyRef": {"name": "shop-credentials", "key": "operator-password"}}


@pytest.mark.parametrize("flavor, port", [("mariadb", 3307), ("mysql", 3306)])
def test_a_restore_jobs_copy_port_admits_only_its_clusters_servers(flavor, port):
    """Issue 53: the port where the restore Job serves a physical copy (MariaDB's stream, MySQL's
    CLONE donor) is reachable from the Pods of this cluster's servers only - no Pod of another
    namespace (a podSelector alone is this namespace's), nor of another cluster here, nor any
    other port. The policy selects the Job's Pod as its Service does."""
    c = parse({**CLUSTER, "spec": {**CLUSTER["spec"], "flavor": flavor}})
    p = restore_network_policy(c)
    assert (p["kind"], p["metadata"]["name"], p["metadata"]["namespace"]) == (
        "NetworkPolicy",
        "shop-restore",
        "prod",
    )
    assert p["spec"]["podSelector"]["matchLabels"] == restore_service(c)["spec"]["selector"]
    pod_labels = restore_job(c, c.spec.backup.s3, "x", "img")["spec"]["template"]["metadata"]["labels"]
    assert p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert p["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = p["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]
    (peer,) = rule["from"]
    assert peer == {"podSelector": {"matchLabels": selector_labels(c)}}
    server_labels = statefulset(c)["spec"]["template"]["metadata"]["labels"]
    assert selector_labels(c).items() <= server_labels.items()


def test_long_backup_names_give_valid_job_names():
    b = parse_backup({**BACKUP, "metadata": {"name": "x" * 70, "namespace": "prod"}})
    assert len(job_name(b)) <= 63


def test_scheduled_backup_is_not_owned_by_the_cluster_and_carries_its_fire_time():
    o = scheduled_backup(
        parse(CLUSTER), "shop-202501020300", dt.datetime(2025, 1, 2, 3, 0, tzinfo=dt.timezone.utc)
    )
    assert "ownerReferences" not in o["metadata"]
    assert o["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION] == "2025-01-02T03:00:00Z"
    assert o["metadata"]["annotations"][DELETE_DATA_ANNOTATION] == "true"
    assert o["spec"] == {"clusterRef": {"name": "shop"}}


def test_storage_override_wins_over_cluster_storage():
    own = {
        **BACKUP,
        "spec": {
            "clusterRef": {"name": "shop"},
            "storage": {"s3": {"bucket": "other", "credentialsSecret": {"name": "o"}}},
        },
    }
    assert storage_for(own, CLUSTER).bucket == "other"
    assert storage_for(BACKUP, CLUSTER).bucket == "backups"
    assert storage_for(BACKUP, {**CLUSTER, "spec": {"instances": 1}}) is None


def _pod(message):
    return {"status": {"containerStatuses": [{"state": {"terminated": {"message": message}}}]}}


def test_job_outcome_running_succeeded_failed():
    assert job_outcome({"status": {"active": 1}}, []) is None
    ok = {
        "ok": True,
        "location": "s3://b/p/c/x",
        "sizeBytes": 5,
        "sha256": "ab",
        "gtidPosition": "0-1-3",
        "sourceInstance": "shop-1",
        "method": "physical",
        "startedAt": "s",
        "completedAt": "e",
    }
    phase, fields = job_outcome({"status": {"succeeded": 1}}, [_pod(json.dumps(ok))])
    assert phase == "Succeeded" and fields["sha256"] == "ab" and fields["sourceInstance"] == "shop-1"
    assert fields["method"] == "physical"
    phase, fields = job_outcome(
        {"status": {"failed": 1}}, [_pod(json.dumps({"ok": False, "message": "bucket gone"}))]
    )
    assert (phase, fields["message"]) == ("Failed", "bucket gone")
    deadline = {
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        }
    }
    assert job_outcome(deadline, [])[1]["message"].startswith("Job was active longer")
    assert job_outcome(None, [])[0] == "Failed"
    # a Job that "completed" without the success report is not a success
    assert job_outcome({"status": {"succeeded": 1}}, [])[0] == "Failed"


def test_restored_cluster_copies_shape_not_schedule_or_credentials():
    src = {**CLUSTER, "spec": {**CLUSTER["spec"], "primary": 1, "credentials": {"secretName": "x"}}}
    new = restored_cluster(src, "shop-manual", "shop-restored", instances=1)
    assert new["metadata"] == {"name": "shop-restored"}
    assert new["spec"]["restore"] == {"fromBackup": {"name": "shop-manual"}}
    assert "schedule" not in new["spec"]["backup"] and "primary" not in new["spec"]
    assert "credentials" not in new["spec"] and new["spec"]["instances"] == 1
    parse({**new, "metadata": {"name": "shop-restored", "namespace": "prod"}})  # a valid spec


def test_cli_registers_backup_and_restore_subcommands():
    p = argparse.ArgumentParser()
    register(p.add_subparsers(dest="command", required=True))
    a = p.parse_args(
        [
            "backup",
            "run",
            "--namespace",
            "n",
            "--cluster",
            "c",
            "--backup",
            "b",
            "--bucket",
            "bk",
            "--source",
            "c-0=h:3306",
        ]
    )
    assert a.func.__name__ == "cmd_run" and a.source == ["c-0=h:3306"] and a.tls_ca is None  # optional
    a = p.parse_args(
        [
            "backup",
            "restore-into",
            "--bucket",
            "bk",
            "--path",
            "c/b",
            "--user",
            "u",
            "--target",
            "c-0=h:3306",
            "--tls-ca",
            "/ca.crt",
        ]
    )
    assert a.func.__name__ == "cmd_restore_into" and a.tls_ca == "/ca.crt"
    assert a.primary is None  # the first target
    assert p.parse_args(["backup", "list", "-n", "x"]).func.__name__ == "cmd_list"
    assert p.parse_args(["restore", "b1", "--into", "c2"]).func.__name__ == "cmd_restore"
    with pytest.raises(SystemExit):
        p.parse_args(["backup", "run", "--cluster", "c"])


def test_result_location_is_the_backup_folder():
    from mysql_operator.backup.manifest import Manifest
    from mysql_operator.api import S3 as S3T, SecretKeys

    m = Manifest(
        cluster="c",
        namespace="n",
        backup="b",
        flavor="mariadb",
        server_version="10.11.6",
        gtid_position="0-1-1",
        source_instance="c-1",
        started_at="s",
        completed_at="e",
        data_key="p/c/b/backup.sql.zst",
        compression="zstd",
        compressed_size=1,
        uncompressed_size=2,
        sha256="0" * 64,
    )
    r = result_of(m, S3T(bucket="bk", credentials_secret=SecretKeys("x")))
    assert r["location"] == "s3://bk/p/c/b" and r["ok"] is True and r["method"] == "logical"


def test_server_pods_and_every_job_pull_with_the_clusters_pull_secrets():
    import copy

    from mysql_operator import manifests as m

    body = copy.deepcopy(CLUSTER)
    body["spec"]["imagePullSecrets"] = [{"name": "registry-a"}, {"name": "registry-b"}]
    c = parse(body)
    want = [{"name": "registry-a"}, {"name": "registry-b"}]
    sts = next(o for o in m.build_all(c, lambda key: "x") if o["kind"] == "StatefulSet")
    assert sts["spec"]["template"]["spec"]["imagePullSecrets"] == want
    backup = backup_job(c, parse_backup(BACKUP), c.spec.backup.s3, "registry.example/mysql-operator:0.1.0")
    restore = restore_job(c, c.spec.backup.s3, "shop/shop-manual", "registry.example/mysql-operator:0.1.0")
    for job in (backup, restore):
        pod = job["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == want
        assert pod["containers"][0]["image"] == "registry.example/mysql-operator:0.1.0"
    assert "imagePullSecrets" not in _job()["spec"]["template"]["spec"]  # none asked for, none set


def test_the_evidence_export_job_is_tokenless_and_reads_only_the_record():
    from mysql_operator.manifests.backup_jobs import EVIDENCE_DIR, evidence_job

    c = parse(CLUSTER)
    job = evidence_job(c, "shop-errant-2-20261126000000", c.spec.backup.s3, "localhost/mysql-operator:0.1.0")
    assert job["metadata"]["name"] == "shop-errant-2-20261126000000-export"
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and job["spec"]["backoffLimit"] == 0
    (ctr,) = pod["containers"]
    assert ctr["args"][:2] == ["backup", "keep-evidence"]
    assert ctr["args"][-4:] == ["--source", EVIDENCE_DIR, "--name", "shop-errant-2-20261126000000"]
    assert "--endpoint" in ctr["args"] and "http://minio.storage:9000" in ctr["args"]
    assert {"name": "evidence", "mountPath": EVIDENCE_DIR, "readOnly": True} in ctr["volumeMounts"]
    volume = next(v for v in pod["volumes"] if v["name"] == "evidence")
    assert volume["configMap"]["name"] == "shop-errant-2-20261126000000"
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for e in ctr["env"] if "valueFrom" in e}
    assert secrets == {"s3-creds"}  # the S3 credentials, nothing of the cluster's
    long = evidence_job(c, "x" * 60, c.spec.backup.s3, "img")
    assert len(long["metadata"]["name"]) <= 63


# ------------------------------------------------------------------ client-side encryption

ENCRYPTED = {
    **CLUSTER,
    "spec": {
        **CLUSTER["spec"],
        "backup": {**CLUSTER["spec"]["backup"], "encryption": {"keySecret": {"name": "backup-key"}}},
    },
}


def _env(ctr) -> dict:
    return {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in ctr["env"]}


@pytest.mark.parametrize("kind", ["backup", "restore", "evidence"])
def test_the_encryption_key_reaches_the_jobs_only_from_its_secret(kind):
    from mysql_operator.manifests.backup_jobs import evidence_job

    restoring = {
        **ENCRYPTED,
        "spec": {
            **ENCRYPTED["spec"],
            "restore": {
                "fromBackup": {"name": "old"},
                "encryption": {"keySecret": {"name": "old-key", "key": "k"}},
            },
        },
    }
    c = parse(restoring)
    job = {
        "backup": lambda: backup_job(c, parse_backup(BACKUP), c.spec.backup.s3, "img"),
        "restore": lambda: restore_job(c, c.spec.backup.s3, "shop/old", "img"),
        "evidence": lambda: evidence_job(c, "rec", c.spec.backup.s3, "img"),
    }[kind]()
    (ctr,) = job["spec"]["template"]["spec"]["containers"]
    want = (
        {"name": "old-key", "key": "k"}
        if kind == "restore"
        else {"name": "backup-key", "key": "encryption-key"}
    )
    assert _env(ctr)["MYSQL_OPERATOR_ENCRYPTION_KEY"] == want
    where = ctr["args"][ctr["args"].index("--encryption-key-from") + 1]
    field = "spec.restore.encryption" if kind == "restore" else "spec.backup.encryption"
    assert where == f"Secret {want['name']!r} key {want['key']!r} ({field}.keySecret)"


def test_without_encryption_no_key_is_asked_for():
    for ctr in (
        _job()["spec"]["template"]["spec"]["containers"][0],
        restore_job(parse(CLUSTER), parse(CLUSTER).spec.backup.s3, "x", "img")["spec"]["template"]["spec"][
            "containers"
        ][0],
    ):
        assert "MYSQL_OPERATOR_ENCRYPTION_KEY" not in _env(ctr)
        assert "--encryption-key-from" not in ctr["args"]


@pytest.mark.parametrize(
    "encryption, field, message",
    [
        ({}, "spec.backup.encryption.keySecret", "is required"),
        ({"keySecret": {}}, "spec.backup.encryption.keySecret.name", ""),
        ({"keySecret": {"name": "Bad_Name"}}, "spec.backup.encryption.keySecret.name", "a Secret name"),
        ({"keySecret": {"name": "k", "key": "a/b"}}, "spec.backup.encryption.keySecret.key", "letters"),
    ],
)
def test_bad_encryption_settings_name_the_field(encryption, field, message):
    from mysql_operator.api import SpecError

    body = {
        **CLUSTER,
        "spec": {**CLUSTER["spec"], "backup": {**CLUSTER["spec"]["backup"], "encryption": encryption}},
    }
    with pytest.raises(SpecError) as e:
        parse(body)
    assert str(e.value).startswith(field) and message in str(e.value)


def test_restored_cluster_takes_the_key_of_the_source_clusters_backups():
    new = restored_cluster(ENCRYPTED, "shop-manual", "shop-restored")
    assert new["spec"]["restore"] == {
        "fromBackup": {"name": "shop-manual"},
        "encryption": {"keySecret": {"name": "backup-key"}},
    }
    c = parse({**new, "metadata": {"name": "shop-restored", "namespace": "prod"}})
    assert c.spec.restore.encryption.secret == "backup-key"


def test_an_encrypted_backup_reports_its_key_id():
    from mysql_operator.backup.manifest import Manifest

    m = Manifest(
        "shop", "prod", "b", "mariadb", "11.8.3", "0-1-5", "shop-1", "t0", "t1",
        "prod/shop/b/backup.sql.zst.enc", "zstd", 10, 20, "0" * 64,
        encryption="AES-256-GCM/STREAM-v1", key_id="00112233aabbccdd", sealed="xx",
    )  # fmt: skip
    assert Manifest.from_json(m.to_json()) == m
    result = result_of(m, parse(CLUSTER).spec.backup.s3)
    assert result["encryptionKeyId"] == "00112233aabbccdd"
    job = {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
    pod = {"status": {"containerStatuses": [{"state": {"terminated": {"message": json.dumps(result)}}}]}}
    _, fields = job_outcome(job, [pod])
    assert fields["encryptionKeyId"] == "00112233aabbccdd"


def test_restore_refuses_from_the_manifest_a_missing_or_other_key():
    from mysql_operator.backup.crypto import Key
    from mysql_operator.backup.manifest import Manifest
    from mysql_operator.backup.restore_source import check_key
    from mysql_operator.backup.restore_types import RestoreError

    key = Key(bytes(32))
    m = Manifest(
        "shop", "prod", "b", "mariadb", "11.8.3", None, "shop-1", "t0", "t1",
        "prod/shop/b/backup.sql.zst.enc", "zstd", 10, 20, "0" * 64,
        encryption="AES-256-GCM/STREAM-v1", key_id=key.id,
    )  # fmt: skip
    s3 = parse(CLUSTER).spec.backup.s3
    check_key(s3, m, key)
    with pytest.raises(RestoreError, match="is encrypted .*set spec.restore.encryption.keySecret"):
        check_key(s3, m, None)
    with pytest.raises(RestoreError, match=f"key whose id is {key.id}; the key given has id"):
        check_key(s3, m, Key(bytes(range(32))))
    with pytest.raises(RestoreError, match="upgrade the operator"):
        check_key(s3, dataclasses.replace(m, encryption="AES-512-future"), key)
    check_key(s3, dataclasses.replace(m, encryption=None, key_id=None), None)  # not encrypted


@pytest.mark.parametrize("primary, expected", [(None, 0), (2, 2)])
def test_the_restore_job_names_the_instance_the_gate_makes_the_primary(primary, expected):
    spec = {**CLUSTER["spec"], "instances": 3, **({} if primary is None else {"primary": primary})}
    c = parse({**CLUSTER, "spec": spec})
    args = restore_job(c, c.spec.backup.s3, "shop/b1", "img")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert args[args.index("--primary") + 1] == f"{c.name}-{expected}"


@pytest.mark.parametrize("check, expected", [(None, False), (False, False), (True, True)])
def test_the_restore_job_checks_the_tables_when_spec_restore_asks(check, expected):
    restore = {"fromBackup": {"name": "b1"}, **({} if check is None else {"checkTables": check})}
    c = parse({**CLUSTER, "spec": {**CLUSTER["spec"], "restore": restore}})
    assert c.spec.restore is not None and c.spec.restore.check_tables is expected
    args = restore_job(c, c.spec.backup.s3, "shop/b1", "img")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert ("--check-tables" in args) is expected
    from mysql_operator.cli import build_parser

    assert build_parser().parse_args(args).check_tables is expected


@pytest.mark.parametrize("database", [{"name": "shop", "user": "shopper"}, {"name": "shop"}, None])
def test_the_restore_job_names_the_definer_of_the_dumps_stored_objects(database):
    spec = {k: v for k, v in CLUSTER["spec"].items() if k != "database"}
    c = parse({**CLUSTER, "spec": {**spec, **({"database": database} if database else {})}})
    args = restore_job(c, c.spec.backup.s3, "shop/b1", "img")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    if database and "user" in database:
        assert args[args.index("--app-user") + 1] == "shopper"
    else:
        assert "--app-user" not in args
