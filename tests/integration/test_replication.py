"""Replication, failover, switchover and scaling on real servers of each flavor: MariaDB 10.11
(Debian's mariadb-server) and MySQL 9.7 (the cluster's MySQL image, `tests/support/mysql.py`).
Every test runs once per flavor; its id names the flavor ([mariadb] / [mysql]).

The "operator" here is the engine's observe -> decide -> act loop (`ReplicationEngine.reconcile`)
run by the test; clients write through the primary the loop publishes (as they would through the
read-write Service). Each failure prints the servers' error logs.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time

import pymysql
import pytest

from mysql_operator import histories, rules
from mysql_operator import topology as t
from mysql_operator.binlogs import Retention
from mysql_operator.db.gtid import errant as gtid_errant
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.observer import Observer
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.integration.helpers_replication import (
    APP,
    DB,
    REPL,
    TIMINGS,
    Cluster,
    factory as factory,  # the module-scoped fixture: each test runs once per flavor
    stop_the_servers_of_each_test as stop_the_servers_of_each_test,  # autouse
    make_cluster,
    new_engine,
    wait_replicated,
    writer_for,
)
from tests.support.mariadb import ADMIN_USER, OPERATOR_USER
from tests.support.wait import wait_for


def commit_in_background(c: Cluster, server, row: int, timeout: float) -> tuple[threading.Thread, list[str]]:
    """One INSERT of `row` through the app account in a thread; its outcome ("ok" or
    "error <errno>") lands in the list once the statement returns."""
    outcome: list[str] = []

    def commit():
        try:
            with c.app_conn(server, timeout=timeout) as conn, conn.cursor() as cur:
                cur.execute(f"INSERT INTO {DB}.t VALUES (%s, 'committed in the background')", (row,))
            outcome.append("ok")
        except pymysql.err.MySQLError as e:
            outcome.append(f"error {e.args[0]}")

    writer = threading.Thread(target=commit)
    writer.start()
    return writer, outcome


# ---- tests ---------------------------------------------------------------------------------------
def test_bootstrap_one_instance(factory):
    c = make_cluster(factory, 1)
    assert c.state.current_primary == "db-0"
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (1, 'one')")
    assert c.rows(c.primary) == {1}
    assert c.primary.query("SELECT @@read_only")[0][0] == 0


def test_bootstrap_three_instances_replicas_read_only(factory):
    c = make_cluster(factory, 3)
    assert c.state.current_primary == "db-0"
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in range(1, 11)])
    wait_replicated(c, set(range(1, 11)))
    for r in c.servers[1:]:
        assert r.query("SELECT @@read_only")[0][0] == 1
        status = Instance(r.host, r.port, OPERATOR_USER, factory.admin_password).replica_status()
        assert status.io_running and status.sql_running and status.source_port == c.primary.port
        with c.app_conn(r) as conn, conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(f"INSERT INTO {DB}.t VALUES (99, 'refused')")
            assert e.value.args[0] == 1290  # --read-only
    assert 99 not in c.rows(c.server("db-1"))


def test_an_observation_costs_a_few_statements_and_sees_every_change_at_once(factory):
    """observe() of a healthy replica: a few statements (counted by the server), and nothing is
    remembered from an earlier pass but a finished binary log's header: a change made through
    another connection - a setting, a purge - shows in the very next observation."""
    c = make_cluster(factory, 2, semisync=True)
    r = c.server("db-1")
    inst = Instance(r.host, r.port, OPERATOR_USER, factory.admin_password, name="db-1")

    def questions() -> int:  # statements of this connection so far (this one included)
        return int(inst.execute("SHOW SESSION STATUS LIKE 'Questions'")[0][1])

    def counted():
        before = questions()
        seen = inst.observe()
        return seen, questions() - before - 1

    inst.observe()  # the first one detects the server's version and looks for the clone plugin
    seen, statements = counted()
    print(f"\n{factory.flavor.value}: statements per observe of a healthy replica: {statements}")
    # state, replica, semi-sync, then MySQL's copy state or MariaDB's binary log list (+ header)
    assert seen.reachable and seen.semisync_replica_enabled and seen.read_only
    assert statements <= 5, statements
    variable = inst.dialect.semisync_replica_enabled
    r.query(f"SET GLOBAL {variable} = OFF")  # someone else's change
    assert not inst.observe().semisync_replica_enabled
    r.query(f"SET GLOBAL {variable} = ON")
    assert inst.observe().semisync_replica_enabled
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (4242, 'purged')")
    wait_replicated(c, {4242}, [r], timeout=30)
    written = inst.observe().executed
    assert not seen.purged.contains(written)
    r.query("FLUSH BINARY LOGS")
    current = r.query("SHOW BINARY LOGS")[-1][0]

    def purged() -> bool:  # someone else's purge (MariaDB keeps a file until its checkpoint moved)
        r.query(f"PURGE BINARY LOGS TO '{current}'")
        return r.query("SHOW BINARY LOGS")[0][0] == current

    wait_for(purged, 30, f"binary logs before {current} purged")
    assert inst.observe().purged.contains(written)
    inst.close()


def test_semisync_on_then_off(factory):
    c = make_cluster(factory, 3, semisync=True)
    p = c.primary
    # the variables' names per flavor (MySQL 8.0.26+: source/replica, MariaDB: master/slave)
    src, rep = ("source", "replica") if factory.flavor == "mysql" else ("master", "slave")
    assert (
        dict(p.query(f"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_{src}_status'"))[f"Rpl_semi_sync_{src}_status"]
        == "ON"
    )
    assert p.query(f"SELECT @@rpl_semi_sync_{src}_wait_point")[0][0] == "AFTER_SYNC"
    replicas = [Instance(s.host, s.port, OPERATOR_USER, factory.admin_password) for s in c.servers[1:]]
    wait_for(
        lambda: p.query(f"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_{src}_clients'")[0][1] == "2",
        10,
        "both replicas acknowledging",
    )
    for k in range(5):
        with c.app_conn(p) as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO {DB}.t VALUES (%s, 'sync')", (k,))
        committed = Instance(p.host, p.port, OPERATOR_USER, factory.admin_password).observe().executed
        # the commit returned: at least one replica has it in its relay log already (no waiting)
        assert any(r.replica_status().received.contains(committed) for r in replicas)
    yes = int(
        dict(p.query(f"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_{src}_yes_tx'"))[f"Rpl_semi_sync_{src}_yes_tx"]
    )
    assert yes >= 5
    c.engine.settings = t.Settings(instances=3, semisync=False)
    c.converge()
    assert any(isinstance(d, t.ConfigureSemiSync) and not d.on for d in c.decisions)
    assert (
        dict(p.query(f"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_{src}_status'"))[f"Rpl_semi_sync_{src}_status"]
        == "OFF"
    )
    for s in c.servers[1:]:
        assert s.query(f"SELECT @@rpl_semi_sync_{rep}_enabled")[0][0] == 0


def _failover_under_writes(factory, how: str):
    c = make_cluster(factory, 3, semisync=True, delay=1.0)
    writer = writer_for(c)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 50, 20, "50 acknowledged writes")
    old = c.primary
    killed_at = time.monotonic()
    if how == "kill9":
        old.kill9()
    else:
        old.sigstop()
    d = c.converge(until=t.Failover, timeout=30)
    c.converge(timeout=30)
    new = c.primary
    assert new.name != old.name and new.name == d.to
    wait_for(lambda: any(s == new.name for _, s, _ in writer.acked), 20, "a write on the new primary")
    first = min(ts for _, s, ts in writer.acked if s == new.name)
    wait_for(lambda: len([1 for _, s, _ in writer.acked if s == new.name]) >= 20, 20, "20 more writes")
    writer.stop()
    acked = {n for n, _, _ in writer.acked}
    found = c.rows(new)
    lost = acked - found
    TIMINGS.append(
        f"failover after {how}: kill -> first write accepted on {new.name}: "
        f"{first - killed_at:.2f}s; acknowledged {len(acked)}, found {len(acked & found)}, "
        f"lost {len(lost)}"
    )
    loop = [f"{a - killed_at:+.2f}..{b - killed_at:+.2f} {k}" for a, b, k in c.timeline if b >= killed_at]
    print(f"{how} timeline: " + "; ".join(loop[:12]), file=sys.stderr)
    assert not lost, f"acknowledged rows missing on the new primary: {sorted(lost)[:10]}"
    assert writer.servers_in_order() == [old.name, new.name]  # never two accepting at once
    other = next(s for s in c.servers if s.name not in (old.name, new.name))
    wait_replicated(c, acked, [other])
    return c, old, new, writer


def held_out_with_its_own_unacknowledged_tail(factory, c: Cluster, old, d) -> bool:
    """MySQL has no crash-time truncation of a primary's binary log: a primary killed while a
    commit waited for its semi-sync acknowledgement keeps that transaction (never acknowledged to
    the client) and comes back with GTIDs of its own that the new primary lacks. It is then held
    out as errant - never promoted, never replicating diverged data - until it is re-seeded.
    True when that is what happened (on MySQL only); its data must then stay read-only."""
    if factory.flavor != "mysql" or not isinstance(d, t.Errant):
        return False
    uuid = old.query("SELECT @@server_uuid")[0][0]
    assert d.instances == (old.name,) and uuid in d.reasons[0], d.reasons
    assert old.query("SELECT @@super_read_only")[0][0] == 1
    TIMINGS.append(f"{factory.flavor}: restarted {old.name} held out (own unacknowledged tail): {d.reasons}")
    return True


def test_failover_after_kill9_under_writes_then_old_primary_rejoins(factory):
    c, old, new, writer = _failover_under_writes(factory, "kill9")
    # the crashed primary returns (read-only by its configuration); on MariaDB, with
    # --init-rpl-role=SLAVE (in the semi-sync configuration, as the operator's) its binlog is
    # truncated to what replicas acknowledged, so it can rejoin as a replica
    old.restart()
    d = c.converge(until=(t.Healthy, t.Errant), timeout=30)
    assert old.query("SELECT @@read_only")[0][0] == 1
    if held_out_with_its_own_unacknowledged_tail(factory, c, old, d):
        return
    if isinstance(d, t.Errant):
        TIMINGS.append(f"kill -9 rejoin: {old.name} held out: {d.reasons}")
        pytest.fail(f"old primary held out instead of rejoining: {d.reasons}")
    status = Instance(old.host, old.port, OPERATOR_USER, factory.admin_password).replica_status()
    assert status.source_port == new.port and status.io_running and status.sql_running
    acked = {n for n, _, _ in writer.acked}
    wait_replicated(c, acked, [old])
    TIMINGS.append(f"kill9: restarted {old.name} rejoined as a read-only replica of {new.name}")


def writes_moved(c: Cluster, writer, old):
    """After a failover away from `old`: the writer commits on the new primary, which holds every
    acknowledged row, and no two servers ever accepted writes at once. (new primary, acked ids)"""
    c.converge(timeout=30)
    new = c.primary
    wait_for(
        lambda: sum(1 for _, s, _ in writer.acked if s == new.name) >= 20, 20, "20 writes on the new primary"
    )
    writer.stop()
    acked = {n for n, _, _ in writer.acked}
    assert not acked - c.rows(new), f"acknowledged rows lost: {sorted(acked - c.rows(new))[:10]}"
    assert writer.servers_in_order() == [old.name, new.name]
    return new, acked


def test_a_killed_primary_is_failed_over_without_waiting_the_delay(factory):
    """kill -9: the engine's kept connection breaks, a new one is refused (nothing listens), the
    replicas' IO threads lose their source: evidence, not silence, so the failover does not wait
    the 30 s delay - every other check stands (no acknowledged write lost, one writable server)."""
    c = make_cluster(factory, 3, semisync=True, delay=30.0)
    writer = writer_for(c)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 50, 20, "50 acknowledged writes")
    old = c.primary
    c.reconcile()  # the engine holds a connection to it from this pass
    kept = Instance(old.host, old.port, OPERATOR_USER, factory.admin_password)
    assert kept.observe().reachable
    old.kill9()
    # the connection kept from before breaks; the observation is what a new one meets
    assert "Connection refused" in (kept.observe().error or "")
    d = c.converge(until=t.Failover, timeout=20)  # well inside the delay: only evidence fails over
    assert d.from_ == old.name, d
    assert "not waiting the 30s failover delay: its server refused the connection" in d.reason, d
    writes_moved(c, writer, old)


def test_primary_restarted_within_the_delay_is_replaced_and_rejoins(factory):
    """A crashed primary that is back before the failover delay (a deleted Pod, a killed container
    restarted by the kubelet) is not trusted as primary again: the most advanced replica, holding
    everything it has, is promoted and the restarted server rejoins as a read-only replica."""
    c = make_cluster(factory, 3, semisync=True, delay=30.0)
    writer = writer_for(c)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 50, 20, "50 acknowledged writes")
    old = c.primary
    wait_for(
        lambda: int(old.query("SHOW GLOBAL STATUS LIKE 'Uptime'")[0][1]) >= 3,
        20,
        "the primary up for 3 s (a restart shows as a later start time)",
    )
    c.reconcile()  # the loop has seen it serving
    old.kill9()
    old.restart()
    d = c.converge(until=(t.Failover, t.Promote), timeout=30)
    if factory.flavor == "mysql" and isinstance(d, t.Promote) and "no replica has" in d.reason:
        # killed while a commit waited for its acknowledgement: MySQL keeps it at restart (no
        # crash-time truncation), so the restarted server holds more than any replica and stays
        # primary (promoting a replica would make that commit errant); nothing acked is lost
        TIMINGS.append(f"restart within the delay: {old.name} kept, holding its unacknowledged tail")
        c.converge(timeout=30)
        assert c.primary.name == old.name and old.query("SELECT @@read_only")[0][0] == 0
        at = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= at + 20, 20, "20 more writes on the kept primary")
        writer.stop()
        acked = {n for n, _, _ in writer.acked}
        wait_replicated(c, acked)
        return
    assert isinstance(d, t.Failover) and d.from_ == old.name and "restarted" in d.reason, d
    new, acked = writes_moved(c, writer, old)
    assert new.name == d.to != old.name
    assert old.query("SELECT @@read_only")[0][0] == 1
    d = c.converge(until=(t.Healthy, t.Errant), timeout=30)
    if held_out_with_its_own_unacknowledged_tail(factory, c, old, d):
        return
    status = Instance(old.host, old.port, OPERATOR_USER, factory.admin_password).replica_status()
    assert status.source_port == new.port and status.io_running and status.sql_running
    wait_replicated(c, acked, [old])


def test_restart_of_the_primary_is_known_to_a_restarted_operator_from_when_it_was_promoted(factory):
    """The operator restarted too (it never saw the old server serve): the time the primary was
    made primary (status.primarySince) tells it the server started after that, i.e. restarted."""
    c = make_cluster(factory, 3, semisync=True, delay=30.0)
    promoted_at = time.time()  # just after the bootstrap promotion, as status.primarySince records
    old = c.primary
    wait_for(
        lambda: time.time() - promoted_at > 2 * Observer.RESTART_TOLERANCE,
        10,
        "time enough that a restart shows as a later start",
    )
    old.kill9()
    old.restart()
    c.engine.close()
    c.engine = ReplicationEngine(  # a new operator process: nothing remembered
        c.engine.members.values(),
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        c.engine.settings,
        app=APP,
        app_database=DB,
        apply_timeout=20,
    )
    unaware = rules.decide(c.engine.observe(), c.engine.settings, c.state.current_primary)
    assert isinstance(unaware, t.Promote) and unaware.name == old.name, unaware  # the control
    c.engine.observer.primary_since = (old.name, promoted_at)
    d = c.converge(until=(t.Failover, t.Promote), timeout=30)
    assert isinstance(d, t.Failover) and d.from_ == old.name and "restarted" in d.reason, d
    c.converge(timeout=30)
    assert c.primary.name == d.to != old.name
    assert old.query("SELECT @@read_only")[0][0] == 1


def test_failover_after_sigstop_hung_primary(factory):
    c, old, new, writer = _failover_under_writes(factory, "sigstop")
    # the hung primary wakes up still writable in memory: the loop fences it, then it rejoins
    old.sigcont()
    d = c.converge(
        until=(t.Healthy, t.Errant), timeout=90
    )  # MySQL: sessions that waited on the hang drain first
    TIMINGS.append(
        f"sigstop: after SIGCONT {old.name} "
        + (f"held out: {d.reasons}" if isinstance(d, t.Errant) else "rejoined as a read-only replica")
    )
    assert (
        any(isinstance(d, t.Fence) and old.name in d.instances for d in c.decisions)
        or old.query("SELECT @@read_only")[0][0] == 1
    )
    assert old.query("SELECT @@read_only")[0][0] == 1
    assert c.primary.name == new.name


def test_fence_ends_a_commit_waiting_for_an_acknowledgement_without_acknowledging_it(factory):
    """A primary cut off from its replicas holds a commit that waits for a semi-sync
    acknowledgement. Fencing it must make it read-only within its timeout (MySQL does not end
    that wait on KILL: the fence releases it once no client could still receive an OK), the
    waiting client gets an error, never an OK, and the fenced server takes connections again."""
    c = make_cluster(factory, 3, semisync=True)
    p = c.primary
    admin = lambda s: Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)  # noqa: E731
    for r in c.servers[1:]:
        admin(r).stop_io_thread()
    writer, outcome = commit_in_background(c, p, 4242, timeout=60)
    wait_for(lambda: admin(p).ack_waiters(), 10, "the commit to wait for an acknowledgement")
    fenced = admin(p)
    fenced.slow_timeout = 10  # read_only waiting on the stuck commit would fail the fence
    assert fenced.fence() >= 1
    writer.join(20)
    assert not writer.is_alive() and outcome and outcome[0].startswith("error"), outcome
    assert p.query("SELECT @@read_only")[0][0] == 1
    assert admin(p).ack_waiters() == []
    with c.app_conn(p) as conn, conn.cursor() as cur:  # connections are accepted again
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute(f"INSERT INTO {DB}.t VALUES (4243, 'refused')")
        assert e.value.args[0] == 1290  # read-only


def test_semisync_stays_on_while_no_replica_can_acknowledge(factory):
    """Both replicas hang: the loop keeps the primary's semi-sync on (no async fallback by
    default), so a commit waits instead of being acknowledged by the primary alone; it completes
    once a replica is back, and that replica has it."""
    c = make_cluster(factory, 3, semisync=True, delay=30.0)
    p, replicas = c.primary, c.servers[1:]
    admin = Instance(p.host, p.port, OPERATOR_USER, factory.admin_password)
    for r in replicas:
        r.sigstop()
    try:

        def both_unreachable():
            out = c.reconcile()
            return all(not s.reachable for s in out.observed if s.name != p.name) and out

        out = wait_for(both_unreachable, 30, "the loop to see both replicas unreachable")
        assert not isinstance(out.decision, t.ConfigureSemiSync), out.decision
        assert admin.observe().semisync_source_enabled

        writer, outcome = commit_in_background(c, p, 5151, timeout=120)
        wait_for(lambda: admin.ack_waiters(), 10, "the commit to wait for an acknowledgement")
        c.reconcile()  # a pass while it waits changes nothing
        assert admin.observe().semisync_source_enabled and not outcome
    finally:
        for r in replicas:
            r.sigcont()
    writer.join(60)
    assert outcome == ["ok"]
    wait_replicated(c, {5151})


def test_short_blip_below_delay_does_not_fail_over(factory):
    c = make_cluster(factory, 3, delay=4.0)
    p = c.primary
    p.sigstop()
    try:
        # drive the loop until it has seen the primary unreachable for over a second
        def seen_down():
            out = c.reconcile()
            prim = next(s for s in out.observed if s.name == p.name)
            return not prim.reachable and prim.unreachable_for >= 1.0

        wait_for(seen_down, 20, "the loop to observe the primary down for 1s")
    finally:
        p.sigcont()
    c.converge(timeout=20)
    assert not any(isinstance(d, t.Failover) for d in c.decisions)
    assert any(isinstance(d, t.WaitForDelay) for d in c.decisions)
    assert c.state.current_primary == p.name
    assert p.query("SELECT @@read_only")[0][0] == 0


def test_errant_transaction_on_replica_is_held_out(factory):
    c = make_cluster(factory, 3)
    r = c.server("db-2")
    # an admin writes on a replica directly (MariaDB: READ_ONLY ADMIN bypasses read_only; MySQL:
    # nobody passes super_read_only, so the admin lifts it for that write)
    if factory.flavor == "mysql":
        with r.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL super_read_only = OFF")
            cur.execute(f"INSERT INTO {DB}.t VALUES (777, 'errant')")
            cur.execute("SET GLOBAL super_read_only = ON")
        marker = r.query("SELECT @@server_uuid")[0][0]  # its GTIDs are <server_uuid>:<n>
    else:
        r.query(f"INSERT INTO {DB}.t VALUES (777, 'errant')")
        marker = f"0-{r.server_id}-"  # <domain>-<server_id>-<seq>
    d = c.converge(until=t.Errant, timeout=20)
    assert d.instances == ("db-2",)
    assert "db-2" in d.reasons[0] and marker in d.reasons[0]
    assert r.query("SELECT @@read_only")[0][0] == 1
    # a later switchover request to it does not switch over (the reconciler refuses it as held
    # out); it stays held out meanwhile, and is never promoted
    out = c.reconcile(desired="db-2")
    assert isinstance(out.decision, t.Errant) and out.decision.instances == ("db-2",), out.decision
    assert histories.switchover_blocker(out.observed, c.engine.settings, "db-0", "db-2").startswith(
        "held out"
    )
    assert c.state.current_primary == "db-0"
    assert 777 not in c.rows(c.primary)  # nothing was "repaired" into the primary
    # what a re-seed would keep as evidence: the errant transaction's binary log events
    errant = gtid_errant(c.last.observed[2].executed, c.last.observed[0].executed)
    events = c.engine.instances["db-2"].errant_events(str(errant))
    assert events and any(f"{DB}.t" in e or "`t`" in e for e in events), events
    assert len(events) <= 6, events  # that one transaction's events, none replicated to it


def test_switchover(factory):
    c = make_cluster(factory, 3)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'before')", [(i,) for i in range(1, 21)])
    idle = c.app_conn(c.primary)  # an application connection the switchover must kill
    d = c.converge(until=t.Switchover, desired="db-2")
    assert (d.from_, d.to) == ("db-0", "db-2")
    c.converge(desired="db-2")
    assert c.state.current_primary == "db-2"
    with pytest.raises(pymysql.err.MySQLError):
        with idle.cursor() as cur:
            cur.execute("SELECT 1")
    with c.app_conn(c.server("db-2")) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (21, 'after')")
    wait_replicated(c, set(range(1, 22)))
    old = c.server("db-0")
    assert old.query("SELECT @@read_only")[0][0] == 1
    status = Instance(old.host, old.port, OPERATOR_USER, factory.admin_password).replica_status()
    assert status.source_port == c.server("db-2").port and status.io_running and status.sql_running


TICK = "tick`s"  # a user's name: the operator quotes it


def schedule_ticks(c: Cluster) -> None:
    """The application's scheduled jobs, created on the primary through the app account: TICK
    inserts a row naming the server it runs on every second; `off`, DISABLEd by the user, would
    too. The event scheduler runs on every server, as `event_scheduler = ON` in
    spec.config.myCnf has it (MariaDB's default is OFF, MySQL's ON)."""
    for s in c.servers:
        s.query("SET GLOBAL event_scheduler = ON")
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {DB}.ticks (id INT AUTO_INCREMENT PRIMARY KEY, server_id INT)")
        for name, state in ((TICK, "ENABLE"), ("off", "DISABLE")):
            cur.execute(
                f"CREATE EVENT {DB}.`{name.replace('`', '``')}` ON SCHEDULE EVERY 1 SECOND {state} "
                f"DO INSERT INTO {DB}.ticks (server_id) VALUES (@@server_id)"
            )


def ticks_from(server) -> int:
    """Rows the event wrote on `server` itself."""
    return server.query(f"SELECT COUNT(*) FROM {DB}.ticks WHERE server_id = @@server_id")[0][0]


def events_of(server) -> dict[str, tuple[str, int, str]]:
    """name -> (STATUS, ORIGINATOR, DEFINER)"""
    rows = server.query("SELECT EVENT_NAME, STATUS, ORIGINATOR, DEFINER FROM information_schema.EVENTS")
    return {name: (status, int(originator), definer) for name, status, originator, definer in rows}


def replica_side_disabled(factory) -> str:
    return "SLAVESIDE_DISABLED" if factory.flavor.value == "mariadb" else "REPLICA_SIDE_DISABLED"


ADMIN_JOB = "admin_job"  # an event of an account other than the app's
ADMIN_DEFINER = f"{ADMIN_USER}@127.0.0.1"


def schedule_an_admin_job(c: Cluster) -> None:
    """A scheduled job a person created as the test servers' admin (ALL PRIVILEGES, root's
    equal): the operator's account may not enable it as that account."""
    c.primary.query(f"CREATE EVENT {DB}.{ADMIN_JOB} ON SCHEDULE EVERY 1 SECOND ENABLE DO SET @x = 1")


