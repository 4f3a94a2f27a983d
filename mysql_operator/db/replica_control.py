"""Replication on one server: its source, its receiver stopped between two transactions, what
it has applied, its semi-sync settings."""

from __future__ import annotations

import time
from typing import Callable

import pymysql

from mysql_operator.db.observation import (
    ER_REPLICA_NOT_CONFIGURED,
    ER_STOP_REPLICA_SQL_THREAD_TIMEOUT,
    InstanceError,
    ReplicaStatus,
)
from mysql_operator.db.session import Session, its_failure, short


class ReplicaControl(Session):
    """The replication operations of db/instance.Instance."""

    @its_failure
    def replica_status(self) -> ReplicaStatus | None:
        d = self.dialect
        rows = self._run(d.show_replica_status(), dict_rows=True)
        if not rows:
            return None
        r, c = rows[0], d.columns
        behind = r.get(c.seconds_behind)
        return ReplicaStatus(
            source_host=r.get(c.source_host) or "",
            source_port=int(r.get(c.source_port) or 0),
            io_state=r.get(c.io_running) or "No",
            sql_running=r.get(c.sql_running) == "Yes",
            io_errno=int(r.get(c.io_errno) or 0),
            io_error=short(r.get(c.io_error) or ""),
            sql_errno=int(r.get(c.sql_errno) or 0),
            sql_error=short(r.get(c.sql_error) or ""),
            seconds_behind=None if behind is None else int(behind),
            received=d.parse_gtids(r.get(c.received) or ""),
            ssl_allowed=r.get(c.ssl_allowed) == "Yes",
            ssl_verify=r.get(c.ssl_verify) == "Yes",
        )

    def stop_replica(self) -> None:
        self._run_slow(self.dialect.stop_replica())

    def stop_io_thread(self) -> None:
        self._run_slow(self.dialect.stop_io_thread())

    def stop_receiving(self, complete_within: float = 3.0, attempts: int = 3) -> None:
        """A running receiver (IO thread) stopped between two transactions, not inside one. A
        transaction only partly in the relay log holds MySQL's multi-threaded applier (there is
        no single-threaded one since 9.x: its coordinator waits for the rest), and STOP REPLICA
        then fails with 1875 for up to 60 s, and a failover's promotion with it (measured: a
        stop under writes cut one in 3 of 19 runs). When a stop left one half queued, the receiver
        starts again (auto-positioning fetches that transaction whole) and stops once it is
        complete, `attempts` times at most. It is waited for while the receiver is connected (a
        large transaction on a loaded machine takes seconds, the source first scans its binary
        logs for it, and each start fetches it from its beginning again: seen in CI), up to
        `slow_timeout`; a receiver not connected for `complete_within` seconds (a source that does
        not answer) leaves it to the server (the applier gives it up by itself). Only for a
        failover's quiesce: the receiver gets whatever the source sends meanwhile, and the
        failover decides again on what each replica holds afterwards."""
        status = self.replica_status()
        if status is None or status.io_state == "No":
            return  # not receiving: left as it is
        self.stop_io_thread()
        sql = self.dialect.QUEUEING_SQL
        if sql is None:
            return

        def queueing() -> str:
            rows = self._run(sql)
            return str(rows[0][0] or "") if rows else ""

        for _ in range(attempts):
            half = queueing()
            if not half:
                return
            wanted = self.dialect.parse_gtids(half)
            self._run(self.dialect.start_io_thread())
            seen = time.monotonic()  # last seen connected (or started)
            deadline = seen + self.slow_timeout
            while True:
                now, status = time.monotonic(), self.replica_status()
                if status is None or status.received.contains(wanted):
                    break  # received whole (QUEUEING_TRANSACTION reads "" while it reconnects)
                if status.io_state == "Yes":
                    seen = now
                elif now - seen >= complete_within:
                    break  # the source does not answer
                if now >= deadline:
                    break  # not in time
                time.sleep(0.05)
            self.stop_io_thread()
            if queueing() == half:
                return  # not completed: left to the server

    def start_replica(self) -> None:
        self._run(self.dialect.start_replica())

    def start_sql_thread(self) -> None:
        self._run(self.dialect.start_replica() + " SQL_THREAD")

    def reset_replica(self) -> None:
        """Forget the source entirely (a promoted or removed instance)."""
        self._run_slow(self.dialect.stop_replica())
        self._run(self.dialect.reset_replica_all())

    def point_at(
        self,
        source_host: str,
        source_port: int,
        user: str,
        password: str,
        start: bool = True,
        attempts: int = 5,
        tls_ca: str | None = None,
    ) -> None:
        """Replicate from a source with GTID auto-positioning (idempotent); with `tls_ca` (a CA
        file on the server's own file system) over TLS verifying the source's certificate.

        CHANGE MASTER and START are two statements: another actor (a second operator process, a
        CLI switchover promoting this server) may RESET the replica between them, and START then
        fails with "MASTER_HOST was not set". The pair is repeated until START runs on the
        configuration written here, so the call either leaves it pointed and started or fails
        for a reason other than a lost configuration."""
        d = self.dialect
        self._stop_replica()
        for sql in d.prepare_replica_position():
            self._run(sql)
        sql, args = d.change_source(source_host, source_port, user, password, tls_ca=tls_ca)
        for attempt in range(1, attempts + 1):
            self._run(sql, args, secrets=[password])
            if not start:
                return
            try:
                self._run(d.start_replica())
                return
            except InstanceError as e:
                if e.errno != ER_REPLICA_NOT_CONFIGURED or attempt == attempts:
                    raise

    def _stop_replica(self) -> None:
        """STOP REPLICA, and when the server gave up waiting for a busy SQL thread (1875: it got the
        stop signal and stops once its current task is done), the wait for that, up to
        slow_timeout: the source cannot be changed while the thread runs, and failing here would
        leave the replica on its old source until a later pass (after a failover, a new primary
        with no replica acknowledging its commits)."""
        try:
            self._run_slow(self.dialect.stop_replica())
        except InstanceError as e:
            if e.errno != ER_STOP_REPLICA_SQL_THREAD_TIMEOUT:
                raise
            stopped, _ = self._replica_until(
                lambda r: r is None or (r.io_state == "No" and not r.sql_running), self.slow_timeout
            )
            if not stopped:
                raise InstanceError(
                    f"{self.name}: its SQL thread did not stop within {self.slow_timeout:.0f}s "
                    f"after STOP REPLICA ({e})",
                    e.errno,
                ) from None

    def _replica_until(
        self, done: Callable[[ReplicaStatus | None], bool], timeout: float
    ) -> tuple[bool, ReplicaStatus | None]:
        """SHOW REPLICA STATUS read every 0.1 s until it is `done` (True) or `timeout` seconds
        have passed (False), with the last status read."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.replica_status()
            if done(status):
                return True, status
            if time.monotonic() >= deadline:
                return False, status
            time.sleep(0.1)

    @its_failure
    def wait_for(self, gtids, timeout: float) -> bool:
        """True once `gtids` are applied here, False after `timeout` seconds."""
        if gtids is None or gtids.is_empty():
            return True
        d = self.dialect
        sql, args = d.wait_for_gtids(gtids, timeout)
        if timeout + 5 <= self.slow_timeout:  # a failover's wait: on the slow statements' connection
            return d.wait_succeeded(self._patiently(sql, args, timeout + 5, "waiting for GTIDs failed")[0][0])
        conn = self._fresh(timeout + 5)
        try:
            return d.wait_succeeded(self._exchange(conn, sql, args, timeout + 5)[0][0])
        except pymysql.err.MySQLError as e:
            raise self._error(e, "waiting for GTIDs failed") from None
        finally:
            conn.close()

    @its_failure
    def wait_connected(self, timeout: float) -> bool:
        """True once this replica's IO thread is connected to its source (False after `timeout`
        seconds, or when it is not a replica or its IO thread is stopped)."""
        _, status = self._replica_until(lambda r: r is None or r.io_state in ("Yes", "No"), timeout)
        return status is not None and status.io_state == "Yes"

    def set_semisync_source(self, on: bool, ack_count: int = 1, timeout_ms: int = 4_294_967_295) -> None:
        """Semi-sync on the primary, AFTER_SYNC; the default timeout means "never fall back"."""
        d = self.dialect
        if on:
            self._install_semisync_plugins()
            for sql, args in d.enable_semisync_source(ack_count, timeout_ms):
                self._run(sql, args)
        else:
            if self._has_variable(d.semisync_source_enabled):
                for sql, args in d.disable_semisync_source():
                    self._run(sql, args)

    def set_semisync_replica(self, on: bool, restart_io: bool = True) -> None:
        """Semi-sync acknowledgements from this replica; restarts a running IO thread to apply
        (`restart_io=False` when the caller repoints and so restarts it anyway). An IO thread
        connected and already acknowledging as asked is left alone: a reconnect is never free
        (the source's name is resolved again; a primary whose only acknowledging replica
        reconnects holds every commit until it is back)."""
        d = self.dialect
        if on:
            self._install_semisync_plugins()
        elif not self._has_variable(d.semisync_replica_enabled):
            return
        stmts = d.enable_semisync_replica() if on else d.disable_semisync_replica()
        for sql, args in stmts:
            self._run(sql, args)
        if not restart_io:
            return
        status = self.replica_status()
        if status is None or status.io_state == "No":
            return
        if status.io_state == "Yes" and self._status_is_on(d.semisync_replica_status) == on:
            return  # the setting is read at the IO thread's start: it started as asked
        self._run_slow(d.stop_io_thread())
        try:
            self._run(d.start_io_thread())
        except InstanceError as e:
            if e.errno != ER_REPLICA_NOT_CONFIGURED:
                raise  # reset meanwhile: nothing left to restart

    def _install_semisync_plugins(self) -> None:
        for plugin, library in self.dialect.semisync_plugins():
            present = self._run("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = %s", (plugin,))
            if not present:
                self._run(f"INSTALL PLUGIN {plugin} SONAME %s", (library,))
