"""The privilege lists (mysql_operator/db/accounts.py), SHOW GRANTS parsing and the convergence plan."""

from __future__ import annotations

import re

import pytest

from mysql_operator.db import accounts as a
from mysql_operator.db import grant_plans as gp
from mysql_operator.db.flavor import Flavor, ServerVersion

MARIADB = ServerVersion(Flavor.MARIADB, 10, 11, 6)
MARIADB_11 = ServerVersion(Flavor.MARIADB, 11, 8, 3)
MYSQL = ServerVersion(Flavor.MYSQL, 8, 4, 3)
MYSQL_OLD = ServerVersion(Flavor.MYSQL, 8, 0, 22)
ALL_VERSIONS = (MARIADB, MARIADB_11, MYSQL, MYSQL_OLD)
# what lets an account change data, schemas or accounts, or act as anyone
WRITES = {
    "ALL PRIVILEGES",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "CREATE VIEW",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "CREATE TEMPORARY TABLES",
    "DELETE HISTORY",
    "FILE",
    "SUPER",
    "SHUTDOWN",
    "CREATE USER",
    "GRANT OPTION",
    "SET USER",
    "SET_USER_ID",
    "SET_ANY_DEFINER",
    "SYSTEM_USER",
    "BINLOG ADMIN",
    "BINLOG_ADMIN",
    "READ_ONLY ADMIN",
    "REPLICATION SLAVE ADMIN",
}


def _global(grants) -> set[str]:
    return {p for g in grants if g.target == "*.*" for p in g.privileges}


def test_operator_mariadb_list_is_exactly_the_documented_one():
    (glob, app) = a.operator_grants(MARIADB, "shop")
    assert glob.target == "*.*" and glob.grant_option
    assert glob.privileges == (
        "SELECT",
        "RELOAD",
        "PROCESS",
        "REPLICATION SLAVE",
        "BINLOG MONITOR",
        "BINLOG ADMIN",
        "SHOW VIEW",
        "CREATE USER",
        "EVENT",
        "TRIGGER",
        "CONNECTION ADMIN",
        "READ_ONLY ADMIN",
        "REPLICATION SLAVE ADMIN",
        "REPLICATION MASTER ADMIN",
        "SLAVE MONITOR",
    )
    assert app == a.Grant(("ALL PRIVILEGES",), "shop.*", grant_option=True)
    # the same names from 10.6 to 11.x: the split of SUPER does not matter, SUPER is never granted
    assert a.operator_grants(MARIADB_11, "shop") == a.operator_grants(MARIADB, "shop")


def test_operator_mysql_list_by_version():
    glob, plugin, app = a.operator_grants(MYSQL, "shop")
    assert (
        set(glob.privileges)
        == {
            "SELECT",
            "RELOAD",
            "PROCESS",
            "REPLICATION SLAVE",
            "REPLICATION CLIENT",
            "SHOW VIEW",
            "CREATE USER",
            "EVENT",
            "TRIGGER",
            "CONNECTION_ADMIN",
            "REPLICATION_SLAVE_ADMIN",
            "SYSTEM_VARIABLES_ADMIN",
            "BINLOG_ADMIN",
            "BACKUP_ADMIN",
            "CLONE_ADMIN",
            "SYSTEM_USER",
            "FLUSH_TABLES",
        }
        and glob.grant_option
    )
    assert plugin == a.Grant(("INSERT",), "mysql.plugin")  # INSTALL PLUGIN, without GRANT OPTION
    assert app.target == "shop.*"
    old = _global(a.operator_grants(MYSQL_OLD))
    assert "FLUSH_TABLES" not in old and "RELOAD" in old  # FLUSH_TABLES appeared in 8.0.23
    assert _global(a.operator_grants(Flavor.MYSQL)) == old  # version unknown: the older names


@pytest.mark.parametrize("v", ALL_VERSIONS, ids=str)
def test_operator_list_has_no_blanket_privilege_and_a_reason_for_each(v):
    assert not _global(a.operator_grants(v)) & {
        "ALL PRIVILEGES",
        "SUPER",
        "FILE",
        "SHUTDOWN",
        "INSERT",
        "UPDATE",
        "DELETE",
        "DROP",
        "CREATE",
        "ALTER",
        "BINLOG REPLAY",  # BINLOG ADMIN is held: PURGE BINARY LOGS (binlogRetention)
    }
    for name, why in a.operator_privileges(v):
        assert why and name in _global(a.operator_grants(v))
    assert [g.target for g in a.operator_grants(v)] == ["*.*"] + (
        ["mysql.plugin"] if v.flavor is Flavor.MYSQL else []
    )


