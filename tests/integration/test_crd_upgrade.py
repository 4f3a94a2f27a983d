"""`helm upgrade` delivering new CRD versions (issue 19): the operator, as its ServiceAccount with
exactly the chart's rules, server-side applies the chart's crds/ at start (mysql_operator/k8s/crds.py)
on a real kube-apiserver: a CRD of the previous version gains the new fields and carries the file's
digest (what `helm test` compares); a second start changes nothing; a file that would take a field
away is refused, the live CRD stays as it was, and the refusal is a Warning Event on the
operator's Pod."""

from __future__ import annotations

import hashlib
import shutil

import yaml
from kubernetes import client

from mysql_operator.k8s import crds
from mysql_operator.operator import warn_on_own_pod
from tests.support.chart import CHART
from tests.support.crds import apply_crds, project_crds
from tests.support.operator_account import operator_api

NAME = "mysqldatabases.mysql.operator.dev"


def live(api) -> dict:
    return api.sanitize_for_serialization(
        client.ApiextensionsV1Api(api).read_custom_resource_definition(NAME)
    )


def spec_properties(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def test_the_operator_brings_its_crds_up_to_date_and_never_takes_a_field_away(
    control_plane, tmp_path, monkeypatch
):
    admin = control_plane.api_client()
    # what a first `helm install` creates: every file of the chart's crds/
    # (an earlier module may have deleted them without waiting: their removal can take minutes)
    chart_crds = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]
    apply_crds(admin, chart_crds, timeout=300)
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": "crd-upgrade"}})
    operator = operator_api(control_plane, "crd-upgrade")
    folder = tmp_path / "crds"
    shutil.copytree(CHART / "crds", folder)
    current = (folder / "mysqldatabases.yaml").read_bytes()
    try:
        # the previous version's CRD: without spec.cleanupPolicy
        older = live(admin)
        del spec_properties(older)["cleanupPolicy"]
        client.ApiextensionsV1Api(admin).replace_custom_resource_definition(NAME, older)
        assert "cleanupPolicy" not in spec_properties(live(admin))

        said = crds.apply(operator, folder)
        print("\n" + "\n".join(said))
        now = live(admin)
        assert "cleanupPolicy" in spec_properties(now), said
        assert now["metadata"]["annotations"][crds.DIGEST_ANNOTATION] == hashlib.sha256(current).hexdigest()
        assert any(line.startswith(f"CRD {NAME} applied") for line in said), said

        assert crds.apply(operator, folder) == [], "every CRD carries its file's digest: nothing to do"

        # a file that would take a field away (a downgrade, a mistake): refused, nothing changes
        narrower = yaml.safe_load(current)
        del spec_properties(narrower)["cleanupPolicy"]
        (folder / "mysqldatabases.yaml").write_text(yaml.safe_dump(narrower))
        # as the chart's Pod runs it: the refusal is also a Warning Event on the operator's Pod
        monkeypatch.setenv("POD_NAME", "mysql-operator-7d9f-x2")
        monkeypatch.setenv("POD_NAMESPACE", "crd-upgrade")
        said = crds.apply(
            operator, folder, warn=lambda reason, message: warn_on_own_pod(operator, reason, message)
        )
        assert said == [
            f"CRD {NAME} not updated: this version's file would remove v1alpha1: spec.cleanupPolicy, "
            "which existing objects may use"
        ], said
        assert (
            live(admin)["metadata"]["annotations"][crds.DIGEST_ANNOTATION]
            == hashlib.sha256(current).hexdigest()
        )
        assert "cleanupPolicy" in spec_properties(live(admin))
        events = (
            client.CoreV1Api(admin)
            .list_namespaced_event("crd-upgrade", field_selector="involvedObject.name=mysql-operator-7d9f-x2")
            .items
        )
        assert [(e.type, e.reason, e.involved_object.kind, e.message) for e in events] == [
            ("Warning", "CRDNotUpdated", "Pod", said[0])
        ]
    finally:
        apply_crds(admin, project_crds(), timeout=300)  # as the other tests expect them
