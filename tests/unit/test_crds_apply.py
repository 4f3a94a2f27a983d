"""What the operator does with the chart's CRDs at start (mysql_operator/k8s/crds.py) and what
`helm test` checks (mysql_operator/install_check.py): the pure decisions."""

from __future__ import annotations

import copy
import hashlib

import yaml

from mysql_operator import install_check
from mysql_operator.k8s import crds
from tests.support.chart import CHART

CLUSTERS = yaml.safe_load((CHART / "crds" / "mysqlclusters.yaml").read_text())


def spec_properties(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def test_removed_properties_names_versions_and_nested_fields():
    assert crds.removed_properties(CLUSTERS, CLUSTERS) == []
    narrower = copy.deepcopy(CLUSTERS)
    del spec_properties(narrower)["backup"]["properties"]["storage"]["properties"]["s3"]["properties"][
        "prefix"
    ]
    assert crds.removed_properties(CLUSTERS, narrower) == ["v1alpha1: spec.backup.storage.s3.prefix"]
    assert crds.removed_properties(narrower, CLUSTERS) == [], "adding is always allowed"
    renamed = copy.deepcopy(CLUSTERS)
    renamed["spec"]["versions"][0]["name"] = "v1beta1"
    assert crds.removed_properties(CLUSTERS, renamed) == ["version v1alpha1"]


def test_plan_applies_changed_crds_refuses_removals_names_missing_ones_and_skips_current_ones():
    f = crds.CRDFile("mysqlclusters.mysql.operator.dev", CLUSTERS, "d1")
    assert crds.plan([f], {f.name: None}) == [crds.Missing(f)], "updated, never created"
    older = copy.deepcopy(CLUSTERS)
    del spec_properties(older)["primary"]
    assert crds.plan([f], {f.name: older}) == [crds.Apply(f)]
    stamped = {
        **CLUSTERS,
        "metadata": {**CLUSTERS["metadata"], "annotations": {crds.DIGEST_ANNOTATION: "d1"}},
    }
    assert crds.plan([f], {f.name: stamped}) == []
    newer = copy.deepcopy(CLUSTERS)
    spec_properties(newer)["future"] = {"type": "string"}
    assert crds.plan([f], {f.name: newer}) == [crds.Refuse(f, ("v1alpha1: spec.future",))]


def test_load_reads_the_charts_crds_with_the_digest_of_their_bytes(tmp_path):
    (tmp_path / "a.yaml").write_bytes((CHART / "crds" / "mysqlusers.yaml").read_bytes())
    (tmp_path / "notes.yaml").write_text("kind: ConfigMap\n")
    (loaded,) = crds.load(tmp_path)
    assert loaded.name == "mysqlusers.mysql.operator.dev"
    assert loaded.digest == hashlib.sha256((tmp_path / "a.yaml").read_bytes()).hexdigest()


def test_check_install_names_each_crd_that_is_missing_or_not_the_charts():
    expected = {"a.x": "1" * 64, "b.x": "2" * 64, "c.x": "3" * 64}
    live = {"a.x": {crds.DIGEST_ANNOTATION: "1" * 64}, "b.x": {}, "c.x": None}
    problems = install_check.crd_problems(expected, live)
    assert problems[0].startswith("CRD b.x is not this chart's (digest none, the chart's 222222222222)")
    assert problems[1] == "CRD c.x is not installed"
    assert len(problems) == 2


def test_the_lease_counts_as_renewed_only_when_its_record_changes():
    class Lease:
        def __init__(self, holder, renew):
            self.spec = type(
                "S", (), {"holder_identity": holder, "renew_time": renew, "lease_transitions": 0}
            )()

    reads = iter([Lease("op-1", "t1"), Lease("op-1", "t1"), Lease("op-1", "t2")])
    assert install_check.lease_renewed(lambda: next(reads), wait=5, sleep=lambda s: None) == "op-1"
    frozen = Lease("op-1", "t1")
    assert install_check.lease_renewed(lambda: frozen, wait=3, sleep=lambda s: None) is None
