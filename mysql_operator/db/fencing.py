"""Taking writes away from a server: its clients killed, read-only, the semi-sync acknowledgement
waits that would hold the commit lock ended."""

from __future__ import annotations

import time
from typing import Iterable

from mysql_operator.db.observation import (
    InstanceError,
    connections_to_kill,
)
from mysql_operator.db.session import Session, its_failure


class Fencing(Session):
    """The fencing operations of db/instance.Instance."""

    def set_read_only(self, on: bool) -> None:
        for sql in self.dialect.set_read_only(on):
            self._run_slow(sql)

    def fence(self, keep_users: Iterable[str] = ()) -> int:
        """Stop a possibly stuck primary from taking writes: kill client connections FIRST (a
        session waiting for a semi-sync acknowledgement that will never come holds the commit
        lock read-only needs; killed, its client never gets an OK), then read-only. Returns
        the number of connections killed.

        MySQL does not end the acknowledgement wait of a killed session: it would hold the lock
        for good (the source timeout is effectively infinite). Such waiters are released by
        turning the semi-sync source off - only once nobody who could still receive an OK is
        connected: offline_mode first refuses new connections of accounts without
        CONNECTION_ADMIN and drops the open ones, a second kill takes the rest, and a session
        still waiting that was not killed stops the fence (raises). offline_mode is lifted
        once the server is read-only."""
        killed = self.kill_client_connections(keep_users)
        offline = self.dialect.offline_mode(True)  # none on MariaDB, whose killed waiters stop waiting
        if offline and self.ack_waiters():
            killed += self._end_ack_waits(keep_users)
        self.set_read_only(True)
        for sql in self.dialect.offline_mode(False):  # read-only now: clients may read again
            self._run(sql)
        return len(killed)

    def _end_ack_waits(self, keep_users: Iterable[str]) -> list[int]:
        """MySQL: offline_mode on (the caller lifts it), every client connection killed, then the
        semi-sync source off, which ends the killed sessions' waits; raises, leaving the source
        on, when a session still waiting was not killed. Returns the connections killed."""
        for sql in self.dialect.offline_mode(True):
            self._run(sql)
        killed = self.kill_client_connections(keep_users)
        alive = [w for w in self.ack_waiters() if w["COMMAND"] != "Killed"]
        if alive:
            raise InstanceError(
                "sessions of "
                + ", ".join(sorted({str(w["USER"]) for w in alive}))
                + " wait for a semi-sync acknowledgement and were not killed: the semi-sync "
                "source stays on (turning it off would acknowledge their commits)"
            )
        for sql, args in self.dialect.disable_semisync_source():
            self._run(sql, args)
        return killed

    STUCK_COMMIT_SECONDS = 5

    @its_failure
    def release_stuck_commits(self, keep_users: Iterable[str] = ()) -> int:
        """MySQL, a primary a copy is made from while no semi-sync replica is connected (its only
        replicas are being re-seeded): CLONE waits for every transaction prepared in the binary
        log to end, and such a commit waits for an acknowledgement only a copied replica can
        give - neither ever ends, and KILL does not end a MySQL acknowledgement wait. Once a
        commit has waited STUCK_COMMIT_SECONDS with no semi-sync replica connected, the waits
        are ended as fence() ends them, without making the server read-only: clients dropped and
        refused (offline_mode), their clients get an error, never an acknowledgement (the
        transactions are in the binary log, and then in the copy, like any unacknowledged write
        a failover may keep); the semi-sync source off until no session waits, on again, then
        clients are let in. Returns the sessions whose waits were ended - those waiting when it
        began and those killed (offline_mode may drop a waiting session before the KILL reaches
        it); 0 when there was nothing to do (and always on MariaDB, whose donor does this
        itself: sh/seed.sh release_commits)."""
        d = self.dialect
        if not d.offline_mode(True):
            return 0
        waiting = self.ack_waiters()
        if not any(int(w["TIME"] or 0) >= self.STUCK_COMMIT_SECONDS for w in waiting):
            return 0
        clients = self._run("SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Rpl_semi_sync%clients'")
        if any(int(value or 0) > 0 for _, value in clients):
            return 0  # a replica may still acknowledge them
        try:
            killed = self._end_ack_waits(keep_users)
            deadline = time.monotonic() + 10
            while self.ack_waiters() and time.monotonic() < deadline:
                time.sleep(0.05)  # the released sessions commit; switched on before, they wait again
        finally:
            self._run(f"SET GLOBAL {d.semisync_source_enabled} = ON")
            for sql in d.offline_mode(False):
                self._run(sql)
        return len({int(w["ID"]) for w in waiting} | set(killed))

    @its_failure
    def ack_waiters(self) -> list[dict]:
        """PROCESSLIST rows (ID, USER, COMMAND, TIME) of sessions waiting for a semi-sync
        acknowledgement; COMMAND is 'Killed' for those killed while waiting."""
        return self._run(
            "SELECT ID, USER, COMMAND, TIME FROM information_schema.PROCESSLIST "
            "WHERE STATE LIKE 'Waiting for semi-sync ACK%'",
            dict_rows=True,
        )

    @its_failure
    def kill_client_connections(self, keep_users: Iterable[str] = ()) -> list[int]:
        """Kill application connections; returns the ids killed."""
        own = int(self.scalar("SELECT CONNECTION_ID()"))
        rows = self._run("SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST", dict_rows=True)
        killed = []
        for cid in connections_to_kill(rows, own, [self.user, *keep_users]):
            try:
                self._run("KILL CONNECTION %s", (cid,))
                killed.append(cid)
            except InstanceError as e:
                if e.errno != 1094:  # unknown thread id: it ended on its own
                    raise
        return killed