def events_carried_over(factory, c: Cluster, old, new, admin_job: bool = False) -> None:
    """After a change of primary: TICK runs on `new` (ENABLED as the app account: its definer
    stays) and nowhere else; `off` stays disabled; the replicas hold TICK replica-side disabled
    from `new`'s ALTER. With `admin_job`: ADMIN_JOB, which ran on `old`, is left replica-side
    disabled on `new`, named in one Warning (the operator's account has no SET USER /
    SET_ANY_DEFINER), and the cluster stays Healthy."""
    off = replica_side_disabled(factory)

    def enabled_on_new():
        c.reconcile()  # the operator's passes go on: the carry-over waits for an acknowledging replica
        return events_of(new)[TICK][0] == "ENABLED"

    wait_for(enabled_on_new, 30, f"{TICK} enabled on {new.name}", describe=c.describe)
    done = [s for s in c.steps if s.action == "events"]
    assert [(s.instance, s.detail, s.ok, s.warn) for s in done[:1]] == [
        (new.name, f"enabled 1 events: {DB}.{TICK}", True, False)
    ]
    expected = {TICK: ("ENABLED", new.server_id, "app@%"), "off": (off, old.server_id, "app@%")}
    if admin_job:
        (warning,) = done[1:]
        assert warning.instance == new.name and warning.ok and warning.warn, warning
        assert f"{DB}.{ADMIN_JOB} (definer {ADMIN_DEFINER})" in warning.detail, warning
        assert TICK not in warning.detail
        expected[ADMIN_JOB] = (off, old.server_id, ADMIN_DEFINER)
        for _ in range(3):  # Healthy, and not tried again
            assert isinstance(c.reconcile().decision, t.Healthy), c.describe()
        assert [s for s in c.steps if s.action == "events"] == done
    else:
        assert done[1:] == []
    assert events_of(new) == expected
    wait_for(lambda: ticks_from(new) >= 3, 20, f"rows written by {TICK} on {new.name}")
    for r in c.servers:
        if r is not new and r.alive:
            wait_for(
                lambda r=r: events_of(r)[TICK] == (off, new.server_id, "app@%"),
                20,
                f"{TICK} replica-side disabled on {r.name} by {new.name}'s ALTER EVENT",
            )
            assert events_of(r)["off"][0] in ("DISABLED", off)
    # MySQL refuses CREATE USER IF NOT EXISTS of an existing account that defines an event: the
    # accounts converge on the new primary all the same
    assert all(s.ok for s in c.steps if s.action == "user")
    TIMINGS.append(f"{factory.flavor.value}: {TICK} runs on {new.name}: {events_of(new)}")


