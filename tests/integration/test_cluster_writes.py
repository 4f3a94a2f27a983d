"""The operator's writes to a MySQLCluster (its status, an annotation removed) against the real
kube-apiserver land on the object the pass worked on and never on another one created since
under the same name: a pass still running when its cluster was deleted and created again once
wrote `currentPrimary` into the new cluster, which then skipped adopting its servers (e2e
test_a_retained_cluster_created_again_comes_back_with_its_data_and_passwords[mariadb]). A write
whose cached copy of the object is behind (another writer changed it since) still lands."""

from __future__ import annotations

import pytest
from kubernetes import client

from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.reflector import Store
from tests.support.crds import apply_crds, project_crds
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane

ANNOTATION = "mysql.operator.dev/switchover"


def _body(name: str) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name, "annotations": {ANNOTATION: "db-1"}},
        "spec": {"flavor": "mariadb", "instances": 1, "storage": {"size": "1Gi"}},
    }


@pytest.fixture
def objs(control_plane):
    apply_crds(control_plane.api_client(), project_crds())
    return client.CustomObjectsApi(control_plane.api_client())


def _create(objs, namespace: str, name: str) -> dict:
    return objs.create_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, _body(name))


def _read(objs, namespace: str, name: str) -> dict:
    return objs.get_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, name)


def _created_again(objs, namespace: str, name: str) -> dict:
    """The cluster deleted (no finalizer holds it here) and created again under its name."""
    objs.delete_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, name)
    wait_for(
        lambda: (
            name
            not in [
                o["metadata"]["name"]
                for o in objs.list_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL)[
                    "items"
                ]
            ]
        ),
        30,
        "the cluster gone",
    )
    return _create(objs, namespace, name)


def _store(*bodies: dict) -> Store:
    """A synced store holding `bodies`, as a watch that has not yet delivered later changes."""
    store = Store()
    store.replace(bodies, max((b["metadata"]["resourceVersion"] for b in bodies), key=int))
    return store


@pytest.mark.parametrize("cached", ["none", "the old object", "the new object"])
def test_a_write_of_a_deleted_cluster_never_lands_on_the_one_created_again(
    control_plane, namespace, objs, cached
):
    old = _create(objs, namespace, "db")
    new = _created_again(objs, namespace, "db")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    store = {"none": None, "the old object": _store(old), "the new object": _store(new)}[cached]
    reads = Reads(control_plane.api_client(), clusters=store)

    assert reads.patch_status(old, {"currentPrimary": "db-0", "phase": "Running"}) is False
    assert reads.remove_cluster_annotation(old, ANNOTATION) is False

    stored = _read(objs, namespace, "db")
    assert stored["metadata"]["uid"] == new["metadata"]["uid"]
    assert "status" not in stored or "currentPrimary" not in stored["status"], stored["status"]
    assert stored["metadata"]["annotations"][ANNOTATION] == "db-1"
    # the new cluster's own pass writes as before
    assert reads.patch_status(new, {"currentPrimary": "db-0"}) is True
    assert reads.remove_cluster_annotation(new, ANNOTATION) is True
    stored = _read(objs, namespace, "db")
    assert stored["status"]["currentPrimary"] == "db-0"
    assert ANNOTATION not in (stored["metadata"].get("annotations") or {})


def test_a_write_lands_when_its_cached_copy_is_behind_another_writers_change(control_plane, namespace, objs):
    body = _create(objs, namespace, "db")
    reads = Reads(control_plane.api_client(), clusters=_store(body))  # keeps this version
    objs.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, CLUSTER_PLURAL, "db", {"spec": {"instances": 2}}
    )
    objs.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, CLUSTER_PLURAL, "db", {"status": {"phase": "Running", "readyInstances": 1}}
    )

    assert reads.patch_status(body, {"currentPrimary": "db-0", "readyInstances": None}) is True
    assert reads.remove_cluster_annotation(body, ANNOTATION) is True

    stored = _read(objs, namespace, "db")
    # merged into what the other writer left: its phase kept, the key written as None removed
    assert stored["status"] == {"phase": "Running", "currentPrimary": "db-0"}
    assert stored["spec"]["instances"] == 2
    assert ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert reads.cluster(namespace, "db")["status"]["currentPrimary"] == "db-0"  # read back at once


def test_a_write_of_a_deleted_cluster_not_created_again_is_dropped(control_plane, namespace, objs):
    body = _create(objs, namespace, "db")
    objs.delete_namespaced_custom_object(GROUP, VERSION, namespace, CLUSTER_PLURAL, "db")
    reads = Reads(control_plane.api_client(), clusters=_store(body))
    assert reads.patch_status(body, {"currentPrimary": "db-0"}) is False
    assert reads.remove_cluster_annotation(body, ANNOTATION) is False
