"""Replication robustness on real MariaDB servers: what the e2e runs on the local cluster found
(repoint churn on a reconnecting IO thread, "MASTER_HOST was not set" during a repoint, stale
addresses answering as another server, read_only read alongside a table)."""

from __future__ import annotations

import dataclasses
import socket
import threading

import pytest

from mysql_operator import topology as t
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.members import Member, Step
from tests.integration.helpers_replication import (
    DB,
    REPL,
    factory as factory,  # the module-scoped fixture: real servers per flavor
    stop_the_servers_of_each_test as stop_the_servers_of_each_test,  # autouse: a test's servers stop when it ends
    make_cluster,
    writer_for,
)
from tests.support.campaign import REJOIN
from tests.support.mariadb import ADMIN_USER, OPERATOR_USER, missing_binaries
from tests.support.wait import wait_for

pytestmark = pytest.mark.skipif(
    bool(missing_binaries()),
    reason=f"MariaDB server binaries missing ({', '.join(missing_binaries())}): "
    "run hack/install-deps.sh (apt: mariadb-server mariadb-client mariadb-backup)",
)


class FakeClock:
    """The engine's clock, moved by the test: how long an error has lasted is logic, not waiting."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def replica_status(server) -> dict | None:
    """SHOW REPLICA STATUS as a dict (None: not a replica); MariaDB has the REPLICA synonyms since
    10.5.1 but keeps the old column names."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW REPLICA STATUS")
        cols = [d[0] for d in cur.description]
        row = cur.fetchone()
    return None if row is None else dict(zip(cols, row))


def io_state(server) -> tuple[str, int]:
    row = replica_status(server)
    return row.get("Replica_IO_Running", row.get("Slave_IO_Running")), int(row["Last_IO_Errno"])


def test_reconnecting_io_thread_is_not_repointed_until_its_error_persists(factory):
    """Bug 1 (churn): a replica whose IO thread is Connecting to the right source must not be
    repointed on one observation; only once its error has lasted the grace period."""
    c = make_cluster(factory, 3)
    clock = FakeClock()
    c.engine.clock = clock
    p, r = c.primary, c.server("db-1")
    # the replication account stops working for db-1: its IO thread retries ("Connecting", 1045)
    with p.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (REPL.user, REPL.host, "changed-elsewhere"))
    r.query("STOP REPLICA IO_THREAD")
    r.query("START REPLICA IO_THREAD")
    wait_for(lambda: io_state(r) == ("Connecting", 1045), 20, "db-1's IO thread retrying on 1045")
    for _ in range(5):
        clock.now += 1.0
        out = c.reconcile()
        assert not isinstance(out.decision, t.ConfigureReplica), out.decision
        assert not any(s.action == "replicate" for s in out.steps), out.steps
    state = next(s for s in out.observed if s.name == "db-1")
    assert state.io_connecting and state.io_errno == 1045 and state.error_for >= 4.0
    # the error persisted past the grace period: now it is reconfigured (once), not before
    clock.now += c.engine.settings.replica_error_grace_seconds
    assert isinstance(c.reconcile().decision, t.ConfigureReplica)
    with p.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (REPL.user, REPL.host, REPL.password))
    # the IO thread retries on its own: once the account works it connects without a repoint
    wait_for(lambda: io_state(r) == ("Yes", 0), 30, "db-1 reconnected by itself")
    assert isinstance(c.reconcile().decision, t.Healthy)


def test_healthy_cluster_under_writes_is_never_repointed(factory):
    """Bug 1 under load: restarting a replica's IO thread (it passes through Connecting) while
    rows are written must not make the loop repoint anything."""
    c = make_cluster(factory, 3)
    w = writer_for(c)
    w.start()
    try:
        for k in range(20):
            if k % 4 == 0:
                c.server("db-2").query("STOP REPLICA IO_THREAD")
                c.server("db-2").query("START REPLICA IO_THREAD")
            d = c.reconcile().decision
            assert not isinstance(d, t.ConfigureReplica), d
        wait_for(lambda: len(w.acked) > 20, 20, "the writer to commit rows")
    finally:
        w.stop()
    assert isinstance(c.reconcile().decision, t.Healthy)


