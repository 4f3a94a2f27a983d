"""tests/support/writer.Writer keeps what each failure said, for the assertions that count them."""

import pymysql

from tests.support.wait import wait_for
from tests.support.writer import Writer, failures_said


def test_a_writer_keeps_each_failure_with_its_error_and_wall_clock_time():
    def refused(_):
        raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server on '10.96.0.9'")

    w = Writer(refused, "INSERT INTO t (id) VALUES (%s)", pause=0.01)
    w.start()
    try:
        wait_for(lambda: len(w.failure_times) >= 2, 10, "two failed connects")
    finally:
        w.stop()
    assert w.failures == len(w.failure_times) == len(w.errors)
    assert [t for t, _, _ in w.errors] == w.failure_times
    said = failures_said(w).splitlines()
    assert len(said) == len(w.errors)
    assert said[0].endswith("Z OperationalError: (2003, \"Can't connect to MySQL server on '10.96.0.9'\")")
    assert failures_said(w, since=w.failure_times[-1]) == said[-1]
