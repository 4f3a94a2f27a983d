"""Pure backup logic: command lines per flavor, GTID from dumps, source choice, manifest, paths."""

from __future__ import annotations

import pytest

from mysql_operator.api import S3, SecretKeys
from mysql_operator.backup import commands, dump_text
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.manifest import Manifest, ManifestError
from mysql_operator.backup.restore_source import manifest_key
from mysql_operator.backup.restore_types import RestoreError, Source
from mysql_operator.backup.backup_source import choose_source
from mysql_operator.backup.backup_types import BackupError
from mysql_operator.db.flavor import Flavor, ServerVersion
from mysql_operator.db.gtid import MariaDBGtids
from mysql_operator.db.observation import Observation, ReplicaStatus

MARIADB = ServerVersion(Flavor.MARIADB, 10, 11, 6)
MYSQL84 = ServerVersion(Flavor.MYSQL, 8, 4, 3)
MYSQL80 = ServerVersion(Flavor.MYSQL, 8, 0, 20)
EP = Endpoint("db-1.db-headless.ns.svc", 3306, "mysql-operator")


def test_mariadb_dump_consistent_snapshot_with_gtid_and_no_password():
    argv = commands.dump_command(MARIADB, EP, "/tmp/x/client.cnf", ["app", "shop"])
    assert argv[0] == "mariadb-dump"
    assert argv[1] == "--defaults-extra-file=/tmp/x/client.cnf"
    for opt in (
        "--single-transaction",
        "--master-data=2",
        "--gtid",
        "--routines",
        "--triggers",
        "--events",
        "--hex-blob",
        "--quick",
    ):
        assert opt in argv
    assert argv[-3:] == ["--databases", "app", "shop"]
    assert not any("password" in a for a in argv)


def test_mysqldump_uses_source_data_from_8026_and_sets_gtid_purged():
    argv = commands.dump_command(MYSQL84, EP, "/f", ["app"])
    assert argv[0] == "mysqldump"
    assert "--source-data=2" in argv and "--master-data=2" not in argv
    assert "--set-gtid-purged=ON" in argv and "--single-transaction" in argv
    old = commands.dump_command(MYSQL80, EP, "/f", ["app"])
    assert "--master-data=2" in old and "--source-data=2" not in old


def test_dump_refuses_nothing_to_back_up():
    with pytest.raises(commands.CommandError, match="no databases"):
        commands.dump_command(MARIADB, EP, "/f", [])


def test_system_databases_are_not_dumped():
    assert commands.user_databases(
        ["mysql", "app", "sys", "information_schema", "performance_schema", "a"]
    ) == ["a", "app"]


def test_client_commands_and_gtid_statements_per_flavor():
    m = commands.client_command(MARIADB, EP, "/f")
    assert m[0] == "mariadb" and "--init-command=SET SESSION sql_log_bin=0" in m
    assert commands.client_command(MYSQL84, EP, "/f")[0] == "mysql"
    refuse = "SET GLOBAL local_infile = 0"
    assert commands.before_load_sql(MYSQL84) == [refuse, "RESET BINARY LOGS AND GTIDS"]
    assert commands.before_load_sql(MYSQL80) == [refuse, "RESET MASTER"]
    assert commands.before_load_sql(MARIADB) == [refuse]


@pytest.mark.parametrize(
    "flavor, version, switch",
    [
        (Flavor.MYSQL, (9, 7, 4), ["--commands=OFF"]),
        (Flavor.MYSQL, (8, 4, 3), []),
        (Flavor.MARIADB, (10, 11, 7), []),
        (Flavor.MARIADB, (10, 11, 8), ["--sandbox"]),
        (Flavor.MARIADB, (10, 6, 18), ["--sandbox"]),
        (Flavor.MARIADB, (11, 3, 2), []),
        (Flavor.MARIADB, (11, 4, 2), ["--sandbox"]),
        (Flavor.MARIADB, (11, 8, 0), ["--sandbox"]),
    ],
)
def test_the_client_turns_its_commands_off_where_it_has_the_option(flavor, version, switch):
    v = ServerVersion(flavor, *version)
    assert commands.command_switch(v) == switch
    argv = commands.client_command(v, EP, "/f")
    assert all(s in argv for s in switch) and "--binary-mode" in argv