def test_scheduled_events_keep_running_after_a_failover(factory):
    c = make_cluster(factory, 3, semisync=True)
    old = c.primary
    schedule_ticks(c)
    schedule_an_admin_job(c)
    wait_for(lambda: ticks_from(old) >= 2, 20, f"rows written by {TICK} on {old.name}")
    c.converge()  # a pass that sees the primary serve: it knows which events run there
    old.kill9()
    d = c.converge(until=t.Failover, timeout=30)
    c.converge(timeout=30)
    new = c.server(d.to)
    events_carried_over(factory, c, old, new, admin_job=True)


def switched_over_with_ticks(factory):
    """A 3-server cluster whose primary ran TICK, switched over to db-2, the events carried
    over: (cluster, old primary, new primary)."""
    c = make_cluster(factory, 3, semisync=True)
    old = c.primary
    schedule_ticks(c)
    wait_for(lambda: ticks_from(old) >= 2, 20, f"rows written by {TICK} on {old.name}")
    c.converge()
    c.converge(until=t.Switchover, desired="db-2")
    c.converge(desired="db-2")
    new = c.server("db-2")
    events_carried_over(factory, c, old, new)
    return c, old, new


def test_scheduled_events_keep_running_after_a_switchover(factory):
    c, old, new = switched_over_with_ticks(factory)
    # the old primary ran TICK until its ALTER EVENT arrived, read-only: no row it wrote since,
    # no transaction of its own
    c.converge(desired="db-2")
    assert not any(isinstance(d, t.Errant) for d in c.decisions)
    assert c.primary is new


