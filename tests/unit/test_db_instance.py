"""Pure parts of db/instance: which connections a fence kills, password redaction, the
certificate dates servers report, and which statements an observation sends."""

import datetime as dt

import pytest

from mysql_operator.db.dialects import dialect_for
from mysql_operator.db.flavor import detect
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError, connections_to_kill, parse_tls_time

from mysql_operator.redaction import redact


def row(i, user, command="Query"):
    return {"ID": i, "USER": user, "COMMAND": command}


def test_fence_kills_only_application_connections():
    rows = [
        row(1, "admin"),  # our own connection
        row(2, "app"),
        row(3, "app", "Sleep"),
        row(4, "system user", "Slave_IO"),
        row(5, "system user", "Slave_SQL"),
        row(6, "repl", "Binlog Dump"),  # serving a replica
        row(7, "event_scheduler", "Daemon"),
        row(8, "operator", "Query"),  # another operator account
        row(9, "reporting", "Sleep"),
    ]
    assert connections_to_kill(rows, own_id=1, keep_users=["admin", "operator"]) == [2, 3, 9]


def test_redact_replaces_every_secret():
    assert redact("near 'pw1' and 'pw2'", ["pw1", "pw2", None, ""]) == "near '***' and '***'"


def test_certificate_dates_as_servers_print_them():
    utc = dt.timezone.utc
    assert parse_tls_time("Nov 23 20:00:00 2026 GMT") == dt.datetime(2026, 11, 23, 20, 0, 0, tzinfo=utc)
    assert parse_tls_time("Jun  1 07:05:09 2027 GMT") == dt.datetime(2027, 6, 1, 7, 5, 9, tzinfo=utc)
    assert parse_tls_time("") is None and parse_tls_time(None) is None  # TLS off
    with pytest.raises(InstanceError, match="cannot read a certificate date"):
        parse_tls_time("2026-11-23T20:00:00Z")


class _Answering(Instance):
    """An Instance whose statements a test answers (the SQL it sends is what is checked)."""

    def __init__(self, io_running: str):
        super().__init__("192.0.2.1", 3306, "op", "pw", name="db-2")
        self._dialect = dialect_for(detect("9.7.4", "MySQL Community Server - GPL"))
        self.sent: list[str] = []
        self.io_running = io_running

    def _run(self, sql, args=(), secrets=(), dict_rows=False):
        self.sent.append(sql)
        c = self._dialect.columns
        if sql.startswith("SELECT @@server_id") or "@@server_uuid" in sql:
            return [(3, "f5f044ed-f0c0-11f1-9b53-4633c1900a85", 1, "db-2", "db-2", "", "")]
        if sql == self._dialect.show_replica_status():
            return [
                {
                    c.io_running: self.io_running,
                    c.sql_running: "No",
                    c.source_host: "db-0",
                    c.source_port: 3306,
                }
            ]
        if "global_variables" in sql:
            rows = [("Uptime", "1")]
            return rows + (
                [("count_received_heartbeats", "7")] if "replication_connection_status" in sql else []
            )
        return []


@pytest.mark.parametrize("io_running, asked", [("No", False), ("Connecting", False), ("Yes", True)])
def test_heartbeats_are_read_only_from_a_receiver_that_runs(io_running, asked):
    """MySQL 9.7.4 aborted when performance_schema.replication_connection_status was read just
    after it restarted on a CLONE (its receiver not running yet): observe reads that table only
    while the receiver runs (the only time heartbeats count)."""
    server = _Answering(io_running)
    o = server.observe()
    assert o.reachable, o.error
    assert any("replication_connection_status" in sql for sql in server.sent) is asked
    assert o.heartbeats == (7 if asked else None)