@pytest.mark.parametrize("version", [MARIADB, MYSQL84, MYSQL80])
def test_the_client_loading_a_dump_never_reads_a_local_file(version):
    argv = commands.client_command(version, EP, "/f")
    assert "--local-infile=0" in argv
    assert "--binary-mode" in argv  # client commands off when reading a pipe, in both clients
    assert commands.after_load_sql(MARIADB, "0-1-42") == [
        ("RESET MASTER", ()),
        ("SET GLOBAL gtid_binlog_state = %s", ("0-1-42",)),
        ("SET GLOBAL gtid_slave_pos = %s", ("0-1-42",)),
    ]
    assert commands.after_load_sql(MYSQL84, "uuid:1-5") == [("SET GLOBAL gtid_purged = %s", ("uuid:1-5",))]
    assert commands.after_load_sql(MYSQL84, None) == []


@pytest.mark.parametrize("version", [MARIADB, MYSQL84, MYSQL80])
def test_tools_connect_over_tls_verifying_the_ca_and_host_name_when_given_one(version):
    ca = "/etc/mysql-operator/ca/ca.crt"
    mariadb = version.flavor is Flavor.MARIADB
    verify = (
        ["--ssl", f"--ssl-ca={ca}", "--ssl-verify-server-cert"]
        if mariadb
        else ["--ssl-mode=VERIFY_IDENTITY", f"--ssl-ca={ca}"]
    )
    plain = ["--skip-ssl"] if mariadb else ["--ssl-mode=DISABLED"]  # never the tools' unverified TLS
    assert commands.tls_options(version, ca) == verify and commands.tls_options(version, None) == plain
    for argv, bare in (
        (
            commands.dump_command(version, EP, "/f", ["app"], ca),
            commands.dump_command(version, EP, "/f", ["app"]),
        ),
        (commands.client_command(version, EP, "/f", ca), commands.client_command(version, EP, "/f")),
    ):
        i = argv.index("--protocol=TCP") + 1
        assert argv[i : i + len(verify)] == verify and not any(
            a.startswith("--ssl") for a in argv[i + len(verify) :]
        )
        assert [a for a in bare if "ssl" in a] == plain
        assert argv[:i] == bare[:i] and argv[i + len(verify) :] == bare[i + len(plain) :]


def test_a_refusal_of_a_connection_without_tls_says_to_give_the_ca():
    hint = "connected without TLS, which a server that requires TLS refuses: give --tls-ca"
    mysql = "db-0: cannot connect: (3159, 'Connections using insecure transport are prohibited while ...')"
    mariadb = "db-0: cannot connect: (1045, \"Access denied for user 'u'@'h' (using password: YES)\")"
    assert hint in commands.tls_hint(mysql, None) and hint in commands.tls_hint(mariadb, None)
    assert commands.tls_hint(mariadb, "/ca.crt") == mariadb  # over TLS: a wrong password is just that
    privilege = "db-0: DROP failed: (1044, \"Access denied for user 'u'@'h' to database 'mysql'\")"
    assert commands.tls_hint(privilege, None) == privilege


def test_option_file_quotes_the_password():
    text = commands.client_option_file("u", 'p"w\\x')
    assert 'password="p\\"w\\\\x"' in text


def test_compressor_unknown_is_named():
    with pytest.raises(commands.CommandError, match="brotli"):
        commands.compressor("brotli")


