"""`kubectl mysql` against a real kube-apiserver with the project's CRDs (no operator runs: the
plugin only reads and writes the API's objects): outputs, dry runs that send nothing, one-line
errors with exit codes 4 (not found) and 3 (forbidden)."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from kubernetes import client

from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.cli_backup import backup_object
from mysql_operator.cli_common import NO_ACCESS, NOT_FOUND
from mysql_operator.kubectl_plugin import main
from tests.support.crds import serve_project_crds

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def objs(control_plane):
    serve_project_crds(control_plane.api_client(), BACKUP_PLURAL)
    return serve_project_crds(control_plane.api_client(), CLUSTER_PLURAL)


@pytest.fixture
def run(control_plane, namespace, capsys, monkeypatch):
    """`kubectl mysql ARGV -n <namespace> --kubeconfig <admin>`: (exit code, stdout, stderr)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    transcript: list[str] = []

    def run(*argv: str, kubeconfig=None) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(
            [*argv, "-n", namespace, "--kubeconfig", str(kubeconfig or control_plane.admin_kubeconfig)]
        )
        out, err = capsys.readouterr()
        transcript.append(f"$ kubectl mysql {' '.join(argv)}  # exit {code}\n{out}{err}")
        return code, out, err

    yield run
    print("\n".join(transcript))  # what each command printed (pytest -rP shows it)


def make_cluster(objs, ns: str, name: str = "shop") -> dict:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": {"flavor": "mariadb", "version": "11.4", "instances": 3},
    }
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, body)
    status = {"phase": "Ready", "currentPrimary": f"{name}-0", "readyInstances": 3, "replicaLagSeconds": 0}
    return objs.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, CLUSTER_PLURAL, name, {"status": status}
    )


def clusters(objs, ns: str) -> list[str]:
    return [
        o["metadata"]["name"]
        for o in objs.list_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL)["items"]
    ]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; " in lines[0], err
    return lines[0]


def test_status_prints_the_cluster_in_each_output(objs, namespace, run):
    stored = make_cluster(objs, namespace)
    del stored["metadata"]["managedFields"]  # as kubectl, the plugin leaves them out
    code, out, _ = run("status", "shop", "-o", "json")
    assert code == 0 and json.loads(out) == stored
    code, out, _ = run("status", "shop", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == stored
    code, out, _ = run("status", "shop")
    assert code == 0 and f"{namespace}/shop: phase Ready, primary shop-0, ready 3/3" in out
    code, out, _ = run("status")
    assert code == 0 and out.split("\n")[1].split()[:5] == [namespace, "shop", "Ready", "shop-0", "3/3"]
    code, out, _ = run("status", "-A", "-o", "json")
    listed = json.loads(out)
    assert code == 0 and listed["kind"] == "List"
    assert not any("managedFields" in o["metadata"] for o in listed["items"])
    assert [o["metadata"]["name"] for o in listed["items"] if o["metadata"]["namespace"] == namespace] == [
        "shop"
    ]


def test_backup_create_dry_run_sends_nothing_then_create_list_describe_delete(objs, namespace, run):
    make_cluster(objs, namespace)
    code, out, _ = run("backup", "create", "shop", "--name", "b1", "--dry-run", "-o", "yaml")
    printed = yaml.safe_load(out)
    assert code == 0 and (printed["kind"], printed["metadata"]["name"]) == ("MySQLBackup", "b1")
    assert printed["spec"] == {"clusterRef": {"name": "shop"}}
    assert objs.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"] == []
    # what it printed is a MySQLBackup the API server accepts (its own dry run stores nothing)
    objs.create_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL, printed, dry_run="All")
    assert objs.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"] == []

    code, out, _ = run("backup", "create", "shop", "--name", "b1")
    assert code == 0 and out.strip() == f"mysqlbackup/b1 created in {namespace}"
    code, out, _ = run("backup", "list", "-o", "json")
    (item,) = json.loads(out)["items"]
    assert code == 0 and (item["metadata"]["name"], item["spec"]["clusterRef"]["name"]) == ("b1", "shop")
    code, out, _ = run("backup", "list")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["b1", "shop", "Pending"]
    code, out, _ = run("backup", "describe", "b1", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["metadata"]["uid"] == item["metadata"]["uid"]
    code, out, _ = run("backup", "delete", "b1", "-o", "json")
    assert (
        code == 0
        and objs.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"] == []
    )


@pytest.mark.parametrize(
    "argv, says",
    [
        (("status", "nope"), "MySQLCluster {ns}/nope not found"),
        (("switchover", "nope", "--to", "1"), 'mysqlclusters.mysql.operator.dev "nope" not found'),
        (("rotate-passwords", "nope", "--dry-run"), "MySQLCluster {ns}/nope not found"),
        (("backup", "describe", "nope", "-o", "yaml"), 'mysqlbackups.mysql.operator.dev "nope" not found'),
        (("backup", "delete", "nope"), 'mysqlbackups.mysql.operator.dev "nope" not found'),
        (("restore", "nope", "--into", "x", "--dry-run"), 'mysqlbackups.mysql.operator.dev "nope" not found'),
    ],
)
def test_not_found_exits_4_in_one_line(objs, namespace, run, argv, says):
    code, out, err = run(*argv)
    assert code == NOT_FOUND and out == ""
    assert says.format(ns=namespace) in one_line(err)


def test_a_user_without_rbac_exits_3_in_one_line(control_plane, objs, namespace, run):
    """A ServiceAccount bound to nothing: every call is forbidden."""
    client.CoreV1Api(control_plane.api_client()).create_namespaced_service_account(
        namespace, {"metadata": {"name": "nobody"}}
    )
    kubeconfig = control_plane.service_account_kubeconfig(namespace, "nobody")
    for argv in (
        ("status",),
        ("status", "shop", "-o", "yaml"),
        ("backup", "create", "shop"),
        ("backup", "list"),
    ):
        code, out, err = run(*argv, kubeconfig=kubeconfig)
        assert code == NO_ACCESS and out == ""
        line = one_line(err)
        assert f'User "system:serviceaccount:{namespace}:nobody" cannot' in line and "ask for RBAC" in line
    assert objs.list_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL)["items"] == []


