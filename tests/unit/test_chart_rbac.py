"""RBAC rendered by the chart for each scope: shape, no wildcards, no Secret deletion, and the same
rules as the operator's own list (mysql_operator/k8s/rbac.py)."""

from __future__ import annotations


import pytest
import yaml

from tests.support.chart import CHART, RELEASE, RELEASE_NS, RenderError, helm_template, of_kind, one, render

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
SA = f"{RELEASE}-mysql-operator"


def triples(rules: list[dict]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) for every combination a rule list grants."""
    out = set()
    for r in rules:
        assert set(r) <= {"apiGroups", "resources", "verbs", "resourceNames"}, r
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    out.add((g, res, v))
    return out


def operator_rules():
    from mysql_operator.k8s import rbac

    return rbac


def _subject_is_chart_sa(binding: dict) -> None:
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": RELEASE_NS}]


PEERING = {"peering": {"enabled": True}, "leaderElection": {"enabled": False}}
STANDALONE = {"leaderElection": {"enabled": False}}


def _namespaced(objs: list[dict], kind: str) -> list[dict]:
    """Roles (or bindings) for watched namespaces: not the leader election's own."""
    return [o for o in of_kind(objs, kind) if not o["metadata"]["name"].endswith("-leader-election")]


def test_leader_election_gets_a_role_for_its_lease_in_the_release_namespace_only():
    objs = render()
    (role,) = [r for r in of_kind(objs, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    (binding,) = [
        b for b in of_kind(objs, "RoleBinding") if b["metadata"]["name"] == role["metadata"]["name"]
    ]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == RELEASE_NS
    assert triples(role["rules"]) == triples(operator_rules().LEADER_ELECTION_RULES)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    _subject_is_chart_sa(binding)
    assert not [r for r in of_kind(render(STANDALONE), "Role")], "no Lease, no Role"


def test_all_namespaces_gets_one_cluster_role_and_no_roles():
    objs = render(PEERING)
    role, binding = one(objs, "ClusterRole"), one(objs, "ClusterRoleBinding")
    assert not _namespaced(objs, "Role") and not _namespaced(objs, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    _subject_is_chart_sa(binding)
    granted = triples(role["rules"])
    assert ("mysql.operator.dev", "mysqlclusters", "watch") in granted
    assert ("kopf.dev", "clusterkopfpeerings", "patch") in granted
    assert not any(res == "kopfpeerings" for _, res, _ in granted)
    assert one(objs, "ServiceAccount")["metadata"]["name"] == SA


def test_watched_namespaces_get_a_role_each_and_the_cluster_role_only_cluster_scope():
    objs = render({"watchNamespaces": ["team-a", "team-b"], **PEERING})
    roles = {r["metadata"]["namespace"]: r for r in _namespaced(objs, "Role")}
    bindings = {b["metadata"]["namespace"]: b for b in _namespaced(objs, "RoleBinding")}
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    for ns, b in bindings.items():
        assert b["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": roles[ns]["metadata"]["name"],
        }
        _subject_is_chart_sa(b)
        granted = triples(roles[ns]["rules"])
        assert ("mysql.operator.dev", "mysqlclusters", "list") in granted
        assert ("kopf.dev", "kopfpeerings", "patch") in granted
    cluster = triples(one(objs, "ClusterRole")["rules"])
    namespaced_resources = {res for _, res, _ in triples(roles["team-a"]["rules"])}
    assert not {res for _, res, _ in cluster} & namespaced_resources, "namespaced grants leak cluster-wide"
    assert {res for _, res, _ in cluster} == {"customresourcedefinitions", "namespaces", "clusterissuers"}
    writes = [r for r in one(objs, "ClusterRole")["rules"] if set(r["verbs"]) - {"get", "list", "watch"}]
    # cluster-wide: read only, but for patching the chart's own CRDs, by name (crds.apply)
    assert writes == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": operator_rules().OWN_CRDS,
            "verbs": ["patch"],
        }
    ]
    chart_crds = sorted(
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (CHART / "crds").glob("*.yaml")
    )
    assert sorted(operator_rules().OWN_CRDS) == chart_crds
    off = render({"watchNamespaces": ["team-a"], "crds": {"apply": False}})
    assert {v for _, _, v in triples(one(off, "ClusterRole")["rules"])} <= {"get", "list", "watch"}


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"watchNamespaces": ["a"]},
        PEERING,
        {"watchNamespaces": ["a"], **PEERING},
        STANDALONE,
        {"watchNamespaces": ["a", "b"], **STANDALONE},
    ],
    ids=["all", "namespaced", "all-peering", "namespaced-peering", "all-standalone", "namespaced-standalone"],
)
def test_no_wildcards_no_secret_deletion_no_privilege_verbs(values):
    objs = render(values)
    for role in of_kind(objs, "ClusterRole") + of_kind(objs, "Role"):
        for g, res, verb in triples(role["rules"]):
            assert "*" not in (g, res, verb), (role["kind"], g, res, verb)
            assert verb not in ("escalate", "bind", "impersonate", "deletecollection"), (res, verb)
            if res == "secrets":
                assert verb in ("get", "create", "patch", "list", "watch"), verb
            if res == "mysqlclusters":
                assert verb != "delete", "the operator never deletes the user's clusters"
            # mysqlbackups: deleted only by the retention policy the user sets (spec.backup.retention)


def test_rules_equal_the_operators_rules_in_every_scope():
    rbac = operator_rules()
    ops = triples(rbac.namespaced_rules())
    cluster_scope = triples(rbac.CLUSTER_SCOPE_RULES)

    objs = render(PEERING)
    assert triples(one(objs, "ClusterRole")["rules"]) == ops | cluster_scope | triples(
        rbac.PEERING_RULES_CLUSTER
    )
    for values in ({}, STANDALONE):  # the Lease's rules are in their own Role
        assert triples(one(render(values), "ClusterRole")["rules"]) == ops | cluster_scope

    objs = render({"watchNamespaces": ["a", "b"], **PEERING})
    assert triples(one(objs, "ClusterRole")["rules"]) == cluster_scope
    for role in of_kind(objs, "Role"):
        assert triples(role["rules"]) == ops | triples(rbac.PEERING_RULES_NAMESPACED)
    objs = render({"watchNamespaces": ["a"]})
    assert triples(one(_namespaced(objs, "Role"), "Role")["rules"]) == ops


def test_rbac_create_false_renders_no_rbac_objects():
    objs = render({"rbac": {"create": False}})
    for kind in RBAC_KINDS:
        assert not of_kind(objs, kind), kind
    assert one(objs, "ServiceAccount")


def test_existing_service_account_is_bound_and_not_created():
    objs = render({"serviceAccount": {"create": False, "name": "ops-sa"}})
    assert not of_kind(objs, "ServiceAccount")
    assert one(objs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops-sa"
    assert one(objs, "ClusterRoleBinding")["subjects"][0]["name"] == "ops-sa"


def test_existing_service_account_needs_a_name():
    with pytest.raises(RenderError, match=r"serviceAccount\.name"):
        helm_template({"serviceAccount": {"create": False}})
