"""A pass that waits long never holds what other clusters' passes need (issue 53): past its deadline
it gives up its slot, runs on, and its cluster says so (condition PassOverdue, a Warning Event,
the metric); the condition goes when the pass ends.

The slow pass is real waiting: the operator's own `Instance.observe()` against a server that
accepts the connection and never answers (what a SIGSTOPped mysqld does), on a real kube-apiserver,
as the operator's ServiceAccount."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from kubernetes import client

from mysql_operator import metrics
from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.db.instance import Instance
from mysql_operator.passes import Passes
from mysql_operator.reconcile import Reconciler
from mysql_operator.conditions import PASS_OVERDUE
from tests.support.crds import serve_project_crds
from tests.support.operator_account import operator_api
from tests.support.wait import wait_for

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def objs(control_plane):
    return serve_project_crds(control_plane.api_client(), CLUSTER_PLURAL)


class Silent:
    """A TCP server that accepts and never sends a byte (a hung mysqld: the kernel completes the
    handshake, the process never answers)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


def _cluster(objs, ns: str, name: str) -> dict:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MySQLCluster",
        "metadata": {"name": name},
        "spec": {"instances": 1, "storage": {"size": "1Gi"}},
    }
    return objs.create_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, body)


def _overdue(objs, ns: str, name: str) -> dict:
    body = objs.get_namespaced_custom_object(GROUP, VERSION, ns, CLUSTER_PLURAL, name)
    return next(
        (c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == PASS_OVERDUE), {}
    )


def test_a_pass_past_its_deadline_gives_up_its_slot_and_its_cluster_says_so(control_plane, objs, namespace):
    rec = Reconciler(operator_api(control_plane, namespace))
    hung_body, other_body = _cluster(objs, namespace, "hung"), _cluster(objs, namespace, "other")
    silent = Silent()
    hung = Instance(
        "127.0.0.1", silent.port, "operator", "pw", name="hung-0", connect_timeout=4.0, read_timeout=4.0
    )

    def report(body, seconds):
        meta = body["metadata"]
        metrics.pass_overdue(meta["namespace"], meta["name"], seconds is not None)
        rec.pass_overdue(body, seconds)

    # one slot: without giving it up, the hung cluster's pass would hold the other's for seconds
    passes = Passes(slots=1, deadline=0.5, report=report)
    timeline: dict[str, float] = {}

    def slow_pass():
        o = hung.observe()  # waits its read timeout on a server that never answers
        timeline["hung done"] = time.monotonic()
        return o

    def quick_pass():
        timeline["other done"] = time.monotonic()
        return "ok"

    async def scenario():
        first = asyncio.create_task(passes.run(hung_body, slow_pass))
        await asyncio.sleep(0)  # let it take the slot first
        second = await passes.run(other_body, quick_pass)
        return await first, second

    seen: dict[str, dict] = {}

    def watch():  # the condition while the pass hangs, read back from the API server
        seen["condition"] = wait_for(
            lambda: _overdue(objs, namespace, "hung"), 10, "PassOverdue", interval=0.1
        )

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        observation, other = asyncio.run(scenario())
    finally:
        watcher.join()
        passes.shutdown()
        silent.close()
    assert not observation.reachable and "hung-0" in (observation.error or ""), observation
    assert other == "ok"
    # the other cluster's pass ran while the hung one was still waiting, with the only slot
    assert timeline["other done"] < timeline["hung done"], timeline
    condition = seen["condition"]
    assert condition["status"] == "True" and "more than 0.5 s" in condition["message"], condition
    events = client.CoreV1Api(control_plane.api_client()).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name=hung,reason={PASS_OVERDUE}"
    )
    assert [e.type for e in events.items] == ["Warning"], events.items
    assert "other clusters' passes go on" in events.items[0].message
    # the pass ended: the condition is gone, the gauge back at 0, the counter counted it once
    assert _overdue(objs, namespace, "hung") == {}
    assert _overdue(objs, namespace, "other") == {}
    assert metrics.PASS_OVERDUE.labels(namespace, "hung")._value.get() == 0
    assert metrics.PASSES_OVERDUE.labels(namespace, "hung")._value.get() == 1
