"""MySQLDatabase, MySQLUser, MySQLGrant: the parser's refusals and the statements that converge a
server (pure; the same statements on real servers: tests/integration/test_sql_objects.py)."""

from __future__ import annotations

import pytest

from mysql_operator.api import SpecError
from mysql_operator.api.sql import DATABASE_PRIVILEGES, DatabaseSpec, GrantSpec, UserSpec, parse_sql_object
from mysql_operator.db import statements as st
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.observation import InstanceError
from mysql_operator.sql_status import Result, status_changed, status_for


def body(kind, **spec):
    return {
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": {"clusterRef": {"name": "db"}, **spec},
    }


def test_defaults_when_a_field_is_left_out():
    assert parse_sql_object(body("MySQLDatabase", name="shop")).spec == DatabaseSpec("db", "shop")
    user = parse_sql_object(body("MySQLUser", name="reporting")).spec
    assert user == UserSpec("db", "reporting", "%", None, 0, False, None, "Delete")
    grant = parse_sql_object(
        body("MySQLGrant", user="reporting", database="shop", privileges=["SELECT"])
    ).spec
    assert grant == GrantSpec("db", "reporting", "shop", ("SELECT",)) and grant.target == "shop.*"


@pytest.mark.parametrize(
    "kind, spec, field",
    [
        ("MySQLDatabase", {"name": "mysql"}, "spec.name"),
        ("MySQLDatabase", {"name": "Information_Schema"}, "spec.name"),
        ("MySQLDatabase", {"name": "a-b"}, "spec.name"),
        ("MySQLDatabase", {"name": "a`b"}, "spec.name"),
        ("MySQLDatabase", {"name": "shop", "collation": "latin1_swedish_ci"}, "spec.collation"),
        ("MySQLDatabase", {"name": "shop", "cleanupPolicy": "Drop"}, "spec.cleanupPolicy"),
        ("MySQLUser", {"name": "root"}, "spec.name"),
        ("MySQLUser", {"name": "mysql-operator-sql"}, "spec.name"),
        ("MySQLUser", {"name": "a" * 33}, "spec.name"),
        ("MySQLUser", {"name": "u", "host": "a'b"}, "spec.host"),
        ("MySQLUser", {"name": "u", "authPlugin": "pam"}, "spec.authPlugin"),
        ("MySQLUser", {"name": "u", "maxUserConnections": -1}, "spec.maxUserConnections"),
        ("MySQLUser", {"name": "u", "passwordSecretKeyRef": {"name": "s"}}, "spec.passwordSecretKeyRef.key"),
        ("MySQLGrant", {"user": "u", "database": "shop", "privileges": ["SUPER"]}, "spec.privileges[0]"),
        ("MySQLGrant", {"user": "u", "database": "shop", "privileges": []}, "spec.privileges"),
        (
            "MySQLGrant",
            {"user": "u", "database": "shop", "privileges": ["SELECT", "SELECT"]},
            "spec.privileges",
        ),
        (
            "MySQLGrant",
            {"user": "u", "database": "shop", "privileges": ["ALL PRIVILEGES", "SELECT"]},
            "spec.privileges",
        ),
        (
            "MySQLGrant",
            {"user": "u", "database": "shop", "table": "t", "privileges": ["EXECUTE"]},
            "spec.privileges[0]",
        ),
        ("MySQLGrant", {"user": "u", "database": "sys", "privileges": ["SELECT"]}, "spec.database"),
        ("MySQLGrant", {"user": "u", "database": "*", "privileges": ["SELECT"]}, "spec.database"),
        ("MySQLGrant", {"user": "replication", "database": "shop", "privileges": ["SELECT"]}, "spec.user"),
    ],
)
def test_refusals_name_the_field(kind, spec, field):
    with pytest.raises(SpecError) as e:
        parse_sql_object(body(kind, **spec))
    assert e.value.field == field


