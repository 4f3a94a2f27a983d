"""A physical copy's CLONE whose donor name did not resolve for now (EAI_AGAIN, -3) is tried
again, a few times; any other failure, and a name that does not exist (-2), fail at once."""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest

from mysql_operator.backup import physical
from mysql_operator.backup.commands import Endpoint
from mysql_operator.backup.copy_server import Paths, PhysicalError

STALL = "Clone Donor Error: Connect failed: 2005 : Unknown MySQL server host 'db-1.db-headless.ns.svc' (-3)."
NO_SUCH_NAME = "Clone Donor Error: Connect failed: 2005 : Unknown MySQL server host 'nowhere' (-2)."
REFUSED = "Clone Donor Error: Connect failed: 2003 : Can't connect to MySQL server on 'db-1:3306' (111)."


class Cursor:
    """The recipient's session: CLONE fails with each of `failures` in turn, then completes.
    (A fake: a resolver stall cannot be made on demand.)"""

    def __init__(self, failures: list[str]):
        self.failures, self.clones = list(failures), 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        if sql.startswith("CLONE"):
            self.clones += 1
            if self.failures:
                raise pymysql.err.OperationalError(3862, self.failures.pop(0))

    def fetchone(self):
        return ("Completed", 0, "")


class Conn:
    def __init__(self, cursor):
        self._cursor = cursor

    def cursor(self):
        return self._cursor


def clone(failures: list[str]) -> tuple[int, list[float]]:
    cur, pauses = Cursor(failures), []
    paths = Paths(Path("/nonexistent"))
    donor = Endpoint("db-1.db-headless.ns.svc", 3306, "clone")
    physical._clone(Conn(cur), paths, donor, "secret", None, pause=pauses.append)
    return cur.clones, pauses


def test_a_donor_name_that_did_not_resolve_for_now_is_tried_again():
    clones, pauses = clone([STALL, STALL])
    assert clones == 3
    assert pauses == [physical.NAME_RETRY_SECONDS] * 2


def test_it_is_tried_again_a_bounded_number_of_times():
    with pytest.raises(PhysicalError, match=r"\(-3\)"):
        clone([STALL] * (physical.NAME_RETRIES + 1))


@pytest.mark.parametrize("message", [NO_SUCH_NAME, REFUSED])
def test_other_failures_fail_at_once(message):
    with pytest.raises(PhysicalError, match="failed: Clone Donor Error"):
        clone([message])


def test_the_password_never_reaches_the_error():
    with pytest.raises(PhysicalError) as raised:
        clone(["Access denied for user 'clone' using password secret"])
    assert "secret" not in str(raised.value)