def scheduler_wrote_its_copy_back(factory, server) -> None:
    """What a server's event scheduler leaves when it runs TICK while the replicated ALTER EVENT
    is applied: it writes its in-memory copy (ENABLED) back to the event's row, outside its
    queue's lock, and TICK is queued and runs again. The race is a few microseconds wide; the
    state it leaves is made here as its row and queue would have it (the definer kept, nothing
    binlogged)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            if factory.flavor.value == "mysql":
                cur.execute("SET GLOBAL super_read_only = OFF")
            cur.execute(f"ALTER DEFINER = 'app'@'%' EVENT {DB}.`{TICK.replace('`', '``')}` ENABLE")
            if factory.flavor.value == "mysql":
                cur.execute("SET GLOBAL super_read_only = ON")
    finally:
        conn.close()


def test_a_server_whose_scheduler_undid_the_replicated_alter_event_gets_it_again(factory):
    """The e2e saw it once in about 80 switchovers (MariaDB 10.11): after a switchover, the old
    primary's TICK stayed ENABLED, and ran read-only, though it had applied the new primary's
    ALTER EVENT. The new primary enables TICK once more; the statement replicates; TICK is
    replica-side disabled there, and nothing else changes."""
    c, old, new = switched_over_with_ticks(factory)
    scheduler_wrote_its_copy_back(factory, old)
    status, _, definer = events_of(old)[TICK]  # its originator: here, the local ALTER's
    assert (status, definer) == ("ENABLED", "app@%")
    off = replica_side_disabled(factory)

    def repaired():
        c.reconcile()
        return events_of(old)[TICK][0] == off

    wait_for(repaired, 30, f"{TICK} replica-side disabled again on {old.name}", describe=c.describe)
    again = [s for s in c.steps if s.action == "events" and s.detail.startswith("enabled again")]
    assert [(s.instance, s.ok, s.warn) for s in again] == [(new.name, True, False)], again
    assert f"{old.name} ({DB}.{TICK})" in again[0].detail
    assert events_of(new)[TICK] == ("ENABLED", new.server_id, "app@%")  # its definer stays
    for r in c.servers:
        if r is not new:
            assert events_of(r)[TICK] == (off, new.server_id, "app@%"), r.name
    c.converge(desired="db-2")
    assert not any(isinstance(d, t.Errant) for d in c.decisions)  # nothing of its own on old


def test_a_two_instance_cluster_fails_over_to_its_former_primary_under_writes(factory):
    """db-0, the first primary, hands over to db-1 and replicates from it; db-1 is killed under
    semi-sync writes. db-0 is the only candidate and holds transactions of its own (from when it
    was the primary) that only db-1, now silent, also has: it is promoted, not held out as errant,
    and no acknowledged row is lost. A 2-instance cluster's second failover."""
    c = make_cluster(factory, 2, semisync=True, delay=1.0)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'written by db-0')", [(i,) for i in range(1, 21)])
    c.converge(until=t.Switchover, desired="db-1")
    c.converge(desired="db-1")
    assert c.state.current_primary == "db-1"
    writer = writer_for(c)
    writer.start()
    wait_for(lambda: len(writer.acked) >= 30, 20, "30 acknowledged writes on db-1")
    c.server("db-1").kill9()
    d = c.converge(until=(t.Failover, t.Unrecoverable), timeout=30)
    assert isinstance(d, t.Failover) and d.to == "db-0", d
    writer.stop()  # db-0's commits wait for an acknowledgement no replica can give now
    assert c.state.current_primary == "db-0" and c.server("db-0").query("SELECT @@read_only")[0][0] == 0
    acked = {n for n, _, _ in writer.acked}
    lost = acked - c.rows(c.server("db-0"))
    assert not lost, f"acknowledged rows missing on db-0: {sorted(lost)[:10]}"


