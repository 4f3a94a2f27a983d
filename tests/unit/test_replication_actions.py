"""The order of the engine's multi-step actions (failover, switchover, bootstrap, semi-sync,
decommission), against a recording fake of `db_ops.DbOps`: fence before promote, never two
writable servers, repoint after promote, and what is left when any one step fails.

The fake keeps only what these orders are about (read-only, replication source, IO thread,
semi-sync); the real statements behind each operation are tested against real servers in
tests/integration/test_replication.py. A fault injected here stands for any failure of that
statement (a timeout, a lost connection, a refused privilege)."""

from __future__ import annotations

import dataclasses
import socket
import threading

import pytest

from mysql_operator import duties
from mysql_operator import rules
from mysql_operator import topology as t
from mysql_operator.binlogs import BinlogFile, PurgeBefore, PurgeTo, Retention
from mysql_operator.db.observation import CloneStatus, InstanceError, Observation
from mysql_operator.members import Step
from mysql_operator.observer import Observer
from mysql_operator.reseed import Reseeds
from mysql_operator.status_events import events_from_steps
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from mysql_operator.server_facts import acknowledged_now, commits_wait, leaving_primary

from tests.support.fake_servers import DIALECT, MYSQL_DIALECT, FakeServer, World


def engine(
    world: World, n: int = 3, semisync: bool = True, async_fallback: bool = False
) -> ReplicationEngine:
    for i in range(n):
        world.servers.setdefault(f"db-{i}", FakeServer(f"db-{i}", world))
    members = [Member(f"db-{i}", i, f"db-{i}", 3306) for i in range(n)]
    return ReplicationEngine(
        members,
        Credentials("operator", "op-pw"),
        Credentials("repl", "repl-pw"),
        t.Settings(instances=n, semisync=semisync, failover_delay_seconds=0.0, async_fallback=async_fallback),
        app=Credentials("app", "app-pw"),
        app_database="app",
        connect=lambda m: world.servers[m.name],
    )


def serving(world: World, primary: str, replicas=("db-1", "db-2")) -> None:
    """A healthy cluster: `primary` writable, the others read-only replicas of it."""
    for name, s in world.servers.items():
        s.read_only = name != primary
        s.source = None if name == primary else primary
        s.io_running = name != primary
        s.semisync_source = name == primary
        s.semisync_replica = name != primary


def states(world: World) -> list[t.InstanceState]:
    return [
        t.InstanceState(
            name=n,
            ordinal=int(n.split("-")[1]),
            reachable=s.reachable,
            read_only=s.read_only,
            source=s.source,
        )
        for n, s in world.servers.items()
    ]


def index(world: World, server: str, op: str) -> int:
    return world.log.index((server, op))


FAILOVER = t.Failover("db-0", "db-1", ("db-0", "db-2"), ("db-2",))


# -- failover --------------------------------------------------------------------------------------
def test_failover_fences_then_applies_then_promotes_then_repoints():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    steps = e.act(FAILOVER, states(w))
    assert all(s.ok for s in steps), steps
    promote = index(w, "db-1", "set_read_only(False)")
    assert index(w, "db-0", "fence") < promote  # the old primary is read-only first
    assert index(w, "db-2", "stop_io_thread") < promote  # nobody receives more from it
    assert index(w, "db-1", "stop_io_thread") < index(w, "db-1", "wait_for") < promote
    assert index(w, "db-1", "set_semisync_source(True)") < promote  # before its first write
    assert promote < index(w, "db-2", "point_at(db-1)")
    assert w.writable() == ["db-1"] and w.most_writable == 1
    assert w.servers["db-2"].source == "db-1" and w.servers["db-1"].source is None


def test_failover_skips_an_unreachable_old_primary_and_still_promotes():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].reachable = False
    steps = e.act(FAILOVER, states(w))
    assert any(s.instance == "db-0" and "unreachable, skipped" in s.detail for s in steps)
    assert not any(n == "db-0" for n, _ in w.log)
    assert w.servers["db-1"].read_only is False and w.servers["db-2"].source == "db-1"


@pytest.mark.parametrize(
    "error, fenced",
    [
        ("cannot connect failed: (2013, 'Lost connection to MySQL server during query (timed out)')", True),
        ("cannot connect failed: (2003, \"Can't connect to MySQL server on 'db-0' (timed out)\")", True),
        ("cannot connect failed: (1045, \"Access denied for user 'operator'@'10.244.0.9'\")", True),
        (
            'cannot connect failed: (2003, "Can\'t connect to MySQL server ([Errno 111] Connection refused)")',
            False,
        ),
        ("cannot connect failed: (2005, 'no address (its Pod has no IP)')", False),
    ],
)
def test_an_old_primary_that_may_still_serve_is_restarted_before_the_promotion(error, fenced):
    """Hung, cut off from the operator alone, or refusing its login, the old primary cannot be made
    read-only, and would be writable beside the new primary once it wakes (issue 45's campaign:
    two writable servers sampled after a SIGSTOPped primary resumed): its Pod is deleted first, and
    it starts again read-only. One that refuses connections, or has no Pod IP, is down already."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].reachable = False
    w.servers["db-0"].error = error
    restarted: list[str] = []

    def restart(name: str) -> None:
        restarted.append(name)
        assert w.servers["db-1"].read_only, "restarted before anything is promoted"
        w.servers[name].read_only = True  # every server starts read-only

    e.restart_instance = restart
    assert isinstance(e.reconcile(ClusterState("db-0")).decision, t.WaitForDelay)  # silent once: asked again
    out = e.reconcile(ClusterState("db-0"))  # db-0 down, no failover delay: db-1 promoted
    assert isinstance(out.decision, t.Failover) and w.servers["db-1"].read_only is False, out
    assert restarted == (["db-0"] if fenced else [])
    assert w.writable() == (["db-1"] if fenced else ["db-0", "db-1"])  # down: its read_only unchanged
    fence = next(s for s in out.steps if s.instance == "db-0" and s.action == "fence")
    if fenced:
        assert fence.warn and "restarted, so that it comes back read-only" in fence.detail, fence
        assert error in fence.detail  # the Event says why
    else:
        assert fence.detail == "unreachable, skipped", fence


@pytest.mark.parametrize("gone", [True, False])
def test_the_promotion_waits_until_the_restarted_old_primary_is_gone(gone):
    """A deleted Pod's server keeps serving, writable, until its grace period ends: the k8s
    campaign sampled two writable servers for 1 s after a failover that had deleted the
    partitioned old primary's Pod (MariaDB seeds 202, 216, 222). stop_instance deletes it and
    waits until it is gone; the promotion comes after. Not gone within its wait (a node that
    does not answer): promoted anyway, said in a warning."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].reachable = False
    w.servers["db-0"].error = "db-0: cannot connect: (2003, 'timed out')"
    stopped: list[str] = []

    def stop(name: str) -> bool:
        stopped.append(name)
        assert w.servers["db-1"].read_only, "stopped before anything is promoted"
        return gone

    e.restart_instance = lambda name: pytest.fail("stop_instance is used when it is set")
    e.stop_instance = stop
    assert isinstance(e.reconcile(ClusterState("db-0")).decision, t.WaitForDelay)  # silent once: asked again
    out = e.reconcile(ClusterState("db-0"))
    assert isinstance(out.decision, t.Failover) and stopped == ["db-0"]
    assert w.servers["db-1"].read_only is False
    fence = next(s for s in out.steps if s.instance == "db-0" and s.action == "fence")
    assert fence.warn and fence.ok
    assert ("restarted, so that it comes back read-only" in fence.detail) is gone
    assert ("still running when the wait ended; promoted anyway" in fence.detail) is not gone