def test_repoint_survives_a_concurrent_reset(factory):
    """Bug 2: another actor (a second operator process, a CLI switchover) runs RESET SLAVE ALL on
    a replica while the engine repoints it; START must never fail with 'MASTER_HOST was not set'
    and the replica ends up replicating from the source it was pointed at."""
    c = make_cluster(factory, 2)
    r = c.server("db-1")
    stop = threading.Event()
    resets = []

    def other_actor():
        other = Instance(r.host, r.port, OPERATOR_USER, factory.admin_password, name="other")
        try:
            while not stop.is_set():
                try:
                    other.reset_replica()
                    resets.append(1)
                except InstanceError:
                    pass  # the engine started it again between our STOP and RESET
                stop.wait(0.01)
        finally:
            other.close()

    actor = threading.Thread(target=other_actor, daemon=True)
    actor.start()
    failures = []
    try:
        for _ in range(60):
            steps: list[Step] = []
            try:
                c.engine.configure_replica("db-1", "db-0", steps)
            except InstanceError as e:
                failures.append(str(e))
    finally:
        stop.set()
        actor.join(10)
    assert len(resets) > 10
    assert not [f for f in failures if "MASTER_HOST was not set" in f], failures
    c.engine.configure_replica("db-1", "db-0", [])
    wait_for(lambda: io_state(r) == ("Yes", 0), 20, "db-1 replicating again")


def test_address_answering_as_another_server_is_unreachable_for_that_member(factory):
    """Bug 3: after a grace-period-0 Pod delete the old address may still answer, as another
    server or as an old incarnation. A member is reachable only if @@server_id and
    @@hostname/@@report_host match the Pod expected there."""
    c = make_cluster(factory, 3)
    s0, s1, s2 = (c.server(f"db-{k}") for k in range(3))
    ids = {s.name: int(s.query("SELECT @@server_id")[0][0]) for s in (s0, s1, s2)}
    host = s1.query("SELECT @@hostname")[0][0]
    # db-1's address now reaches db-2's server (a reused IP, a stale DNS answer)
    members = [
        Member("db-0", 0, s0.host, s0.port, server_id=ids["db-0"], hostname=host),
        Member("db-1", 1, s2.host, s2.port, server_id=ids["db-1"], hostname=host),
        Member("db-2", 2, s2.host, s2.port, server_id=ids["db-2"], hostname=host),
    ]
    c.engine.set_members(members)
    by = {s.name: s for s in c.engine.observe()}
    assert by["db-0"].reachable and by["db-2"].reachable
    assert not by["db-1"].reachable
    assert f"answers as server_id {ids['db-2']}, expected {ids['db-1']}" in by["db-1"].last_error
    # a server answering with the right id but as another Pod is not that member either
    c.engine.set_members(
        [
            Member("db-0", 0, s0.host, s0.port, server_id=ids["db-0"], hostname="db-0-of-a-deleted-pod"),
            *members[1:],
        ]
    )
    by = {s.name: s for s in c.engine.observe()}
    assert not by["db-0"].reachable and "expected db-0-of-a-deleted-pod" in by["db-0"].last_error
    # the right identity at the right address: reachable again, the cluster converges
    c.engine.set_members(
        [
            Member(s.name, k, s.host, s.port, server_id=ids[s.name], hostname=host)
            for k, s in enumerate((s0, s1, s2))
        ]
    )
    assert c.converge(timeout=30).primary == "db-0"


def test_recreated_pod_gets_a_new_connection(factory):
    """Bug 3: the same name and address with a new Pod uid must not reuse the old connection
    (it may still reach the old container)."""
    c = make_cluster(factory, 1)
    s0 = c.server("db-0")
    c.engine.set_members([Member("db-0", 0, s0.host, s0.port, uid="uid-1")])
    c.engine.observe()
    old = c.engine.instances["db-0"]
    c.engine.set_members([Member("db-0", 0, s0.host, s0.port, uid="uid-1")])
    assert c.engine.instances["db-0"] is old
    c.engine.set_members([Member("db-0", 0, s0.host, s0.port, uid="uid-2")])
    assert c.engine.instances["db-0"] is not old and old._conn is None


