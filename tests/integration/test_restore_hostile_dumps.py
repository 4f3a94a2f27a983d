"""A dump is a tenant's bytes, loaded by the load account the restore Job makes
(backup/load_account.py, db/accounts.py load_grants): ALL on the databases the dump creates, and
on *.* only what the tools' output needs beside them. That is all a hostile dump gets: no file of
the server, no other session, no grant table, no account, no global setting kept.
On real MariaDB and MySQL 9.7 servers (MySQL's client is the image's own, run by the sidecar
over verified TLS, as in the restore Job), a real S3 server (MinIO), through restore_all as the
restore Job runs it. Each attack is also run with a load account holding the whole ALL (the
control, the load account's grants replaced for the test): it does reach the server's files, the
other sessions or the grant tables there, so each test can fail."""

from __future__ import annotations

import tempfile
import uuid

import pymysql

import pytest

from mysql_operator.backup import load_account
from mysql_operator.backup.restore_types import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.db.accounts import Grant, restore_grants, restore_revokes
from mysql_operator.db.flavor import Flavor
from tests.support.backups import creds, hostile_backup, s3cfg
from tests.support.flavor_servers import HOST, run, servers, servers_and_tools, writable

PASSWORD = "restorer-Pw-5d2e"


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def env(request, tmp_path_factory):
    yield from servers_and_tools(request.param, tmp_path_factory)


def restore_account(flavor: str, server, *, contained: bool) -> None:
    """A new cluster's instance as init leaves it: fenced, the restore account made outside the
    binary log with the product's grants and revokes (`contained`), or with the whole ALL."""
    fence = "SET GLOBAL super_read_only = ON" if flavor == "mysql" else "SET GLOBAL read_only = ON"
    account = "'restorer'@'%'"
    revokes = restore_revokes(Flavor(flavor)) if contained else ()
    run(
        server,
        *writable(flavor),
        "SET SESSION sql_log_bin = 0",
        f"CREATE USER {account} IDENTIFIED BY '{PASSWORD}'",
        *(g.grant_sql().replace("%s@%s", account) for g in restore_grants(Flavor(flavor))),
        *(g.revoke_sql().replace("%s@%s", account) for g in revokes),
        fence,
    )


def new_target(env, prefix: str, *, contained: bool):
    """One new server with the restore account (see restore_account)."""
    (server,) = servers(env, 1, prefix)
    restore_account(env[0], server, contained=contained)
    return server


@pytest.fixture(params=[True, False], ids=["restore-account", "control-whole-all"])
def contained(request, monkeypatch) -> bool:
    """True: the product's accounts. False, the control: the restore account without its revokes
    and the dump run as a load account holding ALL PRIVILEGES on *.*."""
    if not request.param:
        monkeypatch.setattr(load_account, "load_grants", lambda _v: (Grant(("ALL PRIVILEGES",)),))
    return request.param


def restore_dump(env, s3server, server, statements: str) -> dict:
    """`statements` as the dump of a backup, restored into `server` as the restore account."""
    flavor, _, shared, _ = env
    bucket = s3server.create_bucket(f"hostile-{uuid.uuid4().hex[:12]}")
    version = "10.11.0" if flavor == "mariadb" else "9.7.4"
    folder = hostile_backup(s3server, bucket, "evil", statements, flavor, version)
    with tempfile.TemporaryDirectory(prefix="hostile-spool-") as spool:
        target = Target(
            HOST if shared else "127.0.0.1",
            server.port,
            "restorer",
            PASSWORD,
            tls_ca=str(shared / "ca.crt") if shared else None,
            tools_dir=str(shared) if shared else None,
            # as the restore Job loads: in pieces (a dump without table sections is one piece, the rest)
            load_workers=4,
            spool=spool,
        )
        return restore_all(
            {server.name: target}, Source(s3cfg(s3server, bucket), folder), creds(s3server), None
        )


def scratch(server) -> str:
    """A path the server may write (its secure_file_priv folder, else its tmpdir)."""
    folder = run(server, "SELECT COALESCE(NULLIF(@@secure_file_priv, ''), @@tmpdir)")[0][0]
    return f"{folder.rstrip('/')}/restore-{uuid.uuid4().hex}"


def exists_on(server, path: str) -> bool:
    """Whether the server can read `path` (as the test's admin account, which holds FILE)."""
    return run(server, f"SELECT LOAD_FILE('{path}') IS NOT NULL")[0][0] == 1