def test_switchover_and_rotate_passwords_dry_runs_change_nothing(control_plane, objs, namespace, run):
    make_cluster(objs, namespace)
    core = client.CoreV1Api(control_plane.api_client())
    data = {k: base64.b64encode(b"old").decode() for k in ("root-password", "app-password")}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "shop-credentials"}, "data": data})

    code, out, _ = run("switchover", "shop", "--to", "1", "--reason", "disk", "--dry-run", "-o", "yaml")
    patch = yaml.safe_load(out)
    assert code == 0 and patch["metadata"]["annotations"]["mysql.operator.dev/switchover-to"].startswith(
        "1; "
    )
    got = objs.get_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, "shop")
    assert "mysql.operator.dev/switchover-to" not in (got["metadata"].get("annotations") or {})

    code, out, _ = run("rotate-passwords", "shop", "--dry-run", "-o", "yaml")
    printed = yaml.safe_load(out)
    assert code == 0 and sorted(printed["data"]) == ["app-password", "root-password"]
    assert base64.b64encode(b"old").decode() not in out
    assert core.read_namespaced_secret("shop-credentials", namespace).data == data

    code, out, _ = run("rotate-passwords", "shop", "--key", "app-password", "-o", "json")
    assert code == 0 and json.loads(out) == {
        "secret": f"{namespace}/shop-credentials",
        "rotated": ["app-password"],
    }
    now = core.read_namespaced_secret("shop-credentials", namespace).data
    assert now["root-password"] == data["root-password"] and now["app-password"] != data["app-password"]
    assert now["app-password"] not in out and base64.b64decode(now["app-password"]).decode() not in out


def test_restore_dry_run_then_from_the_bucket_when_the_cluster_is_gone(objs, namespace, run):
    make_cluster(objs, namespace)
    backup = backup_object("shop", "b1", delete_data=False)
    objs.create_namespaced_custom_object(GROUP, VERSION, namespace, BACKUP_PLURAL, backup)
    location = "s3://backups/team-a/shop/b1"
    objs.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        BACKUP_PLURAL,
        "b1",
        {"status": {"phase": "Succeeded", "location": location}},
    )
    code, out, _ = run("restore", "b1", "--into", "again", "--dry-run", "-o", "yaml")
    printed = yaml.safe_load(out)
    assert code == 0 and printed["spec"]["restore"] == {"fromBackup": {"name": "b1"}}
    assert printed["spec"]["flavor"] == "mariadb" and printed["metadata"]["namespace"] == namespace
    assert clusters(objs, namespace) == ["shop"]

    objs.delete_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, "shop")
    code, out, err = run("restore", "b1", "--into", "again")
    assert code == NOT_FOUND and f"--from-bucket {location} --s3-credentials-secret" in one_line(err)

    bucket = (
        "--from-bucket",
        location,
        "--s3-credentials-secret",
        "s3",
        "--s3-endpoint",
        "http://minio:9000",
    )
    code, out, _ = run(
        "restore",
        "--into",
        "again",
        *bucket,
        "--flavor",
        "mariadb",
        "--version",
        "11.4",
        "--instances",
        "3",
        "-o",
        "yaml",
    )
    created = yaml.safe_load(out)
    assert code == 0 and created["metadata"]["uid"]  # stored: the CRD's rules accepted it
    assert created["spec"]["restore"]["s3"] == {
        "bucket": "backups",
        "prefix": "team-a",
        "path": "shop/b1",
        "endpoint": "http://minio:9000",
        "forcePathStyle": False,
        "credentialsSecret": {
            "name": "s3",
            "accessKeyIdKey": "AWS_ACCESS_KEY_ID",
            "secretAccessKeyKey": "AWS_SECRET_ACCESS_KEY",
        },
    }
    assert clusters(objs, namespace) == ["again"]
