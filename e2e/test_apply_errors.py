"""A bad edit of a running cluster, with the operator installed by its chart: an affinity the CRD
admits but the StatefulSet API refuses. The status says so (condition Degraded, reason
ApplyFailed, naming spec.affinity and the API's message) with a Warning Event within seconds, the
StatefulSet keeps the last good spec, and the cluster still fails over when its primary dies under
writes; fixing the spec makes it Ready again. (The cheap cases are refused at admission: the
corpus in tests/invalid/, applied to a real API server by tests/integration/test_crds.py.)"""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from e2e.helpers import (
    Cluster,
    cluster_spec,
    create_writes_table,
    lost_rows,
    record,
    signal_server,
    writer_to,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster

BAD_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}


def _apply_failed(c: Cluster) -> dict | None:
    st = c.status()
    degraded = next((x for x in st.get("conditions") or [] if x["type"] == "Degraded"), {})
    return degraded if (degraded.get("status"), degraded.get("reason")) == ("True", "ApplyFailed") else None


@pytest.mark.causes("Failover", "Reseed")  # the primary SIGKILLed under writes
def test_a_bad_edit_is_reported_within_seconds_and_the_cluster_still_fails_over(
    local_cluster, scenario_namespace
):
    api = local_cluster.api_client()
    apps = client.AppsV1Api(api)
    c = Cluster(api, scenario_namespace, "bad-edit").create(cluster_spec(3, "mariadb"))
    old = c.wait_ready(300, instances=3)["currentPrimary"]
    rw, pw = create_writes_table(c)
    good_template = apps.read_namespaced_stateful_set(c.name, c.namespace).spec.template.spec.affinity
    writer = writer_to(rw, "app", pw)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, 60, "50 acknowledged writes")
        edited = time.monotonic()
        c.patch_spec({"affinity": BAD_AFFINITY})
        degraded = wait_for(lambda: _apply_failed(c), 60, "Degraded ApplyFailed", interval=0.2)
        to_condition = time.monotonic() - edited
        assert degraded["message"].startswith(
            f"spec.affinity: StatefulSet {c.name} refused by the API server"
        )
        assert "nodeSelectorTerms" in degraded["message"]
        wait_for(
            lambda: any(e.type == "Warning" for e in c.events("ApplyFailed")),
            60,
            "a Warning Event",
            interval=0.2,
        )
        to_event = time.monotonic() - edited
        record(
            "bad edit to condition ApplyFailed (spec.affinity refused by the StatefulSet API)", to_condition
        )
        record("bad edit to its Warning Event", to_event)
        assert (
            apps.read_namespaced_stateful_set(c.name, c.namespace).spec.template.spec.affinity
            == good_template
        )

        # the primary dies while the bad spec is in place: failover goes on
        signal_server(local_cluster, c, old, "SIGKILL")
        killed = time.monotonic()
        new = wait_for(
            lambda: (p := c.status().get("currentPrimary")) not in (None, old) and p,
            120,
            "a new primary with the bad spec still in place",
            describe=c.describe,
        )
        at = len(writer.acked)
        wait_for(lambda: len(writer.acked) > at + 20, 120, "writes accepted by the new primary")
        to_write = writer.first_ack_after_outage(killed)
    finally:
        writer.stop()
    record(
        "failover with a refused spec in place (primary container SIGKILLed, mariadb) to first write",
        to_write,
    )
    assert _apply_failed(c), "still reported until fixed"
    lost = lost_rows(rw, pw, writer)
    record(
        f"rows lost (failover with a refused spec; {len(writer.acked)} acknowledged)", len(lost), unit="count"
    )
    assert not lost, lost[:20]

    c.patch_spec({"affinity": None})  # the fix
    c.wait_ready(300, "Ready once the spec is fixed", instances=3, primary=new)
