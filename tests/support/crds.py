"""Install CustomResourceDefinitions on a real apiserver for tests: create or replace, then wait
until the apiserver has established them. `crds` is a module-scoped fixture of the project's CRDs
(crds/), removed after the module's tests."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Iterable, Iterator

import pytest
import yaml
from kubernetes import client

from mysql_operator.api import GROUP, VERSION
from mysql_operator.api.sql import PLURALS as SQL_PLURALS
from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]


def project_crds() -> list[dict]:
    """The operator's CRDs, from crds/."""
    return [yaml.safe_load(p.read_text()) for p in sorted((REPO / "crds").glob("*.yaml"))]


def apply_crds(api: client.ApiClient, crds: Iterable[dict], timeout: float = 60) -> list[str]:
    """Create each CRD (or replace it when it exists) and wait until every one is Established.
    Returns their names."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for crd in crds:
        names.append(crd["metadata"]["name"])
        wait_for(lambda: _created_or_replaced(ext, crd, timeout), timeout, f"CRD {names[-1]} created")

    def established(name: str) -> bool:
        conds = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conds)

    for name in names:
        wait_for(lambda: established(name), timeout, f"CRD {name} established")
    return names


def _created_or_replaced(ext, crd: dict, timeout: float) -> bool:
    """Create `crd`, or replace the one of its name; False when it must be tried again: an earlier
    test's CRD of the name was being deleted (409 "object is being deleted") and is gone by the
    time it is read (404), or was waited for until it was gone."""
    name = crd["metadata"]["name"]
    try:
        ext.create_custom_resource_definition(crd)
        return True
    except client.ApiException as e:
        if e.status != 409:
            raise
    try:
        existing = ext.read_custom_resource_definition(name)
    except client.ApiException as e:
        if e.status != 404:
            raise
        return False  # deleted in between: create it again
    if existing.metadata.deletion_timestamp:  # an earlier test's, still being deleted
        wait_for(lambda: _gone(ext, name), timeout, f"CRD {name} deleted")
        return False
    wait_for(lambda: _replaced(ext, name, crd), timeout, f"CRD {name} replaced")
    return True


def _replaced(ext, name: str, crd: dict) -> bool:
    """Replace the CRD `name` by `crd` at the version read now; False when another write came in
    between (409: the API server sets a CRD's status conditions just after another session created
    it), to be read and replaced again."""
    crd["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(name).metadata.resource_version
    try:
        ext.replace_custom_resource_definition(name, crd)
    except client.ApiException as e:
        if e.status != 409:
            raise
        return False
    return True


def serve_project_crds(api: client.ApiClient, plural: str) -> client.CustomObjectsApi:
    """The operator's CRDs applied, and its objects of `plural` served (a CRD Established may
    still answer 404 to a list for a moment): the client to them."""
    from mysql_operator.api import GROUP, VERSION

    apply_crds(api, project_crds())
    objs = client.CustomObjectsApi(api)
    wait_for(
        lambda: objs.list_cluster_custom_object(GROUP, VERSION, plural) is not None,
        30,
        f"{plural} to be served",
    )
    return objs


def _gone(ext: client.ApiextensionsV1Api, name: str) -> bool:
    try:
        ext.read_custom_resource_definition(name)
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


# What issue 45 made the MySQLCluster CRD refuse and the parser always refused: objects stored
# before then may still hold it (validation ratcheting admits later updates that keep it).
BEFORE_ISSUE_45 = {
    "instances": 1,
    "config": {"myCnf": "= 50\n"},
    "backup": {
        "schedule": "0 25 * * *",
        "storage": {"s3": {"bucket": "backups", "credentialsSecret": {"name": "s3"}}},
    },
}


def admits(api: client.ApiClient, namespace: str, spec: dict) -> bool | None:
    """Whether the API server admits a MySQLCluster with this spec (a dry run); None while it
    cannot say."""
    body = {
        "apiVersion": "mysql.operator.dev/v1alpha1",
        "kind": "MySQLCluster",
        "metadata": {"name": "probe"},
    }
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "mysql.operator.dev",
            "v1alpha1",
            namespace,
            "mysqlclusters",
            {**body, "spec": spec},
            dry_run="All",
        )
    except client.ApiException as e:
        return False if e.status == 422 else None
    return True


@contextlib.contextmanager
def cluster_crd_before_issue_45(api: client.ApiClient, namespace: str) -> Iterator[None]:
    """The live MySQLCluster CRD without the rules issue 45 added (a cron hour 25 and a my.cnf
    line without a name admitted again), to put an object stored before them in place; the CRD
    is put back exactly as it was afterwards."""
    ext = client.ApiextensionsV1Api(api)
    name = "mysqlclusters.mysql.operator.dev"
    live = api.sanitize_for_serialization(ext.read_custom_resource_definition(name))
    older = copy.deepcopy(live)
    spec = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    del spec["backup"]["properties"]["schedule"]["x-kubernetes-validations"]
    cnf = spec["config"]["properties"]["myCnf"]
    cnf["x-kubernetes-validations"] = [r for r in cnf["x-kubernetes-validations"] if "*=')" not in r["rule"]]
    ext.replace_custom_resource_definition(name, older)
    try:
        wait_for(lambda: admits(api, namespace, BEFORE_ISSUE_45), 60, "the older schema served", interval=0.5)
        yield
    finally:
        live["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(
            name
        ).metadata.resource_version
        ext.replace_custom_resource_definition(name, live)
        wait_for(
            lambda: admits(api, namespace, BEFORE_ISSUE_45) is False,
            60,
            "the CRD's rules served again",
            interval=0.5,
        )


CRD_FILES = sorted((REPO / "crds").glob("*.yaml"))
PLURALS = {"MySQLCluster": "mysqlclusters", "MySQLBackup": "mysqlbackups", **SQL_PLURALS}


@pytest.fixture(scope="module")
def crds(control_plane):
    """Both CRDs installed from crds/ and established; removed afterwards."""
    ext = client.ApiextensionsV1Api(control_plane.api_client())
    names = apply_crds(control_plane.api_client(), (yaml.safe_load(p.read_text()) for p in CRD_FILES))
    objs = client.CustomObjectsApi(control_plane.api_client())
    for plural in PLURALS.values():
        wait_for(
            lambda plural=plural: objs.list_cluster_custom_object(GROUP, VERSION, plural) is not None,
            30,
            f"{plural} to be served",
        )
    yield ext
    for name in names:
        ext.delete_custom_resource_definition(name)
