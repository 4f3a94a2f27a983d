"""A real Prometheus's configuration for the e2e tests: what the chart's ServiceMonitor and PodMonitor
select (the operator's Pods; the metrics port of every database and binlog archiver Pod of a
namespace), scraped every second, and the chart's alert rules with the waits a test can afford."""

from __future__ import annotations

import copy

import yaml

from e2e.conftest import OPERATOR_NAMESPACE
from tests.support.chart import CHART

RULES = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())


def config(kubeconfig: str, namespace: str) -> dict:
    """Prometheus' configuration: the operator's Pods (honor_labels, as the chart's ServiceMonitor)
    and the port named metrics of every database and binlog archiver Pod (the labels of the
    chart's PodMonitor)."""

    def sd(namespaces: list[str]) -> list[dict]:
        return [{"role": "pod", "kubeconfig_file": kubeconfig, "namespaces": {"names": namespaces}}]

    def label(source: str, target: str) -> dict:
        return {"source_labels": [source], "target_label": target}

    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "mysql-operator",
                "honor_labels": True,
                "kubernetes_sd_configs": sd([OPERATOR_NAMESPACE]),
                "relabel_configs": [
                    {
                        "source_labels": [
                            "__meta_kubernetes_pod_label_app_kubernetes_io_name",
                            "__meta_kubernetes_pod_container_port_name",
                        ],
                        "regex": "mysql-operator;metrics",
                        "action": "keep",
                    },
                    label("__meta_kubernetes_pod_name", "operator_pod"),
                ],
            },
            {
                "job_name": "mysql-exporters",
                "kubernetes_sd_configs": sd([namespace]),
                "relabel_configs": [
                    {
                        "source_labels": [
                            "__meta_kubernetes_pod_label_app_kubernetes_io_component",
                            "__meta_kubernetes_pod_label_app_kubernetes_io_managed_by",
                            "__meta_kubernetes_pod_container_port_name",
                        ],
                        "regex": "(database|binlog-archiver);mysql-operator;metrics",
                        "action": "keep",
                    },
                    label("__meta_kubernetes_namespace", "namespace"),
                    label("__meta_kubernetes_pod_name", "pod"),
                    label("__meta_kubernetes_pod_label_app_kubernetes_io_instance", "cluster"),
                    label("__meta_kubernetes_pod_label_mysql_operator_dev_role", "role"),
                ],
            },
        ],
    }


def short_rules() -> dict:
    """The chart's rules, MySQLClusterPrimaryDown without its `for:` (a failover here is seconds)."""
    rules = copy.deepcopy(RULES)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "MySQLClusterPrimaryDown":
                rule["for"] = "0s"
    return rules
