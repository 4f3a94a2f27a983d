"""Every Pod the operator creates for work on a tenant's bytes (backup and restore Jobs) carries no
ServiceAccount token and passes the `restricted` Pod Security Standard, as judged by the real
kube-apiserver's PodSecurity admission in a namespace that enforces it."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator.api import parse, parse_backup
from mysql_operator.manifests.backup_jobs import backup_job
from mysql_operator.manifests.restore_jobs import restore_job

IMAGE = "localhost/mysql-operator:0.2.0"
S3 = {
    "bucket": "tenant-bucket",
    "endpoint": "http://minio.tenant:9000",
    "forcePathStyle": True,
    "credentialsSecret": {"name": "s3-creds"},
}


def cluster(namespace: str, **spec):
    return parse(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLCluster",
            "metadata": {"name": "shop", "namespace": namespace},
            "spec": {"flavor": "mariadb", "instances": 3, "backup": {"storage": {"s3": S3}}, **spec},
        }
    )


def tenant_jobs(namespace: str, flavor: str = "mariadb") -> dict[str, dict]:
    """The backup and restore Jobs of a cluster; MySQL's are physical (a scratch folder on disk,
    the restore Job serving the copy on its Pod's address)."""
    if flavor == "mysql":
        c = cluster(
            namespace,
            flavor="mysql",
            database={"name": "app"},
            backup={"storage": {"s3": S3}, "method": "physical"},
        )
    else:
        c = cluster(namespace, database={"name": "app"})
    b = parse_backup(
        {
            "apiVersion": "mysql.operator.dev/v1alpha1",
            "kind": "MySQLBackup",
            "metadata": {"name": "nightly", "namespace": namespace},
            "spec": {"clusterRef": {"name": "shop"}},
        }
    )
    return {
        "backup": backup_job(c, b, c.spec.backup.s3, IMAGE),
        "restore": restore_job(c, c.spec.backup.s3, "s3://tenant-bucket/shop/nightly", IMAGE),
    }


@pytest.fixture
def restricted_namespace(control_plane, namespace):
    core = client.CoreV1Api(control_plane.api_client())
    core.patch_namespace(
        namespace,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    return namespace


def create_pod(control_plane, namespace, spec, dry_run=True):
    core = client.CoreV1Api(control_plane.api_client())
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "tenant-", "namespace": namespace},
        "spec": spec,
    }
    return core.create_namespaced_pod(namespace, body, dry_run="All" if dry_run else None)


def test_the_namespace_really_enforces_restricted(control_plane, restricted_namespace):
    """Control: a plain Pod is refused there, so an accepted Pod below was really judged."""
    with pytest.raises(ApiException) as e:
        create_pod(control_plane, restricted_namespace, {"containers": [{"name": "c", "image": IMAGE}]})
    assert e.value.status == 403 and "restricted" in e.value.body


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
@pytest.mark.parametrize("kind", ["backup", "restore"])
def test_tenant_job_pods_are_admitted_as_restricted_and_mount_no_token(
    control_plane, restricted_namespace, kind, flavor
):
    spec = tenant_jobs(restricted_namespace, flavor)[kind]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    pod = create_pod(control_plane, restricted_namespace, spec)  # the real PodSecurity admission
    # what the apiserver would store: no projected token volume was added to the Pod
    volumes = [v.to_dict() for v in pod.spec.volumes or []]
    assert not any((v.get("projected") or {}).get("sources") for v in volumes), volumes
    mounts = [m.mount_path for m in pod.spec.containers[0].volume_mounts or []]
    assert not any(p.startswith("/var/run/secrets/kubernetes.io") for p in mounts), mounts
    # the cluster's CA certificate, read-only (a Secret volume is allowed under `restricted`)
    ca = next(v["secret"] for v in volumes if v["name"] == "ca-bundle")
    assert ca["secret_name"] == "shop-ca-bundle" and [i["key"] for i in ca["items"]] == ["ca.crt"], ca
    assert any(
        m.mount_path == "/etc/mysql-operator/ca" and m.read_only for m in pod.spec.containers[0].volume_mounts
    )


@pytest.mark.parametrize("kind", ["backup", "restore"])
def test_tenant_job_secrets_are_references_never_arguments(kind):
    container = tenant_jobs("prod")[kind]["spec"]["template"]["spec"]["containers"][0]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    # a MariaDB restore Job also holds the new cluster's operator password: it serves a physical
    # copy only to a requester that sends it (backup/copy_serving.py)
    seed = {"MYSQL_OPERATOR_SEED_TOKEN"} if kind == "restore" else set()
    assert set(refs) == {"MYSQL_OPERATOR_DB_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", *seed}
    assert (
        refs["AWS_SECRET_ACCESS_KEY"] == "s3-creds"
        and refs["MYSQL_OPERATOR_DB_PASSWORD"] == "shop-credentials"
        and refs.get("MYSQL_OPERATOR_SEED_TOKEN", "shop-credentials") == "shop-credentials"
    )
    assert not any("password" in a.lower() for a in container["args"] if not a.startswith("--"))


def test_restore_job_targets_every_instance_and_drops_the_empty_app_database():
    job = tenant_jobs("prod")["restore"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["backup", "restore-into"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--target"] == [
        f"shop-{n}=shop-{n}.shop-headless.prod.svc:3306" for n in range(3)
    ]
    assert args[args.index("--path") + 1] == "s3://tenant-bucket/shop/nightly"
    assert args[args.index("--app-database") + 1] == "app"
    # loads as the restore account (only it may load a tenant's dump), which then drops itself
    assert args[args.index("--user") + 1] == "mysql-operator-restore" and "--drop-account" in args
    env = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert env["MYSQL_OPERATOR_DB_PASSWORD"] == "restore-password"
    assert job["metadata"]["name"] == "shop-restore" and job["spec"]["backoffLimit"] == 0
