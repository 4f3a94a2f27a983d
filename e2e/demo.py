"""`make demo`: the first thing a new user runs. On the local one-node cluster (`make cluster-up`):
install the chart, create a 3-instance cluster, write and read a row through the Services, take a
backup to the S3 server beside the cluster, and show `kubectl get`. Each step prints the command
a user would type for it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pymysql
import yaml
from kubernetes import client

from mysql_operator.k8s.client import api_client

from tests.support import chart_oci
from tests.support import cluster as cluster_mod
from tests.support.controlplane import REPO, binary
from tests.support.registry import Registry
from tests.support.wait import wait_for

# the state.json of a cluster started by a test session (e2e/test_demo.py), not by `make cluster-up`
STATE_ENV = "MYSQL_OPERATOR_CLUSTER_STATE"
NS = "demo"
# FLAVOR=mysql|mariadb (`make demo FLAVOR=...`): the example the demo applies
EXAMPLES = {"mysql": ("local-demo-mysql.yaml", "MySQL 9.7"), "mariadb": ("local-demo.yaml", "MariaDB 10.11")}
GROUP, VERSION = "mysql.operator.dev", "v1alpha1"


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def run(*argv: str, env: dict) -> None:
    print("$ " + " ".join(a if " " not in a else repr(a) for a in argv), flush=True)
    subprocess.run(argv, check=True, env=env)


def _replace_other_flavor(objs, core, flavor: str, kubectl: str, env: dict) -> None:
    """A demo of the other flavor left by an earlier `make demo`: its flavor cannot change (the
    CRD refuses it), and its retained volumes and Secret would be adopted by the new one. Deleted
    with them first (deletionPolicy Delete): the demo's data is throwaway."""
    try:
        old = objs.get_namespaced_custom_object(GROUP, VERSION, NS, "mysqlclusters", "demo")
    except client.ApiException as e:
        if e.status == 404:
            return
        raise
    if str(old["spec"].get("flavor")).lower() == flavor.lower():
        return
    step(
        f"the {str(old['spec'].get('flavor')).lower()} demo of an earlier `make demo` goes first, with its volumes and Secret"
    )
    run(
        kubectl,
        "patch",
        "-n",
        NS,
        "mysqlcluster/demo",
        "--type=merge",
        "-p",
        '{"spec":{"deletionPolicy":"Delete"}}',
        env=env,
    )
    run(kubectl, "delete", "-n", NS, "mysqlcluster/demo", "--wait=true", "--timeout=180s", env=env)

    def gone() -> bool:
        claims = core.list_namespaced_persistent_volume_claim(
            NS, label_selector="app.kubernetes.io/instance=demo"
        ).items
        secrets = [s for s in core.list_namespaced_secret(NS).items if s.metadata.name == "demo-credentials"]
        return not claims and not secrets

    wait_for(gone, 180, "the earlier demo's volumes and credentials Secret deleted")


