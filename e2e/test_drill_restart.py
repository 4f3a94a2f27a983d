"""Issue 49 on the local cluster: the operator restarted in the middle of a restore drill. A
1-instance MariaDB cluster with a backup; a drill asked for whose user check sleeps (so its
throwaway cluster's restore Job is still running); the chart's operator Pod force-deleted as soon as
that Job's Pod runs. The Deployment's new operator takes the drill up from status.drill and the
throwaway cluster it finds: the drill passes, and the throwaway cluster, its anchor Job and its
volume are gone. Measured: the drill's RTO with the restart in it."""

from __future__ import annotations

import pytest
from kubernetes import client

from e2e.backups import ask_for_drill, backup_phase_of, create_backup, drill_ended, s3_storage, throwaway_gone
from e2e.conftest import OPERATOR_NAMESPACE
from e2e.helpers import Cluster, cluster_spec, query, ready_pods, record, try_query
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.exclusive]  # disturbs the chart's operator

SLEEP = 40  # seconds the user's check keeps the restore Job running


def test_a_drill_survives_the_operator_restarted_in_its_middle_and_leaves_nothing_behind(
    local_cluster, scenario_namespace, s3_beside_cluster
):
    api, ns = local_cluster.api_client(), scenario_namespace
    core = client.CoreV1Api(api)
    c = Cluster(api, ns, "drr")
    storage = s3_storage(c, s3_beside_cluster, "drr")
    core.create_namespaced_config_map(
        ns,
        {
            "metadata": {"name": "checks"},
            "data": {
                "rows.sql": "SELECT COUNT(*) FROM app.items",
                "rows.expected": "50\n",
                "slow.sql": f"SELECT SLEEP({SLEEP})",
                "slow.expected": "0\n",
            },
        },
    )
    c.create(
        cluster_spec(
            1,
            "mariadb",
            backup={"storage": storage, "drill": {"timeout": "10m", "checksConfigMap": {"name": "checks"}}},
        )
    )
    c.wait_ready(300, instances=1)
    rw, pw = c.service_ip("rw"), c.password()
    wait_for(lambda: try_query(rw, "app", pw, "SELECT 1"), 60, "-rw answering")
    query(rw, "app", pw, "CREATE TABLE app.items (id INT PRIMARY KEY)")
    for i in range(1, 51):
        query(rw, "app", pw, "INSERT INTO app.items VALUES (%s)", args=(i,))
    create_backup(c, "base")
    wait_for(
        lambda: backup_phase_of(c, "base") == "Succeeded", 300, "the backup Succeeded", describe=c.describe
    )

    (before,) = ready_pods(core, OPERATOR_NAMESPACE)
    restore_job = f"{c.name}-drill-restore"
    ask_for_drill(c, "restart")

    def restore_pod_running() -> bool:
        pods = core.list_namespaced_pod(ns, label_selector=f"job-name={restore_job}").items
        return any(p.status.phase == "Running" for p in pods)

    wait_for(restore_pod_running, 300, f"the Pod of {restore_job} running", describe=c.describe)
    assert (c.status().get("drill") or {}).get("phase") == "Running"
    core.delete_namespaced_pod(before, OPERATOR_NAMESPACE, grace_period_seconds=0)
    wait_for(
        lambda: [p for p in ready_pods(core, OPERATOR_NAMESPACE) if p != before],
        180,
        "the Deployment's new operator Pod ready",
    )

    d = drill_ended(c, "restart", 600)

    assert d["phase"] == "Succeeded", d.get("message")
    assert d["checksPassed"] == ["rows", "slow"], d
    assert d["tablesChecked"] == {"tables": 1, "rows": 50}, d
    throwaway_gone(c)
    record("restore drill RTO with the operator restarted in it (mariadb)", d["rtoSeconds"], scenario="49")
