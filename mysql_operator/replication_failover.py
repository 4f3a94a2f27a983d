"""The replication engine's primary changes: bootstrap, failover (its target asked again and the
replicas settled before it is recorded; the old primary fenced, restarted when it cannot be
told), promote and switchover.

`PrimaryChanges` extends `PrimaryAccounts` (replication_accounts.py); a primary change that
cannot go on raises `ReplicationError`, which the pass (replication.py: act) reports as a failed
step."""

from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from mysql_operator import topology as t
from mysql_operator.members import Step
from mysql_operator.db.observation import InstanceError
from mysql_operator.server_facts import may_still_serve
from mysql_operator.replication_accounts import PrimaryAccounts


class ReplicationError(Exception):
    pass


class PrimaryChanges(PrimaryAccounts):
    def bootstrap(self, primary: str, replicas: Sequence[str], steps: list[Step]) -> None:
        self._make_primary(primary, 0, steps)  # semi-sync comes once replicas are attached
        self.converge_accounts(primary, steps)
        for n in replicas:
            self._make_replica(n, primary, steps)

    def _confirm_target(
        self,
        observed: list[t.InstanceState],
        decision: t.Decision,
        decide: Callable[[list[t.InstanceState]], t.Decision],
    ) -> tuple[list[t.InstanceState], t.Decision]:
        """A failover's target asked again before it is recorded as the primary. A pass observes
        every server at once and waits for the slowest, and the primary's observation that timed
        out took seconds: the target's answer may be that old (a replica hung a moment after it
        answered). One that no longer answers is taken as unreachable and the decision made again
        (another target, or a held failover), so no hung server is recorded as the primary."""
        for _ in observed:
            if not isinstance(decision, t.Failover):
                break
            o = self.instances[decision.to].observe()
            if o.reachable:
                break
            self.observer.unreachable(decision.to, o.error or "", self.clock())
            observed = [
                dataclasses.replace(s, reachable=False, executed=None, received=None, purged=None)
                if s.name == decision.to
                else s
                for s in observed
            ]
            decision = decide(observed)
        return observed, decision

    def _settle_received(
        self,
        observed: list[t.InstanceState],
        decision: t.Decision,
        decide: Callable[[list[t.InstanceState]], t.Decision],
    ) -> tuple[list[t.InstanceState], t.Decision]:
        """A failover's target chosen again once no replica can receive more, before it is
        recorded. A primary that only this operator cannot reach (a partition, or too slow to
        answer in time) still sends transactions after the pass observed the replicas, and a
        client has them acknowledged on one replica's word: promoting the replica that was the
        most advanced when observed would discard them. So every replica that answers stops
        receiving first (what the failover's fence does anyway), is observed again, and the
        decision is made on what they hold then. A replica whose IO thread could not be stopped
        is taken as observed again, and the failover's fence tries again."""
        if not isinstance(decision, t.Failover):
            return observed, decision
        names = [
            s.name for s in observed if s.reachable and s.source is not None and s.name != decision.from_
        ]

        def stop(name: str) -> None:
            with contextlib.suppress(InstanceError):
                self.instances[name].stop_receiving()

        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            list(pool.map(stop, names))
        again = {s.name: s for s in self.observe(names)}
        observed = [again.get(s.name, s) for s in observed]
        return observed, decide(observed)

    def failover(self, d: t.Failover, reachable: set[str], steps: list[Step]) -> None:
        # 1. fence, all at once (each may wait on an IO thread stuck on a hung source): nobody
        #    receives more from the old primary; the old primary stops taking writes
        def fence_one(n: str) -> Step:
            if n not in reachable:
                if n == d.from_ and n != d.to:
                    return self._fence_by_restart(n)
                return Step(n, "fence", "unreachable, skipped")
            i = self.instances[n]
            try:
                if n == d.from_ and n != d.to:
                    i.fence()
                    return Step(n, "fence", "old primary: client connections killed, read-only")
                if i.replica_status() is not None:
                    i.stop_io_thread()
                    return Step(n, "fence", "replica IO thread stopped")
                return Step(n, "fence", "not a replica")
            except InstanceError as e:
                return Step(n, "fence", str(e), ok=False)

        names = list(dict.fromkeys([*d.fence, d.to]))
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            steps.extend(pool.map(fence_one, names))
        target = self.instances[d.to]
        status = target.replica_status()
        if status is not None:
            if status.io_state != "No":
                raise ReplicationError(f"{d.to}: replica IO thread still running; not promoted")
            if not status.sql_running:
                target.start_sql_thread()
            # 2. let the new primary apply everything it received
            if not target.wait_for(status.received, self.apply_timeout):
                raise ReplicationError(
                    f"{d.to} did not apply its relay log within {self.apply_timeout:.0f}s; not promoted"
                )
            steps.append(Step(d.to, "apply", f"relay log applied up to {status.received}"))
        # 3. promote, 4. repoint the others
        live = [n for n in d.replicas if n in reachable]
        self._make_primary(d.to, len(live), steps)
        for n in live:
            try:
                self._make_replica(n, d.to, steps)
            except InstanceError as e:
                steps.append(Step(n, "replicate", str(e), ok=False))

    def _fence_by_restart(self, name: str) -> Step:
        """An old primary that cannot be told to stop writing (see may_still_serve) is restarted
        (restart_instance: its Pod deleted): every server starts read-only, so it can never wake
        up writable beside the new primary (a SIGSTOPped process resumed, a partition healed) and
        take writes until the next pass fences it. One that refused the connection, or whose Pod
        shows its server ended (down_evidence), is down already and starts read-only again by
        itself (deleting its Pod and waiting for it to be gone took the failover 2 s more)."""
        why = self.observer.last_error.get(name, "")
        if self.restart_instance is None or not may_still_serve(why):
            return Step(name, "fence", "unreachable, skipped")
        if self.observer.evidence.get(name):
            return Step(name, "fence", f"unreachable, skipped: {self.observer.evidence[name]}")
        self._restarted_at[name] = self.clock()
        try:
            if self.stop_instance is not None:
                # the promotion waits until the old process is gone: a deleted Pod's server
                # serves its clients, writable, until its grace period ends
                if not self.stop_instance(name):
                    return Step(
                        name,
                        "fence",
                        f"old primary unreachable ({why or 'no answer'}): restarted, but still "
                        "running when the wait ended; promoted anyway (its replicas are fenced: it "
                        "cannot have a commit acknowledged)",
                        warn=True,
                    )
            else:
                self.restart_instance(name)
        except Exception as e:  # noqa: BLE001 - the Kubernetes API's errors: reported, not fatal
            return Step(name, "fence", f"unreachable; its restart failed: {e}", ok=False)
        return Step(
            name,
            "fence",
            f"old primary unreachable ({why or 'no answer'}): restarted, so that it comes back read-only",
            warn=True,
        )

    def promote(self, name: str, replicas: Sequence[str], reachable: set[str], steps: list[Step]) -> None:
        self.failover(t.Failover(name, name, (), tuple(replicas)), reachable, steps)

    def switchover(
        self, old: str, new: str, replicas: Sequence[str], reachable: set[str], steps: list[Step]
    ) -> None:
        o, n = self.instances[old], self.instances[new]
        o.set_read_only(True)
        killed = o.kill_client_connections()
        steps.append(Step(old, "demote", f"read-only, {len(killed)} client connections killed"))
        executed = o.observe().executed
        if not n.wait_for(executed, self.apply_timeout):
            raise ReplicationError(
                f"{new} did not catch up with {old} within "
                f"{self.apply_timeout:.0f}s; switchover not completed"
            )
        steps.append(Step(new, "apply", f"caught up with {old} at {executed}"))
        live = [r for r in replicas if r in reachable and r != new]
        self._make_primary(new, len(live), steps)
        for r in live:
            try:
                self._make_replica(r, new, steps)
            except InstanceError as e:
                steps.append(Step(r, "replicate", str(e), ok=False))