def test_a_dump_writing_a_file_on_the_server_fails_the_restore_and_writes_nothing(env, s3server, contained):
    server = new_target(env, "hfile", contained=contained)
    path = scratch(server)
    result = restore_dump(
        env,
        s3server,
        server,
        f"CREATE DATABASE loot;\nSELECT 'from the dump' INTO OUTFILE '{path}';\nCREATE TABLE loot.after (v INT);\n",
    )
    if not contained:
        assert result["ok"], result["message"]
        assert exists_on(server, path)  # the control: the attack is real
        return
    assert not result["ok"]
    assert server.name in result["message"] and "Access denied" in result["message"], result["message"]
    assert not exists_on(server, path)
    assert run(server, "SELECT COUNT(*) FROM mysql.user WHERE user = 'restorer'")[0][0] == 1  # Job ended
    assert run(server, "SELECT @@read_only")[0][0] == 1  # fenced again


def test_a_dump_reading_a_file_of_the_server_reads_nothing(env, s3server, contained):
    server = new_target(env, "hread", contained=contained)
    path = scratch(server)
    run(server, f"SELECT 'a secret of the server' INTO OUTFILE '{path}'")
    result = restore_dump(
        env,
        s3server,
        server,
        f"CREATE DATABASE loot;\nCREATE TABLE loot.t (v LONGBLOB);\nINSERT INTO loot.t VALUES (LOAD_FILE('{path}'));\n",
    )
    assert result["ok"], result["message"]  # LOAD_FILE without FILE is NULL, not an error
    (value,) = run(server, "SELECT v FROM loot.t")[0]
    if contained:
        assert value is None
    else:
        assert value == b"a secret of the server\n"


def test_a_dump_placing_a_library_for_create_function_soname_fails_before_it(env, s3server):
    server = new_target(env, "hlib", contained=True)
    plugin_dir = run(server, "SELECT @@plugin_dir")[0][0]
    library = f"restore-{uuid.uuid4().hex[:8]}.so"
    result = restore_dump(
        env,
        s3server,
        server,
        f"SELECT 0x7f454c46 INTO DUMPFILE '{plugin_dir.rstrip('/')}/{library}';\n"
        f"CREATE FUNCTION loot_exec RETURNS INTEGER SONAME '{library}';\n",
    )
    assert not result["ok"]
    assert "Access denied" in result["message"] and "line 1" in result["message"], result["message"]
    assert not exists_on(server, f"{plugin_dir.rstrip('/')}/{library}")
    assert run(server, "SELECT COUNT(*) FROM mysql.func")[0][0] == 0


def test_a_dump_reading_the_other_sessions_statements_sees_only_its_own(env, s3server, contained):
    """The operator's statements (an ALTER USER's password among them) are in the process list
    while they run: a dump with PROCESS could copy them into a table it restores."""
    server = new_target(env, "hproc", contained=contained)
    with server.connect() as other, other.cursor() as cur:
        cur.execute("SELECT 1")  # another account's session, open while the dump loads
        result = restore_dump(
            env,
            s3server,
            server,
            "CREATE DATABASE loot;\nCREATE TABLE loot.p AS SELECT USER FROM information_schema.PROCESSLIST "
            "WHERE USER NOT IN ('mysql-operator-load', 'system user', 'event_scheduler');\n",
        )
    assert result["ok"], result["message"]
    others = run(server, "SELECT COUNT(*) FROM loot.p")[0][0]
    assert others == 0 if contained else others >= 1


def test_a_dump_cannot_shut_the_server_down(env, s3server):
    server = new_target(env, "hdown", contained=True)
    result = restore_dump(env, s3server, server, "SHUTDOWN;\n")
    assert not result["ok"]
    assert "Access denied" in result["message"] or "denied" in result["message"].lower(), result["message"]
    assert run(server, "SELECT 1")[0][0] == 1  # still serving


KEEPER = "keeper-Pw-81c4"


def with_keeper(flavor: str, server) -> None:
    """Another account of the server (as the operator's and the application's are), made before the
    restore (and fenced again, as init leaves it): a dump must not change it."""
    fence = "SET GLOBAL super_read_only = ON" if flavor == "mysql" else "SET GLOBAL read_only = ON"
    run(
        server,
        *writable(flavor),
        "SET SESSION sql_log_bin = 0",
        f"CREATE USER 'keeper'@'%' IDENTIFIED BY '{KEEPER}'",
        fence,
    )