def test_a_database_is_created_then_altered_only_where_it_differs():
    spec = DatabaseSpec("db", "shop", "utf8mb4", "utf8mb4_bin")
    (create,) = st.database(spec, None)
    assert create.sql == "CREATE DATABASE IF NOT EXISTS `shop` CHARACTER SET %s COLLATE %s"
    assert create.args == ("utf8mb4", "utf8mb4_bin")
    assert st.database(spec, st.DatabaseState("utf8mb4", "utf8mb4_bin")) == []
    (alter,) = st.database(spec, st.DatabaseState("utf8mb4", "utf8mb4_general_ci"))
    assert alter.sql.startswith("ALTER DATABASE `shop`")
    # no collation asked: the server's default for the character set stays
    assert st.database(DatabaseSpec("db", "shop"), st.DatabaseState("utf8mb4", "utf8mb4_uca1400_ai_ci")) == []
    assert st.drop_database(spec) == []  # Skip by default: data is never dropped unless asked
    assert (
        st.drop_database(DatabaseSpec("db", "shop", cleanup="Delete"))[0].sql
        == "DROP DATABASE IF EXISTS `shop`"
    )


def test_a_user_is_created_with_every_value_a_parameter():
    spec = UserSpec("db", "app", "10.%", None, 5, True, None)
    (create,) = st.user(spec, None, Flavor.MYSQL, "pw'--", False)
    assert create.sql == "CREATE USER %s@%s IDENTIFIED BY %s REQUIRE SSL WITH MAX_USER_CONNECTIONS %s"
    assert (
        create.args == ("app", "10.%", "pw'--", 5) and create.hide == ("pw'--",) and "pw" not in create.what
    )


@pytest.mark.parametrize(
    "flavor, plugin, clause, arg",
    [
        (Flavor.MYSQL, "caching_sha2_password", "IDENTIFIED WITH caching_sha2_password BY %s", "pw"),
        (Flavor.MYSQL, None, "IDENTIFIED BY %s", "pw"),
        # MariaDB logs the clause as typed: only a hash may be in it (values from a real server:
        # SELECT PASSWORD('pw'); the ed25519 plugin's hash of 'pw')
        (
            Flavor.MARIADB,
            None,
            "IDENTIFIED VIA mysql_native_password USING %s",
            "*D821809F681A40A6E379B50D0463EFAE20BDD122",
        ),
        (
            Flavor.MARIADB,
            "mysql_native_password",
            "IDENTIFIED VIA mysql_native_password USING %s",
            "*D821809F681A40A6E379B50D0463EFAE20BDD122",
        ),
        (Flavor.MARIADB, "ed25519", "IDENTIFIED VIA ed25519 USING %s", None),
    ],
)
def test_the_password_clause_per_flavor_and_plugin(flavor, plugin, clause, arg):
    spec = UserSpec("db", "app", auth_plugin=plugin)
    (create,) = st.user(spec, None, flavor, "pw", False)
    assert clause in create.sql
    secret = create.args[2]
    assert secret == arg if arg else secret not in ("pw", "") and len(secret) == 43
    assert secret in create.hide  # redacted from errors too
    if flavor is Flavor.MARIADB:
        assert "pw" not in create.args


def test_an_existing_user_is_altered_only_where_it_differs():
    spec = UserSpec("db", "app", max_user_connections=10, require_tls=True)
    same = st.UserState(10, "ANY", "caching_sha2_password")
    assert st.user(spec, same, Flavor.MYSQL, "pw", True) == []
    new_password = st.user(spec, same, Flavor.MYSQL, "pw2", False)
    assert [s.sql for s in new_password] == ["ALTER USER %s@%s IDENTIFIED BY %s"]
    drift = st.user(spec, st.UserState(0, "", "caching_sha2_password"), Flavor.MYSQL, "pw", True)
    assert [s.sql for s in drift] == [
        "ALTER USER %s@%s REQUIRE SSL",
        "ALTER USER %s@%s WITH MAX_USER_CONNECTIONS %s",
    ]
    # a stronger requirement set by hand (X509) is not lowered to REQUIRE SSL
    assert st.user(spec, st.UserState(10, "X509", "x"), Flavor.MYSQL, "pw", True) == []
    assert st.drop_user(spec)[0].args == ("app", "%")
    assert st.drop_user(UserSpec("db", "app", cleanup="Skip")) == []


