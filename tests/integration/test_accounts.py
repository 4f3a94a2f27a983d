"""Every SQL account the operator manages, on real MariaDB servers: SHOW GRANTS equals the list of
mysql_operator/db/accounts.py, the engine converges older accounts to it, an operator account from
before the lists (ALL PRIVILEGES WITH GRANT OPTION) is reduced and still fails over, and each
account is refused what it must not do. (The init script's accounts: test_manifests_scripts.py;
backups taken with the backup account: test_backup.py; failover with the listed operator account:
test_replication*.py.)"""

from __future__ import annotations

import pymysql
import pytest

from mysql_operator import topology as t
from mysql_operator.api.sql import UserSpec
from mysql_operator.db import accounts, password_hash, statements
from mysql_operator.db import grant_plans
from mysql_operator.db.flavor import Flavor
from mysql_operator.db.instance import Instance
from mysql_operator.members import ClusterState, Credentials, Member
from mysql_operator.replication import ReplicationEngine
from tests.integration.helpers_replication import APP, DB, REPL, Cluster, wait_replicated
from tests.support.mariadb import OPERATOR_USER
from tests.support.wait import wait_for

V = Flavor.MARIADB
BACKUP = Credentials("bkp", "bkp-pw-5d1e07")
DENIED = {1044, 1045, 1095, 1142, 1143, 1227, 1370}  # access denied (database, user, thread, table, ...)


def grants(server, user, host="%"):
    return grant_plans.parse_show_grants(
        [r[0] for r in server.query("SHOW GRANTS FOR %s@%s", (user, host))], V
    )


def cluster(factory, n, admin=None, prefix="acc", **engine):
    servers = factory.create(n, prefix=f"{prefix}{len(factory.servers)}")
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
    members = [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)]
    engine = ReplicationEngine(
        members,
        admin or Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        t.Settings(instances=n, failover_delay_seconds=1.0),
        app=APP,
        app_database=DB,
        backup=BACKUP,
        apply_timeout=20,
        **engine,
    )
    c = Cluster(servers, engine)
    c.converge()
    return c


def refused(server, user, password, sql, database=None):
    conn = server.connect(user=user, password=password, database=database)
    try:
        with conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(sql)
        return e.value.args[0]
    finally:
        conn.close()


def test_engine_gives_each_account_exactly_its_list(factory):
    c = cluster(factory, 2)
    for s in c.servers:  # the primary's statements replicate
        wait_for(lambda s=s: grants(s, BACKUP.user), 10, f"the backup account on {s.name}")
        assert grants(s, REPL.user) == grant_plans.expected(accounts.replication_grants(V))
        assert grants(s, APP.user) == grant_plans.expected(accounts.app_grants(V, DB))
        assert grants(s, BACKUP.user) == grant_plans.expected(accounts.backup_grants(V))
        # the operator's account of these tests (tests/support/mariadb.py) holds exactly its list
        assert grants(s, OPERATOR_USER, "127.0.0.1") == grant_plans.expected(accounts.operator_grants(V, DB))


def test_no_password_reaches_the_binary_log(factory):
    """MariaDB logs CREATE/ALTER USER as typed (and replicas and the binlog archive keep it): the
    operator's accounts, a rotation and a MySQLUser's statements put only hashes there, and each
    account logs in with its password (so the hash was the right one)."""
    c = cluster(factory, 2, prefix="nolog")
    primary, replica = c.primary, next(s for s in c.servers if s is not c.primary)
    new = Credentials(APP.user, "rotated-Pw-3c81e5")
    assert c.engine.rotate(primary.name, [new], []).done == {(APP.user, "%")}
    admin = Instance(primary.host, primary.port, OPERATOR_USER, factory.admin_password)
    for s in (primary, replica):  # not replicated: a replica without it stops at the CREATE USER
        s.query("INSTALL SONAME 'auth_ed25519'")
    plugin_user = UserSpec("u", "plug-user", auth_plugin="ed25519")
    admin.run_statements(statements.user(plugin_user, None, V, "plug-Pw-0e44d2", False))
    native_user = UserSpec("u", "native-user")
    admin.run_statements(statements.user(native_user, None, V, "native-Pw-a9f310", False))
    # the same hashes as the server's own (PASSWORD(), the plugin's USING PASSWORD())
    assert primary.query("SELECT PASSWORD(%s)", ("pw",))[0][0] == password_hash.native("pw")
    logged = "\n".join(str(r[-1]) for r in primary.query("SHOW BINLOG EVENTS"))
    assert "IDENTIFIED VIA ed25519 USING" in logged and "native-user" in logged  # it looked at them
    for pw in (
        APP.password,
        REPL.password,
        BACKUP.password,
        new.password,
        "plug-Pw-0e44d2",
        "native-Pw-a9f310",
    ):
        assert pw not in logged
    wait_for(
        lambda: replica.query("SELECT COUNT(*) FROM mysql.user WHERE user = 'native-user'")[0][0],
        10,
        "replicated",
    )
    for s in (primary, replica):
        s.connect(user=APP.user, password=new.password).close()
        s.connect(user="native-user", password="native-Pw-a9f310").close()
    server_hash = primary.query(
        "SELECT JSON_VALUE(Priv, '$.authentication_string') FROM mysql.global_priv WHERE User = 'plug-user'"
    )[0][0]
    assert server_hash == password_hash.ed25519("plug-Pw-0e44d2")
    primary.query(
        "CREATE USER 'plug-check'@'%%' IDENTIFIED VIA ed25519 USING PASSWORD(%s)", ("plug-Pw-0e44d2",)
    )
    assert (
        primary.query(
            "SELECT JSON_VALUE(Priv, '$.authentication_string') FROM mysql.global_priv WHERE User = 'plug-check'"
        )[0][0]
        == server_hash
    )


