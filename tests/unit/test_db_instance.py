"""Pure parts of db/instance: which connections a fence kills, password redaction, and the
certificate dates servers report."""

import datetime as dt

import pytest

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