def test_gtid_from_mariadb_dump_head_and_11x_tail():
    head = (
        "-- MariaDB dump 10.19\n--\n-- Position to start replication or point-in-time recovery from\n"
        "--\n\n-- CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000001', MASTER_LOG_POS=1234;\n\n"
        "--\n-- GTID to start replication from\n--\n\n-- SET GLOBAL gtid_slave_pos='0-1-17';\n"
    )
    assert dump_text.gtid_from_dump(Flavor.MARIADB, head) == "0-1-17"
    assert (
        dump_text.gtid_from_dump(Flavor.MARIADB, "-- SET GLOBAL gtid_slave_pos='0-1-5,1-2-9';\n")
        == "0-1-5,1-2-9"
    )
    assert dump_text.gtid_from_dump(Flavor.MARIADB, "INSERT INTO t VALUES (1);\n") is None


def test_gtid_from_mysqldump_multiline_set():
    text = (
        "SET @@SESSION.SQL_LOG_BIN= 0;\n\n--\n-- GTID state at the beginning of the backup \n--\n\n"
        "SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,\n"
        "4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3';\n"
    )
    assert dump_text.gtid_from_dump(Flavor.MYSQL, text) == (
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:1-3"
    )


def _replica(io="Yes", sql=True, lag=0):
    return Observation(
        reachable=True,
        version=MARIADB,
        read_only=True,
        replica=ReplicaStatus(
            source_host="p",
            source_port=3306,
            io_state=io,
            sql_running=sql,
            io_errno=0,
            io_error="",
            sql_errno=0,
            sql_error="",
            seconds_behind=lag,
            received=MariaDBGtids.parse(""),
        ),
    )


PRIMARY = Observation(reachable=True, version=MARIADB, read_only=False)
DOWN = Observation(reachable=False, error="refused")


def test_source_prefers_least_lagged_healthy_replica():
    assert choose_source([("db-0", PRIMARY), ("db-1", _replica(lag=5)), ("db-2", _replica(lag=1))]) == "db-2"


def test_source_skips_broken_and_lagging_replicas_then_uses_primary():
    obs = [
        ("db-0", PRIMARY),
        ("db-1", _replica(io="Connecting")),
        ("db-2", _replica(lag=900)),
        ("db-3", _replica(sql=False)),
        ("db-4", DOWN),
    ]
    assert choose_source(obs, max_lag_seconds=300) == "db-0"


def test_source_none_is_a_clear_error():
    with pytest.raises(BackupError, match=r"db-0: unreachable \(refused\); db-1: replica not healthy"):
        choose_source([("db-0", DOWN), ("db-1", _replica(io="No"))])


def _manifest(**kw):
    base = dict(
        cluster="c",
        namespace="ns",
        backup="b",
        flavor="mariadb",
        server_version="10.11.6",
        gtid_position="0-1-5",
        source_instance="c-1",
        started_at="2025-01-01T00:00:00Z",
        completed_at="2025-01-01T00:01:00Z",
        data_key="p/c/b/backup.sql.zst",
        compression="zstd",
        compressed_size=10,
        uncompressed_size=100,
        sha256="a" * 64,
        databases=("app",),
    )
    base.update(kw)
    return Manifest(**base)


def test_manifest_round_trip():
    m = _manifest()
    assert Manifest.from_json(m.to_json()) == m


@pytest.mark.parametrize(
    "data, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"cluster": "c"}', "lacks"),
        (_manifest(sha256="xyz").to_json(), "not a hex SHA-256"),
        (_manifest(compressed_size=0).to_json(), "positive"),
        (_manifest().to_json().replace(b'"format": 1', b'"format": 9'), "upgrade the operator"),
    ],
)
def test_damaged_manifest_is_refused_with_reason(data, message):
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(data, "s3://b/m")


S3CFG = S3(bucket="bk", credentials_secret=SecretKeys("s"), prefix="/backups/")


@pytest.mark.parametrize(
    "path, key",
    [
        ("c/b", "backups/c/b/manifest.json"),
        ("c/b/", "backups/c/b/manifest.json"),
        ("c/b/manifest.json", "backups/c/b/manifest.json"),
        ("c/b/backup.sql.zst", "backups/c/b/manifest.json"),
        ("s3://bk/backups/c/b", "backups/c/b/manifest.json"),
    ],
)
def test_manifest_key_from_restore_path_or_location(path, key):
    assert manifest_key(Source(S3CFG, path)) == key