def test_an_old_primary_whose_pod_shows_its_server_ended_is_not_restarted_before_the_promotion():
    """A deleted primary's Pod reports its server container terminated: nothing runs there to
    fence, and it starts read-only again by itself; deleting its Pod and waiting for it to go
    took the k8s campaign's failovers 2 s more (MariaDB, primary Pod deletions)."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    e.reconcile(ClusterState("db-0"))  # db-0 seen answering in its Pod
    w.servers["db-0"].reachable = False
    w.servers["db-0"].error = "db-0: cannot connect: (2003, 'timed out')"
    ended = dataclasses.replace(e.members["db-0"], pod_down="its container mysqld is terminated")
    e.set_members([ended, e.members["db-1"], e.members["db-2"]])
    e.stop_instance = lambda name: pytest.fail("its server ended: nothing to stop")
    e.restart_instance = lambda name: pytest.fail("its server ended: nothing to restart")
    assert isinstance(e.reconcile(ClusterState("db-0")).decision, t.WaitForDelay)  # silent once: asked again
    out = e.reconcile(ClusterState("db-0"))
    assert isinstance(out.decision, t.Failover) and w.writable() == ["db-0", "db-1"], out
    fence = next(s for s in out.steps if s.instance == "db-0" and s.action == "fence")
    assert fence.detail == "unreachable, skipped: its container mysqld is terminated", fence


def test_a_promoted_primary_is_routed_to_at_once_before_the_others_are_repointed():
    """The read-write Service follows the role label: the new primary gets it as soon as it is
    writable, not once every replica is repointed and the pass ends (the k8s campaign measured
    -rw on the fenced old primary for 1.2 s after a failover: MariaDB seed 24)."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    routed: list[tuple[str, int]] = []
    e.promoted = lambda name: routed.append((name, len(w.log)))
    e.act(FAILOVER, states(w))
    assert [name for name, _ in routed] == ["db-1"]
    at = routed[0][1]
    assert index(w, "db-1", "set_read_only(False)") < at <= index(w, "db-2", "point_at(db-1)")


def test_the_primary_a_failover_or_a_switchover_leaves_loses_its_route_first():
    assert leaving_primary(FAILOVER) == "db-0"
    assert leaving_primary(t.Switchover("db-0", "db-2", ("db-1",))) == "db-0"
    assert leaving_primary(t.Promote("db-1", ("db-2",))) is None
    assert leaving_primary(t.Failover("db-1", "db-1", (), ("db-2",))) is None  # promote() of itself


def test_failover_does_not_promote_a_candidate_that_cannot_apply_its_relay_log():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].reachable = False
    w.servers["db-1"].applies = False
    steps = e.act(FAILOVER, states(w))
    assert any(not s.ok and "not promoted" in s.detail for s in steps)
    assert ("db-1", "set_read_only(False)") not in w.log
    # no reachable primary rather than one that lacks acknowledged commits
    assert w.writable() == ["db-0"] and not w.servers["db-0"].reachable
    assert not any(op.startswith("point_at") for _, op in w.log)


FAILOVER_STEPS = [
    ("db-1", "stop_io_thread"),
    ("db-1", "replica_status"),
    ("db-1", "wait_for"),
    ("db-1", "reset_replica"),
    ("db-1", "set_semisync_replica(False)"),
    ("db-1", "set_semisync_source(True)"),
    ("db-1", "set_read_only(False)"),
    ("db-2", "stop_io_thread"),
    ("db-2", "set_read_only(True)"),
    ("db-2", "point_at(db-1)"),
]


@pytest.mark.parametrize("fault", FAILOVER_STEPS, ids=lambda f: f"{f[0]}-{f[1]}")
def test_a_failed_failover_step_is_reported_and_never_leaves_two_writable(fault):
    w = World(fail={fault})
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].reachable = False  # the hung primary: it would accept writes if it woke up
    w.servers["db-0"].read_only = False
    steps = e.act(FAILOVER, states(w))
    assert any(not s.ok and fault[1] in s.detail for s in steps), steps
    writable = [n for n in w.writable() if w.servers[n].reachable]
    assert len(writable) <= 1
    promoted = ("db-1", "set_read_only(False)") in w.log
    if fault[0] == "db-1":  # any failure on the candidate before its promotion stops it
        assert not promoted
    else:  # a replica that could not be repointed does not undo the promotion
        assert promoted and w.servers["db-1"].read_only is False


def test_a_failed_fence_of_the_reachable_old_primary_is_reported_and_fenced_again_next_pass():
    w = World(fail={("db-0", "fence")})
    e = engine(w)
    serving(w, "db-0")
    steps = e.act(FAILOVER, states(w))
    assert any(s.instance == "db-0" and not s.ok for s in steps)
    # the loop's next pass sees two writable servers and fences the one that is not the primary
    w.fail.clear()
    d = rules.decide([s for s in states(w)], e.settings, "db-1", None)
    assert isinstance(d, t.Fence) and d.instances == ("db-0",)
    e.act(d, states(w))
    assert w.writable() == ["db-1"]


# -- switchover ------------------------------------------------------------------------------------
def test_switchover_demotes_waits_promotes_then_repoints():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    steps = e.act(t.Switchover("db-0", "db-1", ("db-1", "db-2")), states(w))
    assert all(s.ok for s in steps), steps
    demote = index(w, "db-0", "set_read_only(True)")
    assert demote < index(w, "db-0", "kill_client_connections") < index(w, "db-1", "wait_for")
    assert index(w, "db-1", "wait_for") < index(w, "db-1", "set_read_only(False)")
    assert index(w, "db-1", "set_read_only(False)") < index(w, "db-2", "point_at(db-1)")
    assert w.most_writable == 1 and w.writable() == ["db-1"]


def test_switchover_to_a_lagging_target_leaves_it_read_only():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-1"].applies = False
    steps = e.act(t.Switchover("db-0", "db-1", ("db-1", "db-2")), states(w))
    assert any(not s.ok and "did not catch up" in s.detail for s in steps)
    assert w.writable() == [] and w.servers["db-1"].source == "db-0"


@pytest.mark.parametrize("fallback, waits_ms", [(False, 4_294_967_295), (True, 10_000)])
def test_a_promoted_primary_waits_for_acknowledgements_as_long_as_the_spec_says(fallback, waits_ms):
    """For ever (no acknowledged write only on the primary), or the fallback's timeout when
    spec.replication.allowAsyncFallback allows asynchronous replication."""
    w = World()
    e = engine(w, async_fallback=fallback)
    serving(w, "db-0")
    e.act(FAILOVER, states(w))
    assert w.servers["db-1"].semisync_timeout_ms == waits_ms
    e.act(t.ConfigureSemiSync(True, "db-1", ("db-2",)), states(w))
    assert w.servers["db-1"].semisync_timeout_ms == waits_ms