def logs_in(server, password: str) -> bool:
    try:
        conn = server.connect(user="keeper", password=password)
    except pymysql.err.OperationalError as e:
        assert e.args[0] == 1045, e  # access denied, nothing else
        return False
    conn.close()
    return True


def refused(result: dict, server) -> None:
    assert not result["ok"]
    assert server.name in result["message"] and "denied" in result["message"].lower(), result["message"]
    assert run(server, "SELECT COUNT(*) FROM mysql.user WHERE user = 'mysql-operator-load'")[0][0] == 0


def test_a_dump_altering_another_account_fails_and_the_account_keeps_its_password(env, s3server, contained):
    server = new_target(env, "halter", contained=contained)
    with_keeper(env[0], server)
    result = restore_dump(
        env, s3server, server, "CREATE DATABASE loot;\nALTER USER 'keeper'@'%' IDENTIFIED BY 'taken-Pw-1';\n"
    )
    if not contained:
        assert result["ok"], result["message"]
        assert logs_in(server, "taken-Pw-1")  # the control: the attack is real
        return
    refused(result, server)
    assert logs_in(server, KEEPER) and not logs_in(server, "taken-Pw-1")


# (a dump's statement, how many rows of the grant tables it made or changed), per flavor
GRANT_TABLE_WRITES = {
    "row-into-mysql.db": (
        "INSERT INTO mysql.db (Host, Db, User, Select_priv) VALUES ('%', 'loot', 'keeper', 'Y');",
        "SELECT COUNT(*) FROM mysql.db WHERE User = 'keeper'",
    ),
    "create-user": (
        "CREATE USER 'evil'@'%' IDENTIFIED BY 'x';",
        "SELECT COUNT(*) FROM mysql.user WHERE user = 'evil'",
    ),
    "update-an-account": {  # MariaDB keeps accounts in mysql.global_priv (mysql.user is a view)
        "mysql": (
            "UPDATE mysql.user SET max_connections = 7 WHERE User = 'keeper';",
            "SELECT COUNT(*) FROM mysql.user WHERE User = 'keeper' AND max_connections = 7",
        ),
        "mariadb": (
            "UPDATE mysql.global_priv SET Priv = JSON_SET(Priv, '$.max_connections', 7) WHERE User = 'keeper';",
            "SELECT COUNT(*) FROM mysql.global_priv WHERE User = 'keeper' AND JSON_VALUE(Priv, '$.max_connections') = 7",
        ),
    },
}


@pytest.mark.parametrize("attack", sorted(GRANT_TABLE_WRITES))
def test_a_dump_writing_the_grant_tables_fails_and_writes_nothing(env, s3server, contained, attack):
    case = GRANT_TABLE_WRITES[attack]
    statement, count = case[env[0]] if isinstance(case, dict) else case
    server = new_target(env, "hgrant", contained=contained)
    with_keeper(env[0], server)
    result = restore_dump(env, s3server, server, f"CREATE DATABASE loot;\n{statement}\n")
    written = run(server, count)[0][0]
    if not contained:
        assert result["ok"], result["message"]
        assert written == 1  # the control: the attack is real
        return
    refused(result, server)
    assert written == 0


def test_a_dump_creating_a_table_in_a_system_database_fails_naming_it(env, s3server):
    server = new_target(env, "hsys", contained=True)
    result = restore_dump(
        env, s3server, server, "CREATE DATABASE IF NOT EXISTS mysql;\nCREATE TABLE mysql.loot (v INT);\n"
    )
    assert not result["ok"]
    assert "database mysql: a system database, never restored" in result["message"], result["message"]
    assert run(server, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'loot'")[0][0] == 0


def test_a_dump_changing_a_global_setting_fails_and_the_setting_is_as_it_was(env, s3server):
    """MariaDB's load account may set the binary log's settings (BINLOG ADMIN, for its session's
    sql_log_bin): a change is set back and fails the restore; MySQL's may set none."""
    server = new_target(env, "hglobal", contained=True)
    (before,) = run(server, "SELECT @@GLOBAL.binlog_format")[0]
    result = restore_dump(
        env,
        s3server,
        server,
        "CREATE DATABASE loot;\nSET GLOBAL binlog_format = 'STATEMENT';\nCREATE TABLE loot.t (v INT);\n",
    )
    assert not result["ok"]
    if env[0] == "mariadb":
        assert (
            f"the load changed the global setting binlog_format from {before} to STATEMENT"
            in result["message"]
        )
    else:
        assert "denied" in result["message"].lower(), result["message"]
    assert run(server, "SELECT @@GLOBAL.binlog_format")[0][0] == before
