"""A failover's quiesce stops each replica's receiver between two transactions (MySQL 9.7, real
servers). A receiver stopped inside a transaction leaves it half in the relay log; MySQL's
applier is always multi-threaded since 9.x, and its coordinator then waits for the rest, so a
STOP REPLICA fails with 1875 and the promotion waits up to 60 s (seen as a flaky
test_a_primary_only_the_operator_cannot_reach_keeps_serving_until_the_partition_grace[mysql]:
3 of 19 runs). `Instance.stop_receiving` fetches the half transaction whole before it stops."""

from __future__ import annotations

import pymysql
import pytest

from mysql_operator.db.instance import Instance
from tests.integration.helpers_replication import new_factory
from tests.support.mariadb import ADMIN_USER
from tests.support.wait import wait_for

ROWS = 400_000  # one transaction of about 90 MB of row events: still arriving when stopped
HALF = "SELECT QUEUEING_TRANSACTION FROM performance_schema.replication_connection_status"


@pytest.fixture(scope="module")
def pair():
    factory = new_factory("mysql")
    try:
        source, replica = factory.create(2, prefix="recv")
        pw = factory.admin_password
        with source.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL super_read_only = OFF")
            cur.execute("SET GLOBAL read_only = OFF")
            cur.execute("CREATE DATABASE big")
            cur.execute("CREATE TABLE big.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(255))")
        r = Instance(replica.host, replica.port, ADMIN_USER, pw)
        r.point_at(source.host, source.port, ADMIN_USER, pw)
        with replica.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL rpl_stop_replica_timeout = 2")  # 1875 after 2 s, not 20
        yield source, replica, r
    finally:
        factory.close()


def _big_transaction(source) -> None:
    with source.connect(timeout=120) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION cte_max_recursion_depth = %s", (ROWS,))
        cur.execute(
            "INSERT INTO big.t (v) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
            f"WHERE n < {ROWS}) SELECT REPEAT('a', 200) FROM s"
        )
        conn.commit()


def _half(replica) -> str:
    return str(replica.query(HALF)[0][0] or "")


def _stop_while_it_arrives(source, replica, stop) -> None:
    """`stop()` the receiver while a committed transaction streams to it (once it has begun)."""
    _big_transaction(source)
    wait_for(lambda: _half(replica), 30, "the transaction arriving on the replica", interval=0.01)
    stop()


def test_a_stop_between_transactions_leaves_no_half_one_and_the_applier_can_stop(pair):
    source, replica, r = pair
    # the plain stop: a half transaction, and the applier cannot be stopped. On a loaded machine
    # the stop can come after the whole transaction arrived (no case made): then another one
    for _ in range(3):
        _stop_while_it_arrives(source, replica, r.stop_io_thread)
        if _half(replica):
            break
        r.start_replica()
    assert _half(replica), "the receiver stopped between transactions 3 times: the case was not made"
    with pytest.raises(pymysql.MySQLError) as stuck:
        replica.query("STOP REPLICA")
    assert stuck.value.args[0] == 1875, stuck.value  # the applier waits for the rest
    r.start_replica()  # the rest fetched: the applier finishes the transaction, then stops as asked
    wait_for(lambda: not r.replica_status().sql_running, 60, "the applier stopped after the transaction")
    r.start_replica()

    _stop_while_it_arrives(source, replica, r.stop_receiving)
    assert not _half(replica), "stop_receiving left a half transaction"
    assert r.replica_status().io_state == "No"
    # The applier may still be applying the whole transaction (tens of seconds on a loaded
    # machine: 1875 after 2 s, seen in CI); it stops once that is done. Held by a half one, it
    # never would (the first half of this test: it needed the rest fetched)
    try:
        replica.query("STOP REPLICA")
    except pymysql.MySQLError as e:
        assert e.args[0] == 1875, e
    wait_for(
        lambda: not r.replica_status().sql_running, 180, "the applier stopped after the whole transaction"
    )
    r.start_replica()
    wait_for(
        lambda: (
            replica.query("SELECT COUNT(*) FROM big.t")[0][0]
            == source.query("SELECT COUNT(*) FROM big.t")[0][0]
        ),
        120,
        "all applied",
    )


def test_a_receiver_not_running_is_left_as_it_is(pair):
    _, replica, r = pair
    r.stop_io_thread()
    r.stop_receiving()
    assert r.replica_status().io_state == "No"
    r.start_replica()