def test_a_grant_is_exactly_its_privileges_on_its_target_and_leaves_other_targets():
    spec = GrantSpec("db", "app", "shop_db", ("SELECT", "INSERT"))
    held = {"shop_db.*": (frozenset({"SELECT", "DELETE"}), False), "other.*": (frozenset({"SELECT"}), False)}
    sql = [(s.sql, s.args) for s in st.grant(spec, held)]
    assert sql == [
        ("REVOKE DELETE ON `shop\\_db`.* FROM %s@%s", ("app", "%")),
        ("GRANT SELECT, INSERT ON `shop\\_db`.* TO %s@%s", ("app", "%")),
    ]
    assert st.grant(spec, {"shop_db.*": (frozenset({"SELECT", "INSERT"}), False)}) == []
    table = GrantSpec("db", "app", "shop_db", ("SELECT",), table="orders", grant_option=True)
    assert [s.sql for s in st.grant(table, {})] == [
        "GRANT SELECT ON `shop_db`.`orders` TO %s@%s WITH GRANT OPTION"
    ]
    # deleting: what it holds there, nothing elsewhere; an account that is gone holds nothing
    assert [s.sql for s in st.revoke(spec, held)] == ["REVOKE DELETE, SELECT ON `shop\\_db`.* FROM %s@%s"]
    assert st.revoke(spec, None) == []


def test_all_privileges_replaces_and_is_replaced_by_a_list():
    spec = GrantSpec("db", "app", "shop", ("ALL PRIVILEGES",))
    assert [s.sql for s in st.grant(spec, {"shop.*": (frozenset({"SELECT"}), False)})] == [
        "GRANT ALL PRIVILEGES ON `shop`.* TO %s@%s"
    ]
    narrower = GrantSpec("db", "app", "shop", ("SELECT",))
    assert [s.sql for s in st.grant(narrower, {"shop.*": (frozenset({"ALL PRIVILEGES"}), False)})] == [
        "REVOKE ALL PRIVILEGES ON `shop`.* FROM %s@%s",
        "GRANT SELECT ON `shop`.* TO %s@%s",
    ]


def test_status_moves_its_transition_time_only_when_ready_changes():
    ok = status_for(Result(True, "Applied", "in sync"), {}, 2, "T1")
    again = status_for(Result(True, "Applied", "in sync"), ok, 2, "T2")
    assert not status_changed(ok, again)
    broken = status_for(Result(False, "SQLFailed", "denied"), again, 3, "T3")
    assert status_changed(again, broken) and broken["conditions"][0]["lastTransitionTime"] == "T3"
    assert broken["observedGeneration"] == 3


def test_objects_of_the_same_name_in_two_namespaces_are_two_objects():
    from mysql_operator.sql_objects import SqlObjects

    def user(ns, cluster="db"):
        return {
            "kind": "MySQLUser",
            "metadata": {"name": "writer", "namespace": ns},
            "spec": {"clusterRef": {"name": cluster}, "name": "writer"},
        }

    objs = SqlObjects(object(), object())
    assert objs.seen(user("team-a")) == ("team-a", "db")
    assert objs.seen(user("team-b")) == ("team-b", "db")
    assert objs.due("team-a", "db", now=1.0) and objs.due("team-b", "db", now=1.0)
    objs.gone(user("team-b"))
    assert objs.due("team-a", "db", now=1.0) and not objs.due("team-b", "db", now=1.0)
    objs.seen(user("team-a", cluster="other"))  # moved (CEL forbids it; kept in one place anyway)
    assert not objs.due("team-a", "db", now=1.0) and objs.due("team-a", "other", now=1.0)