def test_engine_converges_accounts_made_with_more(factory):
    (s,) = factory.create(1, prefix="accold")
    s.name = "db-0"
    s.query("SET GLOBAL read_only = 0")
    for sql in (  # what the init script and bootstrap made before the lists, and a tenant's extras
        f"CREATE USER '{REPL.user}'@'%' IDENTIFIED BY '{REPL.password}'",
        f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{REPL.user}'@'%'",
        f"CREATE DATABASE {DB}",
        f"CREATE USER '{APP.user}'@'%' IDENTIFIED BY 'old-password'",
        f"GRANT ALL PRIVILEGES ON {DB}.* TO '{APP.user}'@'%' WITH GRANT OPTION",
        f"GRANT PROCESS ON *.* TO '{APP.user}'@'%'",
        f"GRANT SELECT ON mysql.* TO '{APP.user}'@'%'",
        f"CREATE USER '{BACKUP.user}'@'%' IDENTIFIED BY 'x'",
        f"GRANT ALL PRIVILEGES ON *.* TO '{BACKUP.user}'@'%'",
    ):
        s.query(sql)
    s.query("SET GLOBAL read_only = 1")
    members = [Member(s.name, 0, s.host, s.port)]
    engine = ReplicationEngine(
        members,
        Credentials(OPERATOR_USER, factory.admin_password, "127.0.0.1"),
        REPL,
        t.Settings(instances=1),
        app=APP,
        app_database=DB,
        backup=BACKUP,
    )
    c = Cluster([s], engine, ClusterState("db-0"))  # an existing cluster: its primary is recorded
    c.converge()
    assert grants(s, REPL.user) == grant_plans.expected(accounts.replication_grants(V))
    assert grants(s, APP.user) == grant_plans.expected(accounts.app_grants(V, DB))
    assert grants(s, BACKUP.user) == grant_plans.expected(accounts.backup_grants(V))
    s.connect(user=APP.user, password=APP.password).close()  # the Secret's password, again
    # converged once per primary: a healthy loop says nothing more to the server
    before = s.query("SELECT @@gtid_binlog_pos")
    c.converge()
    assert s.query("SELECT @@gtid_binlog_pos") == before


def test_an_operator_account_from_before_the_lists_is_reduced_and_still_fails_over(factory):
    servers = factory.create(3, prefix="acclegacy")
    legacy = Credentials("legacy-operator", "legacy-pw-3c9a", "%")
    for s in servers:  # as the init script made it on every server, outside the binary log
        conn = s.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"CREATE USER '{legacy.user}'@'%' IDENTIFIED BY '{legacy.password}'")
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{legacy.user}'@'%' WITH GRANT OPTION")
        conn.close()
    for k, s in enumerate(servers):
        s.name = f"db-{k}"
    members = [Member(s.name, k, s.host, s.port) for k, s in enumerate(servers)]

    def engine(**kw):
        return ReplicationEngine(
            members,
            legacy,
            REPL,
            t.Settings(instances=3, failover_delay_seconds=1.0),
            app=APP,
            app_database=DB,
            backup=BACKUP,
            apply_timeout=20,
            **kw,
        )

    c = Cluster(servers, engine(reduce_admin=True))
    out = c.converge()
    assert c.state.current_primary == "db-0", out
    assert not c.reconcile().steps  # healthy: nothing left to do
    want = grant_plans.expected(accounts.operator_grants(V, DB))
    for s in servers:  # one REVOKE on the primary, replicated
        wait_for(lambda s=s: grants(s, legacy.user) == want, 10, f"the reduced operator account on {s.name}")
    assert "SUPER" not in want["*.*"][0] and "ALL PRIVILEGES" not in want["*.*"][0]
    assert refused(servers[0], legacy.user, legacy.password, "CREATE DATABASE other") in DENIED

    # a new operator process: new connections, with only the listed privileges
    c.engine.close()
    c.engine = engine(reduce_admin=True)
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, note VARCHAR(40))")
        cur.execute(f"INSERT INTO {DB}.t VALUES (1, 'before')")
    wait_replicated(c, {1})
    servers[0].kill9()
    c.converge(until=t.Failover, timeout=30)
    c.converge(timeout=30)
    assert c.state.current_primary != "db-0"
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (2, 'after the failover')")
    c.converge(desired="db-2" if c.state.current_primary == "db-1" else "db-1", timeout=30)  # switchover
    with c.app_conn(c.primary) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES (3, 'after the switchover')")
    wait_replicated(c, {1, 2, 3}, servers=servers[1:])


