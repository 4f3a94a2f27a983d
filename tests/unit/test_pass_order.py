"""A whole cluster pass, against the recording fakes of everything it reads and writes (the
stores and API reads, KubeOps, the servers' DbOps: tests/support/fakes.py, fake_servers.py), in
one log: it observes first - every read of Kubernetes and of the servers - and then acts. The one
place a pass reads after it has begun to write is named: a failover's quiesce (the replicas stop
receiving, then are observed again, so the target holds every acknowledged transaction) and its
own steps, each reading the replication state of the server it acts on (a fenced replica's
source, the target's relay log applied before it is made writable)."""

from __future__ import annotations

from typing import Any

import pytest

from mysql_operator.reconcile import Reconciler
from tests.support.fake_servers import FakeServer, World
from tests.support.fakes import RecordingKube, RecordingReads
from tests.support.specs import body, running_pod

# what reads, among the operations the fakes log (every other operation writes)
SERVER_READS = {"observe", "events", "binary_logs", "tls_not_after", "replica_status", "errant_events"}
# what a failover's own steps wait on: the target's relay log applied, a repointed IO thread connected
STEP_WAITS = {"wait_for", "wait_connected"}
# what a failover's quiesce and steps read of the server they act on (the fake's replica_status
# observes, as the server's own answer would come from the same statements)
STEP_READS = {"observe", "replica_status"} | STEP_WAITS


def is_read(call: tuple[Any, ...]) -> bool:
    """A Kubernetes read (RecordingReads), or a server's (the fake servers log (name, operation))."""
    return call[0] == "read" or (call[0].startswith("db-") and call[1] in SERVER_READS | STEP_WAITS)


def reads_after_first_write(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    first = next((i for i, c in enumerate(calls) if not is_read(c)), len(calls))
    return [c for c in calls[first:] if is_read(c)]


class Cluster:
    """A 3-instance cluster its operator created in an earlier pass, db-0 its primary."""

    def __init__(self, spec: dict | None = None) -> None:
        self.body = body({"instances": 3, **(spec or {})}, name="db", uid="u-1", generation=1)
        self.kube = RecordingKube()
        self.reads = RecordingReads(self.kube, clusters=[self.body])
        self.world = World(log=self.kube.calls, log_reads=True)
        for i in range(3):
            self.world.servers[f"db-{i}"] = FakeServer(
                f"db-{i}", self.world, executed="0-1-5", server_id=i + 1, hostname=f"db-{i}"
            )
        self.serving("db-0")
        self.r = Reconciler(
            None,
            job_image="operator:test",
            kube=self.kube,
            reads=self.reads,
            connect=lambda mb: self.world.servers[mb.name],
        )
        self.entry = self.r._entry("ns", "db", "u-1")
        self.status = self.r._reconcile(self.body, self.entry, True).status  # creates its objects
        self.reads.pods = [running_pod("db-0", "primary")] + [
            running_pod(f"db-{i}", "replica") for i in (1, 2)
        ]
        self.status = {**self.status, "currentPrimary": "db-0"}

    def serving(self, primary: str) -> None:
        for name, s in self.world.servers.items():
            s.read_only = name != primary
            s.source = None if name == primary else f"{primary}.db-headless.ns.svc"
            s.io_running = name != primary
            s.semisync_source, s.semisync_replica = name == primary, name != primary

    def a_pass(self, apply: bool | None = None) -> list[tuple[Any, ...]]:
        self.kube.calls.clear()
        result = self.r._reconcile({**self.body, "status": self.status}, self.entry, apply)
        self.status = result.status
        return list(self.kube.calls)


def test_a_pass_that_converges_a_primary_applies_its_objects_and_checks_its_certificate_reads_first():
    """The engine's first pass on a primary (its accounts converged, its events and binary logs
    looked at), the owned objects applied and the certificate checked: every read comes first."""
    cluster = Cluster()
    cluster.entry.tls.checked = float("-inf")  # the certificate's check is due
    calls = cluster.a_pass(apply=True)
    assert reads_after_first_write(calls) == []
    ops = [c[1] for c in calls if c[0].startswith("db-")]
    assert {"observe", "events", "binary_logs", "tls_not_after"} <= set(ops)
    assert any(op.startswith("ensure_user") for op in ops)
    reads = [c[1:] for c in calls if c[0] == "read"]
    assert ("live statefulset", "db") in reads and ("secret", "db-tls") in reads
    assert [c[2] for c in calls if c[0] == "apply"][-1] == "db"  # the StatefulSet last of the objects
    assert calls[-1][0] == "status"


def test_a_steady_pass_reads_and_writes_nothing_else():
    cluster = Cluster()
    cluster.a_pass()
    calls = cluster.a_pass()
    assert all(is_read(c) for c in calls), [c for c in calls if not is_read(c)]


def test_a_failover_pass_reads_after_its_first_write_only_in_its_quiesce_and_its_steps_waits():
    cluster = Cluster()
    cluster.a_pass()
    gone = cluster.world.servers["db-0"]  # killed: nothing listens on its port, no replica receives
    gone.reachable, gone.error = False, 'db-0: connect failed: (2003, "Can\'t connect (Connection refused)")'
    for name in ("db-1", "db-2"):
        cluster.world.servers[name].io_running = False
    calls = cluster.a_pass()
    assert cluster.status.get("currentPrimary") in ("db-1", "db-2")
    late = reads_after_first_write(calls)
    first = next(i for i, c in enumerate(calls) if not is_read(c))
    assert calls[first][1] == "stop_io_thread", calls[first]  # the quiesce: replicas stop receiving
    assert late and all(c[0] != "read" for c in late), "no Kubernetes read once the pass writes"
    assert {c[1] for c in late} <= STEP_READS, late
    assert [c for c in calls if c[0] == "status"][0][1]["currentPrimary"] == cluster.status["currentPrimary"]


def test_a_replication_pass_that_fails_still_applies_the_owned_objects_then_fails_the_pass():
    """A spec change never waits on the servers: what fails on their side (here the engine
    cannot even be made) fails the pass - it is retried - after the owned objects are applied."""
    cluster = Cluster()

    def broken(member: Any) -> Any:
        raise RuntimeError(f"cannot reach {member.name}")

    cluster.r.connect = broken
    with pytest.raises(RuntimeError, match="cannot reach db-0"):
        cluster.a_pass(apply=True)
    assert ("apply", "StatefulSet", "db") in [c[:3] for c in cluster.kube.calls]
    assert not [c for c in cluster.kube.calls if c[0] == "status"]
