"""The chart's NetworkPolicy (`networkPolicy.*`) rendered by the real `helm template`: nothing when
off (the default); when on, one policy per protected namespace whose selectors match the labels
the operator's own builders put on server Pods and backup/restore Job Pods, the chart's operator
Pods, and labelled clients, and nothing else. Enforcement is tested on a real cluster in
e2e/test_network_policy.py."""

from __future__ import annotations

import subprocess

import pytest

from mysql_operator import manifests as m
from mysql_operator.api import GROUP
from mysql_operator.manifests import backup_jobs, restore_jobs, tenant_jobs
from tests.support.chart import (
    CHART,
    KUBE_VERSION,
    RELEASE,
    RELEASE_NS,
    RenderError,
    helm_or_skip,
    helm_template,
    of_kind,
    one,
    render,
)
from tests.support.network_policy import admitted, matches, policies
from tests.support.specs import cluster

CLIENT_LABEL = f"{GROUP}/client"


def ns_labels(name: str) -> dict:
    return {"kubernetes.io/metadata.name": name}


# --------------------------------------------------------------------------------- off by default


@pytest.mark.parametrize(
    "values",
    [{}, {"watchNamespaces": ["a", "b"]}, {"networkPolicy": {"enabled": False, "namespaces": ["a"]}}],
    ids=["defaults", "namespaced", "off-with-namespaces"],
)
def test_nothing_is_rendered_when_off(values):
    assert policies(values) == []


def test_off_is_the_default_value():
    assert "kind: NetworkPolicy" not in helm_template({})


# --------------------------------------------------------------------------------- on


def test_one_policy_per_watched_namespace_selecting_the_database_pods():
    objs = policies({"watchNamespaces": ["team-a", "team-b"], "networkPolicy": {"enabled": True}})
    assert sorted(p["metadata"]["namespace"] for p in objs) == ["team-a", "team-b"]
    for p in objs:
        assert p["apiVersion"] == "networking.k8s.io/v1"
        assert p["metadata"]["name"] == f"{RELEASE}-mysql-operator-database"
        assert p["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
        spec = p["spec"]
        assert spec["podSelector"] == {
            "matchLabels": {
                "app.kubernetes.io/component": "database",
                "app.kubernetes.io/managed-by": "mysql-operator",
            }
        }
        assert spec["policyTypes"] == ["Ingress"]  # outgoing traffic (DNS, S3, API) untouched
        rule, seed, progress, metrics_port = spec["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": 3306}]
        assert seed["ports"] == [{"protocol": "TCP", "port": 3307}]
        assert progress["ports"] == [{"protocol": "TCP", "port": 3308}]
        assert metrics_port["ports"] == [{"protocol": "TCP", "port": 9104}] and "from" not in metrics_port


def test_the_namespaces_value_overrides_watch_namespaces():
    objs = policies({"watchNamespaces": ["a"], "networkPolicy": {"enabled": True, "namespaces": ["b", "c"]}})
    assert sorted(p["metadata"]["namespace"] for p in objs) == ["b", "c"]


def test_all_namespaces_mode_needs_an_explicit_list():
    with pytest.raises(RenderError) as e:
        render({"networkPolicy": {"enabled": True}})
    assert "networkPolicy.namespaces" in str(e.value)
    objs = policies({"networkPolicy": {"enabled": True, "namespaces": ["apps"]}})
    assert [p["metadata"]["namespace"] for p in objs] == ["apps"]


def test_the_policy_selects_exactly_the_server_pods_the_operator_builds():
    (p,) = policies({"networkPolicy": {"enabled": True, "namespaces": ["prod"]}})
    c = cluster(flavor="mariadb", version="10.11", podLabels={"team": "x"})
    server = m.statefulset(c)["spec"]["template"]["metadata"]["labels"]
    assert matches(p["spec"]["podSelector"], server)
    for component in (backup_jobs.COMPONENT_BACKUP, restore_jobs.COMPONENT_RESTORE):
        job = tenant_jobs.tenant_job(c, "j", component, "x", "img", [], [])
        assert not matches(p["spec"]["podSelector"], job["spec"]["template"]["metadata"]["labels"])


