"""The operator's account and accounts that hold SYSTEM_USER (MySQL's root does), on a real server
of each flavor: with the operator's listed privileges (db/accounts.py) it changes such an
account's password (a rotation of root-password) and kills its sessions (a fence); on MySQL an
operator account without SYSTEM_USER - a cluster made by an earlier version - is refused with an
access-denied error the engine tells apart from a failure (replication_accounts.Rotation.denied)."""

from __future__ import annotations

import pymysql
import pytest

from mysql_operator.db import accounts
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.observation import ACCESS_DENIED, InstanceError
from mysql_operator.db.instance import Instance
from tests.support.wait import wait_for

SYSTEM = ("sysacct", "sys-Pw-7f21c0")  # stands for root, which holds every privilege
OPERATOR = ("op", "op-Pw-1b9e44")
OLD_OPERATOR = ("op-old", "op-old-Pw-52d7a3")


def _create(server, user: str, password: str, grants) -> None:
    server.query("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
    for g in grants:
        server.query(g.grant_sql(), (user, "%"))


def _logs_in(server, user: str, password: str) -> bool:
    try:
        server.connect(user=user, password=password).close()
        return True
    except pymysql.MySQLError:
        return False


@pytest.fixture(scope="module")
def server(writable_server):
    s, flavor = writable_server, writable_server.flavor
    _create(s, *SYSTEM, [accounts.Grant(("ALL PRIVILEGES",), grant_option=True)])
    _create(s, *OPERATOR, accounts.operator_grants(flavor))
    if flavor is Flavor.MYSQL:
        older = list(accounts.operator_grants(flavor))
        older[0] = accounts.Grant(tuple(p for p in older[0].privileges if p != "SYSTEM_USER"), "*.*", True)
        _create(s, *OLD_OPERATOR, older)
    return s


def test_the_operator_changes_the_password_of_an_account_holding_every_privilege(server):
    op = Instance(server.host, server.port, *OPERATOR)
    op.set_password(SYSTEM[0], "%", "sys-Pw-rotated-0c3d")
    assert _logs_in(server, SYSTEM[0], "sys-Pw-rotated-0c3d")
    assert not _logs_in(server, *SYSTEM)
    op.set_password(SYSTEM[0], "%", SYSTEM[1])


def test_a_fence_kills_the_sessions_of_an_account_holding_every_privilege(server):
    session = server.connect(user=SYSTEM[0], password=SYSTEM[1])
    try:
        with session.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            (thread,) = cur.fetchone()
        op = Instance(server.host, server.port, *OPERATOR)
        assert thread in op.kill_client_connections()
        wait_for(
            lambda: (
                thread not in {r[0] for r in server.query("SELECT ID FROM information_schema.PROCESSLIST")}
            ),
            10,
            f"session {thread} of {SYSTEM[0]} gone",
        )
    finally:
        try:
            session.close()
        except pymysql.MySQLError:
            pass


def test_on_mysql_an_operator_account_without_system_user_is_denied_not_failed(server):
    if server.flavor is not Flavor.MYSQL:
        pytest.skip(reason="MariaDB has no SYSTEM_USER: nothing to deny")
    old = Instance(server.host, server.port, *OLD_OPERATOR)
    with pytest.raises(InstanceError) as e:
        old.set_password(SYSTEM[0], "%", "never-applied-Pw-9")
    assert e.value.errno in ACCESS_DENIED, e.value
    assert _logs_in(server, *SYSTEM)
