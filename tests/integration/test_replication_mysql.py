"""The key replication scenarios on real MySQL servers.

Bootstrap of 3 instances, failover after kill -9 of the primary under a write load with
acknowledged-row accounting (semi-sync on), and switchover - the same engine loop as the MariaDB
tests (`tests/integration/helpers_replication.py`).

Servers: MySQL 9.7 from the cluster's MySQL image, run on 127.0.0.1 with chroot into its root
(`tests/support/mysql.py`); where that cannot run (not root) but a Docker engine answers, MySQL
8.4 containers (`tests/support/mysql_container.py`). Skipped, printing both reasons, otherwise.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import pymysql
import pytest

from mysql_operator import topology as t
from mysql_operator.db.instance import Instance
from mysql_operator.members import Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.integration.helpers_replication import APP, DB, REPL, Cluster, wait_replicated, writer_for
from tests.support import mysql_container
from tests.support.mysql import OPERATOR_USER, MySQLFactory, mysql_unavailable
from tests.support.wait import wait_for


@pytest.fixture(scope="module")
def group(request):
    rsa_missing = mysql_container.rsa_unavailable()
    if rsa_missing:
        pytest.skip(reason=f"pymysql cannot log in to MySQL: {rsa_missing}")
    host_missing = mysql_unavailable()
    if host_missing is None:
        g = MySQLFactory()
        g.admin_user = "admin"
    else:
        docker_missing = mysql_container.docker_unavailable()
        if docker_missing:
            pytest.skip(reason=f"no MySQL server: {host_missing}; {docker_missing}")
        g = mysql_container.MySQLGroup()
        g.admin_user = mysql_container.ADMIN_USER
    failed_before = request.session.testsfailed
    try:
        yield g
    finally:
        if request.session.testsfailed > failed_before:
            print("\n" + g.logs_report(40), file=sys.stderr)
        g.close()


def make_cluster(
    group, n: int, semisync: bool = False, delay: float = 1.0, admin: Credentials | None = None, **settings
) -> Cluster:
    made = len(getattr(group, "nodes", None) or getattr(group, "servers", []))
    if isinstance(group, MySQLFactory):  # the operator's my.cnf loads the semi-sync plugins
        nodes = group.create(n, prefix=f"c{made}", semisync=semisync)
    else:
        nodes = group.create(n, prefix=f"c{made}")
    for k, s in enumerate(nodes):
        s.name = f"db-{k}"
    members = [Member(s.name, k, s.host, s.port) for k, s in enumerate(nodes)]
    engine = ReplicationEngine(
        members,
        admin or Credentials(group.admin_user, group.admin_password),
        REPL,
        t.Settings(instances=n, failover_delay_seconds=delay, semisync=semisync, **settings),
        app=APP,
        app_database=DB,
        apply_timeout=30,
    )
    c = Cluster(nodes, engine)
    c.converge(timeout=60)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")
    c.converge(timeout=60)
    return c


def admin(group, node) -> Instance:
    return Instance(node.host, node.port, group.admin_user, group.admin_password)


def test_mysql_bootstrap_three_instances_replicas_super_read_only(group):
    c = make_cluster(group, 3)
    assert c.state.current_primary == "db-0"
    major, minor = (int(x) for x in c.primary.query("SELECT VERSION()")[0][0].split(".")[:2])
    assert (major, minor) >= (8, 4)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(i,) for i in range(1, 11)])
    wait_replicated(c, set(range(1, 11)), timeout=30)
    assert c.primary.query("SELECT @@read_only, @@super_read_only")[0] == (0, 0)
    for r in c.servers[1:]:
        assert r.query("SELECT @@read_only, @@super_read_only")[0] == (1, 1)
        status = admin(group, r).replica_status()
        assert status.io_running and status.sql_running and status.source_host == c.primary.host
        with c.app_conn(r) as conn, conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(f"INSERT INTO {DB}.t VALUES (99, 'refused')")
            assert e.value.args[0] == 1290  # --super-read-only
    assert 99 not in c.rows(c.server("db-1"))


def test_mysql_failover_after_kill9_under_writes_loses_no_acknowledged_row(group):
    c = make_cluster(group, 3, semisync=True, delay=1.0)
    p = c.primary
    assert dict(p.query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_status'")) == {
        "Rpl_semi_sync_source_status": "ON"
    }
    writer = writer_for(c)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, 30, "50 acknowledged writes")
        old = c.primary
        killed_at = time.monotonic()
        old.kill9()
        d = c.converge(until=t.Failover, timeout=60)
        c.converge(timeout=60)
        new = c.primary
        assert new.name != old.name and new.name == d.to
        wait_for(lambda: any(s == new.name for _, s, _ in writer.acked), 30, "a write on the new primary")
        first = min(ts for _, s, ts in writer.acked if s == new.name)
        wait_for(lambda: len([1 for _, s, _ in writer.acked if s == new.name]) >= 20, 30, "20 more writes")
    finally:
        writer.stop()
    acked = {n for n, _, _ in writer.acked}
    found = c.rows(new)
    lost = acked - found
    print(
        f"mysql failover after kill -9: kill -> first write on {new.name} {first - killed_at:.2f}s; "
        f"acknowledged {len(acked)}, lost {len(lost)}",
        file=sys.stderr,
    )
    assert not lost, f"acknowledged rows missing on the new primary: {sorted(lost)[:10]}"
    assert writer.servers_in_order() == [old.name, new.name]  # never two accepting at once
    other = next(s for s in c.servers if s.name not in (old.name, new.name))
    wait_replicated(c, acked, [other], timeout=30)
    assert other.query("SELECT @@super_read_only")[0][0] == 1
    status = admin(group, other).replica_status()
    assert status.source_host == new.host and status.io_running and status.sql_running


def test_mysql_switchover(group):
    c = make_cluster(group, 3)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'before')", [(i,) for i in range(1, 21)])
    idle = c.app_conn(c.primary)  # an application connection the switchover must kill
    d = c.converge(until=t.Switchover, desired="db-2", timeout=60)
    assert (d.from_, d.to) == ("db-0", "db-2")
    c.converge(desired="db-2", timeout=60)
    assert c.state.current_primary == "db-2"
    with pytest.raises(pymysql.err.MySQLError):
        with idle.cursor() as cur:
            cur.execute("SELECT 1")
    with c.app_conn(c.server("db-2")) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (21, 'after')")
    wait_replicated(c, set(range(1, 22)), timeout=30)
    old = c.server("db-0")
    assert old.query("SELECT @@super_read_only")[0][0] == 1
    status = admin(group, old).replica_status()
    assert status.source_host == c.server("db-2").host and status.io_running and status.sql_running


def test_mysql_semisync_acknowledgements_change_at_runtime_without_a_restart(group):
    """More instances want more acknowledgements (3 -> 5: 2): the operator's my.cnf does not name
    them, so scaling restarts no server; the primary's count is set by the next pass (the engine
    is rebuilt with the new settings, as a changed spec rebuilds it in the operator)."""
    c = make_cluster(group, 3, semisync=True)
    primary = admin(group, c.primary)
    before = primary.observe()
    assert (before.semisync_source_enabled, before.semisync_ack_count) == (True, 1)
    members = [Member(s.name, k, s.host, s.port) for k, s in enumerate(c.servers)]
    settings = dataclasses.replace(c.engine.settings, semisync_acks=2)
    c.engine = ReplicationEngine(
        members, c.engine.admin, REPL, settings, app=APP, app_database=DB, semisync_acks=2, apply_timeout=30
    )
    d = c.converge(until=t.ConfigureSemiSync, timeout=30)
    assert d.reason == "1 -> 2 acknowledgement(s)", d
    c.converge(timeout=30)
    after = primary.observe()
    assert (after.semisync_source_enabled, after.semisync_ack_count) == (True, 2)
    assert after.uptime >= before.uptime, "the same server process, not restarted"


def converge_restarting(c: Cluster, server, timeout: float = 180.0) -> int:
    """Run passes until the cluster is Healthy with every instance replicating, starting
    `server` again whenever it has exited (a re-seeded server shuts down on its copy; in a Pod
    its container is restarted). Returns how many times it was started."""
    starts = 0

    def step():
        nonlocal starts
        if not server.alive:
            server.start()
            starts += 1
        out = c.reconcile()
        return out if isinstance(out.decision, t.Healthy) and not out.decision.degraded and starts else None

    wait_for(
        step, timeout, f"{server.name} re-seeded and replicating again", interval=0.2, describe=c.describe
    )
    return starts


def test_mysql_replica_behind_purged_binlogs_is_reseeded(group):
    """A replica stopped while the primary's binary logs it still needed were purged can never
    catch up by replication: it is re-seeded by CLONE and then replicates."""
    if not isinstance(group, MySQLFactory):
        pytest.skip(reason="re-seeding restarts a server on its copied data: the host-run servers only")
    c = make_cluster(
        group, 3, semisync=True, admin=Credentials(OPERATOR_USER, group.admin_password), reseed=True
    )
    behind = c.server("db-2")
    behind.stop()
    c.converge(timeout=30)  # Healthy, db-2 unreachable
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'while stopped')", [(i,) for i in range(1, 501)])
    p = c.primary
    p.query("FLUSH BINARY LOGS")
    current = p.query("SHOW BINARY LOG STATUS")[0][0]
    p.query(f"PURGE BINARY LOGS TO '{current}'")
    assert p.query("SELECT @@gtid_purged")[0][0], "nothing purged"
    behind.start()
    d = c.converge(until=t.Reseed, timeout=60)
    assert (d.name, d.donor, d.errant) == ("db-2", "db-1", ""), d
    assert converge_restarting(c, behind) == 1
    wait_replicated(c, set(range(1, 501)), [behind], timeout=30)
    status = admin(group, behind).replica_status()
    assert status.source_host == c.primary.host and status.io_running and status.sql_running


def test_mysql_errant_replica_is_reseeded_by_clone_and_rejoins_under_writes(group):
    """errantPolicy Reseed on real servers, with exactly the operator account's privileges: a
    replica holding a transaction the primary lacks is recorded (its GTID and binary log events),
    then replaced by a CLONE of the healthy replica while the primary keeps taking writes; the
    server shuts itself down once copied (a Pod's container then restarts it: here the test starts
    it again, with a new server_uuid as start.sh does) and rejoins as an ordinary replica without
    the errant row. No acknowledged write is
    lost and the primary never stops taking writes."""
    if not isinstance(group, MySQLFactory):
        pytest.skip(reason="re-seeding restarts a server on its copied data: the host-run servers only")
    operator = Credentials(OPERATOR_USER, group.admin_password)
    c = make_cluster(group, 3, semisync=True, admin=operator, reseed=True, reseed_errant=True)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'before')", [(i,) for i in range(1, 2001)])
    wait_replicated(c, set(range(1, 2001)), timeout=60)
    kept: list[tuple[str, str, list[str]]] = []

    def keep(name: str, gtids: str, events: list[str]) -> str:
        kept.append((name, gtids, events))
        return "the test's record"

    c.engine.reseeds.keep_evidence = keep
    victim = c.server("db-2")
    victim.query("SET GLOBAL super_read_only = OFF")
    victim.query(f"INSERT INTO {DB}.t VALUES (999999, 'errant')")
    victim.query("SET GLOBAL super_read_only = ON")
    uuid = victim.query("SELECT @@server_uuid")[0][0]
    writer = writer_for(c)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 30, "20 acknowledged writes")
        d = c.converge(until=t.Reseed, timeout=30)
        assert (d.name, d.donor) == ("db-2", "db-1") and uuid in d.errant, d
        assert kept and kept[0][0] == "db-2" and uuid in kept[0][1], kept
        assert any("Table_map" in e and f"{DB}.t" in e for e in kept[0][2]), kept[0][2]
        reseed_steps = [s for s in c.last.steps if s.action == "reseed"]
        assert reseed_steps and "copying the data of db-1" in reseed_steps[0].detail, c.last.steps

        restarts = converge_restarting(c, victim)
        wait_for(
            lambda: len([1 for a in writer.acked if a.at > time.monotonic() - 1]) > 0, 10, "writes going on"
        )
    finally:
        writer.stop()
    assert restarts == 1
    acked = {n for n, _, _ in writer.acked}
    wait_replicated(c, acked | set(range(1, 2001)), timeout=60)
    assert 999999 not in c.rows(victim), "the errant row survived the re-seed"
    # a new server_uuid: what it writes later never reuses the discarded transactions' GTIDs
    assert victim.query("SELECT @@server_uuid")[0][0] != uuid
    assert victim.query("SELECT @@super_read_only")[0][0] == 1
    status = admin(group, victim).replica_status()
    assert status.source_host == c.primary.host and status.io_running and status.sql_running
    assert writer.servers_in_order() == ["db-0"]  # the primary served throughout
    lost = acked - c.rows(c.primary)
    assert not lost
    times = sorted(a.at for a in writer.acked)
    gap = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    print(
        f"mysql re-seed: {len(acked)} writes acknowledged meanwhile, {len(lost)} lost, "
        f"{writer.failures} failed attempts, longest gap between acknowledgements {gap:.2f}s",
        file=sys.stderr,
    )


def test_mysql_the_only_replica_is_reseeded_from_a_primary_whose_commits_wait_for_it(group):
    """Two instances, semi-sync that never falls back: the only replica is lost (stopped, the
    primary's binary logs it needs purged) while writers go on. Their commits wait for an
    acknowledgement only that replica can give, and its copy (CLONE from the primary, the only
    donor) waits for every transaction prepared in the binary log to end: without the operator's
    release neither ever ends (measured: CLONE at PAGE COPY for minutes; KILL does not end a MySQL
    acknowledgement wait). Released, the waiting clients get an error, never an acknowledgement;
    the replica is copied, rejoins, and commits are acknowledged again; no acknowledged row lost."""
    if not isinstance(group, MySQLFactory):
        pytest.skip(reason="re-seeding restarts a server on its copied data: the host-run servers only")
    c = make_cluster(
        group, 2, semisync=True, admin=Credentials(OPERATOR_USER, group.admin_password), reseed=True
    )
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'before')", [(i,) for i in range(1, 501)])
    wait_replicated(c, set(range(1, 501)), timeout=60)
    replica = c.server("db-1")
    replica.stop()
    c.converge(timeout=30)  # the primary keeps its role; the replica is unreachable
    p = c.primary
    # binary logs the replica needs, then purged (semi-sync off for the test's own rows only)
    p.query("SET GLOBAL rpl_semi_sync_source_enabled = OFF")
    p.query(f"INSERT INTO {DB}.t VALUES (501, 'while stopped')")
    p.query("FLUSH BINARY LOGS")
    current = p.query("SHOW BINARY LOG STATUS")[0][0]
    p.query(f"PURGE BINARY LOGS TO '{current}'")
    p.query("SET GLOBAL rpl_semi_sync_source_enabled = ON")
    writer = writer_for(c)
    writer.start()
    try:
        wait_for(lambda: admin(group, p).ack_waiters(), 30, "a commit waiting for an acknowledgement")
        assert not writer.acked, "a commit acknowledged with no replica connected"
        replica.start()
        d = c.converge(until=t.Reseed, timeout=60)
        assert (d.name, d.donor) == ("db-1", "db-0"), d
        restarts = converge_restarting(c, replica, timeout=240)
        wait_for(lambda: len(writer.acked) >= 20, 60, "commits acknowledged again by the re-seeded replica")
    finally:
        writer.stop()
    assert restarts == 1
    released = [s.detail for s in c.steps if s.action == "release"]
    assert released and "not an acknowledgement" in released[0], released
    assert writer.failures > 0, "the waiting clients got an error"
    acked = {a.id for a in writer.acked}
    lost = acked - c.rows(c.primary)
    assert not lost
    wait_replicated(c, acked | set(range(1, 502)), [replica], timeout=60)
    status = admin(group, replica).replica_status()
    assert status.source_host == c.primary.host and status.io_running and status.sql_running
    print(
        f"mysql re-seed from a waiting primary: {len(released)} release(s), {writer.failures} failed "
        f"attempts, {len(acked)} acknowledged after the copy, {len(lost)} lost",
        file=sys.stderr,
    )
