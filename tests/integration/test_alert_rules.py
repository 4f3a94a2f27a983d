"""The chart's alert rules (charts/mysql-operator/files/prometheus-rules.yaml) checked and unit-tested
by the real promtool (built from Prometheus' Go module): each alert fires on the series the
operator and the exporters publish in the situation it names, and not in the look-alike situations
it must ignore (a new cluster has no primary yet; a lag that recovered)."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support import prometheus as prom
from tests.support.chart import CHART

pytestmark = pytest.mark.late_build

RULES_FILE = CHART / "files" / "prometheus-rules.yaml"
RULES = {r["alert"]: r for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"]}


@pytest.fixture(scope="module")
def promtool():
    prom.ensure_built()
    return prom.promtool


def annotations(alert: str, labels: dict[str, str], value: str) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them for `labels` and `value`."""

    def render(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m_: labels.get(m_.group(1), ""), text)
        percent = f"{float(value) * 100:.4g}%" if value else ""
        return text.replace("{{ $value }}", value).replace("{{ $value | humanizePercentage }}", percent)

    return {k: render(v) for k, v in RULES[alert]["annotations"].items()}


def expect(alert: str, labels: dict[str, str], value: str = "") -> dict:
    return {
        "exp_labels": {**labels, **RULES[alert]["labels"]},
        "exp_annotations": annotations(alert, labels, value),
    }


def test_the_rules_file_is_valid(promtool):
    r = promtool("check", "rules", str(RULES_FILE))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in r.stdout


