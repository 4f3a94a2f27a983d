"""A whole cluster pass, against the recording fakes of everything it reads and writes (the
stores and API reads, KubeOps, the servers' DbOps: tests/support/fakes.py, fake_servers.py), in
one log: it observes first - every read of Kubernetes and of the servers - and then acts. The one
place a pass reads after it has begun to write is named: a failover's quiesce (the replicas stop
receiving, then are observed again, so the target holds every acknowledged transaction) and its
own steps, each reading the replication state of the server it acts on (a fenced replica's
source, the target's relay log applied before it is made writable)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from mysql_operator import certificates, clock
from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import writes as w
from mysql_operator import reasons as R
from mysql_operator.api import parse
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
    """A Kubernetes read (RecordingReads), or a server's (the fake servers log (name, operation));
    the marks of the replication step's beginning and end count as neither read nor write."""
    return call[0] in ("read", "replication step") or (
        call[0].startswith("db-") and call[1] in SERVER_READS | STEP_WAITS
    )


def reads_after_first_write(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    first = next((i for i, c in enumerate(calls) if not is_read(c)), len(calls))
    return [c for c in calls[first:] if is_read(c) and c[0] != "replication step"]


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
        self.executed: list[Any] = []  # every Done the executor returned, in order
        execute, replicate = self.r.execute, self.r._replicate

        def recording_executor(*args: Any, **kw: Any) -> Any:
            done = execute(*args, **kw)
            self.executed.extend(done)
            return done

        def marked_replication(*args: Any) -> Any:  # the replication step, marked in the log
            self.kube.calls.append(("replication step", "begins"))
            try:
                return replicate(*args)
            finally:
                self.kube.calls.append(("replication step", "ends"))

        self.r.execute = recording_executor  # type: ignore[method-assign]
        self.r._replicate = marked_replication  # type: ignore[method-assign]
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
        self.executed.clear()
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
    through_the_executor(cluster, calls)
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
    through_the_executor(cluster, calls)


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


def planned(write: Any) -> list[tuple[Any, ...]]:
    """What the recording fakes log for one write the executor made."""
    if isinstance(write, w.Chain):
        return [call for one in write.writes for call in planned(one)]
    if isinstance(write, w.Apply):
        return [("apply", write.obj["kind"], write.obj["metadata"]["name"])]
    if isinstance(write, w.SecretWrite):
        name = write.body["metadata"]["name"]
        return [
            ("create secret", name) if write.create else ("secret keys", name, sorted(write.body["data"]))
        ]
    simple = {
        w.Post: lambda x: ("events", [reason for _, reason, _ in x.events]),
        w.PatchStatus: lambda x: ("status", dict(x.fields)),
        w.RemoveAnnotation: lambda x: ("unannotate", x.key),
        w.SetPodLabel: lambda x: ("label", x.pod, x.value),
        w.AnnotatePod: lambda x: ("annotate", x.pod, x.key),
        w.DeletePod: lambda x: ("delete", x.pod),
        w.DeleteDeployment: lambda x: ("delete deployment", x.name),
        w.GrowClaim: lambda x: ("grow claim", x.claim, x.size),
        w.ReloadTLS: lambda x: (x.server, "reload_tls"),
    }
    return [simple[type(write)](write)]


def outside_the_replication_step(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The writes of a pass's log made outside its replication step (the named exception)."""
    out, inside = [], False
    for c in calls:
        if c[0] == "replication step":
            inside = c[1] == "begins"
        elif not inside and not is_read(c):
            out.append(c)
    return out


def through_the_executor(cluster: Cluster, calls: list[tuple[Any, ...]]) -> None:
    """Every write of the pass outside its replication step is one the executor made, in the
    order of the plans it was given, and nothing it skipped was made."""
    made = [call for d in cluster.executed if not d.skipped for call in planned(d.write)]
    assert outside_the_replication_step(calls) == made


def test_the_owned_objects_are_written_as_planned_on_what_was_read():
    """A pass that rolls a new operator version's Pod template (approved; an older operator wrote
    the StatefulSet, so the API server is asked by a dry run whether the template changes, and
    the other clusters' StatefulSets whether one rolls) and grows the data claims: the plan is
    made on reads made before the pass's first write, and its writes are carried out through
    KubeOps one after another, in the plan's order: what the log shows is the plan."""
    cluster = Cluster({"operatorUpgrades": "Manual", "storage": {"size": "2Gi"}})
    cluster.a_pass()
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns", "uid": "sts-1", "annotations": {}},
        "spec": {
            "replicas": 3,
            "template": {"metadata": {}, "spec": {"containers": [{"name": "mysqld", "image": "old"}]}},
            "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1Gi"}}}}],
        },
    }
    cluster.reads.statefulsets["db"] = sts
    approval = rolling.APPROVE_RESTART_ANNOTATION
    cluster.body["metadata"]["annotations"] = {approval: "true"}
    plans: list[Any] = []
    plan_upkeep = cluster.r._plan_upkeep

    def recorded(*args: Any) -> Any:
        plans.append(plan_upkeep(*args))
        return plans[-1]

    cluster.r._plan_upkeep = recorded  # type: ignore[method-assign]
    calls = cluster.a_pass(apply=True)
    assert reads_after_first_write(calls) == []
    assert ("read", "dry run", "StatefulSet", "db") in calls and ("read", "statefulsets") in calls
    plan = plans[0].owned
    expected = [call for w in plan.writes for call in planned(w)]
    start = calls.index(expected[0])
    assert calls[start : start + len(expected)] == expected
    through_the_executor(cluster, calls)
    assert ("events", [R.OPERATOR_RESTART]) in expected and ("unannotate", approval) in expected
    grown = [c for c in expected if c[0] == "grow claim"]
    assert grown == [("grow claim", m.data_claim_name(parse(cluster.body), i), "2Gi") for i in range(3)]


