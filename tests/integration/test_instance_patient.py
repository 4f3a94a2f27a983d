"""The slow statements of a failover (read_only, stop an IO thread, wait for GTIDs) share one
connection per server (Session._patient), on a real MariaDB and MySQL server: one TLS login for
several of them instead of one each, and a server restarted under it costs no failed statement."""

from __future__ import annotations

from mysql_operator.db.instance import Instance
from mysql_operator.db.session import PATIENT_REUSE_SECONDS
from tests.support.mariadb import ADMIN_USER


def logins(server) -> int:
    """Connections the server has accepted so far (this question's own included)."""
    return int(server.query("SHOW GLOBAL STATUS LIKE 'Connections'")[0][1])


def test_slow_statements_share_one_connection_and_survive_a_restart_of_the_server(writable_server):
    s = writable_server
    i = Instance(s.host, s.port, ADMIN_USER, s.admin_password, name="db-0", connect_attempts=1)
    try:
        i.dialect  # noqa: B018 - the instance's own connection, opened before counting
        before = logins(s)
        for on in (True, False, True, False):  # two statements each on MySQL (super_read_only)
            i.set_read_only(on)
        assert i.wait_for(i.observe().executed, 5)
        assert logins(s) - before == 2, "one login for the slow statements, one for counting"
        assert s.query("SELECT @@read_only")[0][0] == 0

        s.restart()  # within the reuse window: the shared connection is cut under the instance
        i.set_read_only(True)  # sent again on a new connection, no error
        assert s.query("SELECT @@read_only")[0][0] == 1

        # past the window, the next observation closes it: no session left on the server
        sessions = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s"
        i.observe()  # (its own connection was cut too: a new one; close() drops the shared one)
        i.set_read_only(True)
        held = s.query(sessions, (ADMIN_USER,))[0][0]  # this question's, the instance's, the shared one
        assert held == 3
        i._patient_at -= PATIENT_REUSE_SECONDS + 1  # as if its last statement were that old
        i.observe()
        assert s.query(sessions, (ADMIN_USER,))[0][0] == held - 1
    finally:
        i.close()
        s.query("SET GLOBAL read_only = 0")
