"""The SQL each flavor gets. MySQL cannot run here (no binaries, no Docker): its side is covered
by these tests of the generated SQL only; MariaDB's is also exercised on real servers."""

from __future__ import annotations

import pytest

from mysql_operator.db.dialects import dialect_for
from mysql_operator.db.flavor import Flavor, UnsupportedServer, detect
from mysql_operator.db.gtid import MariaDBGtids, MySQLGtidSet


@pytest.mark.parametrize(
    "version, comment, flavor, tup",
    [
        ("8.4.3", "MySQL Community Server - GPL", Flavor.MYSQL, (8, 4, 3)),
        ("8.0.36-0ubuntu0.22.04.1", "(Ubuntu)", Flavor.MYSQL, (8, 0, 36)),
        ("10.11.6-MariaDB-0+deb12u1-log", "Debian 12", Flavor.MARIADB, (10, 11, 6)),
        ("11.4.2-MariaDB-ubu2404", "mariadb.org binary distribution", Flavor.MARIADB, (11, 4, 2)),
        ("11.4.2", "MariaDB Server", Flavor.MARIADB, (11, 4, 2)),
    ],
)
def test_detect(version, comment, flavor, tup):
    v = detect(version, comment)
    assert v.flavor is flavor and (v.major, v.minor, v.patch) == tup


@pytest.mark.parametrize("version", ["5.7.44", "10.3.39-MariaDB", "garbage"])
def test_detect_refuses_unsupported(version):
    with pytest.raises(UnsupportedServer):
        detect(version, "")


def D(version, comment=""):
    return dialect_for(detect(version, comment))


