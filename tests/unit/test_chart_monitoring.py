"""The chart's monitoring objects rendered by the real `helm template`: the PodMonitor selects the
Pods the operator's builders make and their port named metrics, the PrometheusRule carries exactly
files/prometheus-rules.yaml, the dashboard ConfigMap exactly files/dashboard.json; all off by
default, and refused, naming the value, where the Prometheus Operator's CRDs are missing. (A real
Prometheus loads the same files in e2e/test_monitoring.py.)"""

from __future__ import annotations

import json

import pytest
import yaml

from mysql_operator import manifests as m
from mysql_operator.api import parse
from mysql_operator.manifests.archiver import binlog_archiver
from tests.support.archiving import cluster as archiving_cluster
from tests.support.chart import CHART, MONITORING_APIS, RELEASE_NS, RenderError, of_kind, one, render
from tests.support.network_policy import admitted, matches, policies
from tests.support.specs import cluster

RULES = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
DASHBOARD = json.loads((CHART / "files" / "dashboard.json").read_text())
ALL_ON = {
    "metrics": {
        "podMonitor": {"enabled": True, "interval": "15s"},
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus"}},
        "dashboard": {"enabled": True},
    }
}


def test_monitoring_objects_are_off_by_default():
    objs = render()
    assert not of_kind(objs, "PodMonitor") and not of_kind(objs, "PrometheusRule")
    assert not [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]


@pytest.mark.parametrize(
    "value, kind",
    [
        ({"podMonitor": {"enabled": True}}, "PodMonitor"),
        ({"prometheusRule": {"enabled": True}}, "PrometheusRule"),
        ({"enabled": True, "serviceMonitor": {"enabled": True}}, "ServiceMonitor"),
    ],
)
def test_a_monitor_without_the_prometheus_operators_crd_is_refused_naming_the_value(value, kind):
    with pytest.raises(RenderError) as e:
        render({"metrics": value})
    field = f"metrics.{kind[0].lower() + kind[1:]}.enabled"
    assert f"{field}: the cluster has no {kind}" in str(e.value), str(e.value)
    assert f"set {field}=false" in str(e.value)


def test_the_pod_monitor_scrapes_every_database_pod_and_binlog_archiver():
    pm = one(render(ALL_ON, *MONITORING_APIS), "PodMonitor")
    assert pm["spec"]["namespaceSelector"] == {"any": True}  # watchNamespaces [] = all
    for flavor in ("mysql", "mariadb"):
        sts = m.statefulset(cluster(flavor=flavor))
        pod = sts["spec"]["template"]
        assert matches(pm["spec"]["selector"], pod["metadata"]["labels"])
        ports = [p["name"] for ct in pod["spec"]["containers"] for p in ct.get("ports", [])]
        assert "metrics" in ports
    # and the binary log archiver's Pod, its port named metrics (mysql_binlog_archive_*)
    archiver = binlog_archiver(parse(archiving_cluster(binlogs={"enabled": True})), "op")["spec"]["template"]
    assert matches(pm["spec"]["selector"], archiver["metadata"]["labels"])
    assert "metrics" in [p["name"] for ct in archiver["spec"]["containers"] for p in ct.get("ports", [])]
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["interval"] == "15s"
    targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
    assert targets["cluster"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"]
    assert targets["role"] == ["__meta_kubernetes_pod_label_mysql_operator_dev_role"]
    scoped = one(render({**ALL_ON, "watchNamespaces": ["shop", "blog"]}, *MONITORING_APIS), "PodMonitor")
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": ["shop", "blog"]}


def test_the_prometheus_rule_is_the_rules_file_and_every_alert_has_a_runbook():
    rule = one(render(ALL_ON, *MONITORING_APIS), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    assert rule["spec"]["groups"] == RULES["groups"]
    runbooks = (CHART.parents[1] / "docs" / "monitoring.md").read_text().lower()
    alerts = [r for g in RULES["groups"] for r in g["rules"]]
    assert {"MySQLClusterPrimaryDown", "MySQLBackupFailed", "MySQLReplicaLagging"} <= {
        a["alert"] for a in alerts
    }
    for a in alerts:
        page, anchor = a["annotations"]["runbook"].split("#")
        assert page == "docs/monitoring.md" and anchor == a["alert"].lower()
        # the heading mkdocs turns into that anchor, and the three parts of every runbook
        section = runbooks.split(f"\n#### {anchor}\n", 1)
        assert len(section) == 2, f"docs/monitoring.md has no runbook for {a['alert']}"
        body = section[1].split("\n#### ", 1)[0]
        for part in ("**means:**", "**check:**", "**do:**"):
            assert part in body, f"the runbook of {a['alert']} lacks {part}"


def test_the_dashboard_configmap_is_the_dashboard_file_for_grafanas_sidecar():
    (cm,) = [
        o
        for o in of_kind(render(ALL_ON, *MONITORING_APIS), "ConfigMap")
        if o["metadata"]["name"].endswith("-dashboard")
    ]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["mysql-operator-clusters.json"]) == DASHBOARD
    panels = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in DASHBOARD["panels"]}) == len(DASHBOARD["panels"])
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    titles = {p["title"] for p in DASHBOARD["panels"] if p["type"] == "row"}
    assert titles == {"Cluster health", "Replication", "Servers", "Backups", "Operator"}