# -- bootstrap, semi-sync, decommission ------------------------------------------------------------
def test_bootstrap_creates_accounts_before_replicas_connect_and_semisync_waits_for_them():
    w = World()
    e = engine(w)
    steps = e.act(t.Bootstrap("db-0", ("db-1", "db-2")), states(w))
    assert all(s.ok for s in steps), steps
    assert index(w, "db-0", "set_read_only(False)") < index(w, "db-0", "ensure_user(repl)")
    assert index(w, "db-0", "ensure_user(repl)") < index(w, "db-1", "point_at(db-0)")
    # with no replica attached yet a semi-sync primary would block its first write
    assert w.servers["db-0"].semisync_source is False
    assert w.writable() == ["db-0"]


@pytest.mark.parametrize("on", [True, False])
def test_semisync_replicas_acknowledge_before_the_primary_waits_for_them(on):
    w = World()
    e = engine(w)
    serving(w, "db-0")
    e.act(t.ConfigureSemiSync(on, "db-0", ("db-1", "db-2")), states(w))
    source = index(w, "db-0", f"set_semisync_source({on})")
    replicas = [index(w, r, f"set_semisync_replica({on})") for r in ("db-1", "db-2")]
    # on: the primary waits only once replicas acknowledge; off: it stops waiting first
    assert (max(replicas) < source) if on else (source < min(replicas))


def test_decommission_makes_read_only_before_it_forgets_the_source():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    e.act(t.Decommission(("db-2",)), states(w))
    assert index(w, "db-2", "set_read_only(True)") < index(w, "db-2", "reset_replica")
    assert w.servers["db-2"].source is None and w.servers["db-2"].read_only


# -- the pass ------------------------------------------------------------------------------------
def test_a_new_primary_is_recorded_before_any_server_is_touched():
    w = World()
    e = engine(w)
    seen = []
    out = e.reconcile(
        ClusterState(),
        record=lambda st, _d: seen.append((st.current_primary, len(w.log))),
        announce=lambda d: seen.append((d.kind, len(w.log))),
    )
    assert isinstance(out.decision, t.Bootstrap)
    assert seen == [("db-0", 0), ("Bootstrap", 0)]  # recorded, announced, then acted
    assert w.writable() == ["db-0"]


def test_a_record_that_fails_stops_the_pass_before_it_acts():
    w = World()
    e = engine(w)

    def record(st, decision):
        raise RuntimeError("status patch refused")

    with pytest.raises(RuntimeError):
        e.reconcile(ClusterState(), record=record)
    assert w.log == [] and w.writable() == []


@pytest.mark.parametrize("semisync", [True, False])
def test_a_target_that_hangs_after_the_pass_observed_it_is_not_recorded_as_the_primary(semisync):
    """The pass observes every server at once and waits seconds for the hung primary: the most
    advanced replica answered at its start and hung since. Asked again before it is recorded, it
    is taken as down: semi-sync with one acknowledgement holds the failover (the one replica left
    may miss acknowledged commits), asynchronous replication promotes the other replica."""
    w = World()
    e = engine(w, semisync=semisync)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    w.servers["db-0"].reachable = False
    w.servers["db-1"].executed, w.servers["db-2"].executed = "0-1-10", "0-1-9"
    assert isinstance(e.reconcile(ClusterState("db-0")).decision, t.WaitForDelay)  # silent once: asked again
    hangs = w.servers["db-1"]
    looked = []

    def observe_then_hang():
        looked.append(1)
        if len(looked) > 1:
            hangs.reachable = False
        return FakeServer.observe(hangs)

    hangs.observe = observe_then_hang
    recorded = []
    out = e.reconcile(ClusterState("db-0"), record=lambda st, d: recorded.append(st.current_primary))
    assert len(looked) == 2
    assert "db-1" not in recorded and w.servers["db-1"].read_only
    if semisync:
        assert isinstance(out.decision, t.FailoverHeld) and recorded == []
        assert "only 1 of 2 replicas answer (db-2)" in out.decision.reason
        assert w.writable() == ["db-0"]  # the hung old primary: touched by nothing
    else:
        assert isinstance(out.decision, t.Failover) and out.decision.to == "db-2"
        assert recorded == ["db-2"] and w.writable() == ["db-0", "db-2"]  # db-0 hung: unreachable


def test_a_pass_decides_on_the_observations_it_is_given_and_does_not_look_again():
    """The Reconciler observes the servers first (they are part of its Observed, the rolling
    update's step reads them) and hands them to the engine's pass."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    state = ClusterState("db-0")
    observed = e.observe()
    w.servers["db-0"].reachable = False  # after the observation: this pass does not see it

    out = e.reconcile(state, "db-2", observed=observed)
    assert out.observed is observed
    assert isinstance(out.decision, t.Switchover) and out.decision.to == "db-2"
    # a second look would have seen the primary gone and failed over instead
    assert isinstance(
        e.reconcile(ClusterState("db-0")).decision, (t.Failover, t.WaitForDelay, t.FailoverHeld)
    )


# -- password rotation -----------------------------------------------------------------------------


def test_rotation_alters_on_the_primary_and_repoints_every_replica_with_a_new_replication_password():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    e.observe()  # the engine knows which servers replicate
    accounts = [
        Credentials("repl", "repl-pw-2"),
        Credentials("app", "app-pw-2"),
        Credentials("operator", "op-pw-2"),
    ]
    w.fail.add(("db-2", "point_at(db-0)"))  # one replica refuses: reported, the others go on
    steps: list = []
    done = e.rotate("db-0", accounts, steps).done
    assert done == {("repl", "%"), ("app", "%"), ("operator", "%")}
    altered = [op for server, op in w.log if op.startswith("set_password")]
    assert altered == ["set_password(repl@%)", "set_password(app@%)", "set_password(operator@%)"]
    assert {server for server, op in w.log if op.startswith("set_password")} == {"db-0"}  # it replicates
    assert index(w, "db-0", "set_password(repl@%)") < index(w, "db-1", "point_at(db-0)")
    assert w.servers["db-1"].source_password == "repl-pw-2" and e.replication.password == "repl-pw-2"
    assert [s.instance for s in steps if not s.ok] == ["db-2"]
    assert w.writable() == ["db-0"]


def test_a_new_replication_password_repoints_one_replica_at_a_time_so_the_others_go_on_acknowledging():
    w = World()
    e = engine(w, n=4)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    e.observe()
    steps: list = []
    e.rotate("db-0", [Credentials("repl", "repl-pw-2")], steps)
    order = [(s, op) for s, op in w.log if op in ("point_at(db-0)", "wait_connected")]
    assert order == [
        ("db-1", "point_at(db-0)"),
        ("db-1", "wait_connected"),
        ("db-2", "point_at(db-0)"),
        ("db-2", "wait_connected"),
        ("db-3", "point_at(db-0)"),  # the last: no one else to keep acknowledging meanwhile
    ]
    assert all(s.ok and not s.warn for s in steps)


def test_a_replica_that_does_not_reconnect_after_a_new_replication_password_leaves_the_others_connected():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    e.observe()
    w.servers["db-1"].connects = False
    steps: list = []
    done = e.rotate("db-0", [Credentials("repl", "repl-pw-2")], steps).done
    assert done == {("repl", "%")}
    assert not [op for s, op in w.log if s == "db-2" and op == "point_at(db-0)"]
    assert w.servers["db-2"].io_running and w.servers["db-2"].source == "db-0"
    warned = [s for s in steps if s.warn]
    assert [(s.instance, s.action) for s in warned] == [("db-1", "replicate")]
    assert "db-2 keep their connection" in warned[0].detail


def test_a_rotation_the_primary_refuses_is_reported_and_not_counted_as_done():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.fail.add(("db-0", "set_password(root@localhost)"))  # e.g. the server went away
    steps: list = []
    r = e.rotate("db-0", [Credentials("root", "r2", "localhost"), Credentials("app", "a2")], steps)
    assert r.done == {("app", "%")} and not r.denied
    assert [(s.action, s.ok) for s in steps] == [("rotate", False), ("rotate", True)]


def test_a_rotation_refused_for_a_privilege_is_told_apart_from_a_failure():
    """MySQL: an operator account without SYSTEM_USER (a cluster created before it was granted)
    may not change root's password: no retry helps, the caller says what to do."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.denied.add(("db-0", "set_password(root@localhost)"))
    steps: list = []
    r = e.rotate("db-0", [Credentials("root", "r2", "localhost"), Credentials("app", "a2")], steps)
    assert r.done == {("app", "%")} and r.denied == {("root", "localhost")}
    assert [(s.action, s.ok, s.warn) for s in steps] == [("rotate", True, True), ("rotate", True, False)]