def test_read_only_is_observed_right_on_a_replica_holding_rows(factory):
    """Bug 5: `SELECT @@global.read_only, COUNT(*) FROM t` was seen returning 0 on a read-only
    replica; observe reads variables in queries of their own, so a replica with rows is
    read-only and the primary is not."""
    c = make_cluster(factory, 2)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.t VALUES (%s, 'x')", [(k,) for k in range(1, 51)])
    wait_for(lambda: len(c.rows(c.server("db-1"))) == 50, 20, "rows on db-1")
    combined = c.server("db-1").query(f"SELECT @@global.read_only, COUNT(*) FROM {DB}.t")[0]
    print(
        f"MariaDB {c.server('db-1').query('SELECT VERSION()')[0][0]}: read_only with COUNT(*) "
        f"in one query -> {combined}"
    )
    by = {s.name: s for s in c.engine.observe()}
    assert by["db-1"].read_only and not by["db-0"].read_only


def test_service_probe_counts_only_the_writable_named_primary(factory):
    """Ready waits until a connection through -rw reaches the new primary: a stale endpoint (the
    old, fenced primary or another server) or a refused connection does not count."""
    from mysql_operator.routing import service_routes_to
    from tests.support.ports import free_port

    s = factory.create(1, prefix="probe")[0]
    name = s.query("SELECT @@hostname")[0][0]
    pw = factory.admin_password
    assert not service_routes_to(s.host, s.port, ADMIN_USER, pw, name)  # starts read-only (fenced)
    s.query("SET GLOBAL read_only = 0")
    assert service_routes_to(s.host, s.port, ADMIN_USER, pw, name)
    assert not service_routes_to(s.host, s.port, ADMIN_USER, pw, name + "-other")
    assert not service_routes_to(s.host, free_port(), ADMIN_USER, pw, name)  # no endpoint: refused
    assert not service_routes_to(None, s.port, ADMIN_USER, pw, name)
    assert not service_routes_to("None", s.port, ADMIN_USER, pw, name)  # a headless Service


def test_a_connection_the_driver_tore_down_is_replaced_not_a_crash(factory):
    """Seen in e2e: pymysql had closed a connection's reader and the next query raised
    AttributeError out of observe(), failing the whole pass. The fault (a torn-down reader) is
    injected; the server is real. A statement on it fails as that instance's error (never the
    exception), and observe(), whose kept connection broke, answers from a new one at once."""
    s = factory.create(1, prefix=f"torn{len(factory.servers)}")[0]
    i = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password, name="db-0")
    assert i.observe().reachable
    i._conn._rfile = None  # injected: the driver's reader is gone, its socket still set
    with pytest.raises(InstanceError) as broken:
        i.execute("SELECT 1")
    assert "connection broken" in str(broken.value) and factory.admin_password not in str(broken.value)
    assert i.observe().reachable, "a new connection after the broken one"
    i._conn._rfile = None
    assert i.observe().reachable, "observe() replaces a kept connection that broke"


def test_an_instance_without_an_address_is_unreachable_and_never_localhost(factory):
    """A Pod without an IP yet: no address. pymysql would take a missing host for localhost, where
    another server may listen (here a real one, on the same port)."""
    s = factory.create(1, prefix=f"noaddr{len(factory.servers)}")[0]
    o = Instance(None, s.port, OPERATOR_USER, factory.admin_password, name="db-0").observe()
    assert not o.reachable and "no address" in o.error, o