def test_the_network_policy_lets_prometheus_reach_the_metrics_port_only():
    base = {"networkPolicy": {"enabled": True, "namespaces": ["shop"]}}
    (policy,) = policies(base)
    anywhere = ("monitoring", {"app": "prometheus"}, {"kubernetes.io/metadata.name": "monitoring"})
    assert admitted(policy, *anywhere, port=9104)
    assert not admitted(policy, *anywhere, port=3306)
    (narrow,) = policies(
        {
            "networkPolicy": {
                **base["networkPolicy"],
                "metricsFrom": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}
                ],
            }
        }
    )
    assert not admitted(narrow, *anywhere, port=9104)
    assert admitted(narrow, "obs", {"app": "prometheus"}, {"kubernetes.io/metadata.name": "obs"}, port=9104)


def operator_metrics_policies(values: dict) -> list[dict]:
    return [p for p in policies(values) if p["metadata"]["name"].endswith("-metrics")]


def test_the_operators_metrics_are_open_to_no_pod_until_the_scrapers_are_named():
    """The operator's series name every cluster it manages: with metrics on, a NetworkPolicy on
    its Pods admits nothing by default; metrics.networkPolicy.from names who may scrape, and
    only the metrics port is opened to them."""
    objs = render({"metrics": {"enabled": True}})
    (policy,) = of_kind(objs, "NetworkPolicy")
    operator = one(objs, "Deployment")["spec"]["template"]
    (port,) = [
        p["containerPort"]
        for c in operator["spec"]["containers"]
        for p in c["ports"]
        if p["name"] == "metrics"
    ]
    assert policy["metadata"]["namespace"] == RELEASE_NS
    assert matches(policy["spec"]["podSelector"], operator["metadata"]["labels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    for ns in (RELEASE_NS, "monitoring", "tenant"):
        assert not admitted(policy, ns, prometheus, {"kubernetes.io/metadata.name": ns}, port=port), ns

    scrapers = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": prometheus},
        }
    ]
    (named,) = operator_metrics_policies(
        {"metrics": {"enabled": True, "port": 9191, "networkPolicy": {"from": scrapers}}}
    )
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    assert admitted(named, "monitoring", prometheus, monitoring, port=9191)
    assert not admitted(named, "monitoring", prometheus, monitoring, port=8081), "the metrics port only"
    assert not admitted(named, "monitoring", {"app": "other"}, monitoring, port=9191)
    assert not admitted(named, "tenant", prometheus, {"kubernetes.io/metadata.name": "tenant"}, port=9191)


@pytest.mark.parametrize(
    "metrics", [{}, {"enabled": True, "networkPolicy": {"enabled": False}}], ids=["metrics-off", "policy-off"]
)
def test_no_operator_policy_without_metrics_or_when_turned_off(metrics):
    assert operator_metrics_policies({"metrics": metrics}) == []