@pytest.mark.parametrize("v", ALL_VERSIONS, ids=str)
def test_operator_can_grant_what_the_other_accounts_get(v):
    """GRANT needs the grantor to hold each privilege WITH GRANT OPTION at that level."""
    held = gp.expected(a.operator_grants(v, "shop"))
    for grants in (a.replication_grants(v), a.backup_grants(v)):
        for g in grants:
            assert set(g.privileges) <= held["*.*"][0] and held["*.*"][1]
    assert a.app_grants(v, "shop")[0].target == "shop.*" and held["shop.*"] == (
        frozenset({"ALL PRIVILEGES"}),
        True,
    )


@pytest.mark.parametrize("v", ALL_VERSIONS, ids=str)
def test_backup_reads_everything_and_writes_nothing(v):
    (g,) = a.backup_grants(v)
    assert g.target == "*.*" and not g.grant_option
    assert not set(g.privileges) & WRITES
    want = {"SELECT", "SHOW VIEW", "TRIGGER", "EVENT"}
    if v.flavor is Flavor.MARIADB:
        want |= {"BINLOG MONITOR", "SLAVE MONITOR"}  # no RELOAD/LOCK TABLES: no FTWRL in mariadb-dump
    else:
        # BACKUP_ADMIN: a physical backup's CLONE (it also allows LOCK INSTANCE FOR BACKUP)
        want |= {"REPLICATION CLIENT", "BACKUP_ADMIN", "FLUSH_TABLES" if v.at_least(8, 0, 23) else "RELOAD"}
    assert set(g.privileges) == want


@pytest.mark.parametrize("v", ALL_VERSIONS, ids=str)
def test_replication_app_and_restore_accounts(v):
    assert a.replication_grants(v) == (a.Grant(("REPLICATION SLAVE",)),)
    assert a.app_grants(v, "shop") == (a.Grant(("ALL PRIVILEGES",), "shop.*"),)
    # the Job's own account: it grants the load account its databases; no dump runs as it
    assert a.restore_grants(v) == (a.Grant(("ALL PRIVILEGES",), grant_option=True),)
    # taken back from its ALL: the server's files, the other sessions' statements, SHUTDOWN; on
    # MySQL also SYSTEM_USER (with it the dump could alter root's and the operator's accounts)
    (revoked,) = a.restore_revokes(v)
    assert revoked.target == "*.*" and {"FILE", "PROCESS"} <= set(revoked.privileges)
    assert ("SYSTEM_USER" in revoked.privileges) is (v.flavor is Flavor.MYSQL)
    assert ("SHUTDOWN" in revoked.privileges) is (v.flavor is Flavor.MARIADB)  # MySQL's CLONE needs it


@pytest.mark.parametrize("v", ALL_VERSIONS, ids=str)
def test_the_load_account_holds_no_account_grant_file_or_global_setting_privilege(v):
    """What a tenant's dump runs as: definers, binlog replay, its own session; never the grant
    tables (CREATE USER, any privilege on *.* that writes data), files, other sessions, SUPER."""
    (g,) = a.load_grants(v)
    assert g.target == "*.*" and not g.grant_option
    if v.flavor is Flavor.MARIADB:
        assert set(g.privileges) == {"SET USER", "BINLOG REPLAY", "BINLOG ADMIN"}
    else:
        assert set(g.privileges) == {"SET_ANY_DEFINER", "REPLICATION_APPLIER", "SESSION_VARIABLES_ADMIN"}
    data = {"ALL PRIVILEGES", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "CREATE USER", "FILE"}
    assert not data & set(g.privileges) and "SUPER" not in g.privileges


