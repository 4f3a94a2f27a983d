"""Pure parts of db/instance: which connections a fence kills, and password redaction."""

from mysql_operator.db.instance import connections_to_kill, redact


def row(i, user, command="Query"):
    return {"ID": i, "USER": user, "COMMAND": command}


def test_fence_kills_only_application_connections():
    rows = [
        row(1, "admin"),  # our own connection
        row(2, "app"), row(3, "app", "Sleep"),
        row(4, "system user", "Slave_IO"), row(5, "system user", "Slave_SQL"),
        row(6, "repl", "Binlog Dump"),  # serving a replica
        row(7, "event_scheduler", "Daemon"),
        row(8, "operator", "Query"),  # another operator account
        row(9, "reporting", "Sleep"),
    ]
    assert connections_to_kill(rows, own_id=1, keep_users=["admin", "operator"]) == [2, 3, 9]


def test_redact_replaces_every_secret():
    assert redact("near 'pw1' and 'pw2'", ["pw1", "pw2", None, ""]) == "near '***' and '***'"
