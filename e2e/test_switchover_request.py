"""Issue 45, item 4: a switchover is a request, done once. A cluster created with spec.primary
(deprecated) gets that primary once (status.primaryRequest Done); a switchover asked for with
`mysql-operator switchover` (the annotation mysql.operator.dev/switchover-to) is done once
(status.switchover Done, a SwitchoverDone Event, the annotation removed); then the new primary's
server is killed, the cluster fails over, and once everything is Ready again the primary is NOT
moved back - neither to the instance the annotation asked for nor to spec.primary's - for a
minute of watching."""

from __future__ import annotations

import time

import pytest

from e2e.helpers import Cluster, cluster_spec, record, signal_server, stopwatch
from mysql_operator import cli
from mysql_operator import switchover as sw
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster]

WATCH_SECONDS = 60


@pytest.mark.causes("Failover", "Switchover", "Reseed")  # asked for; the killed primary may rejoin by a copy
def test_a_switchover_request_is_done_once_and_a_failover_is_never_undone(local_cluster, scenario_namespace):
    c = Cluster(local_cluster.api_client(), scenario_namespace, "swr")
    # spec.primary on creation: a one-time request, honoured by the bootstrap
    c.create(cluster_spec(3, primary=2))
    c.wait_ready(300, "Ready with the primary spec.primary asked for", instances=3, primary="swr-2")
    asked = wait_for(
        lambda: (r := c.status().get("primaryRequest")) and r.get("result") == "Done" and r,
        60,
        "status.primaryRequest Done",
        describe=c.describe,
    )
    assert asked["value"] == 2, asked

    # the request: once, recorded, said, its annotation removed
    elapsed = stopwatch()
    argv = ["switchover", c.name, "--to", "1", "--reason", "e2e: issue 45", "--wait", "--timeout", "180"]
    assert cli.main([*argv, "-n", c.namespace, "--kubeconfig", local_cluster.kubeconfig]) == 0
    st = c.wait_ready(180, "Ready after the requested switchover", instances=3, primary="swr-1")
    record("switchover (request to Done and Ready)", elapsed())
    done = st["switchover"]
    assert (done["to"], done["result"]) == ("swr-1", "Done"), done
    assert done["requestedBy"].endswith("e2e: issue 45") and done.get("finishedAt"), done
    assert sw.ANNOTATION not in (c.body()["metadata"].get("annotations") or {})
    # (spec.primary's request, done by the bootstrap, has a SwitchoverDone Event of its own)
    said = [e for e in c.events("SwitchoverDone") if "e2e: issue 45" in (e.message or "")]
    assert [e.type for e in said] == ["Normal"], c.describe()
    assert len(c.events("Switchover")) == 1, c.describe()  # the one asked for: spec.primary's was a bootstrap
    assert (
        c.status()["primaryRequest"] == asked
    )  # acted on once: not again, though swr-2 is no longer primary

    # the requested primary fails: a failover, which nothing undoes when it returns
    signal_server(local_cluster, c, "swr-1", "SIGKILL")
    st = wait_for(
        lambda: (s := c.status()).get("currentPrimary") not in (None, "swr-1") and s,
        180,
        "a failover away from swr-1",
        describe=c.describe,
    )
    new = st["currentPrimary"]
    c.wait_ready(420, "Ready again after the failover, swr-1 back as a replica", instances=3, primary=new)
    assert c.roles()["swr-1"] == "replica", c.describe()
    switchovers = len(c.events("Switchover"))
    seen = set()
    deadline = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < deadline:
        seen.add(c.status().get("currentPrimary"))
        time.sleep(1)
    assert seen == {new}, f"the primary moved after the failover: {seen}\n{c.describe()}"
    assert len(c.events("Switchover")) == switchovers == 1, c.describe()
    st = c.status()
    assert st["switchover"] == done and st["primaryRequest"] == asked, st
    assert st["phase"] == "Ready", c.describe()