@pytest.mark.parametrize(
    "name, sql",
    [
        ("shop", "GRANT ALL PRIVILEGES ON `shop`.* TO `l`@`%`"),
        ("my_db", "GRANT ALL PRIVILEGES ON `my\\_db`.* TO `l`@`%`"),  # one database, not my?db
        ("100%", "GRANT ALL PRIVILEGES ON `100\\%`.* TO `l`@`%`"),
        ("a`b", "GRANT ALL PRIVILEGES ON `a``b`.* TO `l`@`%`"),
        ("Käse", "GRANT ALL PRIVILEGES ON `Käse`.* TO `l`@`%`"),
    ],
)
def test_a_database_grant_names_exactly_one_database(name, sql):
    assert a.database_grant_sql(name, "`l`@`%`") == sql


@pytest.mark.parametrize(
    "name", ["mysql", "MySQL", "sys", "performance_schema", "information_schema", "", "x" * 65, "a\\b"]
)
def test_no_database_grant_on_a_system_database_or_a_name_a_grant_cannot_hold(name):
    with pytest.raises(ValueError):
        a.database_grant_sql(name, "`l`@`%`")


def test_grant_lines_are_what_init_sh_turns_into_grants():
    text = a.grant_lines(a.operator_grants(MYSQL, "shop"))
    lines = text.split("\n")
    assert len(lines) == 3
    assert lines[0].startswith("SELECT, RELOAD, ") and lines[0].endswith(" ON *.* WITH GRANT OPTION")
    assert lines[1] == "INSERT ON `mysql`.`plugin`"
    assert lines[2] == "ALL PRIVILEGES ON `shop`.* WITH GRANT OPTION"
    assert all(
        re.fullmatch(r"[A-Z_ ,]+ ON (\*|`\w+`)\.(\*|`\w+`)( WITH GRANT OPTION)?", line) for line in lines
    )


def test_grant_lines_with_revokes():
    assert a.grant_lines(a.restore_grants(MYSQL), a.restore_revokes(MYSQL)) == (
        "ALL PRIVILEGES ON *.* WITH GRANT OPTION\nREVOKE FILE, PROCESS, SYSTEM_USER, PERSIST_RO_VARIABLES_ADMIN, "
        "INNODB_REDO_LOG_ENABLE, ENCRYPTION_KEY_ADMIN, SENSITIVE_VARIABLES_OBSERVER ON *.*"
    )
    assert a.grant_lines(a.restore_grants(MARIADB), a.restore_revokes(MARIADB)) == (
        "ALL PRIVILEGES ON *.* WITH GRANT OPTION\nREVOKE FILE, PROCESS, SHUTDOWN ON *.*"
    )


def test_grant_statements_use_placeholders_for_the_account():
    g = a.Grant(("SELECT", "SHOW VIEW"), "shop.orders", grant_option=True)
    assert g.grant_sql() == "GRANT SELECT, SHOW VIEW ON `shop`.`orders` TO %s@%s WITH GRANT OPTION"
    assert a.Grant(("GRANT OPTION",), "shop.*").revoke_sql() == "REVOKE GRANT OPTION ON `shop`.* FROM %s@%s"


@pytest.mark.parametrize(
    "privileges,target",
    [
        (("SELECT; DROP TABLE x",), "*.*"),
        (("select",), "*.*"),
        (("SELECT",), "shop"),
        (("SELECT",), "sh`op.*"),
        (("SELECT",), "*.t"),
        (("SELECT",), "a.b.c"),
    ],
)
def test_grant_refuses_what_is_not_a_privilege_or_a_target(privileges, target):
    with pytest.raises(ValueError):
        a.Grant(privileges, target)


def test_parse_show_grants_mariadb():
    lines = [
        "GRANT SELECT, RELOAD, BINLOG MONITOR, SLAVE MONITOR ON *.* TO `op`@`%` IDENTIFIED BY PASSWORD "
        "'*B69027D44F6E5EDC07F1AEAD1477967B16F28227' WITH GRANT OPTION",
        "GRANT ALL PRIVILEGES ON `shop`.* TO `op`@`%` WITH GRANT OPTION",
        "GRANT SELECT (`a`, `b`) ON `shop`.`t` TO `op`@`%`",  # column grants: not managed
        "GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `op`@`%`",  # routine grants: not managed
        "GRANT `some_role` TO `op`@`%`",
        "GRANT PROXY ON ''@'%' TO `op`@`%`",
    ]
    assert gp.parse_show_grants(lines, MARIADB) == {
        "*.*": (frozenset({"SELECT", "RELOAD", "BINLOG MONITOR", "SLAVE MONITOR"}), True),
        "shop.*": (frozenset({"ALL PRIVILEGES"}), True),
    }
    # aliases read as the names SHOW GRANTS prints
    assert gp.parse_show_grants(["GRANT REPLICATION CLIENT, REPLICA MONITOR ON *.* TO `x`@`%`"], MARIADB) == {
        "*.*": (frozenset({"BINLOG MONITOR", "SLAVE MONITOR"}), False)
    }
    assert gp.parse_show_grants(["GRANT USAGE ON *.* TO `x`@`%` IDENTIFIED BY PASSWORD '*AB'"], MARIADB) == {}


