"""STOP REPLICA that the server gives up on (1875: rpl_stop_replica_timeout passed while the SQL
thread finished a task; it stops once that is done), against the project's own `Instance` and a fake
MySQL server on a real socket (tests/support/fake_mysql.py): a busy SQL thread cannot be produced
on demand. Seen for real in CI: after a failover, the repoint of the other replica failed with 1875
and the new primary had no replica acknowledging its commits until a later pass."""

from __future__ import annotations

import pytest

from mysql_operator.db.instance import Instance

from mysql_operator.db.observation import InstanceError
from tests.support.fake_mysql import OK, Err, FakeMySQL, Reply, Rows, default_answer, version_rows

BUSY = "STOP REPLICA command execution is incomplete: Replica SQL thread got the stop signal, thread is busy"


class Replica:
    """A MySQL 9.7 replica whose SQL thread stops `busy_polls` status reads after STOP REPLICA."""

    def __init__(self, busy_polls: int):
        self.busy_polls = busy_polls
        self.stopping = False

    def __call__(self, sql: str) -> Reply:
        if "VERSION()" in sql:
            return version_rows("9.7.4")
        if sql.startswith("STOP REPLICA"):
            self.stopping = True
            return Err(1875, BUSY)
        if sql.startswith("SHOW REPLICA STATUS"):
            running = not self.stopping or self.busy_polls > 0
            self.busy_polls -= self.stopping
            return Rows(
                ("Source_Host", "Source_Port", "Replica_IO_Running", "Replica_SQL_Running"),
                [("db-0", "3306", "No", "Yes" if running else "No")],
            )
        if sql.startswith(("CHANGE REPLICATION SOURCE", "START REPLICA")):
            return OK()
        return default_answer(sql)


def replica(server: FakeMySQL, slow_timeout: float) -> Instance:
    return Instance(
        "127.0.0.1", server.port, "operator", "pw", name="db-2", connect_attempts=1, slow_timeout=slow_timeout
    )


def test_a_stop_the_server_gave_up_on_is_waited_for_and_the_replica_repointed():
    with FakeMySQL(Replica(busy_polls=3)) as server:
        replica(server, slow_timeout=10).point_at("db-1.h.ns.svc", 3306, "repl", "repl-pw")
        changed = [q for q in server.queries if q.startswith("CHANGE REPLICATION SOURCE")]
        assert changed and "db-1.h.ns.svc" in changed[0]
        assert server.queries.index(changed[0]) > max(
            i for i, q in enumerate(server.queries) if q.startswith("SHOW REPLICA STATUS")
        ), "the source is changed only once the SQL thread has stopped"
        assert server.queries[-1].startswith("START REPLICA")


def test_a_sql_thread_that_never_stops_fails_the_repoint_naming_the_server():
    with FakeMySQL(Replica(busy_polls=10**6)) as server:
        with pytest.raises(InstanceError) as e:
            replica(server, slow_timeout=1).point_at("db-1.h.ns.svc", 3306, "repl", "repl-pw")
        assert "db-2" in str(e.value) and "did not stop within 1s" in str(e.value) and e.value.errno == 1875
        assert not [q for q in server.queries if q.startswith("CHANGE REPLICATION SOURCE")]
