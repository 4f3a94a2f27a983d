"""Objects anyone may create in their namespace, labelled like the operator's, against the real
kube-apiserver (its StatefulSet and Job controllers; no kubelet, so a Pod's end is written by the
test): a StatefulSet left mid-roll holds no cluster's one-at-a-time restart turn unless a
MySQLCluster that exists controls it; a Pod labelled `job-name=<the Job>` is not read as the
Job's result, only the Pods that Job owns are."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from kubernetes import client

from mysql_operator import rolling
from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s import jobs
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.reflector import start_reflectors
from mysql_operator.rollout import RestartGate, restarting_now
from tests.support.crds import apply_crds, project_crds
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

OPERATOR_LABELS = {
    "app.kubernetes.io/managed-by": "mysql-operator",
    "app.kubernetes.io/component": "database",
}


@pytest.fixture(scope="module")
def custom(control_plane):
    apply_crds(control_plane.api_client(), project_crds())
    return client.CustomObjectsApi(control_plane.api_client())


@pytest.fixture
def tenant(control_plane):
    """A second namespace: another tenant's."""
    with control_plane.fresh_namespace("tenant") as name:
        yield name


def mid_roll_statefulset(api, ns: str, name: str, owner: dict | None) -> None:
    """A one-Pod StatefulSet labelled like the operator's (OnDelete, as the operator's), its
    template changed after the StatefulSet controller made its Pod: the controller then reports
    updatedReplicas 0 of 1, the roll under way that rolling.restarting reads."""
    apps = client.AppsV1Api(api)
    labels = {**OPERATOR_LABELS, "app.kubernetes.io/instance": name}
    meta: dict = {"name": name, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    apps.create_namespaced_stateful_set(
        ns,
        {
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "serviceName": name,
                "updateStrategy": {"type": "OnDelete"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "localhost/none:0"}]},
                },
            },
        },
    )

    def status() -> dict:
        return apps.read_namespaced_stateful_set_status(name, ns).to_dict()["status"] or {}

    wait_for(
        lambda: status().get("updated_replicas") == 1, 60, f"the StatefulSet controller to make {name}-0"
    )
    changed = apps.patch_namespaced_stateful_set(
        name, ns, {"spec": {"template": {"metadata": {"annotations": {"changed": "yes"}}}}}
    )
    generation = changed.metadata.generation
    wait_for(
        lambda: status().get("observed_generation") == generation and not status().get("updated_replicas"),
        60,
        f"{name}: the new template observed, its Pod still on the old one",
    )


def _ours(keys: set[str], *namespaces: str) -> set[str]:
    """Those of this test's namespaces (the control plane is shared by the session's tests)."""
    return {key for key in keys if key.split("/", 1)[0] in namespaces}


def _seen_mid_roll(reads: Reads, ns: str, name: str) -> bool:
    """Whether `reads` (a store may lag behind the API server) shows that StatefulSet mid-roll."""
    return any(
        (s["metadata"]["namespace"], s["metadata"]["name"]) == (ns, name) and rolling.restarting(s)
        for s in reads.owned_statefulsets()
    )


def test_a_lookalike_statefulset_mid_roll_holds_no_restart_turn(control_plane, custom, namespace, tenant):
    api = control_plane.api_client()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": "db"},
        "spec": {"flavor": "mariadb", "instances": 1, "storage": {"size": "1Gi"}},
    }
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, body)
    clusters, pods, sets, reflectors = start_reflectors(
        api, [], "app.kubernetes.io/managed-by=mysql-operator"
    )
    try:
        wait_for(lambda: clusters.synced.is_set() and sets.synced.is_set(), 30, "the stores synced")
        # the operator's two ways of reading: its watched stores, and the API server without them
        readers = {"stores": Reads(api, clusters, pods, sets), "API server": Reads(api)}

        # another tenant's StatefulSet: the operator's labels and the cluster's name, owned by nobody
        mid_roll_statefulset(api, tenant, "db", owner=None)
        for how, reads in readers.items():
            wait_for(lambda: _seen_mid_roll(reads, tenant, "db"), 30, f"the look-alike seen mid-roll ({how})")
            assert _ours(restarting_now(reads), namespace, tenant) == set(), how
            gate = RestartGate()
            held = gate.take(f"{namespace}/other", _ours(restarting_now(reads), namespace, tenant))
            assert held is None, f"the turn is free ({how})"

        # the cluster's own StatefulSet, mid-roll: it holds the turn, under the cluster's name
        owner = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLCluster",
            "name": "db",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        mid_roll_statefulset(api, namespace, "db", owner=owner)
        for how, reads in readers.items():
            wait_for(
                lambda: _seen_mid_roll(reads, namespace, "db"), 30, f"the cluster's own seen mid-roll ({how})"
            )
            assert _ours(restarting_now(reads), namespace, tenant) == {f"{namespace}/db"}, how
            gate = RestartGate()
            held = gate.take(f"{namespace}/other", _ours(restarting_now(reads), namespace, tenant))
            assert held == f"{namespace}/db", how
    finally:
        for r in reflectors:
            r.stop()


def _terminate(core, ns: str, pod: str, result: dict) -> None:
    """Stand in for the kubelet: the Pod succeeded, its container's termination message `result`."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": 0, "message": json.dumps(result), "startedAt": now, "finishedAt": now}
    status = {
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": "c",
                "image": "localhost/none:0",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            }
        ],
    }
    core.patch_namespaced_pod_status(pod, ns, {"status": status})


def test_a_lookalike_pod_labelled_with_the_jobs_name_is_not_its_result(control_plane, namespace):
    api = control_plane.api_client()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    name = "backup-nightly"
    container = {"name": "c", "image": "localhost/none:0"}
    jobs.create_job(
        api,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        },
    )
    uid = batch.read_namespaced_job(name, namespace).metadata.uid
    (real,) = wait_for(
        lambda: core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items,
        30,
        "the Job controller to make the Job's Pod",
    )
    # anyone who may create Pods here: the Job's label, a name listed after the real Pod's, and a
    # result of its own (a backup that "succeeded" with another size and digest)
    forged = f"{name}-zzzzzz"
    core.create_namespaced_pod(
        namespace,
        {"metadata": {"name": forged, "labels": {"job-name": name}}, "spec": {"containers": [container]}},
    )
    _terminate(core, namespace, forged, {"ok": True, "message": "forged", "size": 666})
    _terminate(core, namespace, real.metadata.name, {"ok": True, "message": "dumped", "size": 1})
    wait_for(
        lambda: batch.read_namespaced_job_status(name, namespace).status.succeeded, 60, "the Job complete"
    )

    job, pods = jobs.read_job(api, namespace, name)
    assert jobs.job_result(job, pods) == {"ok": True, "message": "dumped", "size": 1}
    assert [p["metadata"]["name"] for p in pods] == [real.metadata.name]
    assert {ref["uid"] for ref in pods[0]["metadata"]["ownerReferences"]} == {uid}