def test_location_in_another_bucket_is_refused():
    with pytest.raises(RestoreError, match="not in bucket"):
        manifest_key(Source(S3CFG, "s3://other/c/b"))


# ---- events: the source primary's statuses in the manifest, given to the restored cluster
def test_manifest_keeps_the_events_statuses_and_an_older_one_has_none():
    m = _manifest(events=(("app", "tick", "ENABLED"), ("app", "off", "DISABLED")))
    assert Manifest.from_json(m.to_json()) == m
    assert b'"events"' not in _manifest().to_json()  # not known: absent, as in older manifests
    assert Manifest.from_json(_manifest().to_json()).events is None
    damaged = _manifest().to_json().replace(b'"format"', b'"events": [["app", "x"]], "format"')
    with pytest.raises(ManifestError, match=r"events must be a list of \[schema, name, status\]"):
        Manifest.from_json(damaged, "s3://b/m")


def test_manifest_keeps_the_tables_and_their_note_and_an_older_one_has_none():
    tables = {
        "app.t": {"rows": 3, "digest": "0123456789abcdef"},
        "app.empty": {"rows": 0, "digest": "0" * 16},
    }
    m = _manifest(tables=tables)
    assert Manifest.from_json(m.to_json()).tables == tables
    assert b'"tables' not in _manifest().to_json()  # not recorded: absent, as in older manifests
    noted = _manifest(tables_note="the table digests failed (exit status 1): no message")
    assert Manifest.from_json(noted.to_json()) == noted and noted.tables is None
    damaged = _manifest().to_json().replace(b'"format"', b'"tables": {"app.t": {"rows": -1}}, "format"')
    with pytest.raises(ManifestError, match="tables: not a table's rows and digest"):
        Manifest.from_json(damaged, "s3://b/m")


def _event(name, status):
    from mysql_operator.db.observation import Event

    return Event("app", name, status, "app@%")


SOURCE = (("app", "tick", "ENABLED"), ("app", "off", "DISABLED"), ("app", "held", "SLAVESIDE_DISABLED"))


@pytest.mark.parametrize(
    "loaded, source, primary, flavor, expected",
    [
        # a dump of a replica: every event replica-side disabled; the new primary gets the source's
        (
            {"tick": "SLAVESIDE_DISABLED", "off": "SLAVESIDE_DISABLED", "held": "SLAVESIDE_DISABLED"},
            SOURCE,
            True,
            "mariadb",
            [("tick", "ENABLE"), ("off", "DISABLE"), ("held", "DISABLE")],
        ),
        # a dump of the primary: already right; an event the manifest does not name is left alone
        ({"tick": "ENABLED", "off": "DISABLED", "new": "ENABLED"}, SOURCE, True, "mysql", []),
        # an older backup (not known): as loaded
        ({"tick": "REPLICA_SIDE_DISABLED"}, None, True, "mysql", []),
        # the others: replica-side disabled, whatever the source
        (
            {"tick": "ENABLED", "off": "DISABLED", "held": "REPLICA_SIDE_DISABLED"},
            SOURCE,
            False,
            "mysql",
            [("tick", "DISABLE ON REPLICA"), ("off", "DISABLE ON REPLICA")],
        ),
        ({"tick": "ENABLED"}, None, False, "mariadb", [("tick", "DISABLE ON SLAVE")]),
    ],
)
def test_event_changes_give_the_new_primary_the_source_statuses(loaded, source, primary, flavor, expected):
    from mysql_operator.backup.restore_server import event_changes

    events = [_event(n, s) for n, s in loaded.items()]
    assert [(e.name, c) for e, c in event_changes(events, source, primary, flavor)] == expected


