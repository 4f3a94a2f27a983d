"""Issue 17 on the local cluster: a real Prometheus (built from its Go module, a host process on
loopback, its configuration generated here with the same relabelling as the chart's PodMonitor and
ServiceMonitor) scrapes the chart-installed operator and the mysqld_exporter sidecar of every
server Pod of a 2-instance MySQL cluster and a 1-instance MariaDB cluster. It loads the chart's
alert rules (MySQLClusterPrimaryDown with a short `for:`). Under a write load the MySQL primary
hangs (SIGSTOP): PromQL then shows the new primary (operator and exporter agree), failovers +1 and the
alert having fired; a backup resets the backup age; every query of the chart's dashboard is valid
PromQL and the ones that must have data have it. The MySQL cluster archives its binary logs: the
archiver's delay metric stays near maxDelaySeconds under writes and falls back once the archive
has followed the failover. Restore drills (issue 49): one whose user check fails makes
MySQLRestoreDrillFailed fire, the next one (the check fixed) ends it and publishes its RTO.
Measured: the exporters' scrape time and memory, the archive delay."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes import client

from e2e.backups import drill
from e2e.conftest import OPERATOR_NAMESPACE
from e2e.helpers import (
    GROUP,
    VERSION,
    Cluster,
    cluster_spec,
    create_writes_table,
    lost_rows,
    record,
    signal_server,
    writer_to,
)
from e2e.prometheus_scrape import RULES, config, short_rules
from mysql_operator.topology import FAILOVER_CAUSES
from tests.support import prometheus as prom
from tests.support.chart import CHART
from tests.support.wait import wait_for

# exclusive: the archive's delay it waits to fall back under 2 s after the failover stayed above
# it with other e2e tests loading the 2 cores beside it (a cold CI run)
pytestmark = [pytest.mark.cluster, pytest.mark.late_build, pytest.mark.exclusive]
DASHBOARD = json.loads((CHART / "files" / "dashboard.json").read_text())
# dashboard panels that must return data for a running MySQL cluster that failed over and backed up
MUST_HAVE_DATA = {
    "Phase",
    "Primary",
    "Accepts writes",
    "Primary changes (24h)",
    "Last failover",
    "Instances by role",
    "Conditions",
    "Replica lag (operator)",
    "Replica lag (server)",
    "Queries per second",
    "Connections",
    "Binary logs on disk",
    "Exporters up",
    "Last backup age",
    "Last backup size",
    "Last backup duration",
    "Backups (7d)",
    "Binary log archive delay",
    "Reconcile duration p99",
}
MAX_DELAY = 2  # spec.backup.binlogs.maxDelaySeconds of the MySQL cluster


def dashboard_queries(namespace: str, cluster: str) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target, with Grafana's variables filled in."""
    out = []
    for panel in DASHBOARD["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$namespace", namespace).replace("$cluster", cluster)
            out.append((panel["title"], expr.replace("$__rate_interval", "1m")))
    return out


@pytest.fixture
def s3_secret(local_cluster, scenario_namespace, s3_beside_cluster):
    bucket = f"e2e-{uuid.uuid4().hex[:10]}"
    s3_beside_cluster.create_bucket(bucket)
    Cluster(local_cluster.api_client(), scenario_namespace, "x").core.create_namespaced_secret(
        scenario_namespace,
        {
            "metadata": {"name": "s3"},
            "stringData": {
                "AWS_ACCESS_KEY_ID": s3_beside_cluster.access_key,
                "AWS_SECRET_ACCESS_KEY": s3_beside_cluster.secret_key,
            },
        },
    )
    return {
        "bucket": bucket,
        "prefix": "mon",
        "endpoint": s3_beside_cluster.endpoint,
        "region": "us-east-1",
        "forcePathStyle": True,
        "credentialsSecret": {"name": "s3"},
    }


def behind(delay: float | None) -> float:
    """The archive's delay as scraped; no sample yet counts as far behind. 0 is the bucket holding
    every transaction (the usual value once writes stop), not a missing sample."""
    return float("inf") if delay is None else delay


