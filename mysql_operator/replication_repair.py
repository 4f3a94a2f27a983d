"""The replication engine's repairs: a re-seed begun and watched (and a serving donor's stuck
commits released), errant servers held out, a server stuck on its own locks restarted.

`ServerRepairs` extends `PrimaryChanges` (replication_failover.py); the copies themselves are
reseed.py's."""

from __future__ import annotations

from typing import Sequence

from mysql_operator import topology as t
from mysql_operator.members import Step
from mysql_operator.db.observation import InstanceError
from mysql_operator.replication_failover import PrimaryChanges


class ServerRepairs(PrimaryChanges):
    def reseed(self, d: t.Reseed, observed: Sequence[t.InstanceState], steps: list[Step]) -> None:
        """Replace `d.name`'s data by a copy of `d.donor`'s (reseed.py): later passes watch the
        copy; once copied, the server restarts on the new data; then it is an ordinary replica
        without a source (rule 7)."""
        state = next(s for s in observed if s.name == d.name)
        if state.clone in (t.CLONE_COPYING, t.CLONE_COPIED):
            # the status shows its progress; a copied server is stopping to restart on it
            if state.clone == t.CLONE_COPYING:
                self.release_stuck_commits(d, observed, steps)
            return
        self.reseeds.begin(
            d,
            self.instances[d.name],
            self.instances[d.donor],
            self.members[d.donor],
            self.admin,
            self.tls_ca_path,
            self.clock(),
            self.wall_clock(),
            steps,
            failed=state.clone_error if state.clone == t.CLONE_FAILED else None,
        )

    def release_stuck_commits(
        self, d: t.Reseed, observed: Sequence[t.InstanceState], steps: list[Step]
    ) -> None:
        """A copy from a serving primary waits for its commits to end (reseed.py)."""
        donor = self.reseeds.donor_of(d)
        seen = next((s for s in observed if s.name == donor), None)
        if seen is None or not seen.reachable or seen.read_only or donor == d.name:
            return  # a replica's copy waits for nobody's commits
        self.reseeds.release_stuck_commits(d.name, donor, self.instances[donor], steps)

    STUCK_SECONDS = 60.0  # a server that takes logins but answers no query this long is restarted

    STUCK_RETRY_SECONDS = 300.0

    def restart_stuck(self, primary: str | None, steps: list[Step]) -> None:
        """Restart (restart_instance) every instance but the primary that has taken logins but
        answered no query for STUCK_SECONDS: a server stuck on its own locks (seen on MariaDB, an
        old primary resumed after a hang with commits still waiting for acknowledgements that
        will never come) never gets better, and cannot even be fenced. It serves nobody (not
        reachable: no role), and restarts on its own data: crash recovery, then it rejoins or
        is re-seeded like any old primary."""
        if self.restart_instance is None:
            return
        now = self.clock()
        for name, since in list(self.observer.stuck_since.items()):
            if name == primary or now - since < self.STUCK_SECONDS:
                continue
            if now - self._restarted_at.get(name, float("-inf")) < self.STUCK_RETRY_SECONDS:
                continue
            self._restarted_at[name] = now
            last = self.observer.last_error.get(name, "")
            try:
                self.restart_instance(name)
            except Exception as e:  # noqa: BLE001 - the Kubernetes API's errors: tried again later
                steps.append(Step(name, "restart-stuck", f"its restart failed: {e}", ok=False))
                continue
            steps.append(
                Step(
                    name,
                    "restart-stuck",
                    f"took logins but answered no query for {now - since:.0f} s ({last}): restarted",
                    warn=True,
                )
            )

    def hold_out(self, names: Sequence[str], reasons: Sequence[str], steps: list[Step]) -> None:
        for n, why in zip(names, reasons):
            try:
                self.instances[n].set_read_only(True)
            except InstanceError:
                pass  # it answered a moment ago; the next loop tries again
            steps.append(Step(n, "held-out", why, ok=False))
