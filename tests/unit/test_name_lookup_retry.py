"""A backup whose server's name did not resolve for now (EAI_AGAIN, -3) is tried again, a few
times: a physical copy's CLONE, and a whole backup whose dump tool or session could not look the
server up; any other failure, and a name that does not exist (-2), fail at once."""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest

from mysql_operator.backup import commands, physical, run
from mysql_operator.backup.backup_types import BackupError
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


# what each client printed when the cluster DNS did not answer in time (the first from a CI run's
# backup Job, docs/flakes.md), and failures that are not worth a second try
DUMP_STALL = (
    "mysqldump failed on demo-mysql-1 (exit status 2) after 0 bytes: mysqldump: Got error: 2005: "
    "Unknown MySQL server host 'demo-mysql-1.demo-mysql-headless.docs.svc' (-3) when trying to connect"
)
MARIADB_STALL = "mariadb-dump: Got error: 2005: \"Unknown server host 'db-1.db-headless.ns.svc' (-3)\" when trying to connect"
SESSION_STALL = (
    "no instance could be read: db-0: (2003, \"Can't connect to MySQL server on "
    "'db-0.db-headless.ns.svc' ([Errno -3] Temporary failure in name resolution)\")"
)
NOT_FOUND = "mysqldump: Got error: 2005: Unknown MySQL server host 'db-9.db-headless.ns.svc' (-2) when trying to connect"
DENIED = "mysqldump: Got error: 1045: Access denied for user 'backup'@'10.0.0.3' (using password: YES)"


@pytest.mark.parametrize("message", [STALL, DUMP_STALL, MARIADB_STALL, SESSION_STALL])
def test_each_clients_words_for_a_lookup_that_failed_for_now_are_read_so(message):
    assert commands.name_not_resolved_yet(message)


@pytest.mark.parametrize("message", [NO_SUCH_NAME, REFUSED, NOT_FOUND, DENIED, "(-3)"])
def test_other_failures_are_not(message):
    assert not commands.name_not_resolved_yet(message)


def backup(failures: list[str], tries: list[int] | None = None) -> tuple[list[int], list[float], bool]:
    """run_backup over tries (counted into `tries`) that fail with each of `failures` in turn, then
    succeed: (the tries, the pauses between them, whether the last try's manifest came back)."""
    tries, pauses, done = [] if tries is None else tries, [], object()

    def once(req, s3_credentials, db_password, *, client, on_part):
        tries.append(len(tries) + 1)
        if failures:
            raise BackupError(failures.pop(0))
        return done

    result = run.run_backup(None, None, "pw", once=once, pause=pauses.append)
    return tries, pauses, result is done


def test_a_backup_whose_lookup_failed_for_now_is_taken_again():
    tries, pauses, finished = backup([DUMP_STALL, SESSION_STALL])
    assert (tries, pauses, finished) == ([1, 2, 3], [run.LOOKUP_RETRY_SECONDS] * 2, True)


def test_a_backup_is_taken_again_a_bounded_number_of_times():
    with pytest.raises(BackupError, match=r"\(-3\)"):
        backup([DUMP_STALL] * (run.LOOKUP_RETRIES + 1))


@pytest.mark.parametrize("message", [NOT_FOUND, DENIED])
def test_a_backup_that_failed_otherwise_fails_at_once(message):
    tries: list[int] = []
    with pytest.raises(BackupError, match="Got error"):
        backup([message], tries)
    assert tries == [1]
