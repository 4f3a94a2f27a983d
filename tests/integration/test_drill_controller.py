"""Restore drills' controller against the real kube-apiserver, as the operator's ServiceAccount
(the chart's rules: it may create a MySQLCluster but never delete one). No kopf loop and no
servers: `tick` is called directly and the throwaway cluster's status is written by the test, as
its own pass would. That deleting the anchor Job takes the throwaway cluster (the garbage collector)
is shown by the e2e test; here, that the operator deletes the anchor and never the cluster."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.backup import drill
from mysql_operator.backup.drill_controller import DrillController
from tests.support.backup_objects import get, make_stored_backup
from tests.support.crds import serve_project_crds
from tests.support.operator_account import operator_api

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def crds(control_plane):
    return serve_project_crds(control_plane.api_client(), BACKUP_PLURAL)


@pytest.fixture
def account(control_plane, crds, namespace):
    """The operator's ServiceAccount in the test's namespace (the chart's rules)."""
    return operator_api(control_plane, namespace)


def controller(account) -> DrillController:
    """A new one each time: what it remembers is lost, as when the operator restarts."""
    return DrillController(account, image="localhost/mysql-operator:test")


def source(objs, ns, name: str = "shop"):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": {
            "flavor": "mariadb",
            "instances": 2,
            "storage": {"size": "1Gi"},
            "backup": {
                "storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}},
                "drill": {"timeout": "10m"},
            },
        },
    }
    objs.create_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, body)
    objs.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        CLUSTER_PLURAL,
        name,
        {
            "status": {
                "currentPrimary": f"{name}-0",
                "instances": [{"name": f"{name}-0", "gtidExecuted": "0-1-42"}],
            }
        },
    )


def request(objs, ns, token: str, name: str = "shop") -> dict:
    return objs.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        CLUSTER_PLURAL,
        name,
        {"metadata": {"annotations": {drill.REQUEST_ANNOTATION: token}}},
    )


def exists(read) -> bool:
    try:
        read()
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


def test_a_drill_creates_its_anchor_and_cluster_ends_and_deletes_only_the_anchor(
    control_plane, account, namespace
):
    ns, objs = namespace, client.CustomObjectsApi(control_plane.api_client())
    batch = client.BatchV1Api(control_plane.api_client())
    source(objs, ns)
    make_stored_backup(objs, ns, "shop-b1", "2026-12-06T03:00:00Z")

    d = controller(account).tick(request(objs, ns, "r1"))

    assert isinstance(d, drill.Start) and d.backup == "shop-b1"
    record = get(objs, ns, CLUSTER_PLURAL, "shop")["status"]["drill"]
    assert (record["phase"], record["request"], record["sourceGtid"]) == ("Running", "r1", "0-1-42")
    anchor = batch.read_namespaced_job("shop-drill", ns)
    src_uid = get(objs, ns, CLUSTER_PLURAL, "shop")["metadata"]["uid"]
    assert anchor.spec.suspend is True and [o.uid for o in anchor.metadata.owner_references] == [src_uid]
    thrown = get(objs, ns, CLUSTER_PLURAL, "shop-drill")
    assert [(o["kind"], o["uid"]) for o in thrown["metadata"]["ownerReferences"]] == [
        ("Job", anchor.metadata.uid)
    ]
    assert thrown["spec"]["restore"]["fromBackup"] == {"name": "shop-b1"} and thrown["spec"]["instances"] == 1

    # the throwaway cluster restored and serves (its own pass would say so); the operator restarted
    restored = {
        "phase": "Succeeded",
        "durationSeconds": 12.5,
        "bytesLoaded": 1000,
        "gtidPosition": "0-1-42",
        "tablesChecked": {"tables": 3, "rows": 600},
    }
    objs.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, CLUSTER_PLURAL, "shop-drill", {"status": {"phase": "Ready", "restore": restored}}
    )
    d = controller(account).tick(get(objs, ns, CLUSTER_PLURAL, "shop"))

    assert isinstance(d, drill.Finish) and d.passed
    record = get(objs, ns, CLUSTER_PLURAL, "shop")["status"]["drill"]
    assert record["phase"] == "Succeeded" and record["missingTransactions"] == 0
    assert record["tablesChecked"] == {"tables": 3, "rows": 600} and record["lastSucceededAt"]
    assert not exists(lambda: batch.read_namespaced_job("shop-drill", ns))
    reasons = {e.reason for e in client.CoreV1Api(control_plane.api_client()).list_namespaced_event(ns).items}
    assert {"RestoreDrillStarted", "RestoreDrillSucceeded"} <= reasons
    # the operator deleted no MySQLCluster (it may not): the throwaway one goes with its anchor,
    # by the garbage collector (its owner reference names the anchor deleted)
    assert all(o["uid"] == anchor.metadata.uid for o in thrown["metadata"]["ownerReferences"])


def test_a_cluster_of_the_drills_name_that_is_not_its_drill_is_never_touched(
    control_plane, account, namespace
):
    ns, objs = namespace, client.CustomObjectsApi(control_plane.api_client())
    source(objs, ns)
    make_stored_backup(objs, ns, "shop-b1", "2026-12-06T03:00:00Z")
    objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        CLUSTER_PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLCluster",
            "metadata": {"name": "shop-drill"},
            "spec": {"flavor": "mariadb", "instances": 1},
        },
    )

    assert controller(account).tick(request(objs, ns, "r1")) is None

    record = get(objs, ns, CLUSTER_PLURAL, "shop")["status"]["drill"]
    assert record["phase"] == "Failed" and "is not this cluster's drill" in record["message"]
    assert "ownerReferences" not in get(objs, ns, CLUSTER_PLURAL, "shop-drill")["metadata"]


def test_a_source_whose_drill_cluster_name_is_too_long_fails_the_drill_with_the_apis_reason(
    control_plane, account, namespace
):
    ns, objs = namespace, client.CustomObjectsApi(control_plane.api_client())
    long = "a" * 38  # a valid cluster name; with "-drill" past the 40 characters a name may have
    source(objs, ns, long)
    objs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        BACKUP_PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MySQLBackup",
            "metadata": {"name": "b1"},
            "spec": {"clusterRef": {"name": long}},
        },
    )
    objs.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        BACKUP_PLURAL,
        "b1",
        {"status": {"phase": "Succeeded", "completedAt": "2026-12-06T03:00:00Z"}},
    )

    controller(account).tick(request(objs, ns, "r1", long))

    record = get(objs, ns, CLUSTER_PLURAL, long)["status"]["drill"]
    assert record["phase"] == "Failed" and "the API refused the drill's cluster" in record["message"]
    assert "at most 40 characters" in record["message"]
    batch = client.BatchV1Api(control_plane.api_client())
    assert not exists(lambda: batch.read_namespaced_job(f"{long}-drill", ns))  # its anchor went too