def test_a_failover_promotes_only_once_the_old_primary_it_restarted_has_stopped(factory):
    """Found by the k8s fault campaign (seed 202 on both flavors, fixed by 824c8a4): a primary cut
    off from the operator and then from its replicas was failed over; the failover restarted it
    (its Pod deleted, grace 2 s) and promoted at once, so the old server, alive through its grace
    period and still reached by its clients, was writable beside the new primary (MySQL: 1 of
    21,863 acknowledged writes lost). Here on real servers: the operator's address of the old
    primary takes connections and never answers (a partition keeps a Pod's IP), its replicas stop
    hearing it, and a Pod deletion stops the server 2 s later, as within a grace period. The new
    primary is made writable only once the old server's process is gone (before the fix, the
    engine only asked for the deletion: this fails with the old server alive at the promotion)."""
    c = make_cluster(factory, 3, semisync=True)
    c.engine.settings = dataclasses.replace(c.engine.settings, partition_grace_seconds=1.0)
    old = c.primary
    silent = socket.create_server(("127.0.9.1", 0), backlog=64)  # takes connections, never answers
    c.engine.set_members(
        [
            dataclasses.replace(m, host="127.0.9.1", port=silent.getsockname()[1], source_host=m.host)
            if n == old.name
            else m
            for n, m in c.engine.members.items()
        ]
    )
    for s in c.servers:  # the replicas stop hearing it: their receivers stopped
        if s is not old:
            s.query("STOP REPLICA IO_THREAD")
    stopped: list[str] = []
    alive_at_promotion: dict[str, bool] = {}

    def delete_pod(name: str) -> None:  # the kubelet stops the server within its grace period
        threading.Timer(2.0, c.server(name).stop).start()

    def stop_instance(name: str) -> bool:  # the Pod deleted, then read until it is gone
        stopped.append(name)
        delete_pod(name)
        wait_for(lambda: not c.server(name).alive, 15, f"{name}'s process gone")
        return True

    c.engine.restart_instance = delete_pod
    c.engine.stop_instance = stop_instance
    c.engine.promoted = lambda name: alive_at_promotion.setdefault(name, old.alive)
    try:
        c.converge(until=t.Failover, timeout=60)
    finally:
        silent.close()
    new = c.state.current_primary
    assert new != old.name
    assert alive_at_promotion == {new: False}, f"{old.name} still ran when {new} was made writable"
    assert stopped == [old.name]


def source_port(server) -> int | None:
    status = replica_status(server)
    return None if status is None else int(status.get("Source_Port", status.get("Master_Port")))


def test_a_new_primary_is_announced_as_soon_as_it_is_writable_before_the_others_are_repointed(factory):
    """Found by the k8s fault campaign (MariaDB seed 24, fixed by 4746559): the read-write Service
    follows the role label, which moved only at the end of the failover's pass, after every replica
    was repointed: -rw led to the fenced old primary for 1.2 s while the new one was writable. The
    engine now announces the new primary (`promoted`, which labels its Pod) as soon as it is
    writable. Here on real servers, after a kill -9 of the primary: when it is announced, it is
    writable and the other replica still has the old primary as its source."""
    c = make_cluster(factory, 3, semisync=True)
    old = c.primary
    seen: dict[str, object] = {}

    def promoted(name: str) -> None:
        seen["read_only"] = c.server(name).query("SELECT @@read_only")[0][0]
        seen["sources"] = [source_port(s) for s in c.servers if s.name not in (name, old.name)]

    c.engine.promoted = promoted
    old.kill9()
    c.converge(until=t.Failover, timeout=60)
    assert seen == {"read_only": 0, "sources": [old.port]}, seen
    c.converge()  # and the pass goes on: the other replica follows the new primary
    new = c.primary
    assert [source_port(s) for s in c.servers if s.name not in (new.name, old.name)] == [new.port]


def test_a_hung_old_primary_is_restarted_before_the_promotion_and_never_wakes_writable(factory):
    """Found by the host fault campaign (two-writable samples: MariaDB seed 9, MySQL seeds 8 and
    11; fixed by 39216b1): a SIGSTOPped primary was failed over and later resumed writable beside
    the new primary, taking writes until a later pass fenced it. A failover now restarts an old
    primary it cannot reach but that may still serve (restart_instance: its Pod deleted; every
    server starts read-only), before the promotion. Here on real servers: the old primary hung,
    failed over, resumed (and, if it was ended, started again as the kubelet would): read-only."""
    c = make_cluster(factory, 3, semisync=True)
    old = c.primary
    restarted: list[str] = []

    def restart_instance(name: str) -> None:  # the Pod deleted: its hung server ends
        restarted.append(name)
        c.server(name).kill9()

    c.engine.restart_instance = restart_instance
    old.sigstop()
    c.converge(until=t.Failover, timeout=60)
    assert c.state.current_primary != old.name
    old.sigcont()  # wakes up (a hung disk, a partition healed)
    if not old.alive:
        old.restart(**REJOIN[factory.flavor.value])  # the kubelet starts the container again
    assert old.query("SELECT @@read_only")[0][0] == 1, f"{old.name} woke up writable"
    assert restarted == [old.name]