# -- one effective value: my.cnf and the runtime SQL ----------------------------------------------


@pytest.mark.parametrize(
    "flavor, instances, acks, fallback",
    [
        ("mysql", 2, None, False),
        ("mysql", 3, None, True),
        ("mysql", 5, None, False),
        ("mysql", 5, 3, False),
        ("mysql", 3, 1, True),
        ("mariadb", 2, None, False),
        ("mariadb", 3, None, True),
        ("mariadb", 5, 1, False),
    ],
)
def test_the_semisync_values_in_my_cnf_are_the_ones_a_promotion_sets(flavor, instances, acks, fallback):
    """What a server starts with (my.cnf) and what the engine sets when it makes a primary come
    from one computation: never a primary that waits for a different time after a restart than
    after a promotion. The acknowledgements it waits for are the engine's alone (my.cnf does not
    name them: a change of spec.instances then restarts no server)."""
    from mysql_operator.api import parse
    from mysql_operator.manifests import server_settings
    from mysql_operator.engine_config import build_engine, engine_settings
    from tests.support.specs import body

    replication = {
        "mode": "semisync",
        "allowAsyncFallback": fallback,
        **({"semiSyncAcks": acks} if acks else {}),
    }
    c = parse(body({"flavor": flavor, "instances": instances, "replication": replication}, name="db"))
    cnf = dict(server_settings(c.spec))
    w = World()
    for i in range(instances):
        w.servers[f"db-{i}"] = FakeServer(f"db-{i}", w)
    members = [Member(f"db-{i}", i, f"db-{i}", 3306) for i in range(instances)]
    passwords = {"operator-password": "o", "replication-password": "r"}
    e = build_engine(c, members, passwords, engine_settings(c), connect=lambda mb: w.servers[mb.name])
    steps: list = []
    e.act(t.Promote("db-0", tuple(f"db-{i}" for i in range(1, instances))), states(w))
    primary = w.servers["db-0"]
    assert primary.semisync_source, steps
    if flavor == "mysql":
        assert cnf["rpl_semi_sync_source_timeout"] == str(primary.semisync_timeout_ms)
        assert "rpl_semi_sync_source_wait_for_replica_count" not in cnf
        assert primary.semisync_acks == t.semisync_acks(instances, acks)
    else:  # MariaDB waits for one acknowledgement, always
        assert cnf["rpl_semi_sync_master_timeout"] == str(primary.semisync_timeout_ms)
        assert primary.semisync_acks == 1


def test_an_outage_is_timed_from_its_first_failed_look_also_once_the_server_answers_again():
    """down_for (the failover duration metric): a primary that restarted answers again by the
    time it is replaced; its outage still counts, for a minute."""
    w = World()
    e = engine(w)
    now = [100.0]
    e.clock = lambda: now[0]
    serving(w, "db-0")
    e.observe()
    assert e.down_for("db-0") is None
    w.servers["db-0"].reachable = False
    e.observe()  # first failed look at 100
    now[0] = 103.0
    e.observe()
    assert e.down_for("db-0") == 3.0
    w.servers["db-0"].reachable = True
    now[0] = 104.5
    e.observe()  # answers again (restarted)
    assert e.down_for("db-0") == 4.5
    now[0] = 104.5 + Observer.RECENT_OUTAGE_SECONDS + 1
    assert e.down_for("db-0") is None  # too long ago to time anything


# -- re-seed ---------------------------------------------------------------------------------------
RESEED = t.Reseed("db-2", "db-1", errant="uuid-2:1")


def reseed_states(world: World, clone: str | None = None) -> list[t.InstanceState]:
    return [dataclasses.replace(s, clone=clone) if s.name == "db-2" else s for s in states(world)]


def mysql(world: World) -> World:
    """MySQL servers: a re-seed is a CLONE run by the recipient."""
    for s in world.servers.values():
        s.dialect = MYSQL_DIALECT
    return world


def test_reseed_records_the_errant_transactions_before_the_copy_starts():
    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")
    kept = []
    e.reseeds.keep_evidence = lambda name, gtids, events: (
        w.log.append((name, "kept")),
        kept.append(events),
        "ConfigMap x",
    )[2]
    steps = e.act(RESEED, reseed_states(w))
    assert all(s.ok for s in steps), steps
    assert (
        index(w, "db-2", "errant_events") < index(w, "db-2", "kept") < index(w, "db-2", "start_clone(db-1)")
    )
    assert index(w, "db-1", "ensure_clone_plugin") < index(w, "db-2", "start_clone(db-1)")
    assert "uuid-2:1" in kept[0][0]
    assert "ConfigMap x" in steps[0].detail and "uuid-2:1" in steps[0].detail
    assert w.writable() == ["db-0"]  # the recipient was made read-only, nothing else changed


def test_reseed_discards_nothing_when_the_record_cannot_be_kept():
    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")

    def refuse(name, gtids, events):
        raise InstanceError("ConfigMap refused (injected)")

    e.reseeds.keep_evidence = refuse
    steps = e.act(RESEED, reseed_states(w))
    assert steps and not steps[-1].ok and "refused" in steps[-1].detail
    assert not any(op.startswith("start_clone") for _, op in w.log)
    e.reseeds.keep_evidence = None  # and with no keeper at all
    e.reseeds.retry_at.clear()
    steps = e.act(RESEED, reseed_states(w))
    assert not steps[-1].ok and not any(op.startswith("start_clone") for _, op in w.log)


