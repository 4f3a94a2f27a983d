"""The reads every pass makes of its Secrets, StatefulSet and claims, as plain JSON from a real
kube-apiserver (k8s/objects.read_json): what is stored comes back as a manifest would say it, an
absent object is None, a refusal is the API server's error (never None), and the client the
operator makes keeps enough connections for its threads."""

from __future__ import annotations

import base64
import threading

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator.k8s import objects as k
from mysql_operator.k8s.client import POOL_CONNECTIONS, api_client
from tests.support.operator_account import operator_api

pytestmark = pytest.mark.controlplane


def _statefulset(name: str) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "plain-reads"}},
        "spec": {
            "replicas": 2,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "mysqld", "image": "example.invalid/none:1"}]},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def test_a_statefulset_reads_back_as_its_manifest_and_an_absent_one_as_none(control_plane, namespace):
    api = control_plane.api_client()
    client.AppsV1Api(api).create_namespaced_stateful_set(namespace, _statefulset("db"))
    sts = k.read_statefulset(api, namespace, "db")
    assert sts is not None
    assert sts["metadata"]["name"] == "db" and sts["metadata"]["uid"]
    # camelCase keys, as in a manifest (what statefulset_sizing and the template placement read)
    assert k.statefulset_sizing(sts) == (2, "1Gi")
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "example.invalid/none:1"
    assert k.read_statefulset(api, namespace, "not-there") is None


def test_a_secret_reads_back_decoded_with_its_owners_and_version(control_plane, namespace):
    api = control_plane.api_client()
    made = client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": made.metadata.uid}
    client.CoreV1Api(api).create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "s", "annotations": {"a": "b"}, "ownerReferences": [owner]},
            "data": {
                "text": base64.b64encode(b"p\xc3\xa4ss").decode(),
                "binary": base64.b64encode(b"\xff\xfe").decode(),
            },
        },
    )
    found = k.read_secret(api, namespace, "s")
    assert found is not None
    assert found.data["text"] == "päss"
    # not UTF-8: lone surrogates, never an exception that could quote the bytes
    assert found.data["binary"].encode(errors="surrogateescape") == b"\xff\xfe"
    assert found.owners == (owner["uid"],)
    assert found.annotations == {"a": "b"}
    stored = client.CoreV1Api(api).read_namespaced_secret("s", namespace)
    assert found.version == stored.metadata.resource_version
    assert k.read_secret(api, namespace, "absent") is None
    assert k.read_secret_data(api, namespace, "absent") is None


def test_a_claim_smaller_than_asked_is_grown_and_an_absent_one_is_left(control_plane, namespace):
    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "data-db-0"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    assert k.grow_claim(api, namespace, "data-db-0", "512Mi") == (True, None)  # asks for more already
    assert core.read_namespaced_persistent_volume_claim("data-db-0", namespace).spec.resources.requests == {
        "storage": "1Gi"
    }
    assert k.grow_claim(api, namespace, "absent", "2Gi") == (False, None)
    # an unbound claim cannot grow: the API server's refusal, in its words (not None, not a crash)
    grown, why = k.grow_claim(api, namespace, "data-db-0", "2Gi")
    assert not grown and why is not None and "Forbidden" in why, why


def test_a_read_the_api_server_refuses_is_its_error_not_an_absent_object(control_plane, namespace):
    # the operator's own account in another namespace: a 403, which must never read as "absent"
    # (a pass would then create what exists, or take a Secret for missing)
    elsewhere = operator_api(control_plane, namespace)
    with control_plane.fresh_namespace() as other:
        client.CoreV1Api(control_plane.api_client()).create_namespaced_secret(
            other, {"metadata": {"name": "s"}, "data": {"k": base64.b64encode(b"v").decode()}}
        )
        with pytest.raises(ApiException) as refused:
            k.read_secret(elsewhere, other, "s")
        assert refused.value.status == 403
        with pytest.raises(ApiException) as refused:
            k.read_statefulset(elsewhere, other, "db")
        assert refused.value.status == 403


def test_the_operator_client_reuses_its_connections_under_its_threads_load(control_plane, namespace):
    """As many threads as the passes' slots and kopf's workers read at once, several rounds: the
    connections opened are about the threads' number, not one per request (the client's default
    pool, 5 per core, opened and closed one per request past it)."""
    api = api_client(str(control_plane.admin_kubeconfig))
    assert api.configuration.connection_pool_maxsize == POOL_CONNECTIONS
    client.CoreV1Api(api).create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "data": {}})
    threads, rounds = 40, 5
    assert threads <= POOL_CONNECTIONS
    start = threading.Barrier(threads)  # reused: one wait per round

    def reader():
        for _ in range(rounds):
            start.wait()  # every round: all threads at once, as a busy moment of the passes
            assert k.read_secret(api, namespace, "s") is not None

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    pools = api.rest_client.pool_manager.pools
    opened = sum(pools[key].num_connections for key in pools.keys())
    assert 0 < opened <= threads, f"{opened} connections for {threads * rounds} requests"
