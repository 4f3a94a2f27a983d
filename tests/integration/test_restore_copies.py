"""The operator's part of a MariaDB physical restore, on the real kube-apiserver: once the restore
Job serves the copy, every instance is asked for one (the re-seed ConfigMap, marked restore) and
the Pods that started before the request are deleted, once; a later pass (an operator restart)
deletes only what still predates it."""

from __future__ import annotations

from kubernetes import client

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator.restore_gate import request_restore_copies


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
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": name, "labels": m.selector_labels(c)},
                "spec": {"containers": [{"name": "x", "image": "pause"}]},
            },
        )
        if at:  # what the kubelet reports once the Pod runs
            core.patch_namespaced_pod_status(name, namespace, {"status": {"startTime": at}})
    writes = []

    record = request_restore_copies(
        api, c, body, {"phase": "Running", "startedAt": "2026-11-29T05:00:01Z"}, lambda *a: writes.append(a)
    )

    data = core.read_namespaced_config_map("shop-reseed", namespace).data
    line = f"shop-restore.{namespace}.svc 20261129050001 restore"
    assert data == {"shop-0": line, "shop-1": line, "shop-2": line}
    assert record["copiesRequestedAt"] and writes == [(namespace, "shop", {"restore": record})]
    left = {
        p.metadata.name
        for p in core.list_namespaced_pod(namespace).items
        if not p.metadata.deletion_timestamp
    }
    assert left == {"shop-1", "shop-2"}  # shop-0 started before the request; the others after, or not yet

    # the next pass (or another operator): the request stands, nothing is written again
    again = request_restore_copies(api, c, body, record, lambda *a: writes.append(a))
    assert again == record and len(writes) == 1