def test_reseed_watches_a_copy_under_way_and_retries_a_failed_copy_later():
    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")
    plain = t.Reseed("db-2", "db-1")  # behind, nothing errant: nothing to record
    assert e.act(plain, reseed_states(w, t.CLONE_COPYING)) == [] and w.log == []
    assert e.act(plain, reseed_states(w, t.CLONE_COPIED)) == [] and w.log == []  # it restarts itself
    e.act(plain, reseed_states(w, t.CLONE_FAILED))
    assert ("db-2", "start_clone(db-1)") in w.log
    w.log.clear()
    assert e.act(plain, reseed_states(w, t.CLONE_FAILED)) == [] and w.log == []  # not before a minute
    e.clock = lambda: float("inf")
    steps = e.act(plain, reseed_states(w, t.CLONE_FAILED))
    assert not steps[0].ok and "failed" in steps[0].detail and ("db-2", "start_clone(db-1)") in w.log


def test_a_copy_from_the_primary_has_its_stuck_commits_released_and_a_replicas_copy_never():
    """The primary's commits wait for an acknowledgement only the copy's recipient can give, and
    the copy (CLONE) waits for them: the primary ends those waits, every pass the copy is under
    way (Instance.release_stuck_commits decides whether any is stuck). A copy from a replica
    waits for no commit: the primary is left alone."""
    w = World()
    e = engine(w, n=2)
    mysql(w)
    serving(w, "db-0")
    from_primary = t.Reseed("db-1", "db-0")
    copying = [dataclasses.replace(s, clone=t.CLONE_COPYING) if s.name == "db-1" else s for s in states(w)]
    assert e.act(from_primary, copying) == [] and w.log == [("db-0", "release_stuck_commits")]
    w.log.clear()
    w.servers["db-0"].stuck_commits = 3
    steps = e.act(from_primary, copying)
    assert [(s.instance, s.action, s.ok) for s in steps] == [("db-0", "release", True)], steps
    assert "3 connection(s) closed" in steps[0].detail and "not an acknowledgement" in steps[0].detail
    assert w.log == [("db-0", "release_stuck_commits")] and w.writable() == ["db-0"]
    # copied: the server restarts on it, nothing is released any more
    w.log.clear()
    copied = [dataclasses.replace(s, clone=t.CLONE_COPIED) if s.name == "db-1" else s for s in states(w)]
    assert e.act(from_primary, copied) == [] and w.log == []

    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")
    w.servers["db-0"].stuck_commits = 3
    assert e.act(t.Reseed("db-2", "db-1"), reseed_states(w, t.CLONE_COPYING)) == [] and w.log == []


