"""MySQLDatabase, MySQLUser and MySQLGrant statements (db/statements.py) run as the cluster's SQL
account on real servers of both flavors: after each change - create, add a privilege, remove one,
change the password, delete - SHOW GRANTS (read as the administrator) is exactly what the objects
say, and the account can do exactly that."""

from __future__ import annotations


import pymysql
import pytest

from mysql_operator.api.sql import DATABASE_PRIVILEGES, TABLE_PRIVILEGES, DatabaseSpec, GrantSpec, UserSpec
from mysql_operator.db import grant_plans
from mysql_operator.db import statements as st
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from tests.support.mariadb import SQL_USER

DENIED = {1044, 1045, 1142, 1143, 1227}


@pytest.fixture(scope="module")
def server(writable_server):
    return writable_server


def sql_account(s) -> Instance:
    """What the operator connects as: the SQL-objects account with exactly its privileges."""
    return Instance(s.host, s.port, SQL_USER, s.admin_password, name=s.name)


def show_grants(s, user, host="%"):
    rows = s.query("SHOW GRANTS FOR %s@%s", (user, host))
    return grant_plans.parse_show_grants([r[0] for r in rows], s.flavor)


def apply(inst: Instance, statements) -> list[str]:
    return inst.run_statements(statements)


def login(s, user, password, database=None):
    # never TLS (pymysql would use it unverified where the server offers it): REQUIRE SSL is seen
    return pymysql.connect(
        host=s.host,
        port=s.port,
        user=user,
        password=password,
        database=database,
        autocommit=True,
        ssl_disabled=True,
    )


def attempt(s, user, password, sql, database=None) -> int | None:
    """None if the account may run `sql`, else the server's error number."""
    try:
        conn = login(s, user, password, database)
    except pymysql.err.MySQLError as e:
        return e.args[0]
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
        return None
    except pymysql.err.MySQLError as e:
        return e.args[0]
    finally:
        conn.close()


def converge_grant(inst, spec, flavor):
    apply(inst, st.grant(spec, inst.grants_of(spec.user, spec.host), flavor))
    assert st.grant(spec, inst.grants_of(spec.user, spec.host), flavor) == []  # nothing left to do