@pytest.mark.causes("Failover", "Reseed")  # the primary hung under writes
def test_prometheus_sees_the_failover_the_alert_and_the_backup(
    local_cluster, scenario_namespace, s3_secret, tmp_path
):
    prom.ensure_built()
    api, ns = local_cluster.api_client(), scenario_namespace
    c = Cluster(api, ns, "mon")
    maria = Cluster(api, ns, "mon-maria")
    c.create(
        cluster_spec(
            2,
            "mysql",
            backup={"storage": {"s3": s3_secret}, "binlogs": {"enabled": True, "maxDelaySeconds": MAX_DELAY}},
        )
    )
    maria.create(cluster_spec(1, "mariadb"))
    c.wait_ready(300, instances=2, primary="mon-0")
    maria.wait_ready(300, instances=1)

    p = prom.Prometheus(tmp_path / "prometheus", config(local_cluster.kubeconfig, ns), short_rules()).start()
    try:
        sel = f'namespace="{ns}",cluster="mon"'

        def exporters_up() -> bool:
            up = {m["pod"]: v for m, v in p.query(f'mysql_up{{namespace="{ns}"}}')}
            return up == {"mon-0": 1, "mon-1": 1, "mon-maria-0": 1}

        wait_for(exporters_up, 90, "mysql_up 1 on every server", describe=lambda: str(p.api("targets")))
        wait_for(lambda: p.value(f"mysql_operator_cluster_primary{{{sel}}}") == 1, 60, "the operator scraped")
        # ... through the chart's NetworkPolicy that opens its metrics to no Pod (e2e/conftest.py
        # sets metrics.networkPolicy): a Prometheus on the node is admitted, as the README says
        (policy,) = [
            n
            for n in client.NetworkingV1Api(api).list_namespaced_network_policy(OPERATOR_NAMESPACE).items
            if n.metadata.name.endswith("-metrics")
        ]
        assert policy.spec.policy_types == ["Ingress"] and not policy.spec.ingress
        assert p.query(f"mysql_operator_cluster_primary{{{sel}}}")[0][0]["instance"] == "mon-0"
        assert p.value(f'mysql_global_variables_read_only{{{sel},pod="mon-0"}}') == 0
        assert p.value(f'mysql_global_variables_read_only{{{sel},pod="mon-1"}}') == 1
        assert p.value(f'mysql_global_variables_read_only{{namespace="{ns}",pod="mon-maria-0"}}') == 0
        assert (
            p.value(f'mysql_operator_cluster_phase{{namespace="{ns}",cluster="mon-maria",phase="Ready"}}')
            == 1
        )

        # the chart's alert rules: loaded, evaluated without error
        groups = p.api("rules")["groups"]
        loaded = {r["name"]: r for g in groups for r in g["rules"]}
        expected = {r["alert"] for g in RULES["groups"] for r in g["rules"]}
        assert set(loaded) == expected
        wait_for(
            lambda: all(r["health"] == "ok" for g in p.api("rules")["groups"] for r in g["rules"]),
            30,
            "every rule evaluated without error",
            describe=lambda: str(
                [(r["name"], r.get("lastError")) for g in p.api("rules")["groups"] for r in g["rules"]]
            ),
        )
        assert p.query(f'ALERTS{{alertname="MySQLClusterPrimaryDown",namespace="{ns}"}}') == []

        failovers = f'mysql_operator_primary_changes_total{{{sel},kind="Failover"}}'
        before = p.value(f"sum({failovers})") or 0
        rw, pw = create_writes_table(c)
        load = writer_to(rw, "app", pw)
        load.start()
        archive = f"mysql_binlog_archive_delay_seconds{{{sel}}}"
        try:
            wait_for(lambda: len(load.acked) >= 20, 60, "20 acknowledged writes")
            # the archiver keeps up under writes: its delay stays near maxDelaySeconds
            wait_for(
                lambda: p.value(f"mysql_binlog_archive_streaming{{{sel}}}") == 1,
                120,
                "Prometheus: the binlog archiver streaming",
                describe=lambda: str(p.api("targets")),
            )
            bound = 3 * MAX_DELAY + 5
            wait_for(lambda: behind(p.value(archive)) <= bound, 120, "the archive caught up with the writes")
            caught_up = time.monotonic()
            wait_for(lambda: time.monotonic() - caught_up >= 20, 30, "20 s of writes archived (the window)")
            under_load = p.value(f"max_over_time({archive}[20s])")
            assert under_load <= bound, f"{under_load} s behind under writes"
            # the primary hangs (SIGSTOP): it stays down however long the failover takes. A Pod
            # deleted instead came back within the failover delay once (CI), holding a commit of
            # its own no replica had: the operator rightly kept it primary, and no failover came
            hung = signal_server(local_cluster, c, "mon-0", "SIGSTOP")
            try:
                wait_for(
                    lambda: c.status().get("currentPrimary") == "mon-1",
                    120,
                    "mon-1 promoted",
                    describe=c.describe,
                )
            finally:
                signal_server(local_cluster, c, "mon-0", "SIGKILL", hung)  # unless the operator restarted it
            wait_for(
                lambda: p.value(f'mysql_operator_cluster_primary{{{sel},instance="mon-1"}}') == 1,
                30,
                "Prometheus: the new primary",
            )
            wait_for(lambda: p.value(f"sum({failovers})") == before + 1, 30, "Prometheus: failovers +1")
            # and why: one of the causes a failover has (a bounded label)
            reasons = {labels["reason"] for labels, _ in p.query(f"{failovers} > 0")}
            assert len(reasons) == 1 and reasons <= set(FAILOVER_CAUSES), reasons
            wait_for(
                lambda: p.value(f'mysql_global_variables_read_only{{{sel},pod="mon-1"}}') == 0,
                30,
                "the exporter: mon-1 writable",
            )
            fired = (
                f'max_over_time(ALERTS{{alertname="MySQLClusterPrimaryDown",alertstate="firing",{sel}}}[10m])'
            )
            wait_for(lambda: p.value(fired) == 1, 30, "MySQLClusterPrimaryDown fired during the failover")
            assert p.value(f"mysql_operator_last_failover_duration_seconds{{{sel}}}") > 0
            c.wait_ready(300, instances=2, primary="mon-1")
            wait_for(exporters_up, 90, "mysql_up 1 on every server, mon-0 back as a replica")
            # resolved once the new primary serves
            wait_for(
                lambda: (
                    p.query(f'ALERTS{{alertname="MySQLClusterPrimaryDown",alertstate="firing",{sel}}}') == []
                ),
                30,
                "MySQLClusterPrimaryDown resolved",
            )
        finally:
            load.stop()
        assert lost_rows(c.service_ip("rw"), pw, load) == []
        # the archiver followed the failover: every write is archived from mon-1, the delay back
        # to about one pass
        wait_for(
            lambda: behind(p.value(archive)) < 2, 60, "Prometheus: the archive caught up after the failover"
        )
        record(
            "binlog archive delay under writes, max over 20 s", round(under_load, 1), unit="s", scenario="17"
        )
        peak = p.value(f"max_over_time({archive}[10m])")
        record("binlog archive delay, max across the failover", round(peak, 1), unit="s", scenario="17")

        # a backup: the age resets, its size and duration are published
        started = time.time()
        c.objs.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "mysqlbackups",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "MySQLBackup",
                "metadata": {"name": "now"},
                "spec": {"clusterRef": {"name": "mon"}},
            },
        )
        wait_for(
            lambda: (p.value(f"mysql_operator_last_backup_timestamp_seconds{{{sel}}}") or 0) >= started - 1,
            300,
            "Prometheus: the backup's completion",
            describe=c.describe,
        )
        assert p.value(f"time() - mysql_operator_last_backup_timestamp_seconds{{{sel}}}") < 300
        assert p.value(f"mysql_operator_last_backup_size_bytes{{{sel}}}") > 0
        # whole seconds (the status' timestamps): a small backup can take "0"
        assert p.value(f"mysql_operator_last_backup_duration_seconds{{{sel}}}") >= 0
        wait_for(
            lambda: p.value(f'mysql_operator_backups_total{{{sel},outcome="Succeeded"}}') == 1,
            30,
            "backups_total{Succeeded} 1",
        )

        # restore drills (issue 49): one whose user check fails - the drill fails and
        # MySQLRestoreDrillFailed fires; the check fixed, the next drill passes, the alert ends
        # and its RTO is published
        c.core.create_namespaced_config_map(
            ns, {"metadata": {"name": "mon-checks"}, "data": {"one.sql": "SELECT 1", "one.expected": "2\n"}}
        )
        c.objs.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "mysqlclusters",
            "mon",
            {"spec": {"backup": {"drill": {"checksConfigMap": {"name": "mon-checks"}}}}},
        )
        failed = drill(c, "failing", 600)
        assert failed["phase"] == "Failed" and "one: row 1 differs" in failed["message"], failed
        drill_alert = f'ALERTS{{alertname="MySQLRestoreDrillFailed",alertstate="firing",{sel}}}'
        wait_for(lambda: p.query(drill_alert), 120, "Prometheus: MySQLRestoreDrillFailed firing")
        c.core.patch_namespaced_config_map("mon-checks", ns, {"data": {"one.expected": "1\n"}})
        passed = drill(c, "passing", 600)
        assert passed["phase"] == "Succeeded" and passed["checksPassed"] == ["one"], passed
        wait_for(lambda: p.query(drill_alert) == [], 120, "Prometheus: MySQLRestoreDrillFailed resolved")
        wait_for(
            lambda: p.value(f"mysql_operator_drill_rto_seconds{{{sel}}}") == passed["rtoSeconds"],
            60,
            "Prometheus: the drill's RTO",
        )
        assert p.value(f"mysql_operator_drill_succeeded{{{sel}}}") == 1

        # the dashboard: every query valid; the ones a running cluster has data for return some
        empty = []
        for title, expr in dashboard_queries(ns, "mon"):
            result = p.query(expr)  # raises QueryError on invalid PromQL
            if title in MUST_HAVE_DATA and not result:
                empty.append((title, expr))
        assert empty == [], empty

        # the exporters' cost, for the closing note
        for pod in ("mon-0", "mon-1", "mon-maria-0"):
            target = f'job="mysql-exporters",pod="{pod}"'
            # a Pod recreated by the failover had another address: one series per address
            seconds = p.value(f"avg(avg_over_time(scrape_duration_seconds{{{target}}}[1m]))")
            memory = p.value(f"max(process_resident_memory_bytes{{{target}}})")
            record(f"exporter scrape time, ms ({pod})", round(seconds * 1000, 1), unit="", scenario="17")
            record(f"exporter resident memory, MiB ({pod})", round(memory / 2**20, 1), unit="", scenario="17")
    finally:
        p.stop()