def test_a_failover_promotes_the_replica_holding_the_most_once_no_replica_can_receive_more(factory):
    """The operator loses its way to a primary that still serves its clients and its replicas (a
    partition between them, or a primary too slow to answer it in time). A pass decides from what
    it observed, and such a primary still sends transactions afterwards, acknowledged on a
    replica's word. Here the pass's observation saw db-1 and db-2 equal (db-1 would be promoted:
    the lower ordinal); then db-1 stops receiving and rows are acknowledged by db-2 alone. Every
    replica stops receiving before the target is chosen again: db-2 is promoted, no row lost.
    (The replicas still hear db-0: without a partition grace of 0 the failover would wait for it,
    test_a_primary_only_the_operator_cannot_reach_keeps_serving_until_the_partition_grace.)"""
    c = make_cluster(factory, 3, semisync=True, delay=1.0)
    c.engine.settings = dataclasses.replace(c.engine.settings, partition_grace_seconds=0.0)
    old = c.server("db-0")
    cut = dataclasses.replace(c.engine.members["db-0"], host=None, source_host=old.host)
    c.engine.set_members([cut, c.engine.members["db-1"], c.engine.members["db-2"]])

    def long_enough():  # the operator's passes look at db-0 and fail; the replicas still receive
        seen = c.engine.observe()
        return seen if next(s for s in seen if s.name == "db-0").unreachable_for >= 1.0 else None

    observed = wait_for(long_enough, 20, "db-0 unreachable for the failover delay")
    assert all(s.io_running for s in observed if s.name != "db-0")
    Instance(
        c.server("db-1").host, c.server("db-1").port, OPERATOR_USER, factory.admin_password
    ).stop_io_thread()
    with c.app_conn(old) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {DB}.t VALUES (%s, 'acknowledged by db-2')", [(i,) for i in range(1, 11)]
        )
    acked = set(range(1, 11))
    # acknowledged on receipt: applied a moment later
    wait_for(lambda: acked <= c.rows(c.server("db-2")), 30, "the acknowledged rows applied on db-2")
    assert not acked & c.rows(c.server("db-1"))

    out = c.engine.reconcile(c.state, observed=observed)
    assert isinstance(out.decision, t.Failover) and out.decision.to == "db-2", out.decision
    assert c.state.current_primary == "db-2"
    assert c.server("db-2").query("SELECT @@read_only")[0][0] == 0
    c.converge()
    wait_replicated(c, acked, [c.server("db-1"), c.server("db-2")])