def test_a_database_its_users_and_their_grants_through_every_change(server):
    s, inst = server, sql_account(server)
    db = DatabaseSpec("c", "shop_db", "utf8mb4", "utf8mb4_bin")
    apply(inst, st.database(db, inst.database_state(db.name)))
    assert inst.database_state("shop_db") == st.DatabaseState("utf8mb4", "utf8mb4_bin")
    assert st.database(db, inst.database_state(db.name)) == []
    s.query("CREATE DATABASE shopXdb")  # what `shop_db` would match were '_' a wildcard
    s.query("CREATE TABLE shop_db.orders (id INT PRIMARY KEY)")

    rw = UserSpec("c", "app_rw", max_user_connections=5)
    apply(inst, st.user(rw, inst.user_state(rw.name, rw.host), s.flavor, "first-pw", False))
    assert inst.user_state("app_rw", "%").max_user_connections == 5
    assert show_grants(s, "app_rw") == {}
    ro = UserSpec("c", "app_ro", require_tls=False)
    apply(inst, st.user(ro, None, s.flavor, "ro-pw", False))

    grant = GrantSpec("c", "app_rw", "shop_db", ("SELECT", "INSERT"))
    converge_grant(inst, grant, s.flavor)
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "INSERT"}), False)}
    read_only = GrantSpec("c", "app_ro", "shop_db", ("SELECT",), table="orders")
    converge_grant(inst, read_only, s.flavor)
    assert show_grants(s, "app_ro") == {"shop_db.orders": (frozenset({"SELECT"}), False)}
    assert attempt(s, "app_ro", "ro-pw", "SELECT * FROM shop_db.orders") is None
    assert attempt(s, "app_ro", "ro-pw", "INSERT INTO shop_db.orders VALUES (1)") in DENIED
    assert attempt(s, "app_rw", "first-pw", "INSERT INTO shop_db.orders VALUES (1)") is None
    assert attempt(s, "app_rw", "first-pw", "SELECT 1", database="shopXdb") in DENIED  # literal name

    # add a privilege, then remove one: exactly the list each time
    converge_grant(inst, GrantSpec("c", "app_rw", "shop_db", ("SELECT", "INSERT", "UPDATE")), s.flavor)
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "INSERT", "UPDATE"}), False)}
    narrower = GrantSpec("c", "app_rw", "shop_db", ("SELECT", "UPDATE"))
    converge_grant(inst, narrower, s.flavor)
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "UPDATE"}), False)}
    assert attempt(s, "app_rw", "first-pw", "INSERT INTO shop_db.orders VALUES (2)") in DENIED
    converge_grant(
        inst, GrantSpec("c", "app_rw", "shop_db", ("ALL PRIVILEGES",), grant_option=True), s.flavor
    )
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"ALL PRIVILEGES"}), True)}
    converge_grant(inst, narrower, s.flavor)
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "UPDATE"}), False)}
    # every privilege of a level listed (MySQL shows them as ALL PRIVILEGES): converged once
    every = tuple(p for p in DATABASE_PRIVILEGES if p != "ALL PRIVILEGES")
    converge_grant(inst, GrantSpec("c", "app_rw", "shop_db", every), s.flavor)
    every_table = tuple(p for p in TABLE_PRIVILEGES if p != "ALL PRIVILEGES")
    converge_grant(inst, GrantSpec("c", "app_ro", "shop_db", every_table, table="orders"), s.flavor)
    converge_grant(inst, read_only, s.flavor)
    converge_grant(inst, narrower, s.flavor)

    # a new password: the old one is refused, the new one accepted
    state = inst.user_state(rw.name, rw.host)
    apply(inst, st.user(rw, state, s.flavor, "second-pw", False))
    assert attempt(s, "app_rw", "first-pw", "SELECT 1") == 1045
    assert attempt(s, "app_rw", "second-pw", "SELECT 1") is None
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "UPDATE"}), False)}
    # TLS required and the limit changed: altered in place, grants untouched
    stricter = UserSpec("c", "app_rw", max_user_connections=2, require_tls=True)
    apply(inst, st.user(stricter, inst.user_state(rw.name, rw.host), s.flavor, "second-pw", True))
    assert inst.user_state("app_rw", "%") == st.UserState(2, "ANY", inst.user_state("app_rw", "%").plugin)
    assert attempt(s, "app_rw", "second-pw", "SELECT 1") in DENIED  # this login is without TLS
    assert show_grants(s, "app_rw") == {"shop_db.*": (frozenset({"SELECT", "UPDATE"}), False)}

    # deleting: the grant is revoked, the user dropped, the database kept (cleanupPolicy Skip)
    apply(inst, st.revoke(narrower, inst.grants_of("app_rw", "%")))
    assert show_grants(s, "app_rw") == {}
    apply(inst, st.drop_user(rw))
    assert inst.user_state("app_rw", "%") is None and inst.grants_of("app_rw", "%") is None
    assert st.revoke(read_only, inst.grants_of("app_rw", "%")) == []  # nothing to revoke from no one
    apply(inst, st.drop_database(db))
    assert inst.database_state("shop_db") is not None
    apply(inst, st.drop_database(DatabaseSpec("c", "shop_db", cleanup="Delete")))
    assert inst.database_state("shop_db") is None


def test_the_sql_account_cannot_grant_on_the_servers_own_schemas_through_the_statements(server):
    """The objects refuse mysql/sys (api/sql.py); the statements quote whatever reaches them, so a
    name with a quote is one (absent) database, never SQL."""
    inst = sql_account(server)
    assert inst.database_state("x`; DROP DATABASE mysql; --") is None
    spec = DatabaseSpec("c", "evil_`name")
    apply(inst, st.database(spec, None))
    assert inst.database_state("evil_`name") is not None and inst.database_state("mysql") is not None


def test_an_account_the_operator_has_not_made_is_reported_missing(server):
    inst = sql_account(server)
    assert inst.grants_of("nobody_here", "%") is None
    with pytest.raises(InstanceError) as e:
        apply(inst, st.grant(GrantSpec("c", "nobody_here", "anydb", ("SELECT",)), {}))
    assert e.value.errno is not None


def test_an_authentication_plugin_is_used_and_kept(server):
    s, inst = server, sql_account(server)
    plugin = "caching_sha2_password" if s.flavor is Flavor.MYSQL else "mysql_native_password"
    spec = UserSpec("c", "plugged", auth_plugin=plugin)
    apply(inst, st.user(spec, None, s.flavor, "plug-pw", False))
    state = inst.user_state("plugged", "%")
    assert state is not None and state.plugin == plugin
    assert st.user(spec, state, s.flavor, "plug-pw", True) == []  # nothing to change
    assert attempt(s, "plugged", "plug-pw", "SELECT 1") is None
    apply(inst, st.user(spec, state, s.flavor, "plug-pw-2", False))
    assert inst.user_state("plugged", "%").plugin == plugin
    assert attempt(s, "plugged", "plug-pw", "SELECT 1") == 1045