def test_mysql_84_uses_only_new_syntax():
    d = D("8.4.3")
    sql, args = d.change_source("10.0.0.5", 3306, "repl", "s3cret")
    assert sql.startswith("CHANGE REPLICATION SOURCE TO SOURCE_HOST=%s")
    assert "SOURCE_AUTO_POSITION=1" in sql and "GET_SOURCE_PUBLIC_KEY=1" in sql
    assert "s3cret" not in sql and "s3cret" in args  # the password is a bound value
    assert "MASTER" not in sql.upper() and "SLAVE" not in sql.upper()
    for stmt in (
        d.start_replica(),
        d.stop_replica(),
        d.stop_io_thread(),
        d.reset_replica_all(),
        d.show_replica_status(),
    ):
        assert "SLAVE" not in stmt and "MASTER" not in stmt
    assert d.stop_io_thread() == "STOP REPLICA IO_THREAD"
    assert d.columns.io_running == "Replica_IO_Running"
    assert d.columns.seconds_behind == "Seconds_Behind_Source"
    assert d.set_read_only(True) == ["SET GLOBAL super_read_only = ON"]
    assert d.set_read_only(False) == ["SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"]
    assert d.executed_gtids_sql() == "SELECT @@GLOBAL.gtid_executed"
    assert isinstance(d.parse_gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3"), MySQLGtidSet)


def test_mysql_semisync_with_ack_count_and_after_sync():
    d = D("8.4.3")
    assert d.supports_ack_count
    stmts = d.enable_semisync_source(ack_count=2, timeout_ms=3_600_000)
    assert ("SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = %s", (2,)) in stmts
    assert ("SET GLOBAL rpl_semi_sync_source_wait_point = 'AFTER_SYNC'", ()) in stmts
    assert stmts[-1][0] == "SET GLOBAL rpl_semi_sync_source_enabled = ON"  # enabled last
    assert d.semisync_source_status == "Rpl_semi_sync_source_status"
    assert ("rpl_semi_sync_source", "semisync_source.so") in d.semisync_plugins()
    # before 8.0.26 the plugins and variables are named master/slave
    old = D("8.0.25")
    assert old.semisync_replica_enabled == "rpl_semi_sync_slave_enabled"
    assert any("wait_for_slave_count" in s for s, _ in old.enable_semisync_source(1, 1000))


def test_mysql_wait_for_position():
    d = D("8.0.36")
    g = MySQLGtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9")
    sql, args = d.wait_for_gtids(g, 5)
    assert sql == "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)"
    assert args == ("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9", 5)
    assert d.wait_succeeded(0) and not d.wait_succeeded(1)


def test_mysql_8022_has_replica_statements_but_old_change_master():
    d = D("8.0.22")
    assert d.start_replica() == "START REPLICA"
    assert d.change_source("h", 1, "u", "p")[0].startswith("CHANGE MASTER TO MASTER_HOST=%s")


def test_mariadb_1011():
    d = D("10.11.6-MariaDB-0+deb12u1-log")
    sql, args = d.change_source("10.0.0.5", 3306, "repl", "s3cret")
    assert "MASTER_USE_GTID=slave_pos" in sql and "MASTER_SSL=0" not in sql
    assert "s3cret" not in sql
    assert d.stop_io_thread() == "STOP SLAVE IO_THREAD"
    assert d.columns.received == "Gtid_IO_Pos"
    assert d.set_read_only(True) == ["SET GLOBAL read_only = ON"]
    assert d.executed_gtids_sql() == "SELECT @@GLOBAL.gtid_binlog_state"
    assert not d.supports_ack_count and d.semisync_plugins() == []
    stmts = d.enable_semisync_source(ack_count=2, timeout_ms=1000)
    assert ("SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'", ()) in stmts
    assert not any("count" in s for s, _ in stmts)
    sql, args = d.wait_for_gtids(MariaDBGtids.parse("0-1-98,0-2-150"), 2.5)
    assert sql == "SELECT MASTER_GTID_WAIT(%s, %s)" and args == ("0-2-150", 2.5)
    assert d.wait_succeeded(0) and not d.wait_succeeded(-1)
    assert 1950 in d.divergence_errnos


def test_mariadb_114_turns_off_tls_verification_of_the_source():
    sql, _ = D("11.4.2-MariaDB").change_source("h", 1, "u", "p")
    assert sql.endswith("MASTER_SSL=0, MASTER_SSL_VERIFY_SERVER_CERT=0")


CA = "/etc/mysql-operator/tls/ca.crt"


@pytest.mark.parametrize(
    "version, head, p",
    [
        ("8.4.3", "CHANGE REPLICATION SOURCE TO", "SOURCE"),
        ("8.0.22", "CHANGE MASTER TO", "MASTER"),
        ("10.11.6-MariaDB", "CHANGE MASTER TO", "MASTER"),
        ("11.4.2-MariaDB", "CHANGE MASTER TO", "MASTER"),
    ],
)
def test_replication_over_tls_verifies_the_source_against_the_ca(version, head, p):
    sql, args = D(version).change_source("db-0.db-headless.ns.svc", 3306, "repl", "s3cret", tls_ca=CA)
    assert sql.startswith(head)
    assert sql.endswith(f", {p}_SSL=1, {p}_SSL_CA=%s, {p}_SSL_VERIFY_SERVER_CERT=1")
    assert args[-1] == CA and CA not in sql and "SSL=0" not in sql
    assert sql.count("%s") == len(args)


def test_without_a_ca_replication_is_configured_as_before():
    for version in ("8.4.3", "10.11.6-MariaDB", "11.4.2-MariaDB"):
        d = D(version)
        sql, args = d.change_source("h", 1, "u", "p", tls_ca=None)
        assert (sql, args) == d.change_source("h", 1, "u", "p") and "SSL=1" not in sql


def test_tls_reload_and_status_columns_per_flavor():
    assert D("10.11.6-MariaDB").reload_tls() == "FLUSH NO_WRITE_TO_BINLOG SSL"  # never an errant GTID
    assert D("8.4.3").reload_tls() == D("8.0.22").reload_tls() == "ALTER INSTANCE RELOAD TLS"
    assert D("10.11.6-MariaDB").columns.ssl_verify == "Master_SSL_Verify_Server_Cert"
    assert D("8.0.21").columns.ssl_allowed == "Master_SSL_Allowed"
    assert (D("8.4.3").columns.ssl_allowed, D("8.4.3").columns.ssl_verify) == (
        "Source_SSL_Allowed",
        "Source_SSL_Verify_Server_Cert",
    )
    assert "Ssl_server_not_after" in D("8.4.3").tls_not_after_sql()