def test_who_is_admitted_to_3306():
    objs = render({"networkPolicy": {"enabled": True, "namespaces": ["prod"]}})
    (p,) = of_kind(objs, "NetworkPolicy")
    c = cluster(flavor="mariadb", version="10.11")  # namespace prod
    server = m.statefulset(c)["spec"]["template"]["metadata"]["labels"]
    operator = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    prod, ops, other = ns_labels("prod"), ns_labels(RELEASE_NS), ns_labels("other")

    # the operator's Pods, from the release namespace
    assert admitted(p, RELEASE_NS, operator, ops)
    # replicas (the servers of the namespace)
    assert admitted(p, "prod", server, prod)
    # the operator's backup and restore Jobs (their Pods' labels, from the builders)
    for component in (backup_jobs.COMPONENT_BACKUP, restore_jobs.COMPONENT_RESTORE):
        job = tenant_jobs.tenant_job(c, "j", component, "x", "img", [], [])
        assert admitted(p, "prod", job["spec"]["template"]["metadata"]["labels"], prod), component
    # labelled clients of the namespace
    assert admitted(p, "prod", {"app": "shop", CLIENT_LABEL: "true"}, prod)

    # and nobody else
    assert not admitted(p, "prod", {"app": "shop"}, prod)
    assert not admitted(p, "prod", {"app": "shop", CLIENT_LABEL: "yes"}, prod)
    assert not admitted(p, "other", {"app": "shop", CLIENT_LABEL: "true"}, other)
    assert not admitted(p, "other", server, other)  # another namespace's servers
    assert not admitted(p, "other", operator, other)  # an operator-looking Pod elsewhere
    assert not admitted(p, RELEASE_NS, {**operator, "app.kubernetes.io/instance": "x"}, ops)
    assert not admitted(
        p,
        "prod",
        {"app.kubernetes.io/managed-by": "mysql-operator", "app.kubernetes.io/component": "exporter"},
        prod,
    )

    # a MariaDB server's copies (re-seeding, physical backups): only the other servers and the
    # backup Jobs of the namespace
    assert admitted(p, "prod", server, prod, port=3307)
    backup = tenant_jobs.tenant_job(c, "b", backup_jobs.COMPONENT_BACKUP, "x", "img", [], [])
    assert admitted(p, "prod", backup["spec"]["template"]["metadata"]["labels"], prod, port=3307)
    assert not admitted(p, "other", backup["spec"]["template"]["metadata"]["labels"], other, port=3307)
    for who, ns, labels in (
        ("operator", RELEASE_NS, operator),
        ("client", "prod", {"app": "shop", CLIENT_LABEL: "true"}),
        ("other namespace's server", "other", server),
    ):
        assert not admitted(p, ns, labels, ns_labels(ns), port=3307), who
    job = tenant_jobs.tenant_job(c, "j", restore_jobs.COMPONENT_RESTORE, "x", "img", [], [])
    assert not admitted(p, "prod", job["spec"]["template"]["metadata"]["labels"], prod, port=3307)

    # how far a MariaDB re-seed is (the recipient's seed init container): only the operator
    assert admitted(p, RELEASE_NS, operator, ops, port=3308)
    for who, ns, labels in (
        ("server", "prod", server),
        ("client", "prod", {"app": "shop", CLIENT_LABEL: "true"}),
        ("operator-looking Pod elsewhere", "other", operator),
    ):
        assert not admitted(p, ns, labels, ns_labels(ns), port=3308), who


def test_the_operator_peer_follows_the_release_name_and_namespace():
    objs = render(
        {"networkPolicy": {"enabled": True, "namespaces": ["prod"]}, "fullnameOverride": "dbop"},
        namespace="ops-2",
    )
    (p,) = of_kind(objs, "NetworkPolicy")
    assert p["metadata"]["name"] == "dbop-database"
    operator_peer = p["spec"]["ingress"][0]["from"][0]
    dep = one(objs, "Deployment")
    assert operator_peer == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops-2"}},
        "podSelector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]},
    }


def test_extra_from_peers_are_appended():
    extra = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}},
        "podSelector": {"matchLabels": {CLIENT_LABEL: "true"}},
    }
    (p,) = policies({"networkPolicy": {"enabled": True, "namespaces": ["prod"], "extraFrom": [extra]}})
    assert p["spec"]["ingress"][0]["from"][-1] == extra
    assert admitted(p, "apps", {CLIENT_LABEL: "true"}, ns_labels("apps"))


BAD = [
    ("networkPolicy.enabled=yes", ["/networkPolicy/enabled", "want boolean"]),
    ("networkPolicy.enabled=true,networkPolicy.namespaces={Bad_NS}", ["/networkPolicy/namespaces/0"]),
    ("networkPolicy.extraFrom[0].pods=x", ["/networkPolicy/extraFrom/0", "pods"]),
    ("networkPolicy.ports={3307}", ["/networkPolicy", "ports", "not allowed"]),
]


@pytest.mark.parametrize("arg,fragments", BAD, ids=[a for a, _ in BAD])
def test_bad_values_are_refused(arg, fragments):
    with pytest.raises(RenderError) as e:
        helm_template({}, "--set", arg)
    for fragment in fragments:
        assert fragment in str(e.value), f"{fragment!r} not in helm's error:\n{e.value}"


def test_helm_lint_strict_is_clean_with_the_policy_on():
    r = subprocess.run(
        [
            helm_or_skip(),
            "lint",
            "--strict",
            str(CHART),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "networkPolicy.enabled=true",
            "--set",
            "watchNamespaces={a}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[WARNING]" not in r.stdout and "[ERROR]" not in r.stdout, r.stdout
