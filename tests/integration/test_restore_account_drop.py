"""The restore account goes when the restore ends, whatever ended it (issue 53): the operator's
pass that records the end (restore_plan.plan_restore plans DropRestoreAccount for a Job that
succeeded, failed, passed its deadline or was deleted: tests/unit/test_restore_gate.py) drops
it from every server as the operator's account, with exactly the operator's grants, on real
MySQL 9.7 and MariaDB servers fenced as a new cluster's instances are."""

from __future__ import annotations

import pytest

from mysql_operator import restore_gate as gate
from mysql_operator.db import accounts
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from mysql_operator.manifests.common import RESTORE_USER
from tests.support.ports import free_port

OPERATOR = ("op", "op-Pw-5e0a71")
RESTORE_PASSWORD = "restore-Pw-9c2d44"


def _create(server, user: str, password: str, grants, revokes=()) -> None:
    server.query("SET SESSION sql_log_bin = 0")
    server.query("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
    for g in grants:
        server.query(g.grant_sql(), (user, "%"))
    for g in revokes:
        server.query(g.revoke_sql(), (user, "%"))


def _restore_accounts(server) -> int:
    return server.query("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (RESTORE_USER,))[0][0]


def _fence(server, on: bool) -> None:
    knob = "super_read_only" if server.flavor is Flavor.MYSQL else "read_only"
    server.query(f"SET GLOBAL {knob} = {'ON' if on else 'OFF'}")
    if not on:
        server.query("SET GLOBAL read_only = OFF")


def _executed(server) -> str:
    v = "gtid_executed" if server.flavor is Flavor.MYSQL else "gtid_binlog_pos"
    return server.query(f"SELECT @@GLOBAL.{v}")[0][0]


@pytest.fixture(scope="module")
def server(writable_server):
    s = writable_server
    _create(s, *OPERATOR, accounts.operator_grants(s.flavor))
    yield s
    _fence(s, False)


def operator_session(server):
    return ("db-0", lambda: Instance(server.host, server.port, *OPERATOR, name="db-0"))


def test_the_operator_drops_a_restore_account_left_behind_and_leaves_the_server_fenced(server):
    """As after a restore Job killed by its deadline: the account is there (the Job never
    dropped it), the server fenced."""
    _create(
        server,
        RESTORE_USER,
        RESTORE_PASSWORD,
        accounts.restore_grants(server.flavor),
        accounts.restore_revokes(server.flavor),
    )
    _fence(server, True)
    before = _executed(server)

    gate.drop_restore_account([operator_session(server)])

    assert _restore_accounts(server) == 0
    assert server.query("SELECT @@GLOBAL.read_only")[0][0] == 1
    if server.flavor is Flavor.MYSQL:
        assert server.query("SELECT @@GLOBAL.super_read_only")[0][0] == 1
    assert _executed(server) == before  # outside the binary log: no GTID of this instance alone
    # the next pass (or another end recorded twice) finds nothing to do and changes nothing
    gate.drop_restore_account([operator_session(server)])
    assert server.query("SELECT @@GLOBAL.read_only")[0][0] == 1


def test_a_server_writable_stays_writable(server):
    _fence(server, False)
    _create(server, RESTORE_USER, RESTORE_PASSWORD, accounts.restore_grants(server.flavor))
    gate.drop_restore_account([operator_session(server)])
    assert _restore_accounts(server) == 0
    assert server.query("SELECT @@GLOBAL.read_only")[0][0] == 0


def test_a_server_that_cannot_be_reached_fails_the_drop_naming_it(server):
    _create(server, RESTORE_USER, RESTORE_PASSWORD, accounts.restore_grants(server.flavor))
    port = free_port()
    unreachable = (
        "db-1",
        lambda: Instance("127.0.0.1", port, *OPERATOR, name="db-1", connect_timeout=1, connect_attempts=1),
    )
    with pytest.raises(RuntimeError) as e:
        gate.drop_restore_account([unreachable, operator_session(server)])
    assert "db-1" in str(e.value) and OPERATOR[1] not in str(e.value)
    assert _restore_accounts(server) == 0  # the others are still done
