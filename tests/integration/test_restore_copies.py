"""The operator's part of a MariaDB physical restore, on the real kube-apiserver: once the restore
Job serves the copy, every instance is asked for one (the re-seed ConfigMap, marked restore) and
the Pods that started before the request are deleted; a later pass (an operator restart, a
lagging watch) deletes only the Pod it saw, never the one its StatefulSet started in its place."""

from __future__ import annotations

from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator import restore_gate as gate
from mysql_operator import restore_plan
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.writes import DeletePod, PatchStatus


def test_every_instance_is_asked_for_the_copy_and_pods_older_than_the_request_restart(
    control_plane, namespace
):
    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    owner_cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "owner", "uid": owner_cm.metadata.uid},
    }
    c = parse(
        {
            "metadata": {"name": "shop", "namespace": namespace},
            "spec": {"flavor": "mariadb", "instances": 3, "restore": {"fromBackup": {"name": "nightly"}}},
        }
    )
    started = {"shop-0": "2020-01-01T00:00:00Z", "shop-1": "2999-01-01T00:00:00Z", "shop-2": None}
    for name, at in started.items():
        core.create_namespaced_pod(namespace, pod_body(c, name))
        if at:  # what the kubelet reports once the Pod runs
            core.patch_namespaced_pod_status(name, namespace, {"status": {"startTime": at}})
    listed = k.list_pods(api, namespace, m.selector_labels(c))
    record = {"phase": "Running", "startedAt": "2026-11-29T05:00:01Z"}
    now = "2026-11-29T05:00:09Z"

    record, writes = restore_plan.copies(c, body, record, listed, now)
    gate.carry_out(Reads(api), Reads(api), c, body, writes)

    data = core.read_namespaced_config_map("shop-reseed", namespace).data
    line = f"shop-restore.{namespace}.svc 20261129050001 restore"
    assert data == {"shop-0": line, "shop-1": line, "shop-2": line}
    assert record["copiesRequestedAt"] == now
    assert PatchStatus({"restore": record}) in writes
    assert live(core, namespace) == {
        "shop-1",
        "shop-2",
    }  # shop-0 started before the request; the others after, or not yet

    # a later pass that still sees the old shop-0 (a lagging watch): its StatefulSet's new Pod of
    # that name is not deleted
    core.create_namespaced_pod(namespace, {**pod_body(c, "shop-0")})
    again, writes = restore_plan.copies(c, body, record, listed, now)
    old = next(p["metadata"]["uid"] for p in listed if p["metadata"]["name"] == "shop-0")
    assert again == record and writes == [DeletePod("shop-0", old)]
    gate.carry_out(Reads(api), Reads(api), c, body, writes)
    assert live(core, namespace) == {"shop-0", "shop-1", "shop-2"}


def pod_body(c, name: str) -> dict:
    return {
        "metadata": {"name": name, "labels": m.selector_labels(c)},
        "spec": {"containers": [{"name": "x", "image": "pause"}]},
    }


def live(core, namespace: str) -> set[str]:
    return {
        p.metadata.name
        for p in core.list_namespaced_pod(namespace).items
        if not p.metadata.deletion_timestamp
    }
