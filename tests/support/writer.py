"""The one load writer of the tests, the e2e scenarios and the failover benchmark: numbered rows
inserted one by one (autocommit) through whatever `target()` names, reconnecting when the target
changes or a statement fails. It remembers every acknowledged commit (its id, the target that
acknowledged it, when) and when attempts failed: what "no acknowledged write lost" is checked
against."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, NamedTuple

import pymysql


class Ack(NamedTuple):
    id: int
    target: Any  # what target() returned: a server name, an address
    at: float  # time.monotonic() of the acknowledgement


class Writer(threading.Thread):
    """`connect(target)` opens an autocommit connection; `sql` inserts (id, target) - or only id
    when it has one placeholder; `target()` is asked before every statement."""

    def __init__(
        self,
        connect: Callable[[Any], Any],
        sql: str,
        target: Callable[[], Any] = lambda: None,
        first_id: int = 0,
        pause: float = 0.02,
    ):
        super().__init__(daemon=True)
        self.connect, self.sql, self.target, self.pause = connect, sql, target, pause
        self.next_id = first_id
        self.acked: list[Ack] = []
        # (monotonic time, wall-clock time, the error) of each failed statement or connect
        self.errors: list[tuple[float, float, str]] = []
        self.stop_event = threading.Event()
        self._go, self._idle = threading.Event(), threading.Event()
        self._go.set()

    def run(self) -> None:
        conn, conn_to = None, None
        with_target = self.sql.count("%s") == 2
        while not self.stop_event.is_set():
            if not self._go.is_set():
                self._idle.set()
                self._go.wait()
                self._idle.clear()
            target = self.target()
            try:
                if conn is None or conn_to != target:
                    _close(conn)
                    conn, conn_to = None, target
                    conn = self.connect(target)
                self.next_id += 1
                n = self.next_id
                with conn.cursor() as cur:
                    cur.execute(self.sql, (n, target) if with_target else (n,))
                self.acked.append(Ack(n, target, time.monotonic()))
            except pymysql.err.MySQLError as e:
                self.errors.append((time.monotonic(), time.time(), f"{type(e).__name__}: {e}"))
                _close(conn)
                conn = None
                self.stop_event.wait(self.pause)
        _close(conn)

    def second_without_commits(self, timeout: float = 30) -> int:
        """Holds the writer (after its statement in flight) across the end of a wall-clock second
        and returns that second T: every write acknowledged before committed at T or earlier,
        every later one starts after T. A restore to T must hold exactly the first: a
        transaction's binary log events carry its statements' or its commit's second (MySQL
        stamps the GTID event at the commit), so a write that spans a second's end could count
        either way."""
        self._go.clear()
        try:
            if not self._idle.wait(timeout):
                raise TimeoutError(f"the writer still busy with one statement after {timeout} s")
            t = int(time.time())
            time.sleep(max(0.0, t + 1 - time.time()))  # until the wall clock's next second
        finally:
            self._go.set()
        return t

    def stop(self, timeout: float = 15) -> None:
        self.stop_event.set()
        self.join(timeout)

    @property
    def ids(self) -> list[int]:
        return [a.id for a in self.acked]

    @property
    def failure_times(self) -> list[float]:
        """The monotonic time of each failure, oldest first."""
        return [t for t, _, _ in self.errors]

    @property
    def failures(self) -> int:
        return len(self.errors)

    def servers_in_order(self) -> list[Any]:
        """Acknowledging targets in order, consecutive duplicates collapsed."""
        out: list[Any] = []
        for a in self.acked:
            if not out or out[-1] != a.target:
                out.append(a.target)
        return out

    def first_ack_after_outage(self, since: float) -> float | None:
        """Seconds from `since` to the first write acknowledged after the first failed attempt
        that followed `since` (the outage), None if writes never failed or never came back."""
        failed = [t for t in self.failure_times if t >= since]
        if not failed:
            return None
        back = [a.at for a in self.acked if a.at > failed[0]]
        return back[0] - since if back else None


def _close(conn: Any) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a dead connection is closed enough
            pass


def failures_said(w: Writer, since: float = float("-inf")) -> str:
    """The writer's failures since `since` (monotonic), one a line: the wall-clock time (UTC) and
    the error, for an assertion's message (the evidence bundle's logs are by wall clock)."""
    return "\n".join(
        f"{time.strftime('%H:%M:%S', time.gmtime(wall))}.{int(wall % 1 * 1000):03d}Z {error}"
        for t, wall, error in w.errors
        if t >= since
    )