def test_every_definer_line_of_a_dump_names_the_application_account_and_nothing_else_changes():
    dump = (
        b"INSERT INTO t VALUES ('\\nCREATE DEFINER=`root`@`localhost` PROCEDURE x');\n"
        b"/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER tr BEFORE INSERT ON t */;;\n"
        b"CREATE DEFINER=`o``dd`@`%` PROCEDURE p() SELECT 1 ;;\n"
        b"CREATE DEFINER=`root`@`localhost` FUNCTION f() RETURNS INT RETURN 1 ;;\n"
        b"/*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */\n"
        b"/*!50106 CREATE*/ /*!50117 DEFINER=`root`@`localhost`*/ /*!50106 EVENT e DO SELECT 1 */ ;;\n"
        b"  CREATE DEFINER=`root`@`localhost` VIEW in_a_body\n"
        b"no newline at the end"
    )
    app = commands.quote_account("a`pp")
    for size in (1, 7, len(dump)):  # however the pieces fall
        rewrite = dump_text.DumpFilter(app)
        out = b"".join(rewrite(dump[i : i + size]) for i in range(0, len(dump), size)) + rewrite(b"")
        lines = out.split(b"\n")
        assert lines[0] == dump.split(b"\n")[0]  # data: as it was
        assert [line.count(b"DEFINER=`a``pp`@`%`") for line in lines] == [0, 1, 1, 1, 1, 1, 0, 0]
        assert b"root" not in b"".join(lines[1:6]) and lines[6].startswith(b"  CREATE DEFINER=`root`")
        assert lines[7] == b"no newline at the end"


@pytest.mark.parametrize(
    "line, release",
    [
        ("mysqlbinlog  Ver 9.7.4-2 for Linux on x86_64 ((Debian))", (9, 7, 4)),
        ("mysqlbinlog  Ver 8.4.3 for Linux on aarch64 (MySQL Community Server - GPL)", (8, 4, 3)),
        ("mariadb-binlog from 11.8.9-MariaDB, client 3.5 for debian-linux-gnu (x86_64)", (11, 8, 9)),
        ("mariadb-dump  Ver 10.19 Distrib 10.11.19-MariaDB, for debian-linux-gnu (x86_64)", (10, 11, 19)),
        ("mariadb-binlog Ver 3.5 for debian-linux-gnu at x86_64", None),  # 10.11: its client version only
        ("", None),
    ],
)
def test_a_tools_version_line_names_the_server_release_it_was_built_with(line, release):
    assert commands.tool_release(line) == release


@pytest.mark.parametrize(
    "line, server, refused",
    [
        ("mysqlbinlog  Ver 9.7.4-2 for Linux", "mysql 9.7.4", None),
        ("mysqlbinlog  Ver 9.7.1 for Linux", "mysql 9.7.4", None),  # an older patch of the series
        ("mysqlbinlog  Ver 9.8.0 for Linux", "mysql 9.7.4", None),  # newer reads older
        ("mysqlbinlog  Ver 8.4.3 for Linux", "mysql 9.7.4", "older"),
        ("mysqlbinlog  Ver 9.6.0 for Linux", "mysql 9.7.4", "older"),
        ("mariadb-binlog from 10.11.19-MariaDB, client 3.5", "mariadb 11.8.9", "older"),
        ("mariadb-dump from 11.8.9-MariaDB, client 10.20", "mariadb 10.11.19", None),
        ("mariadb-binlog Ver 3.5 for debian-linux-gnu at x86_64", "mariadb 11.8.9", None),  # unknown
        # the other flavor's, whatever its version (Debian's MariaDB answers to mysqldump too)
        ("mysqldump from 11.8.9-MariaDB, client 10.20", "mysql 9.7.4", "flavor"),
        ("mysqlbinlog  Ver 9.7.4-2 for Linux", "mariadb 10.11.19", "flavor"),
    ],
)
def test_a_client_tool_of_the_other_flavor_or_an_older_series_is_refused_naming_both_and_the_fix(
    line, server, refused
):
    flavor, release = server.split()
    version = ServerVersion(Flavor(flavor), *map(int, release.split(".")))
    tool = line.split()[0]
    why = commands.tool_too_old(tool, line, version, "reg.example/tools:old")
    if refused is None:
        assert why is None
        return
    said = f"{tool} {'.'.join(map(str, commands.tool_release(line)))} in the tool image reg.example/tools:old"
    if refused == "older":
        assert why.startswith(f"{said} is older than the server ({version})"), why
    else:
        other = "mysql" if flavor == "mariadb" else "mariadb"
        assert why.startswith(f"{said} is {other}'s, and the server is {version}"), why
    major, minor, _ = release.split(".")
    assert f"Fix spec.toolsImage: name a tool image of {flavor} {major}.{minor} or later" in why


