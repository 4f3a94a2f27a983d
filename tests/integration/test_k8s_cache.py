"""The watched stores against the real kube-apiserver: a created, changed and deleted object is
seen through the watch; the operator's own status write is read back at once (before its watch
event), and a later, older event does not undo it; the namespace scope keeps other namespaces out.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from mysql_operator.api import GROUP, VERSION
from mysql_operator.k8s.cache import Reads, start_reflectors
from tests.support.crds import apply_crds, project_crds
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

SELECTOR = "app.kubernetes.io/managed-by=mysql-operator"


def pod(name: str, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "mysql-operator", **labels}},
        "spec": {"containers": [{"name": "c", "image": "localhost/none:0"}]},
    }


@pytest.fixture
def spaces(control_plane):
    apply_crds(control_plane.api_client(), project_crds())
    core = client.CoreV1Api(control_plane.api_client())
    names = [f"cache-{uuid.uuid4().hex[:6]}", f"cache-{uuid.uuid4().hex[:6]}"]
    for n in names:
        core.create_namespace({"metadata": {"name": n}})
    yield names
    for n in names:
        core.delete_namespace(n)


def test_the_stores_follow_the_api_server_and_read_the_operators_own_writes(control_plane, spaces):
    watched, other = spaces
    api = control_plane.api_client()
    core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    clusters, pods, sets, reflectors = start_reflectors(control_plane.api_client(), [watched], SELECTOR)
    try:
        wait_for(
            lambda: clusters.synced.is_set() and pods.synced.is_set() and sets.synced.is_set(), 30, "synced"
        )
        reads = Reads(api, clusters, pods, sets)

        core.create_namespaced_pod(watched, pod("db-0", instance="db"))
        core.create_namespaced_pod(watched, pod("db-1", instance="db"))
        core.create_namespaced_pod(watched, {**pod("stranger"), "metadata": {"name": "stranger"}})  # no label
        core.create_namespaced_pod(other, pod("db-0", instance="db"))
        wait_for(lambda: len(reads.list_pods(watched, {"instance": "db"})) == 2, 30, "both Pods seen")
        assert pods.get(watched, "stranger") is None and pods.get(other, "db-0") is None

        reads.set_pod_label(watched, "db-1", "role", "primary")  # read back at once
        assert [p["metadata"]["name"] for p in reads.list_pods(watched, {"role": "primary"})] == ["db-1"]
        core.delete_namespaced_pod("db-0", watched, grace_period_seconds=0)
        wait_for(
            lambda: [p["metadata"]["name"] for p in reads.list_pods(watched, {})] == ["db-1"], 30, "gone"
        )

        objs.create_namespaced_custom_object(
            GROUP,
            VERSION,
            watched,
            "mysqlclusters",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "MySQLCluster",
                "metadata": {"name": "db"},
                "spec": {"flavor": "mariadb", "instances": 1, "storage": {"size": "1Gi"}},
            },
        )
        created = wait_for(lambda: reads.cluster(watched, "db"), 30, "the cluster seen")
        # the status recorded before acting is what the next pass reads, before any watch event
        reads.patch_status(watched, "db", {"currentPrimary": "db-1"})
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
        reads.seen(created)  # kopf delivering an older body later changes nothing
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
        objs.patch_namespaced_custom_object(
            GROUP, VERSION, watched, "mysqlclusters", "db", {"spec": {"instances": 2}}
        )
        wait_for(lambda: reads.cluster(watched, "db")["spec"]["instances"] == 2, 30, "the edit seen")
        assert reads.cluster(watched, "db")["status"]["currentPrimary"] == "db-1"
    finally:
        for r in reflectors:
            r.stop()