def test_a_renewed_certificate_is_written_announced_and_reloaded_through_the_executor():
    """A server certificate with less than a third of its validity left: the pass renews it (its
    Secret's keys set) and announces it (an Event, the Pods annotated for the kubelet); the next
    checks have the servers reload it until the kubelet has rewritten their files and they serve
    it. Every write through the executor, after the pass's reads."""
    cluster = Cluster()
    cluster.a_pass()
    c = parse(cluster.body)
    validity = dt.timedelta(seconds=c.spec.tls.certificate_validity_seconds)
    owner = {"apiVersion": "v1", "kind": "MySQLCluster", "metadata": {"name": "db", "uid": "u-1"}}
    _, writes = certificates.plan_secrets(c, owner, clock.now() - validity * 0.9, None)
    old = RecordingKube()
    assert certificates.write_secrets(old, writes)
    cluster.kube.secrets.update(old.secrets)  # what the Secrets hold now: a certificate near its end
    ending = certificates.serving_now(certificates.read_stored(cluster.reads, c))
    assert ending is not None
    cluster.entry.tls.state, cluster.entry.tls.checked = ending, float("-inf")
    cluster.entry.tls.served = ending.not_after
    cluster.world.tls_files = ending.not_after  # what the servers' files hold, and serve
    for s in cluster.world.servers.values():
        s.tls_until = ending.not_after

    def a_check() -> list[tuple[Any, ...]]:
        cluster.entry.tls.reload_tried = float("-inf")  # (every few seconds: one is due)
        calls = cluster.a_pass()
        assert reads_after_first_write(calls) == []
        through_the_executor(cluster, calls)
        return calls

    calls = a_check()
    assert ("secret keys", "db-tls", ["ca.crt", "tls.crt", "tls.key"]) in calls
    assert ("events", [R.CERTIFICATE_RENEWED]) in calls
    assert [c[1] for c in calls if c[0] == "annotate"] == ["db-0", "db-1", "db-2"]
    renewed = cluster.entry.tls.state
    assert renewed is not None and renewed.not_after > ending.not_after

    def reloaded() -> list[str]:
        return [c[0] for c in a_check() if c[1:] == ("reload_tls",)]

    assert reloaded() == ["db-0", "db-1", "db-2"]  # the next check: the files are not new yet
    assert reloaded() == ["db-0", "db-1", "db-2"]  # again
    cluster.world.tls_files = renewed.not_after  # the kubelet has rewritten them
    assert reloaded() == ["db-0", "db-1", "db-2"]
    assert reloaded() == [] and cluster.entry.tls.served == renewed.not_after