def main() -> int:
    flavor = os.environ.get("FLAVOR") or "mysql"
    if flavor not in EXAMPLES:
        print(f"FLAVOR={flavor}: choose mysql or mariadb", file=sys.stderr)
        return 2
    example, server = EXAMPLES[flavor]
    state = cluster_mod.running_state()
    if state is None and os.environ.get(STATE_ENV):  # a cluster a test session started
        state = json.loads(Path(os.environ[STATE_ENV]).read_text())
    if state is None:
        print("no local cluster is running: `make cluster-up` first", file=sys.stderr)
        return 1
    env = {"KUBECONFIG": state["kubeconfig"], "PATH": "/usr/bin:/bin", "HOME": "/var/tmp/mysqlop-helm"}
    kubectl, helm = str(binary("kubectl")), str(binary("helm"))
    api = api_client(state["kubeconfig"])
    core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    t0 = time.monotonic()

    step("the Helm chart packaged and pushed to the registry beside the cluster (oci://)")
    if not state.get("registry"):
        print("no registry beside the local cluster: `make cluster-down cluster-up`", file=sys.stderr)
        return 1
    registry = Registry.from_state(state["registry"])
    ref, version, ca = chart_oci.publish(registry, helm, env)
    print(f"pushed {ref}:{version}", flush=True)

    step("install the operator from there (its image built from ./Dockerfile, pushed there too)")
    _apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mysql-operator"}},
            cluster_mod.pull_secret(state, "mysql-operator"),
        ],
        env,
        kubectl,
        f"namespace mysql-operator, secret {cluster_mod.PULL_SECRET}: the registry's credentials",
    )
    run(
        helm,
        "upgrade",
        "--install",
        "mysql-operator",
        ref,
        "--version",
        version,
        *ca,
        "--namespace",
        "mysql-operator",
        "--create-namespace",
        "-f",
        str(REPO / "examples" / "values-local.yaml"),
        "--wait",
        "--timeout",
        "180s",
        env=env,
    )

    step("a namespace, its pull Secret, and the S3 credentials for backups (MinIO beside the cluster)")
    s3 = state["s3"]
    manifests = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "demo-s3", "namespace": NS},
            "stringData": {"AWS_ACCESS_KEY_ID": s3["access_key"], "AWS_SECRET_ACCESS_KEY": s3["secret_key"]},
        },
        cluster_mod.pull_secret(state, NS),
    ]
    _apply(manifests, env, kubectl, f"namespace {NS}, secrets demo-s3 and {cluster_mod.PULL_SECRET}")
    _ensure_bucket(s3, "backups")

    _replace_other_flavor(objs, core, flavor, kubectl, env)
    step(f"create a 3-instance {server} cluster")
    run(kubectl, "apply", "-n", NS, "-f", str(REPO / "examples" / example), env=env)
    run(kubectl, "wait", "-n", NS, "mysqlcluster/demo", "--for=condition=Ready", "--timeout=300s", env=env)
    print(f"cluster Ready {time.monotonic() - t0:.0f}s after the demo started", flush=True)

    step("write through the read-write Service, read through the read-only Service")
    secret = core.read_namespaced_secret("demo-credentials", NS).data
    password = base64.b64decode(secret["app-password"]).decode()
    rw = core.read_namespaced_service("demo-rw", NS).spec.cluster_ip
    ro = core.read_namespaced_service("demo-ro", NS).spec.cluster_ip

    def connect_rw():
        return pymysql.connect(
            host=rw, user="app", password=password, database="app", autocommit=True, connect_timeout=5
        )

    # kube-proxy follows the primary's label and readiness within a few seconds
    with wait_for(connect_rw, 60, "the read-write Service") as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE IF NOT EXISTS greetings (id INT AUTO_INCREMENT PRIMARY KEY, text VARCHAR(100))"
        )
        cur.execute("INSERT INTO greetings (text) VALUES ('hello from the demo')")
        cur.execute("SELECT @@hostname")
        print(f"wrote 1 row on {cur.fetchone()[0]} (demo-rw, {rw})")

    def read_replica():
        with (
            pymysql.connect(
                host=ro, user="app", password=password, database="app", connect_timeout=5
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute("SELECT @@hostname, COUNT(*) FROM greetings")
            return cur.fetchone()

    host, count = wait_for(lambda: (r := read_replica()) and r[1] >= 1 and r, 60, "the row on a replica")
    print(f"read {count} row(s) on {host} (demo-ro, {ro})")

    step("take a backup to S3")
    backup = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLBackup",
        "metadata": {"name": f"demo-{int(time.time())}"},
        "spec": {"clusterRef": {"name": "demo"}},
    }
    print(f"$ kubectl create -n {NS} -f - <<< (MySQLBackup {backup['metadata']['name']})")
    objs.create_namespaced_custom_object(GROUP, VERSION, NS, "mysqlbackups", backup)
    phase = wait_for(
        lambda: (
            (
                objs.get_namespaced_custom_object(
                    GROUP, VERSION, NS, "mysqlbackups", backup["metadata"]["name"]
                ).get("status")
                or {}
            ).get("phase")
            in ("Succeeded", "Failed")
            and objs.get_namespaced_custom_object(
                GROUP, VERSION, NS, "mysqlbackups", backup["metadata"]["name"]
            )["status"]["phase"]
        ),
        300,
        "the backup to finish",
    )
    print(f"backup {phase}")

    step("what kubectl shows")
    run(kubectl, "get", "-n", NS, "mysqlclusters,mysqlbackups", env=env)
    run(kubectl, "get", "-n", NS, "pods,services,pvc", "-L", "mysql.operator.dev/role", env=env)
    print(f"\ndemo done in {time.monotonic() - t0:.0f}s. Try: export KUBECONFIG={state['kubeconfig']}")
    return 0 if phase == "Succeeded" else 1


def _apply(manifests: list[dict], env: dict, kubectl: str, what: str) -> None:
    """`kubectl apply` of manifests whose content (Secrets) the demo does not print."""
    print(f"$ kubectl apply -f - <<< ({what})", flush=True)
    subprocess.run(
        [kubectl, "apply", "-f", "-"],
        input=yaml.safe_dump_all(manifests),
        text=True,
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def _ensure_bucket(s3: dict, bucket: str) -> None:
    import boto3
    from botocore.config import Config

    c = boto3.session.Session().client(
        "s3",
        endpoint_url=s3["endpoint"],
        aws_access_key_id=s3["access_key"],
        aws_secret_access_key=s3["secret_key"],
        config=Config(region_name="us-east-1", s3={"addressing_style": "path"}),
    )
    if bucket not in {b["Name"] for b in c.list_buckets()["Buckets"]}:
        c.create_bucket(Bucket=bucket)


if __name__ == "__main__":
    sys.exit(main())