def test_a_second_failover_waits_rather_than_promote_a_replica_lacking_acknowledged_commits(factory):
    """The CI failure of issue 45 (e2e, a hung primary's second round): db-0 hung as the primary
    with a commit nobody received; db-1, holding every acknowledged commit, replaced it; db-2
    lagged and could not be repointed. Then db-1 stopped answering and db-0 came back, held out
    for its own commit. db-0 and db-2 answer - the quorum - but db-2, the only candidate, lacks
    commits acknowledged under db-0 (on db-0 and db-1 only): nothing is promoted until db-1
    answers again, and then every acknowledged row reaches every instance."""
    c = make_cluster(factory, 3, semisync=True, delay=1.0)
    d0, d1, d2 = (c.server(f"db-{k}") for k in range(3))
    admin = lambda s: Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)  # noqa: E731
    admin(d2).stop_io_thread()  # db-2 lags
    with c.app_conn(d0) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {DB}.t VALUES (%s, 'acknowledged by db-1')", [(i,) for i in range(1, 11)]
        )
    acked = set(range(1, 11))
    # acknowledged on receipt: applied a moment later (CI saw none yet at once)
    wait_for(lambda: acked <= c.rows(d1), 30, "the acknowledged rows applied on db-1")
    assert not acked & c.rows(d2)
    admin(d1).stop_io_thread()  # nobody receives: the next commit waits for an acknowledgement
    writer, outcome = commit_in_background(c, d0, 99, timeout=120)
    wait_for(lambda: admin(d0).ack_waiters(), 10, "a commit waiting for an acknowledgement on db-0")
    d0.sigstop()
    stopped = [d0]
    try:

        def lagging_replica_hangs(state, decision):  # before the failover acts: db-2 not repointed
            if isinstance(decision, t.Failover):
                d2.sigstop()
                stopped.append(d2)

        def first_failover():
            out = c.engine.reconcile(c.state, record=lagging_replica_hangs)
            c.decisions.append(out.decision)
            c.last = out
            return out if isinstance(out.decision, t.Failover) else None

        out = wait_for(first_failover, 30, "a failover from the hung db-0", interval=0.1, describe=c.describe)
        assert out.decision.to == "db-1", out.decision
        assert any(s.instance == "db-2" and not s.ok for s in out.steps), out.steps
        d1.sigstop()  # the new primary stops answering too
        stopped.append(d1)
        for s in (d0, d2):
            s.sigcont()
            stopped.remove(s)
        held = c.converge(until=(t.FailoverHeld, t.Failover, t.Unrecoverable), timeout=60)
        assert isinstance(held, t.FailoverHeld), held
        assert "db-2, the most advanced instance that may be promoted, lacks" in held.reason, held.reason
        assert c.state.current_primary == "db-1"
        assert not acked <= c.rows(d2)  # (what promoting it would have lost)
    finally:
        for s in stopped:
            s.sigcont()
    c.converge(until=(t.Healthy, t.Errant), timeout=90)
    assert c.state.current_primary == "db-1"
    wait_replicated(c, acked, [d1, d2], timeout=30)
    writer.join(60)
    if outcome == ["ok"]:  # acknowledged: it must be on the primary too
        assert 99 in c.rows(d1), "an acknowledged commit is missing"


def test_the_operators_own_statements_never_wait_for_an_acknowledgement_that_cannot_come(factory):
    """A semi-sync primary that no replica acknowledges yet: the moment after a failover, before
    the replicas are repointed (here db-1, promoted by hand). An account statement run then
    waits for ever, holding the server's account lock: no one logs in (MySQL), the pass's next
    observation waits behind it (MariaDB), and the primary was taken for lost and failed over
    (issue 45's CI failure). A new operator's engine converges the accounts, and a password
    rotation comes, only once a replica acknowledges: no statement waits, no failover."""
    c = make_cluster(factory, 3, semisync=True)
    d0, d1 = c.server("db-0"), c.server("db-1")
    admin = lambda s: Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)  # noqa: E731
    d0.query(f"REVOKE INSERT ON {DB}.* FROM '{APP.user}'@'{APP.host}'")  # drift the engine repairs
    assert admin(d1).wait_for(admin(d0).observe().executed, 20)
    new = admin(d1)
    new.reset_replica()
    new.set_semisync_replica(False)
    new.set_semisync_source(True, 1)
    new.set_read_only(False)
    admin(d0).fence()
    c.state.current_primary = "db-1"
    engine = new_engine(factory, c.servers, semisync=True)
    seen = engine.observe()
    assert next(s for s in seen if s.name == "db-1").semisync_source
    steps = []
    assert engine.rotate("db-1", [APP], steps).done == frozenset() and steps == []
    first = engine.reconcile(c.state)
    assert isinstance(first.decision, t.ConfigureReplica), first.decision
    assert not [s for s in first.steps if s.action == "user"], first.steps  # not tried: nothing waits
    assert admin(d1).ack_waiters() == []
    c.engine = engine
    c.converge(timeout=30)
    users = [s for s in c.steps if s.action == "user"]
    assert users and all(s.ok for s in users), users
    assert any("application" in s.detail and "granted" in s.detail for s in users), users
    assert all(d.kind != "Failover" for d in c.decisions) and c.state.current_primary == "db-1"
    assert admin(d1).ack_waiters() == []


def test_a_primary_only_the_operator_cannot_reach_keeps_serving_until_the_partition_grace(factory):
    """Issue 45: the operator loses its way to db-0, its clients and replicas do not. The replicas
    still hear db-0 (heartbeats, transactions): no failover while the grace lasts, and db-0 keeps
    acknowledging writes. A primary stuck behind a stalled disk looks the same to its replicas,
    so once the grace is over it is failed over, losing no acknowledged row."""
    c = make_cluster(factory, 3, semisync=True, delay=1.0)
    grace = 8.0
    c.engine.settings = dataclasses.replace(c.engine.settings, partition_grace_seconds=grace)
    old = c.server("db-0")
    writer = writer_for(c)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 20, "20 acknowledged writes")
        members = c.engine.members
        cut = dataclasses.replace(members["db-0"], host=None, source_host=old.host)
        c.engine.set_members([cut, members["db-1"], members["db-2"]])

        def past_the_delay():
            out = c.reconcile()
            seen = next(s for s in out.observed if s.name == "db-0")
            return out if seen.unreachable_for >= 3.0 else None

        out = wait_for(past_the_delay, 30, "db-0 unreachable for 3s", interval=0.1, describe=c.describe)
        assert isinstance(out.decision, t.WaitForDelay), out.decision
        assert "partition between the operator and the primary" in out.decision.reason, out.decision
        assert not any(isinstance(d, t.Failover) for d in c.decisions), c.decisions
        during = len(writer.acked)
        wait_for(
            lambda: len(writer.acked) > during + 20, 20, "db-0 acknowledging writes during the partition"
        )
        failover = c.converge(until=t.Failover, timeout=30)
        seen = next(s for s in c.last.observed if s.name == "db-0")
        assert seen.unreachable_for >= grace, (seen.unreachable_for, failover)
        at = len(writer.acked)
        wait_for(lambda: len(writer.acked) > at + 20, 30, "writes on the new primary")
    finally:
        writer.stop()
    c.engine.set_members([members["db-0"], members["db-1"], members["db-2"]])
    c.converge(until=(t.Healthy, t.Errant), timeout=90)
    lost = set(writer.ids) - c.rows(c.primary)
    assert not lost, f"acknowledged rows missing on {c.primary.name}: {sorted(lost)[:10]}"


def test_scale_3_to_5_to_3(factory):
    c = make_cluster(factory, 3)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in range(1, 6)])
    extra = factory.create(2, prefix=f"scale{len(factory.servers)}")
    for k, s in enumerate(extra, start=3):
        s.name = f"db-{k}"
    c.servers += extra
    c.engine.settings = t.Settings(instances=5, failover_delay_seconds=1.0)
    c.engine.set_members([Member(s.name, k, s.host, s.port) for k, s in enumerate(c.servers)])
    c.converge()
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (6, 'five')")
    wait_replicated(c, set(range(1, 7)))  # new replicas seeded from the complete binlogs
    c.engine.settings = t.Settings(instances=3, failover_delay_seconds=1.0)
    d = c.converge(until=t.Decommission)
    assert d.instances == ("db-3", "db-4")
    c.converge()
    for s in extra:
        assert s.query("SHOW REPLICA STATUS") == []
        assert s.query("SELECT @@read_only")[0][0] == 1
        s.stop()
    c.engine.set_members([Member(s.name, k, s.host, s.port) for k, s in enumerate(c.servers[:3])])
    c.servers = c.servers[:3]
    c.converge()
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (7, 'three')")
    wait_replicated(c, set(range(1, 8)))


