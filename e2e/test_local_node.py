"""The local node runs real Pods: MariaDB StatefulSet, cluster DNS, Services, PVCs, restarts."""

from __future__ import annotations

import subprocess
import time

import pymysql
import pytest
from kubernetes import client
from kubernetes.stream import stream

from e2e.helpers import IMAGE, PULL

from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

ROOT_PASSWORD = "e2e-node-test-only"  # a throwaway cluster's; not a secret of anyone's


def _statefulset(replicas: int) -> dict:
    labels = {"app": "db"}
    return {
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "imagePullSecrets": PULL["imagePullSecrets"],
                    "containers": [
                        {
                            "name": "mariadb",
                            "image": IMAGE,
                            "imagePullPolicy": PULL["imagePullPolicy"],
                            "env": [{"name": "MARIADB_ROOT_PASSWORD", "value": ROOT_PASSWORD}],
                            "ports": [{"containerPort": 3306, "name": "mysql"}],
                            "readinessProbe": {  # over TCP: the entrypoint's first server has none
                                "exec": {
                                    "command": [
                                        "sh",
                                        "-c",
                                        "mariadb-admin --protocol=tcp "
                                        '-h127.0.0.1 -uroot -p"$MARIADB_ROOT_PASSWORD" ping',
                                    ]
                                },
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}],
                        }
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "256Mi"}},
                    },
                }
            ],
        },
    }


def _exec(core, ns: str, pod: str, command: list[str]) -> str:
    return stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        ns,
        command=command,
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )


def _sql_in_pod(core, ns, pod, host, sql) -> str:
    return _exec(
        core, ns, pod, ["mariadb", f"-h{host}", "-uroot", f"-p{ROOT_PASSWORD}", "-N", "-B", "-e", sql]
    ).strip()


def _ready_pods(core, ns) -> list:
    pods = core.list_namespaced_pod(ns, label_selector="app=db").items
    return [
        p for p in pods if any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
    ]


def test_mariadb_statefulset_on_the_local_node(local_cluster, kube_namespace):
    ns = kube_namespace
    api = local_cluster.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)

    core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "db"},
            "spec": {
                "clusterIP": "None",
                "selector": {"app": "db"},
                "ports": [{"name": "mysql", "port": 3306}],
            },
        },
    )
    svc = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "db-any"},
            "spec": {"selector": {"app": "db"}, "ports": [{"name": "mysql", "port": 3306}]},
        },
    )
    t0 = time.monotonic()
    apps.create_namespaced_stateful_set(ns, _statefulset(3))
    wait_for(lambda: len(_ready_pods(core, ns)) == 3, 300, "3 MariaDB pods Ready")
    print(f"\n3 MariaDB pods Ready {time.monotonic() - t0:.1f}s after the StatefulSet was created")

    # Each Pod reaches the others by their stable DNS names (CoreDNS + headless Service). A
    # name is published once its Pod is Ready, through the EndpointSlice CoreDNS watches: a
    # moment after the Pod's readiness (CI saw "Unknown server host" for a Pod Ready just now)
    for src in ("db-0", "db-1", "db-2"):
        for dst in ("db-0", "db-1", "db-2"):
            fqdn = f"{dst}.db.{ns}.svc.cluster.local"

            def resolved(src=src, fqdn=fqdn) -> str | None:
                answer = _sql_in_pod(core, ns, src, fqdn, "SELECT @@hostname")
                return None if "Unknown server host" in answer else answer

            answer = wait_for(resolved, 30, f"{fqdn} resolved in {src}")
            assert answer == dst, (src, fqdn, answer)

    # A ClusterIP Service answers from the host (kube-proxy DNAT) and from a Pod.
    def host_query():
        conn = pymysql.connect(
            host=svc.spec.cluster_ip, port=3306, user="root", password=ROOT_PASSWORD, connect_timeout=3
        )
        with conn, conn.cursor() as cur:
            cur.execute("SELECT @@hostname")
            return cur.fetchone()[0]

    assert wait_for(host_query, 60, "the Service from the host") in {"db-0", "db-1", "db-2"}
    assert _sql_in_pod(core, ns, "db-2", "db-any", "SELECT @@hostname") in {"db-0", "db-1", "db-2"}

    # Data on the PVC survives the Pod.
    _sql_in_pod(
        core,
        ns,
        "db-0",
        "localhost",
        "CREATE DATABASE keep; CREATE TABLE keep.t (v INT); INSERT INTO keep.t VALUES (42)",
    )
    old_uid = core.read_namespaced_pod("db-0", ns).metadata.uid
    t1 = time.monotonic()
    core.delete_namespaced_pod("db-0", ns)
    wait_for(
        lambda: (
            (p := core.read_namespaced_pod("db-0", ns)).metadata.uid != old_uid
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ),
        180,
        "db-0 recreated and Ready",
    )
    print(f"db-0 deleted -> recreated and Ready in {time.monotonic() - t1:.1f}s")
    assert _sql_in_pod(core, ns, "db-0", "localhost", "SELECT v FROM keep.t") == "42"

    # Killing the container makes the kubelet restart it.
    pod = core.read_namespaced_pod("db-1", ns)
    status = pod.status.container_statuses[0]
    container_id = status.container_id.split("://", 1)[1]
    t2 = time.monotonic()
    subprocess.run(
        [
            "ctr",
            "--address",
            local_cluster.containerd_socket,
            "-n",
            "k8s.io",
            "tasks",
            "kill",
            "-s",
            "SIGKILL",
            container_id,
        ],
        check=True,
    )
    wait_for(
        lambda: (
            (p := core.read_namespaced_pod("db-1", ns)).status.container_statuses[0].restart_count
            > status.restart_count
            and p.status.container_statuses[0].ready
        ),
        180,
        "db-1's container restarted by the kubelet and Ready",
    )
    print(f"db-1 container killed -> restarted and Ready in {time.monotonic() - t2:.1f}s")
    assert _sql_in_pod(core, ns, "db-1", "localhost", "SELECT 1") == "1"