def test_a_narrower_operator_account_is_left_alone(factory):
    (s,) = factory.create(1, prefix="accnarrow")
    i = Instance(s.host, s.port, OPERATOR_USER, factory.admin_password)
    # a list it lacks part of (SHUTDOWN) changes nothing: the account was made by someone else
    more = list(accounts.operator_grants(V, DB)) + [accounts.Grant(("SHUTDOWN",), "*.*", grant_option=True)]
    before = grants(s, OPERATOR_USER, "127.0.0.1")
    assert i.shed_privileges(more, "127.0.0.1") == []
    assert grants(s, OPERATOR_USER, "127.0.0.1") == before


def test_each_account_is_refused_what_it_must_not_do(factory):
    c = cluster(factory, 2, prefix="accdeny")
    p, r = c.primary, c.server("db-1")
    with c.app_conn(p) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, note VARCHAR(40))")
        cur.execute(f"INSERT INTO {DB}.t VALUES (1, 'secret')")
        cur.execute(f"DROP TABLE IF EXISTS {DB}.scratch")  # the app account: everything on its database
    wait_replicated(c, {1})

    # backup: reads, never writes - on the writable primary either
    bk = (BACKUP.user, BACKUP.password)
    conn = p.connect(user=bk[0], password=bk[1])
    with conn.cursor() as cur:
        cur.execute(f"SELECT note FROM {DB}.t")
        assert cur.fetchall() == (("secret",),)
    conn.close()
    other = p.connect()  # someone else's connection
    other_id = other.thread_id()
    for sql in (
        f"INSERT INTO {DB}.t VALUES (2, 'x')",
        f"UPDATE {DB}.t SET note = 'x'",
        f"DELETE FROM {DB}.t",
        f"CREATE TABLE {DB}.u (id INT)",
        f"DROP TABLE {DB}.t",
        f"ALTER TABLE {DB}.t ADD COLUMN c INT",
        "CREATE DATABASE other",
        f"DROP DATABASE {DB}",
        "CREATE USER 'x'@'%'",
        f"GRANT SELECT ON *.* TO '{APP.user}'@'%'",
        "SET GLOBAL read_only = 1",
        "SELECT * FROM mysql.global_priv INTO OUTFILE '/tmp/x'",
        f"KILL {other_id}",
        "STOP SLAVE",
    ):
        assert refused(p, *bk, sql) in DENIED, sql
    other.close()

    # replication: reads the binary log, not tables
    for sql in (
        f"SELECT * FROM {DB}.t",
        "SELECT * FROM mysql.global_priv",
        f"INSERT INTO {DB}.t VALUES (3, 'x')",
    ):
        assert refused(p, REPL.user, REPL.password, sql) in DENIED, sql
    conn = p.connect(user=REPL.user, password=REPL.password)
    with conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        assert DB not in {row[0] for row in cur.fetchall()}
    conn.close()

    # app: its database only - nothing of mysql.*, no accounts, no server settings
    for sql in (
        "SELECT * FROM mysql.global_priv",
        "SELECT * FROM mysql.user",
        "INSERT INTO mysql.global_priv (Host, User, Priv) VALUES ('%', 'x', '{}')",
        "UPDATE mysql.global_priv SET Priv = '{}'",
        "CREATE USER 'x'@'%'",
        "DROP USER 'replication'@'%'",
        "CREATE DATABASE other",
        "SET GLOBAL read_only = 0",
        "SHOW SLAVE STATUS",
        "GRANT ALL PRIVILEGES ON *.* TO 'x'@'%'",
    ):
        assert refused(p, APP.user, APP.password, sql) in DENIED, sql
    # and on a read-only replica it writes nothing (no READ_ONLY ADMIN)
    assert refused(r, APP.user, APP.password, f"INSERT INTO {DB}.t VALUES (4, 'x')") == 1290