GTID_DUMP = (
    b"SET @MYSQLDUMP_TEMP_LOG_BIN = @@SESSION.SQL_LOG_BIN;\n"
    b"SET @@SESSION.SQL_LOG_BIN= 0;\n"
    b"SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1-20,\n"
    b"bbbbbbbb-bbbb-cccc-dddd-eeeeeeeeeeee:1-3';\n"
    b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n"
    b"USE `shop`;\n"
    b"INSERT INTO t VALUES ('\\nCREATE DATABASE not_one');\n"
    b"CREATE DATABASE other;\n"
    b"CREATE DEFINER=`root`@`localhost` PROCEDURE p() SELECT 1 ;;\n"
    b"SET @@SESSION.SQL_LOG_BIN = @MYSQLDUMP_TEMP_LOG_BIN;\n"
)


@pytest.mark.parametrize("size", [1, 5, len(GTID_DUMP)])
def test_a_mysql_dump_loads_without_its_gtid_statement_and_asks_for_each_database_first(size):
    """The load account may not set gtid_purged: the statement is held back (the restore sets its
    set after the load) and every other line passes on; each database is asked for before its
    CREATE line passes on; the definers are the application account's."""
    asked: list[tuple[str, int]] = []
    out = b""
    f = dump_text.DumpFilter(
        commands.quote_account("app"),
        on_database=lambda name: asked.append((name, len(out))),
        strip_gtid=True,
    )
    for i in range(0, len(GTID_DUMP), size):
        out += f(GTID_DUMP[i : i + size])
    out += f(b"")
    assert (
        f.gtid_purged == "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1-20,bbbbbbbb-bbbb-cccc-dddd-eeeeeeeeeeee:1-3"
    )
    assert b"GTID_PURGED" not in out and b"bbbbbbbb" not in out and not f.errors
    assert [name for name, _ in asked] == ["shop", "other"]
    assert all(
        out.index(b"CREATE DATABASE /*!32312" if n == "shop" else b"CREATE DATABASE other") >= at
        for n, at in asked
    )
    assert b"CREATE DEFINER=`app`@`%` PROCEDURE" in out
    assert out == GTID_DUMP.replace(
        GTID_DUMP[GTID_DUMP.index(b"SET @@GLOBAL") : GTID_DUMP.index(b"CREATE DATABASE /*")], b""
    ).replace(b"`root`@`localhost`", b"`app`@`%`")


def test_a_dump_whose_gtid_statement_never_ends_or_does_not_read_is_a_problem_not_a_silent_skip():
    f = dump_text.DumpFilter(strip_gtid=True)
    out = f(b"SET @@GLOBAL.GTID_PURGED='a:1-5,\nb:1-3\n") + f(b"INSERT INTO t VALUES (1)") + f(b"")
    assert f.errors == ["the dump ends inside its GTID statement"] and f.gtid_purged is None
    assert out == b""  # nothing after it was loaded: the restore fails with the error
    f = dump_text.DumpFilter(strip_gtid=True)
    assert f(b"SET @@GLOBAL.GTID_PURGED=a:1-5;\nCREATE TABLE t (v INT);\n") == b"CREATE TABLE t (v INT);\n"
    assert f.errors == ["the dump's GTID statement does not read as one"] and f.gtid_purged is None
    g = dump_text.DumpFilter()  # MariaDB's dump: no statement held back
    assert g(GTID_DUMP) + g(b"") == GTID_DUMP