def test_operator_restart_mid_failover_converges(factory):
    c = make_cluster(factory, 3, delay=0.5)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in range(1, 31)])
    wait_replicated(c, set(range(1, 31)))
    c.primary.kill9()

    # decide until a failover is due, then run only its fencing step and "crash"
    def failover_due():
        obs = c.engine.observe()
        dec = rules.decide(obs, c.engine.settings, c.state.current_primary)
        return (dec, obs) if isinstance(dec, t.Failover) else None

    d, obs = wait_for(failover_due, 20, "a failover decision")
    c.state.current_primary = d.to  # recorded before acting, as reconcile() does
    for n in d.fence:
        if n in {s.name for s in obs if s.reachable}:
            Instance(
                c.server(n).host, c.server(n).port, OPERATOR_USER, factory.admin_password
            ).stop_io_thread()
    c.engine.close()
    # a new operator process: fresh engine, fresh observations, same recorded state
    c.engine = ReplicationEngine(
        c.engine.members.values(),
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        c.engine.settings,
        app=APP,
        app_database=DB,
        apply_timeout=20,
    )
    c.converge(timeout=30)
    new = c.primary
    assert new.name == d.to and new.query("SELECT @@read_only")[0][0] == 0
    assert any(isinstance(x, t.Promote) for x in c.decisions[-5:])
    with c.app_conn(new) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (31, 'after')")
    wait_replicated(c, set(range(1, 32)), [s for s in c.servers if s.name != "db-0"])


def test_servers_holding_data_with_no_recorded_primary_adopt_the_one_with_every_transaction(factory):
    """A cluster created again over retained volumes: every server starts fenced with replication
    stopped and nothing is recorded. The instance holding every transaction the others have
    becomes the primary (here db-1: db-0, the lowest ordinal, lags), the others replicate from
    it, and every acknowledged row is there."""
    c = make_cluster(factory, 3)
    c.converge(until=t.Switchover, desired="db-1")
    c.converge(desired="db-1")
    admin = {s.name: Instance(s.host, s.port, OPERATOR_USER, factory.admin_password) for s in c.servers}
    admin["db-0"].stop_io_thread()  # db-0 falls behind
    with c.app_conn(c.server("db-1")) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in range(1, 21)])
    wait_replicated(c, set(range(1, 21)), [c.server("db-2")])
    for i in admin.values():  # as the servers start: fenced, replication stopped
        i.set_read_only(True)
        i.stop_replica()
    c.engine.close()
    for i in admin.values():
        i.close()
    c.engine = ReplicationEngine(  # a new cluster object: fresh engine, nothing recorded
        c.engine.members.values(),
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        c.engine.settings,
        app=APP,
        app_database=DB,
        apply_timeout=20,
    )
    c.state, c.decisions = ClusterState(), []
    c.converge(timeout=30)
    boot = next(d for d in c.decisions if isinstance(d, t.Bootstrap))
    assert (boot.primary, "adopting existing data" in boot.reason) == ("db-1", True), boot
    assert c.state.current_primary == "db-1"
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (21, 'after')")
    wait_replicated(c, set(range(1, 22)))  # db-0 caught up from the adopted primary


def test_semi_sync_asked_again_of_a_replica_that_acknowledges_leaves_its_connection_open(factory):
    """Each reconnect of a replica resolves its source's name and logs in again; while the only
    acknowledging replica does so, every commit on the primary waits. Asking a connected replica
    for what it already does (semi-sync on, at each ConfigureSemiSync) leaves its IO thread's
    connection open; asking for a change restarts it (the setting is read at its start)."""
    c = make_cluster(factory, 2, semisync=True)
    replica = next(s for s in c.servers if s.name != c.state.current_primary)
    i = Instance(replica.host, replica.port, OPERATOR_USER, factory.admin_password)
    p = Instance(c.primary.host, c.primary.port, OPERATOR_USER, factory.admin_password)
    status = i.dialect.semisync_replica_status

    def dump_threads() -> list:
        sql = "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
        return [row[0] for row in p.execute(sql)]

    def commit_seen_by_the_replica(row: int) -> None:
        # A row the replica has came through a dump thread the primary has registered: after
        # it, the dump thread listed is the one serving the replica's current connection.
        with c.app_conn(c.primary) as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO {DB}.t VALUES (%s, 'through the current connection')", (row,))
        wait_replicated(c, {row}, servers=[replica])
        wait_for(lambda: len(dump_threads()) == 1, 20, "one dump thread on the primary")

    wait_for(lambda: i.wait_connected(0) and i._status_is_on(status), 20, "the replica acknowledging")
    commit_seen_by_the_replica(1)
    before = dump_threads()
    i.set_semisync_replica(True)
    commit_seen_by_the_replica(2)
    assert dump_threads() == before
    i.set_semisync_replica(False)
    wait_for(
        lambda: i.wait_connected(0) and not i._status_is_on(status), 20, "reconnected, not acknowledging"
    )

    # With its only replica no longer acknowledging, a commit would wait: the new connection
    # shows as a new dump thread in place of the old one (the primary ends the old one when
    # the same replica registers again).
    def replaced() -> bool:
        now = dump_threads()
        return len(now) == 1 and now != before

    wait_for(replaced, 20, "the replica's new dump thread, the old one gone")
    i.close()
    p.close()


def test_rotated_passwords_reach_every_server_and_replicas_reconnect_with_the_new_one(factory):
    """ALTER USER on the primary replicates; a new replication password is written into every
    replica's source configuration, so an IO thread that reconnects (here: forced to) gets in.
    The old application password is refused everywhere, the new one accepted."""
    c = make_cluster(factory, 3)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'before')", [(i,) for i in range(1, 11)])
    wait_replicated(c, set(range(1, 11)))
    repl, app = Credentials(REPL.user, "repl-pw-rotated-2"), Credentials(APP.user, "app-pw-rotated-2")
    steps: list = []
    done = c.engine.rotate(c.state.current_primary, [repl, app], steps).done
    assert done == {(REPL.user, "%"), (APP.user, "%")} and all(s.ok for s in steps), steps
    assert [s.instance for s in steps if s.action == "replicate"] == ["db-1", "db-2"]
    for s in c.servers:
        if s.name == c.state.current_primary:
            continue
        i = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)
        i.stop_io_thread()  # the next connect to the source authenticates again
        i.start_replica()
        i.close()

    def app_login(server, password):
        try:
            server.connect(user=APP.user, password=password, database=DB, timeout=3).close()
            return True
        except pymysql.MySQLError:
            return False

    for s in c.servers:  # the ALTER replicated everywhere
        wait_for(lambda s=s: app_login(s, app.password), 20, f"the new app password on {s.name}")
        assert not app_login(s, APP.password), f"the old app password still works on {s.name}"
    conn = c.primary.connect(user=APP.user, password=app.password, database=DB, timeout=3)
    with conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'after')", [(i,) for i in range(11, 21)])
    wait_replicated(c, set(range(1, 21)))  # replicas reconnected with the new password
    for s in c.servers:
        if s.name != c.state.current_primary:
            st = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password).replica_status()
            assert st.io_running and not st.io_errno, (s.name, st)