def test_a_login_failure_or_a_bug_is_said_on_every_object_not_only_logged():
    from mysql_operator.sql_objects import SqlObjects

    published = []

    class Recording(SqlObjects):
        def _publish(self, body, result):
            published.append((body["metadata"]["name"], result.reason, result.message))

        def _set_finalizers(self, body, finalizers):
            body["metadata"]["finalizers"] = finalizers
            return True

    def obj(kind, name, spec):
        return {
            "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "finalizers": ["mysql.operator.dev/sql-cleanup"]},
            "spec": {"clusterRef": {"name": "db"}, **spec},
        }

    objs = Recording(object(), object())
    objs.seen(obj("MySQLDatabase", "shop", {"name": "shop"}))
    objs.seen(obj("MySQLUser", "reader", {"name": "reader"}))

    def refused():
        raise InstanceError(
            "db-0: connect failed: (1045, \"Access denied for user 'mysql-operator-sql'\")", 1045
        )

    objs.sync("ns", "db", refused, Flavor.MYSQL, "")
    assert [(n, r) for n, r, _ in published] == [
        ("shop", "ClusterUnavailable"),
        ("reader", "ClusterUnavailable"),
    ]
    assert all("cannot log in to the primary as mysql-operator-sql" in msg for _, _, msg in published)

    published.clear()

    class Broken:  # every call but close() hits a bug
        def __getattr__(self, name):
            raise KeyError("a bug")

        def close(self):
            pass

    objs.sync("ns", "db", Broken, Flavor.MYSQL, "")
    assert [(n, r) for n, r, _ in published] == [("shop", "InternalError"), ("reader", "InternalError")]
    assert "KeyError" in published[0][2] and "a bug" not in published[0][2]


def test_a_watch_event_older_than_the_status_written_does_not_post_its_warning_again():
    from mysql_operator.sql_objects import SqlObjects
    from tests.support.fakes import RecordingKube

    class Recording(SqlObjects):
        """The API as the watch sees it: a status patch answers the body at the next version."""

        version = 10

        def _patch(self, body, patch, status=False):
            Recording.version += 1
            stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(Recording.version)}}
            return {**stored, **patch}

    def created(version):
        return {
            "kind": "MySQLUser",
            "metadata": {"name": "reader", "namespace": "ns", "resourceVersion": str(version)},
            "spec": {"clusterRef": {"name": "db"}, "name": "reader"},
        }

    kube = RecordingKube()
    objs = Recording(object(), kube)
    objs.seen(created(10))
    objs.without_cluster("ns", "db", "MySQLCluster db does not exist")
    objs.seen(created(10))  # the creation's event, delivered after the status was written
    objs.without_cluster("ns", "db", "MySQLCluster db does not exist")
    assert kube.calls == [("events", ["ClusterMissing"])]


def _body(kind, name, spec, created="2026-11-28T06:00:00Z", deleting=False):
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if deleting:
        meta.update(deletionTimestamp="2026-11-28T07:00:00Z", finalizers=["mysql.operator.dev/sql-cleanup"])
    return {"kind": kind, "metadata": meta, "spec": {"clusterRef": {"name": "db"}, **spec}}


def test_two_objects_managing_one_thing_and_what_the_cluster_keeps_are_conflicts():
    from mysql_operator.api.sql import parse_sql_object
    from mysql_operator.sql_claims import Owned, conflicts

    bodies = [
        _body("MySQLGrant", "late", {"user": "rw", "database": "shop", "privileges": ["INSERT"]}, "T2"),
        _body("MySQLGrant", "early", {"user": "rw", "database": "shop", "privileges": ["SELECT"]}, "T1"),
        # another target, another host: no conflict
        _body(
            "MySQLGrant", "table", {"user": "rw", "database": "shop", "table": "t", "privileges": ["SELECT"]}
        ),
        _body(
            "MySQLGrant",
            "local",
            {"user": "rw", "host": "localhost", "database": "shop", "privileges": ["SELECT"]},
        ),
        _body("MySQLUser", "rw", {"name": "rw"}, "T1"),
        _body("MySQLUser", "rw-again", {"name": "rw", "host": "%"}, "T3"),
        _body("MySQLUser", "app", {"name": "app"}),
        _body("MySQLGrant", "app-more", {"user": "app", "database": "shop", "privileges": ["SELECT"]}),
        _body("MySQLDatabase", "appdb", {"name": "appdb", "cleanupPolicy": "Delete"}),
        _body("MySQLDatabase", "shop", {"name": "shop"}),
    ]
    found = conflicts([(b, parse_sql_object(b)) for b in bodies], Owned("db", "appdb", "app"))
    reasons = {name: why for (_, _, name), why in found.items()}
    assert set(reasons) == {"late", "rw-again", "app", "app-more", "appdb"}
    assert "MySQLGrant early already manages the privileges of rw@% on shop.*" in reasons["late"]
    assert "MySQLUser rw already manages the account rw@%" in reasons["rw-again"]
    assert "cluster's own application account (spec.database of MySQLCluster db)" in reasons["app"]
    assert "spec.name: the database appdb is the cluster's own" in reasons["appdb"]