def test_parse_show_grants_mysql_static_and_dynamic_lines():
    lines = [
        "GRANT SELECT, RELOAD, PROCESS ON *.* TO `op`@`%` WITH GRANT OPTION",
        "GRANT CONNECTION_ADMIN,REPLICATION_SLAVE_ADMIN,SYSTEM_VARIABLES_ADMIN ON *.* TO `op`@`%` WITH GRANT OPTION",
        "GRANT INSERT ON `mysql`.`plugin` TO `op`@`%`",
        "GRANT ALL PRIVILEGES ON `we``ird`.* TO `op`@`%`",
    ]
    assert gp.parse_show_grants(lines, MYSQL) == {
        "*.*": (
            frozenset(
                {
                    "SELECT",
                    "RELOAD",
                    "PROCESS",
                    "CONNECTION_ADMIN",
                    "REPLICATION_SLAVE_ADMIN",
                    "SYSTEM_VARIABLES_ADMIN",
                }
            ),
            True,
        ),
        "mysql.plugin": (frozenset({"INSERT"}), False),
        "we`ird.*": (frozenset({"ALL PRIVILEGES"}), False),
    }


def test_plan_for_a_new_account_only_grants():
    p = gp.plan({}, a.backup_grants(MARIADB))
    assert p.revoke == () and p.grant == a.backup_grants(MARIADB)
    assert gp.plan(gp.expected(a.backup_grants(MARIADB)), a.backup_grants(MARIADB)) == gp.Plan((), ())


def test_plan_revokes_what_is_held_beyond_the_list():
    # the replication account of init scripts before the lists: REPLICATION CLIENT too
    current = gp.parse_show_grants(
        [
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `r`@`%`",
            "GRANT SELECT ON `shop`.* TO `r`@`%` WITH GRANT OPTION",
        ],
        MARIADB,
    )
    p = gp.plan(current, a.replication_grants(MARIADB))
    assert p.revoke == (
        a.Grant(("BINLOG MONITOR",)),
        a.Grant(("SELECT",), "shop.*"),
        a.Grant(("GRANT OPTION",), "shop.*"),
    )
    assert p.grant == ()


def test_plan_all_privileges():
    want = a.app_grants(MARIADB, "shop")
    # held piecemeal: ALL is granted, nothing on shop.* revoked
    p = gp.plan({"shop.*": (frozenset({"SELECT", "INSERT"}), False)}, want)
    assert p == gp.Plan((), want)
    # held ALL where less is wanted: revoked whole, the list granted again
    p = gp.plan({"*.*": (frozenset({"ALL PRIVILEGES"}), True)}, a.backup_grants(MARIADB))
    assert p.revoke == (a.Grant(("ALL PRIVILEGES",)), a.Grant(("GRANT OPTION",)))
    assert p.grant == a.backup_grants(MARIADB)


def test_plan_adds_a_missing_grant_option():
    p = gp.plan(
        {"shop.*": (frozenset({"ALL PRIVILEGES"}), False)},
        [a.Grant(("ALL PRIVILEGES",), "shop.*", grant_option=True)],
    )
    assert p == gp.Plan((), (a.Grant(("ALL PRIVILEGES",), "shop.*", grant_option=True),))


def test_plan_leaves_grants_on_names_it_cannot_quote_alone():
    current = {"we`ird.*": (frozenset({"SELECT"}), False), "*.*": (frozenset({"PROCESS"}), False)}
    assert gp.plan(current, a.replication_grants(MARIADB)).revoke == (a.Grant(("PROCESS",)),)
