"""A dump is a tenant's bytes, loaded by the restore account: what its ALL PRIVILEGES holds minus
what no dump the tools write needs (db/accounts.py restore_revokes) is all a hostile dump gets.
On real MariaDB and MySQL 9.7 servers (MySQL's client is the image's own, run by the sidecar
over verified TLS, as in the restore Job), a real S3 server (MinIO), through restore_all as the
restore Job runs it. Each attack is also run by an account holding the whole ALL (the control):
it does reach the server's files or the other sessions there, so each test can fail."""

from __future__ import annotations

import uuid

import pytest

from mysql_operator.backup.restore import Source, Target
from mysql_operator.backup.restore_job import restore_all
from mysql_operator.db.accounts import restore_grants, restore_revokes
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


MYSQL_KEEPS_SHUTDOWN = "MySQL's restore account keeps SHUTDOWN: CLONE (the physical restore) restarts with it"


def restore_dump(env, s3server, server, statements: str) -> dict:
    """`statements` as the dump of a backup, restored into `server` as the restore account."""
    flavor, _, shared, _ = env
    bucket = s3server.create_bucket(f"hostile-{uuid.uuid4().hex[:12]}")
    version = "10.11.0" if flavor == "mariadb" else "9.7.4"
    folder = hostile_backup(s3server, bucket, "evil", statements, flavor, version)
    target = Target(
        HOST if shared else "127.0.0.1",
        server.port,
        "restorer",
        PASSWORD,
        tls_ca=str(shared / "ca.crt") if shared else None,
        tools_dir=str(shared) if shared else None,
    )
    return restore_all({server.name: target}, Source(s3cfg(s3server, bucket), folder), creds(s3server), None)


def scratch(server) -> str:
    """A path the server may write (its secure_file_priv folder, else its tmpdir)."""
    folder = run(server, "SELECT COALESCE(NULLIF(@@secure_file_priv, ''), @@tmpdir)")[0][0]
    return f"{folder.rstrip('/')}/restore-{uuid.uuid4().hex}"


def exists_on(server, path: str) -> bool:
    """Whether the server can read `path` (as the test's admin account, which holds FILE)."""
    return run(server, f"SELECT LOAD_FILE('{path}') IS NOT NULL")[0][0] == 1


@pytest.mark.parametrize("contained", [True, False], ids=["restore-account", "control-whole-all"])
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


@pytest.mark.parametrize("contained", [True, False], ids=["restore-account", "control-whole-all"])
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


@pytest.mark.parametrize("contained", [True, False], ids=["restore-account", "control-whole-all"])
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
            "WHERE USER NOT IN ('restorer', 'system user', 'event_scheduler');\n",
        )
    assert result["ok"], result["message"]
    others = run(server, "SELECT COUNT(*) FROM loot.p")[0][0]
    assert others == 0 if contained else others >= 1


def test_a_dump_cannot_shut_the_server_down(env, s3server):
    if env[0] == "mysql":
        pytest.skip(reason=MYSQL_KEEPS_SHUTDOWN)
    server = new_target(env, "hdown", contained=True)
    result = restore_dump(env, s3server, server, "SHUTDOWN;\n")
    assert not result["ok"]
    assert "Access denied" in result["message"] or "denied" in result["message"].lower(), result["message"]
    assert run(server, "SELECT 1")[0][0] == 1  # still serving