def test_an_object_in_conflict_is_not_applied_and_its_deletion_undoes_nothing(monkeypatch):
    from mysql_operator import sql_objects
    from mysql_operator.sql_claims import Owned
    from mysql_operator.sql_objects import SqlObjects

    published, ran, released = [], [], []

    class Recording(SqlObjects):
        def _publish(self, body, result):
            published.append((body["metadata"]["name"], result.reason))

        def _set_finalizers(self, body, finalizers):
            if sql_objects.FINALIZER not in finalizers:
                released.append(body["metadata"]["name"])
            return True

    class Server:
        def grants_of(self, user, host):
            return {}

        def run_statements(self, statements, secrets=()):
            ran.extend(s.sql for s in statements)
            return [s.what for s in statements]

        def close(self):
            pass

    monkeypatch.setattr(sql_objects.k, "post_events", lambda *a: None)
    objs = Recording(object(), object())
    grant = {"user": "rw", "database": "shop", "privileges": ["SELECT"], "cleanupPolicy": "Delete"}
    objs.seen(_body("MySQLGrant", "early", grant, "T1"))
    objs.seen(_body("MySQLGrant", "late", {**grant, "privileges": ["INSERT"]}, "T2"))
    objs.sync("ns", "db", Server, Flavor.MARIADB, "", Owned("db"))
    assert ("late", "Conflict") in published and ("early", "Applied") in published
    assert ran == ["GRANT SELECT ON `shop`.* TO %s@%s"], ran

    # the loser deleted: its finalizer goes, nothing is revoked from what the other keeps
    ran.clear()
    released.clear()
    objs.seen(_body("MySQLGrant", "late", {**grant, "privileges": ["INSERT"]}, "T2", deleting=True))
    objs.sync("ns", "db", Server, Flavor.MARIADB, "", Owned("db"))
    assert released == ["late"] and ran == ["GRANT SELECT ON `shop`.* TO %s@%s"]


def test_utf8_is_the_utf8mb3_the_server_reports_and_a_full_list_is_all_privileges_on_mysql():
    spec = DatabaseSpec("c", "shop", character_set="utf8", collation="utf8_general_ci")
    assert st.database(spec, st.DatabaseState("utf8mb3", "utf8mb3_general_ci")) == []
    assert st.database(spec, st.DatabaseState("utf8mb4", "utf8mb4_bin")) != []

    every = tuple(p for p in DATABASE_PRIVILEGES if p != "ALL PRIVILEGES")
    full = GrantSpec("c", "rw", "shop", every)
    shown = {"shop.*": (frozenset({"ALL PRIVILEGES"}), False)}  # MySQL's SHOW GRANTS of them
    assert st.grant(full, shown, Flavor.MYSQL) == []
    # MariaDB's ALL also holds DELETE HISTORY, which the list has not: it is narrowed
    assert [s.sql.split(" ON ")[0] for s in st.grant(full, shown, Flavor.MARIADB)][:1] == [
        "REVOKE ALL PRIVILEGES"
    ]