def test_mariadb_reseed_records_then_asks_for_a_copy_and_watches_it_until_the_server_restarted_on_it():
    """MariaDB: the recipient's Pod makes the copy (sh/seed.sh) when it restarts; the engine keeps
    the errant record first, asks (request_seed), and counts the instance as re-seeding until it
    answers from a server started after the request - then the pass withdraws the request (seed_done)
    once it has acted, never while observing."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    now = [1000.0]
    e.wall_clock = lambda: now[0]
    e.reseeds.keep_evidence = lambda name, gtids, events: (w.log.append((name, "kept")), "ConfigMap x")[1]
    done: list[str] = []
    e.reseeds.request_seed = lambda name, donor, host: w.log.append((name, f"request_seed({donor}@{host})"))
    e.reseeds.seed_done = done.append
    steps = e.act(RESEED, reseed_states(w))
    assert steps[0].ok and "mariadb-backup" in steps[0].detail and "ConfigMap x" in steps[0].detail
    assert (
        index(w, "db-2", "errant_events")
        < index(w, "db-2", "kept")
        < index(w, "db-2", "request_seed(db-1@db-1)")
    )
    assert index(w, "db-2", "set_read_only(True)") < index(w, "db-2", "request_seed(db-1@db-1)")
    assert not any(op.startswith("start_clone") for _, op in w.log)

    def db2() -> t.InstanceState:
        return next(s for s in e.observe() if s.name == "db-2")

    now[0] = 1005.0
    assert db2().reseeding  # the old server still answers (its Pod is stopping)
    w.servers["db-2"].reachable = False
    assert db2().reseeding and not done  # its Pod copies
    w.servers["db-2"].reachable, w.servers["db-2"].uptime = True, 3.0  # started at 1002: on the copy
    assert not db2().reseeding and not done  # observing writes nothing
    e.reconcile(ClusterState("db-0"))  # the pass's acting part withdraws the request
    assert done == ["db-2"]
    w.log.clear()
    assert e.act(t.Reseed("db-2", "db-1"), reseed_states(w, t.CLONE_COPYING)) == [] and w.log == []


def test_a_finished_copys_request_that_cannot_be_withdrawn_is_a_warning_and_not_asked_again():
    """The withdrawal is a Kubernetes write: refused, the pass says so (a Warning step) and goes
    on; the request stays (its copy is never carried out twice: the volume's marker names it)."""
    reseeds = Reseeds()
    reseeds.finished = ["db-2"]

    def refuse(name: str) -> None:
        raise RuntimeError("configmaps is forbidden (injected)")

    reseeds.seed_done = refuse
    steps: list[Step] = []
    reseeds.withdraw_finished(steps)
    assert [(s.instance, s.action, s.warn) for s in steps] == [("db-2", "reseed", True)]
    assert "forbidden" in steps[0].detail and reseeds.finished == []


def test_a_mysql_copy_counts_as_re_seeding_until_the_server_answers_restarted_on_it():
    """A CLONE is watched through the server's clone_status; once copied the server shuts down
    and its container starts it on the copy: meanwhile it still counts as re-seeding (its last
    account of the copy stands), not as a mere unreachable instance."""
    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")
    now = [1000.0]
    e.wall_clock = lambda: now[0]
    e.act(t.Reseed("db-2", "db-1"), reseed_states(w))
    db2 = w.servers["db-2"]

    def seen() -> t.InstanceState:
        return next(s for s in e.observe() if s.name == "db-2")

    now[0] = 1002.0
    assert seen().reseeding and seen().clone_bytes == (0, 0)  # not in clone_status yet
    db2.clone = CloneStatus(t.CLONE_COPYING, copied=300, total=1000)
    assert (seen().clone, seen().clone_bytes) == (t.CLONE_COPYING, (300, 1000))
    db2.clone = CloneStatus(t.CLONE_COPIED, copied=1000, total=1000)
    assert seen().clone == t.CLONE_COPIED
    db2.reachable, db2.clone = False, None  # shut down on its copy
    assert (seen().clone, seen().clone_bytes) == (t.CLONE_COPIED, (1000, 1000))
    now[0] = 1010.0
    db2.reachable, db2.uptime = True, 2.0  # started at 1008, on the copy
    assert not seen().reseeding and seen().clone is None


def test_a_mysql_copy_that_fails_is_reported_as_failed_at_once():
    w = World()
    e = engine(w)
    mysql(w)
    serving(w, "db-0")
    e.act(t.Reseed("db-2", "db-1"), reseed_states(w))
    w.servers["db-2"].clone = CloneStatus(t.CLONE_FAILED, "donor gone (injected)")
    got = next(s for s in e.observe() if s.name == "db-2")
    assert got.clone == t.CLONE_FAILED and not got.reseeding and "donor gone" in got.clone_error


def test_a_mariadb_copy_shows_the_bytes_its_recipient_reports_on_its_progress_port():
    """While the recipient's Pod receives the copy, its seed init container answers on the
    progress port (sh/seed.sh); the last answer stands when it is gone (the prepare ended, the
    server starts)."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    now = [1000.0]
    e.wall_clock = lambda: now[0]
    e.reseeds.keep_evidence = lambda *_: "ConfigMap x"
    e.reseeds.request_seed = lambda *_: None
    e.act(RESEED, reseed_states(w))
    listener = socket.create_server(("127.0.0.1", 0))
    e.members["db-2"] = dataclasses.replace(e.members["db-2"], host="127.0.0.1")
    e.reseeds.progress_port = listener.getsockname()[1]

    def answer(line: bytes) -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(line)

    def seen() -> t.InstanceState:
        return next(s for s in e.observe() if s.name == "db-2")

    w.servers["db-2"].reachable = False  # its Pod restarts and copies
    for line, want in ((b"receiving 400 1000\n", (400, 1000)), (b"preparing 990 1000\n", (990, 1000))):
        server = threading.Thread(target=answer, args=(line,))
        server.start()
        got = seen()
        server.join()
        assert got.reseeding and (got.clone, got.clone_bytes) == (t.CLONE_COPYING, want)
    listener.close()
    assert seen().clone_bytes == (990, 1000)  # nothing answers any more: the last answer
    now[0] = 1010.0
    w.servers["db-2"].reachable, w.servers["db-2"].uptime = True, 2.0
    assert not seen().reseeding


def test_mariadb_reseed_that_cannot_be_asked_for_is_a_failed_step_and_retried_later():
    w = World()
    e = engine(w)
    serving(w, "db-0")

    def refuse(name, donor, host):
        raise RuntimeError("configmaps is forbidden (injected)")

    e.reseeds.request_seed = refuse
    steps = e.act(t.Reseed("db-2", "db-1"), reseed_states(w))
    assert (
        not steps[-1].ok and "could not be asked for" in steps[-1].detail and "forbidden" in steps[-1].detail
    )
    assert not next(s for s in e.observe() if s.name == "db-2").reseeding
    assert e.act(t.Reseed("db-2", "db-1"), reseed_states(w)) == []  # not before a minute


# -- binary logs -----------------------------------------------------------------------------------
def binlog_world(lagging: str) -> tuple[World, ReplicationEngine]:
    """db-0 primary with three binary logs (1..10 before the second, 1..20 before the third);
    db-1 has everything, db-2 has 1..`lagging`."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].executed = "0-1-30"
    w.servers["db-1"].executed = "0-1-30"
    w.servers["db-2"].executed = lagging
    for s in w.servers.values():
        s.binlogs = [
            BinlogFile("binlog.000001", 100, DIALECT.parse_gtids("")),
            BinlogFile("binlog.000002", 100, DIALECT.parse_gtids("0-1-10")),
            BinlogFile("binlog.000003", 100, DIALECT.parse_gtids("0-1-20")),
        ]
    return w, e


def purges(w: World, server: str) -> list[str]:
    return [op for n, op in w.log if n == server and op.startswith("purge_binary_logs")]


def test_binlogs_past_the_retention_are_purged_on_every_instance_once_nobody_needs_them():
    w, e = binlog_world(lagging="0-1-30")
    e.binlogs.retention = Retention(3600, 0)
    out = e.reconcile(ClusterState("db-0"))
    assert isinstance(out.decision, t.Healthy)
    for n in ("db-0", "db-1", "db-2"):
        assert purges(w, n) == [f"purge_binary_logs({PurgeBefore(3600)})"]
    assert [s for s in out.steps if s.action == "purge-binlogs" and s.ok and not s.warn]


def test_a_stopped_replica_holds_back_the_logs_it_needs_until_the_size_cap_forces_them_out():
    w, e = binlog_world(lagging="0-1-15")  # db-2 needs binlog.000002 onwards
    e.binlogs.retention = Retention(3600, 0)
    e.binlogs.check_seconds = 0.0
    e.reconcile(ClusterState("db-0"))
    assert not purges(w, "db-0") and not purges(w, "db-1")
    assert purges(w, "db-2")  # nobody lacks what only db-2 would serve
    w.servers["db-2"].reachable = False  # it stops: what it had when last seen still counts
    e.reconcile(ClusterState("db-0"))
    assert not purges(w, "db-0")
    e.binlogs.retention = Retention(3600, 150)  # 300 bytes of binary logs: over the cap
    out = e.reconcile(ClusterState("db-0"))
    assert purges(w, "db-0") == [f"purge_binary_logs({PurgeTo('binlog.000003', 300, ('db-2',))})"]
    warned = [s for s in out.steps if s.instance == "db-0" and s.action == "purge-binlogs"]
    assert warned and warned[0].warn and "db-2" in warned[0].detail and "re-seeded" in warned[0].detail
    assert events_from_steps(warned)[0][:2] == ("Warning", "PurgeBinlogs")


def test_binlogs_are_looked_at_once_per_interval_and_never_without_a_retention():
    w, e = binlog_world(lagging="0-1-30")
    e.reconcile(ClusterState("db-0"))
    assert not [op for _, op in w.log if op == "binary_logs"]  # no retention set
    e.binlogs.retention = Retention(3600, 0)
    e.reconcile(ClusterState("db-0"))
    e.reconcile(ClusterState("db-0"))
    assert [op for n, op in w.log if n == "db-0" and op == "binary_logs"] == ["binary_logs"]


# -- stuck servers ---------------------------------------------------------------------------------
def test_a_server_that_takes_logins_but_answers_no_query_is_restarted_unless_it_is_the_primary():
    """An old primary resumed after a hang may be stuck on its own locks for good: logins work,
    statements time out. After a minute it is restarted (never the primary, at most every five
    minutes); a server that is merely down (no login) is not."""
    w = World()
    e = engine(w)
    serving(w, "db-0")
    now = [0.0]
    e.clock = lambda: now[0]
    restarted: list[str] = []
    e.restart_instance = restarted.append
    stuck_error = "SHOW failed: (2013, 'Lost connection to MySQL server during query (timed out)')"
    down_error = 'cannot connect: (2003, "Can\'t connect to MySQL server")'
    for name, error in (("db-1", stuck_error), ("db-2", down_error), ("db-0", stuck_error)):
        w.servers[name].reachable = False
        w.servers[name].error = error
    state = ClusterState("db-0")
    e.reconcile(state)
    now[0] = 59.0
    assert not [s for s in e.reconcile(state).steps if s.action == "restart-stuck"] and restarted == []
    now[0] = 61.0
    steps = [s for s in e.reconcile(state).steps if s.action == "restart-stuck"]
    assert restarted == ["db-1"]  # not db-0 (the primary), not db-2 (down, not stuck)
    assert (
        steps[0].warn and "answered no query for 61 s" in steps[0].detail and "SHOW failed" in steps[0].detail
    )
    now[0] = 200.0
    e.reconcile(state)
    assert restarted == ["db-1"]  # once per five minutes
    now[0] = 400.0
    e.reconcile(state)
    assert restarted == ["db-1", "db-1"]
    w.servers["db-1"].reachable = True  # it answers again: the clock starts over
    e.reconcile(state)
    w.servers["db-1"].reachable = False
    now[0] = 800.0
    e.reconcile(state)
    assert restarted == ["db-1", "db-1"]


def test_a_member_never_seen_answering_has_the_executed_gtids_the_status_recorded():
    """After an operator restart the engine has seen no server answer: what a silent member had
    comes from the cluster status (a failover compares the candidates with it); once the engine
    has seen it answer, its own last observation counts."""
    w = World()
    e = engine(w, n=2)
    serving(w, "db-1", replicas=("db-0",))
    w.servers["db-1"].reachable = False
    e.observer.recorded_executed = {"db-1": DIALECT.parse_gtids("0-1-317,0-2-400")}
    silent = next(i for i in e.observe() if i.name == "db-1")
    assert silent.last_executed == DIALECT.parse_gtids("0-1-317,0-2-400")
    w.servers["db-1"].reachable, w.servers["db-1"].executed = True, "0-1-317,0-2-401"
    e.observe()
    w.servers["db-1"].reachable = False
    silent = next(i for i in e.observe() if i.name == "db-1")
    assert silent.last_executed == DIALECT.parse_gtids("0-1-317,0-2-401")


@pytest.mark.parametrize(
    "seen, now",
    [
        (None, True),  # never observed: not known
        (Observation(reachable=True), True),  # semi-sync off
        (
            Observation(True, semisync_source_enabled=True, semisync_source_active=False, semisync_clients=0),
            True,
        ),
        (
            Observation(True, semisync_source_enabled=True, semisync_source_active=True, semisync_clients=0),
            False,
        ),
        (
            Observation(True, semisync_source_enabled=True, semisync_source_active=True, semisync_clients=1),
            True,
        ),
        (
            Observation(
                True,
                semisync_source_enabled=True,
                semisync_source_active=True,
                semisync_clients=1,
                semisync_ack_count=2,
            ),
            False,
        ),
        (Observation(True, semisync_source_enabled=True, semisync_source_active=True), True),  # count unknown
    ],
)
def test_the_operator_writes_on_a_primary_only_when_a_commit_would_be_acknowledged(seen, now):
    assert acknowledged_now(seen) is now
    # and the status calls the cluster Ready only then, saying what a commit waits for
    assert (commits_wait("db-0", seen) == "") is now
    if not now:
        waits = commits_wait("db-0", seen)
        assert f"{seen.semisync_clients} of the {seen.semisync_ack_count or 1} acknowledging" in waits


# -- scheduled events ------------------------------------------------------------------------------
def with_events(world: World) -> None:
    """db-0 serves with app.tick ENABLED and app.off DISABLED; its replicas hold both replica-side
    disabled, as both servers mark every event they replicate."""
    world.servers["db-0"].scheduled = {"tick": "ENABLED", "off": "DISABLED"}
    for r in ("db-1", "db-2"):
        world.servers[r].scheduled = {"tick": "REPLICA_SIDE_DISABLED", "off": "REPLICA_SIDE_DISABLED"}


def test_a_new_primary_enables_the_events_that_ran_on_the_old_one_and_only_those():
    w = World()
    e = engine(w)
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    with_events(w)
    assert [s for s in e.act(t.Healthy("db-0"), states(w)) if s.action == "events"] == []  # learns
    e.act(FAILOVER, states(w))
    assert not [op for _, op in w.log if op.startswith("enable_event")]  # not while promoting
    steps = e.act(t.Healthy("db-1"), states(w))
    assert [(s.instance, s.detail, s.ok) for s in steps if s.action == "events"] == [
        ("db-1", "enabled 1 events: app.tick", True)
    ]
    assert w.servers["db-1"].scheduled == {"tick": "ENABLED", "off": "REPLICA_SIDE_DISABLED"}
    assert w.servers["db-2"].scheduled["tick"] == "REPLICA_SIDE_DISABLED"
    e.act(t.Healthy("db-1"), states(w))  # once per primary
    assert [op for _, op in w.log if op.startswith("enable_event")] == ["enable_event(app.tick as app@%)"]
    assert w.servers["db-1"].definers["tick"] == "app@%"  # enabled as its definer: it stays


def test_events_are_enabled_only_once_a_commit_would_be_acknowledged_and_retried_after_a_failure():
    w = World()
    e = engine(w)
    now = [0.0]
    e.clock = lambda: now[0]
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    with_events(w)
    e.act(t.Healthy("db-0"), states(w))
    e.act(FAILOVER, states(w))
    e.observer.last_observations["db-1"] = Observation(
        True, semisync_source_enabled=True, semisync_source_active=True, semisync_clients=0
    )
    assert [s for s in e.act(t.ConfigureReplica("db-2", "db-1"), states(w)) if s.action == "events"] == []
    assert w.servers["db-1"].scheduled["tick"] == "REPLICA_SIDE_DISABLED"  # nothing would acknowledge
    e.observer.last_observations["db-1"] = w.servers["db-1"].observe()
    w.fail.add(("db-1", "enable_event(app.tick as app@%)"))
    steps = e.act(t.Healthy("db-1"), states(w))
    assert [(s.action, s.ok) for s in steps if s.action == "events"] == [("events", False)]
    w.fail.clear()
    now[0] += duties.RETRY_SECONDS - 1
    e.act(t.Healthy("db-1"), states(w))
    assert w.servers["db-1"].scheduled["tick"] == "REPLICA_SIDE_DISABLED"  # not yet
    now[0] += 1
    steps = e.act(t.Healthy("db-1"), states(w))
    assert [s.detail for s in steps if s.action == "events"] == ["enabled 1 events: app.tick"]


def test_an_engine_that_never_saw_the_old_primary_serve_enables_nothing_and_says_so():
    w = World()
    e = engine(w)
    serving(w, "db-1")
    w.servers["db-1"].read_only = False
    w.servers["db-1"].scheduled = {"tick": "REPLICA_SIDE_DISABLED", "mine": "ENABLED"}
    (warning,) = [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"]
    assert warning.warn and warning.ok and "app.tick" in warning.detail and "mine" not in warning.detail
    assert not [op for _, op in w.log if op.startswith("enable_event")]
    assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []  # said once


def failed_over_with_events(definers: dict[str, str], set_any_definer: bool = False):
    """db-0 served with app.tick and app.cron ENABLED (defined by `definers`, app@% otherwise),
    then failed over to db-1: (world, engine, clock)."""
    w = World()
    e = engine(w)
    now = [0.0]
    e.clock = lambda: now[0]
    serving(w, "db-0")
    w.servers["db-0"].read_only = False
    for name, s in w.servers.items():
        status = "ENABLED" if name == "db-0" else "REPLICA_SIDE_DISABLED"
        s.scheduled = {"tick": status, "cron": status}
        s.definers = dict(definers)
    w.servers["db-1"].set_any_definer = set_any_definer
    e.act(t.Healthy("db-0"), states(w))
    e.act(FAILOVER, states(w))
    return w, e, now


def test_an_event_of_the_app_account_is_enabled_as_that_account_and_keeps_its_definer():
    w, e, _ = failed_over_with_events({})
    steps = e.act(t.Healthy("db-1"), states(w))
    assert [(s.detail, s.ok, s.warn) for s in steps if s.action == "events"] == [
        ("enabled 2 events: app.tick, app.cron", True, False)
    ]
    assert sorted(op for _, op in w.log if op.startswith("enable_event")) == [
        "enable_event(app.cron as app@%)",
        "enable_event(app.tick as app@%)",
    ]
    assert w.servers["db-1"].definers == {"tick": "app@%", "cron": "app@%"}


def test_an_event_of_another_account_the_server_refuses_to_enable_is_warned_about_once_and_left():
    w, e, now = failed_over_with_events({"cron": "root@localhost"})
    steps = e.act(t.Healthy("db-1"), states(w))
    done = [s for s in steps if s.action == "events"]
    assert all(s.ok for s in steps), steps  # nothing that would make the cluster Degraded
    assert [(s.detail, s.warn) for s in done[:1]] == [("enabled 1 events: app.tick", False)]
    (warning,) = done[1:]
    assert warning.warn and warning.ok
    assert "app.cron (definer root@localhost)" in warning.detail and "app.tick" not in warning.detail
    assert "ALTER EVENT ... ENABLE" in warning.detail
    assert "SET USER (MariaDB) / SET_ANY_DEFINER (MySQL)" in warning.detail
    assert w.servers["db-1"].scheduled == {"tick": "ENABLED", "cron": "REPLICA_SIDE_DISABLED"}
    assert w.servers["db-1"].definers == {"tick": "app@%", "cron": "root@localhost"}
    for _ in range(3):  # no retry: later passes, past the retry delay, try nothing
        now[0] += duties.RETRY_SECONDS + 1
        assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []
    assert [op for _, op in w.log if op.startswith("enable_event")] == [
        "enable_event(app.tick as app@%)",
        "enable_event(app.cron as operator)",
    ]


def test_a_refused_event_is_not_tried_again_while_another_failure_is_retried():
    w, e, now = failed_over_with_events({"cron": "root@localhost"})
    w.fail.add(("db-1", "enable_event(app.tick as app@%)"))
    steps = [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"]
    assert [(s.ok, s.warn) for s in steps] == [(True, True), (False, False)]  # refused; failed
    w.fail.clear()
    now[0] += duties.RETRY_SECONDS
    steps = [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"]
    assert [(s.detail, s.ok, s.warn) for s in steps] == [("enabled 1 events: app.tick", True, False)]
    assert [op for _, op in w.log if op == "enable_event(app.cron as operator)"] == [
        "enable_event(app.cron as operator)"
    ]


def seen_by_the_observer(e: ReplicationEngine, w: World) -> None:
    """The engine's observer as it would be after a pass: each server's answer."""
    e.observer.last_observations.update({n: s.observe() for n, s in w.servers.items()})


def test_a_server_whose_scheduler_undid_the_replicated_change_gets_the_event_enabled_again():
    """A scheduler that runs the event while the change is applied writes its own copy (ENABLED)
    back: that server runs it again, read-only, for ever. The primary enables it once more."""
    w, e, _ = failed_over_with_events({})
    for s in w.servers.values():
        s.executed = "0-1-10"
    seen_by_the_observer(e, w)
    e.act(t.Healthy("db-1"), states(w))  # carried over
    w.servers["db-0"].scheduled["tick"] = "ENABLED"  # its scheduler wrote ENABLED back
    w.servers["db-1"].executed = "0-1-12"  # the statements
    seen_by_the_observer(e, w)  # db-0 and db-2 have not got them yet
    since = len(w.log)
    assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []  # the mark
    assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []  # not theirs yet
    assert [n for n, op in w.log[since:] if op == "events"] == ["db-1", "db-1"]  # the primary's own
    w.servers["db-0"].executed = w.servers["db-2"].executed = "0-1-12"
    seen_by_the_observer(e, w)
    (again,) = [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"]
    assert again.ok and not again.warn and again.instance == "db-1"
    assert again.detail.startswith("enabled again: db-0 (app.tick) still ran them"), again.detail
    assert w.servers["db-0"].scheduled["tick"] == "REPLICA_SIDE_DISABLED"  # it replicated again
    assert w.servers["db-1"].definers["tick"] == "app@%"  # as its definer again
    w.servers["db-1"].executed = w.servers["db-0"].executed = w.servers["db-2"].executed = "0-1-13"
    seen_by_the_observer(e, w)
    for _ in range(3):  # a new mark, then every server settled: nobody is asked again
        assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []
    asked = len([1 for n, op in w.log if op == "events" and n != "db-1"])
    e.act(t.Healthy("db-1"), states(w))
    assert len([1 for n, op in w.log if op == "events" and n != "db-1"]) == asked
    enabled = [op for n, op in w.log if op.startswith("enable_event")]
    assert sorted(enabled) == ["enable_event(app.cron as app@%)"] + ["enable_event(app.tick as app@%)"] * 2


def test_an_event_a_person_disabled_on_the_primary_since_is_not_enabled_again():
    w, e, _ = failed_over_with_events({})
    seen_by_the_observer(e, w)
    e.act(t.Healthy("db-1"), states(w))
    w.servers["db-2"].scheduled["tick"] = "ENABLED"
    w.servers["db-1"].scheduled["tick"] = "DISABLED"  # ALTER EVENT ... DISABLE by its owner
    for _ in range(3):
        assert [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"] == []
    assert w.servers["db-1"].scheduled["tick"] == "DISABLED"
    assert [op for _, op in w.log if op == "enable_event(app.tick as app@%)"] == [
        "enable_event(app.tick as app@%)"
    ]


def test_a_server_that_keeps_undoing_the_change_is_warned_about_after_a_few_tries():
    w, e, _ = failed_over_with_events({})
    seen_by_the_observer(e, w)
    e.act(t.Healthy("db-1"), states(w))
    stuck = w.servers["db-2"]
    steps = []
    for _ in range(2 * (duties.REPAIRS + 2)):
        stuck.scheduled["tick"] = "ENABLED"
        steps += [s for s in e.act(t.Healthy("db-1"), states(w)) if s.action == "events"]
    assert [s.detail.split(":")[0] for s in steps] == ["enabled again"] * duties.REPAIRS + [
        "event(s) still ENABLED on a server that replicates them"
    ]
    assert steps[-1].warn and "db-2 (app.tick)" in steps[-1].detail


def test_an_event_of_another_account_is_enabled_by_the_operator_where_a_person_granted_set_user():
    w, e, _ = failed_over_with_events({"cron": "root@localhost"}, set_any_definer=True)
    steps = e.act(t.Healthy("db-1"), states(w))
    assert [(s.detail, s.warn) for s in steps if s.action == "events"] == [
        ("enabled 2 events: app.tick, app.cron", False)
    ]
    assert w.servers["db-1"].definers == {"tick": "app@%", "cron": "root@localhost"}