def test_passwords_never_in_errors(factory):
    s = factory.create(1, prefix=f"pw{len(factory.servers)}")[0]
    i = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)
    with pytest.raises(InstanceError) as e:
        i.execute("SELECT * FROM WHERE x = %s", ("hunter2-secret",), secrets=["hunter2-secret"])
    assert "hunter2-secret" not in str(e.value) and "***" in str(e.value)
    wrong = Instance(s.host, s.port, OPERATOR_USER, "wrong-" + factory.admin_password)
    with pytest.raises(InstanceError) as e:
        wrong.execute("SELECT 1")
    assert factory.admin_password not in str(e.value) and e.value.errno == 1045
    assert not wrong.observe().reachable
    assert factory.admin_password not in (wrong.observe().error or "")


def test_primary_and_the_acknowledging_replica_lost_together_hold_the_failover_until_forced(factory):
    """Semi-sync, 3 instances (one acknowledgement): db-1 stops receiving, so only db-2
    acknowledges the next commits; then the primary and db-2 hang together. db-1 answers but lacks
    acknowledged commits: promoting it would lose them, so nothing is promoted (FailoverHeld, saying
    why) until a person forces it; the forced failover then promotes db-1 and says so."""
    c = make_cluster(factory, 3, semisync=True, delay=1.0)
    writer = writer_for(c)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 20, "20 acknowledged writes")
        old, lagging, acker = c.primary, c.server("db-1"), c.server("db-2")
        # db-1 receives nothing more (its IO thread stopped; no pass runs meanwhile to restart it):
        # db-2 acknowledges alone
        Instance(lagging.host, lagging.port, OPERATOR_USER, factory.admin_password).stop_io_thread()
        at = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= at + 30, 20, "30 writes acknowledged by db-2 alone")
        old.sigstop()
        acker.sigstop()
    finally:
        writer.stop()
    acked = {n for n, _, _ in writer.acked}
    assert not acked <= c.rows(lagging)  # db-1 lacks acknowledged commits: the case that matters

    held = c.converge(until=t.FailoverHeld, timeout=30)
    assert (held.primary, held.answering, held.needed) == (old.name, ("db-1",), 2)
    assert "only 1 of 2 replicas answer" in held.reason and t.FORCE_FAILOVER_ANNOTATION in held.reason
    for _ in range(5):  # it stays held: nothing is promoted while the proof is missing
        assert isinstance(c.reconcile().decision, t.FailoverHeld)
    assert c.state.current_primary == old.name
    assert lagging.query("SELECT @@read_only")[0][0] == 1

    c.engine.settings = dataclasses.replace(c.engine.settings, force_failover=True)
    forced_at = time.monotonic()
    forced = c.converge(until=t.Failover, timeout=30)
    assert forced.forced and forced.to == "db-1" and "forced" in forced.reason

    def writable() -> bool:  # the engine's passes go on (a step of the forced pass may time out)
        c.reconcile()
        return lagging.query("SELECT @@read_only")[0][0] == 0

    # a pass's STOP REPLICA on db-1 can time out (30 s) on a loaded machine while its receiver
    # still waits on the hung primary; the next passes try again
    wait_for(writable, 150, "db-1 writable", interval=0.5, describe=c.describe)
    took = time.monotonic() - forced_at
    lost = acked - c.rows(lagging)
    slowest = max(
        ((end - start, kind) for start, end, kind in c.timeline if start >= forced_at), default=(0.0, "")
    )
    TIMINGS.append(
        f"{factory.flavor}: primary and acknowledging replica lost together: held for 5+ passes; "
        f"forced failover to db-1 writable {took:.1f}s after forcing (slowest pass {slowest[0]:.1f}s, "
        f"{slowest[1]}), lost {len(lost)} of {len(acked)} acknowledged rows (what the hold protected)"
    )
    assert lost


def binlog_files(server) -> list[str]:
    return [r[0] for r in server.query("SHOW BINARY LOGS")]


def rotate(server, times: int = 2) -> None:
    for _ in range(times):
        server.query("FLUSH BINARY LOGS")


def test_binlog_retention_keeps_what_a_stopped_replica_needs_until_the_size_cap_forces_it(factory):
    """spec.replication.binlogRetention on real servers: files older than the retention go
    while every replica has them; a stopped replica holds back the files it still needs, on
    every instance, long past the retention, and catches up by replication when it returns;
    only the size cap purges them, with a Warning naming it, and it then needs a re-seed."""
    c = make_cluster(factory, 3, semisync=True)
    retention = 1  # second
    c.engine.binlogs.retention = Retention(retention, 0)
    c.engine.binlogs.check_seconds = 0.0
    primary, behind = c.primary, c.server("db-2")
    rotate(primary)
    assert len(binlog_files(primary)) >= 3
    # everyone has everything: the primary's older files go once older than the retention
    wait_for(
        lambda: c.reconcile() and len(binlog_files(primary)) == 1,
        30,
        "the primary's binary logs past the retention purged",
        describe=c.describe,
    )

    behind.stop()
    with c.app_conn(primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'while stopped')", [(i,) for i in range(1, 201)])
    rotate(primary)
    kept = binlog_files(primary)
    # the passes keep running for several times the retention: nothing db-2 needs may go
    started, passes = time.monotonic(), []
    wait_for(
        lambda: (
            passes.append(c.reconcile()) or (len(passes) >= 10 and time.monotonic() - started > 4 * retention)
        ),
        30,
        "passes over four times the retention",
        describe=c.describe,
    )
    assert binlog_files(primary) == kept, "a file the stopped replica needs was purged"
    assert not [s for p in passes for s in p.steps if s.action == "purge-binlogs" and s.instance != "db-2"]
    behind.start()
    c.converge(timeout=60)
    wait_replicated(c, set(range(1, 201)), [behind], timeout=30)
    assert not [d for d in c.decisions if isinstance(d, (t.NeedsSeed, t.Reseed))]
    # caught up: now they go
    wait_for(
        lambda: c.reconcile() and len(binlog_files(primary)) == 1,
        30,
        "the files the replica needed purged once it has them",
        describe=c.describe,
    )

    behind.stop()
    with c.app_conn(primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'capped')", [(i,) for i in range(201, 401)])
    rotate(primary)
    c.engine.binlogs.retention = Retention(0, 1)  # a 1-byte cap: all but the file being written
    # (MariaDB keeps a file until its binlog checkpoint, a moment after the rotation)
    warned = wait_for(
        lambda: [s for s in c.reconcile().steps if s.instance == "db-0" and s.action == "purge-binlogs"],
        30,
        "the size cap to purge the primary's binary logs",
        describe=c.describe,
    )
    assert warned[0].ok and warned[0].warn and "db-2" in warned[0].detail, warned
    # the cap goes on purging on the next passes: a file MariaDB kept for its binlog checkpoint
    # at the first purge goes at a later one
    wait_for(
        lambda: c.reconcile() and len(binlog_files(primary)) == 1,
        30,
        "all but the file being written purged by the size cap",
        describe=c.describe,
    )
    behind.start()
    d = c.converge(until=t.NeedsSeed, timeout=60)
    assert d.name == "db-2", d