def test_each_alert_fires_in_its_situation_only(promtool, tmp_path):
    shop = {"namespace": "shop", "cluster": "db"}
    available = {**shop, "type": "Available"}
    tests = [
        {
            "name": "primary down during a failover, not while a new cluster bootstraps",
            "interval": "15s",
            "input_series": [
                # db: Available 1, then 0 for 90 s (FailingOver), then 1 again
                {
                    "series": _series("mysql_operator_cluster_condition", available),
                    "values": "1 1 0 0 0 0 0 0 1",
                },
                {
                    "series": _series("mysql_operator_cluster_phase", {**shop, "phase": "FailingOver"}),
                    "values": "0 0 1 1 1 1 1 1 0",
                },
                # new: a cluster being created (no primary yet) is not down
                {
                    "series": _series(
                        "mysql_operator_cluster_condition",
                        {"namespace": "shop", "cluster": "new", "type": "Available"},
                    ),
                    "values": "0x8",
                },
                {
                    "series": _series(
                        "mysql_operator_cluster_phase",
                        {"namespace": "shop", "cluster": "new", "phase": "Bootstrapping"},
                    ),
                    "values": "1x8",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "45s", "alertname": "MySQLClusterPrimaryDown", "exp_alerts": []},  # 15 s < for
                {
                    "eval_time": "75s",
                    "alertname": "MySQLClusterPrimaryDown",
                    "exp_alerts": [expect("MySQLClusterPrimaryDown", available)],
                },
                {"eval_time": "120s", "alertname": "MySQLClusterPrimaryDown", "exp_alerts": []},  # recovered
            ],
        },
        {
            "name": "a failed backup, a lagging replica, an exporter that cannot connect",
            "interval": "1m",
            "input_series": [
                {
                    "series": _series("mysql_operator_backups_total", {**shop, "outcome": "Failed"}),
                    "values": "0 0 1 1",
                },
                {
                    "series": _series("mysql_operator_replica_lag_seconds", {**shop, "instance": "db-1"}),
                    "values": "120x8",
                },
                # db-2 lagged for 3 minutes only
                {
                    "series": _series("mysql_operator_replica_lag_seconds", {**shop, "instance": "db-2"}),
                    "values": "120 120 120 0 0 0 0 0 0",
                },
                {"series": _series("mysql_up", {**shop, "pod": "db-0"}), "values": "0x8"},
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "MySQLBackupFailed", "exp_alerts": []},
                {
                    "eval_time": "3m",
                    "alertname": "MySQLBackupFailed",
                    "exp_alerts": [expect("MySQLBackupFailed", {**shop, "outcome": "Failed"})],
                },
                {
                    "eval_time": "7m",
                    "alertname": "MySQLReplicaLagging",
                    "exp_alerts": [expect("MySQLReplicaLagging", {**shop, "instance": "db-1"}, "120")],
                },
                {
                    "eval_time": "6m",
                    "alertname": "MySQLExporterCannotConnect",
                    "exp_alerts": [expect("MySQLExporterCannotConnect", {**shop, "pod": "db-0"})],
                },
            ],
        },
        {
            "name": "a binary log archive falling behind; archiving stopped",
            "interval": "30s",
            "input_series": [
                # db (maxDelay 10: the bound is 60 s) falls behind from 1m on; ok keeps its sawtooth
                {
                    "series": _series("mysql_binlog_archive_delay_seconds", {**shop, "pod": "db-archiver"}),
                    "values": "1 12 30 60 90 120 150 180 210",
                },
                {
                    "series": _series(
                        "mysql_binlog_archive_max_delay_seconds", {**shop, "pod": "db-archiver"}
                    ),
                    "values": "10x8",
                },
                {
                    "series": _series(
                        "mysql_binlog_archive_delay_seconds",
                        {"namespace": "shop", "cluster": "ok", "pod": "a"},
                    ),
                    "values": "1 11 2 11 1 12 1 11 2",
                },
                {
                    "series": _series(
                        "mysql_binlog_archive_max_delay_seconds",
                        {"namespace": "shop", "cluster": "ok", "pod": "a"},
                    ),
                    "values": "10x8",
                },
                {
                    "series": _series(
                        "mysql_operator_cluster_condition", {**shop, "type": "BinlogArchiving"}
                    ),
                    "values": "1 1 0x12",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "150s", "alertname": "MySQLBinlogArchiveBehind", "exp_alerts": []},  # pending
                {
                    "eval_time": "180s",  # above 60 s since 120 s, for 1m
                    "alertname": "MySQLBinlogArchiveBehind",
                    "exp_alerts": [expect("MySQLBinlogArchiveBehind", {**shop, "pod": "db-archiver"}, "150")],
                },
                {
                    "eval_time": "5m",
                    "alertname": "MySQLBinlogArchivingStopped",
                    "exp_alerts": [],
                },  # 4 min < for
                {
                    "eval_time": "6m",
                    "alertname": "MySQLBinlogArchivingStopped",
                    "exp_alerts": [
                        expect("MySQLBinlogArchivingStopped", {**shop, "type": "BinlogArchiving"})
                    ],
                },
            ],
        },
        {
            "name": "a late scheduled backup (also a first one), not a working or an unscheduled one",
            "interval": "1m",
            "input_series": [
                # late: the run scheduled at 600 s never succeeded; the last success is at 0 s
                {
                    "series": _series("mysql_operator_last_scheduled_backup_timestamp_seconds", shop),
                    "values": "600x120",
                },
                {"series": _series("mysql_operator_last_backup_timestamp_seconds", shop), "values": "0x120"},
                # first: scheduled, never succeeded (no last-backup series at all)
                {
                    "series": _series(
                        "mysql_operator_last_scheduled_backup_timestamp_seconds", {**shop, "cluster": "first"}
                    ),
                    "values": "600x120",
                },
                # working: a run every 10 minutes, each stored 2 minutes after it was due
                {
                    "series": _series(
                        "mysql_operator_last_scheduled_backup_timestamp_seconds", {**shop, "cluster": "ok"}
                    ),
                    "values": " ".join(str(600 * (m // 10)) for m in range(121)),
                },
                {
                    "series": _series(
                        "mysql_operator_last_backup_timestamp_seconds", {**shop, "cluster": "ok"}
                    ),
                    "values": " ".join(
                        str(600 * (m // 10) + (120 if m % 10 >= 2 else -480)) for m in range(121)
                    ),
                },
                # unscheduled: backed up once, long ago (no schedule, no alert)
                {
                    "series": _series(
                        "mysql_operator_last_backup_timestamp_seconds", {**shop, "cluster": "manual"}
                    ),
                    "values": "0x120",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "50m", "alertname": "MySQLBackupLate", "exp_alerts": []},  # for: 1h
                {
                    "eval_time": "90m",
                    "alertname": "MySQLBackupLate",
                    "exp_alerts": [
                        expect("MySQLBackupLate", shop),
                        expect("MySQLBackupLate", {**shop, "cluster": "first"}),
                    ],
                },
            ],
        },
        {
            "name": "a data volume of a cluster filling, not another application's",
            "interval": "1m",
            "input_series": [
                {
                    "series": _series("mysql_operator_cluster_phase", {**shop, "phase": "Ready"}),
                    "values": "1x15",
                },
                *(
                    {
                        "series": _series(
                            f"kubelet_volume_stats_{what}_bytes",
                            {"namespace": "shop", "persistentvolumeclaim": pvc},
                        ),
                        "values": values,
                    }
                    for pvc in ("data-db-1", "data-postgres-0")
                    for what, values in (("available", "5x15"), ("capacity", "100x15"))
                ),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "12m",
                    "alertname": "MySQLVolumeFilling",
                    "exp_alerts": [
                        expect("MySQLVolumeFilling", {**shop, "persistentvolumeclaim": "data-db-1"})
                    ],
                },
            ],
        },
        {
            "name": "a restore drill failed (db), passed (other), ran none (third)",
            "interval": "1m",
            "input_series": [
                # db: passed, then the next drill failed, then one passed again
                {"series": _series("mysql_operator_drill_succeeded", shop), "values": "1 1 0 0 0 1 1"},
                {
                    "series": _series("mysql_operator_drill_succeeded", {**shop, "cluster": "other"}),
                    "values": "1x6",
                },
                {
                    "series": _series(
                        "mysql_operator_cluster_phase", {**shop, "cluster": "third", "phase": "Ready"}
                    ),
                    "values": "1x6",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "MySQLRestoreDrillFailed", "exp_alerts": []},
                {
                    "eval_time": "3m",
                    "alertname": "MySQLRestoreDrillFailed",
                    "exp_alerts": [expect("MySQLRestoreDrillFailed", shop)],
                },
                {"eval_time": "6m", "alertname": "MySQLRestoreDrillFailed", "exp_alerts": []},
            ],
        },
        {
            "name": "no operator metrics",
            "interval": "1m",
            "input_series": [{"series": _series("mysql_up", {**shop, "pod": "db-0"}), "values": "1x15"}],
            "alert_rule_test": [
                {
                    "eval_time": "12m",
                    "alertname": "MySQLOperatorAbsent",
                    "exp_alerts": [expect("MySQLOperatorAbsent", {})],
                },
            ],
        },
        {
            "name": "the operator scraped",
            "interval": "1m",
            "input_series": [
                {
                    "series": _series("mysql_operator_reconciles_total", {**shop, "outcome": "ok"}),
                    "values": "0+1x15",
                }
            ],
            "alert_rule_test": [{"eval_time": "12m", "alertname": "MySQLOperatorAbsent", "exp_alerts": []}],
        },
        {
            "name": "a cluster failed, degraded, with an instance held out or re-seeding; errors; connections",
            "interval": "1m",
            "input_series": [
                {
                    "series": _series("mysql_operator_cluster_phase", {**shop, "phase": "Failed"}),
                    "values": "0 1x70",
                },
                {
                    "series": _series("mysql_operator_cluster_condition", {**shop, "type": "Degraded"}),
                    "values": "1x70",
                },
                # a second cluster Degraded for 10 minutes only, then recovered
                {
                    "series": _series(
                        "mysql_operator_cluster_condition", {**shop, "cluster": "brief", "type": "Degraded"}
                    ),
                    "values": "1x9 0x60",
                },
                {
                    "series": _series("mysql_operator_cluster_instances", {**shop, "role": "held-out"}),
                    "values": "1x70",
                },
                {
                    "series": _series("mysql_operator_cluster_instances", {**shop, "role": "reseeding"}),
                    "values": "1x70",
                },
                {
                    "series": _series(
                        "mysql_operator_reconcile_errors_total", {**shop, "cause": "TimeoutError"}
                    ),
                    "values": "0+1x70",
                },
                {
                    "series": _series("mysql_operator_pass_overdue", shop),
                    "values": "0x5 1x70",
                },
                # another cluster's pass overdue for 3 minutes only, then ended
                {
                    "series": _series("mysql_operator_pass_overdue", {**shop, "cluster": "brief"}),
                    "values": "1x3 0x66",
                },
                {
                    "series": _series("mysql_global_status_threads_connected", {**shop, "pod": "db-0"}),
                    "values": "90x70",
                },
                {
                    "series": _series("mysql_global_variables_max_connections", {**shop, "pod": "db-0"}),
                    "values": "100x70",
                },
                {
                    "series": _series("mysql_global_status_threads_connected", {**shop, "pod": "db-1"}),
                    "values": "50x70",
                },
                {
                    "series": _series("mysql_global_variables_max_connections", {**shop, "pod": "db-1"}),
                    "values": "100x70",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "MySQLClusterFailed", "exp_alerts": []},
                {
                    "eval_time": "4m",
                    "alertname": "MySQLClusterFailed",
                    "exp_alerts": [expect("MySQLClusterFailed", {**shop, "phase": "Failed"})],
                },
                {
                    "eval_time": "20m",
                    "alertname": "MySQLClusterDegraded",
                    "exp_alerts": [expect("MySQLClusterDegraded", {**shop, "type": "Degraded"})],
                },
                {
                    "eval_time": "12m",
                    "alertname": "MySQLInstanceHeldOut",
                    "exp_alerts": [expect("MySQLInstanceHeldOut", {**shop, "role": "held-out"}, "1")],
                },
                {"eval_time": "50m", "alertname": "MySQLInstanceReseedingTooLong", "exp_alerts": []},
                {
                    "eval_time": "65m",
                    "alertname": "MySQLInstanceReseedingTooLong",
                    "exp_alerts": [expect("MySQLInstanceReseedingTooLong", {**shop, "role": "reseeding"})],
                },
                {
                    "eval_time": "25m",
                    "alertname": "MySQLOperatorReconcileErrors",
                    "exp_alerts": [expect("MySQLOperatorReconcileErrors", {**shop, "cause": "TimeoutError"})],
                },
                {"eval_time": "9m", "alertname": "MySQLOperatorPassOverdue", "exp_alerts": []},  # for: 5m
                {
                    "eval_time": "12m",
                    "alertname": "MySQLOperatorPassOverdue",
                    "exp_alerts": [expect("MySQLOperatorPassOverdue", shop, "1")],
                },
                {
                    "eval_time": "10m",
                    "alertname": "MySQLTooManyConnections",
                    "exp_alerts": [expect("MySQLTooManyConnections", {**shop, "pod": "db-0"}, "0.9")],
                },
            ],
        },
    ]
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {"rule_files": [str(RULES_FILE)], "evaluation_interval": "15s", "tests": tests}, sort_keys=False
        )
    )
    r = promtool("test", "rules", str(test_file))
    assert r.returncode == 0, r.stdout + r.stderr


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
