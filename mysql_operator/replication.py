"""The replication pass of a cluster on its servers: observe -> decide -> act, one step at a time.

`ReplicationEngine` knows the members (name, ordinal, address), the operator's admin credentials,
the replication and application credentials, the settings, and TLS: `tls_ca_path`, the CA file
in the servers' own file system that replicas verify their source with (its host name too), and
`tls`, the context the operator's connections verify every server with.

`reconcile(state)` is the one pass, the operator's (reconcile.Reconciler calls it with its
Kubernetes hooks) as the benchmarks' and tests': it observes every member, asks
`rules.decide`, records a new primary in `state` - and through `record`, in the cluster
status - BEFORE acting (so a restart in the middle resumes the same way), runs the effect and
returns what was done as plain `Step`s (for Events). Every effect is idempotent: a crash mid-way
and a rerun from fresh observations converge.

Effects reach a server only through `DbOps` (db/instance.Instance in production; a recording
fake in tests/unit/test_replication_actions.py checks the order of multi-step actions).
Kubernetes-free: the reconcile wiring supplies members through its resolver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from mysql_operator.manifests.config import FALLBACK_TIMEOUT_MS, NO_FALLBACK_TIMEOUT_MS
from mysql_operator import rules
from mysql_operator import topology as t
from mysql_operator.binlog_upkeep import BinlogUpkeep
from mysql_operator.duties import AccountSet, Accounts, Events, Seen
from mysql_operator.observer import Observer
from mysql_operator.reseed import Reseeds, ReseedError
from mysql_operator.members import ClusterState, Credentials, Member, Outcome, Step
from mysql_operator.db.observation import (
    ACCESS_DENIED,
    InstanceError,
    Observation,
    identity_mismatch,
)
from mysql_operator.db.instance import Instance
from mysql_operator.db_ops import DbOps
from mysql_operator.server_facts import acknowledged_now, may_still_serve, new_primary


@dataclass(frozen=True)
class Rotation:
    """What a rotation did: the accounts (user, host) whose password changed, and those whose
    ALTER USER the primary refused for a privilege the operator's account lacks."""

    done: frozenset[tuple[str, str]]
    denied: frozenset[tuple[str, str]] = frozenset()


class ReplicationError(Exception):
    pass


class ReplicationEngine:
    def __init__(
        self,
        members: Sequence[Member],
        admin: Credentials,
        replication: Credentials,
        settings: t.Settings,
        app: Credentials | None = None,
        app_database: str | None = None,
        semisync_acks: int | None = None,
        apply_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout: float = 1.0,
        read_timeout: float = 2.0,
        wall_clock: Callable[[], float] = time.time,
        backup: Credentials | None = None,
        monitor: Credentials | None = None,
        binlog: Credentials | None = None,
        reduce_admin: bool = False,
        tls_ca_path: str | None = None,
        tls: ssl.SSLContext | None = None,
        connect: Callable[[Member], DbOps] | None = None,
    ):
        if settings.replication_tls and tls_ca_path is None:
            # rule 10 would reconfigure replicas for TLS on every pass without ever getting it
            raise ValueError("settings.replication_tls needs tls_ca_path")
        self.tls_ca_path, self.tls = tls_ca_path, tls
        self.admin, self.replication, self.app, self.backup = admin, replication, app, backup
        self.monitor = monitor  # the metrics sidecar's account (@localhost)
        self.binlog = binlog  # the binary-log archiver's account (spec.backup.binlogs)
        # `admin` is the operator's own account (not a person's): reduce it to its list
        self.reduce_admin = reduce_admin
        self.app_database = app_database
        self.settings = settings
        self.semisync_acks = t.semisync_acks(settings.instances, semisync_acks)
        self.apply_timeout = apply_timeout
        self.clock = clock
        self.wall_clock = wall_clock
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.members: dict[str, Member] = {}
        self.connect = connect or self._instance
        self.instances: dict[str, DbOps] = {}
        self.observer = Observer()  # what is remembered of each member between passes
        # what a serving primary does beyond replication, once per primary (duties.py)
        self.primary_accounts = Accounts()
        self.primary_events = Events()
        self.reseeds = Reseeds()  # copies under way and their hooks (reseed.py)
        # restart_instance(instance) restarts a server that takes logins but answers no query, and
        # an old primary that may still serve its clients when a failover replaces it
        # (its Pod deleted); never the primary, at most once per STUCK_RETRY_SECONDS
        self.restart_instance: Callable[[str], None] | None = None
        # stop_instance(instance): an old primary a failover cannot reach, restarted (its Pod
        # deleted) and waited for until its process is gone; True when it is (None: restart_instance)
        self.stop_instance: Callable[[str], bool] | None = None
        # promoted(instance): it has just been made writable (the read-write Service may route to
        # it now, not at the end of the pass: the repointing of the others can take seconds)
        self.promoted: Callable[[str], None] | None = None
        self._restarted_at: dict[str, float] = {}
        self.binlogs = BinlogUpkeep()  # spec.replication.binlogRetention (binlog_upkeep.py)
        self.set_members(members)

    # -- membership ------------------------------------------------------------------------------

    @property
    def semisync_timeout_ms(self) -> int:
        """How long a commit waits for its acknowledgements: for ever, unless the user allowed
        the fallback to asynchronous replication (spec.replication.allowAsyncFallback)."""
        return FALLBACK_TIMEOUT_MS if self.settings.async_fallback else NO_FALLBACK_TIMEOUT_MS

    def set_members(self, members: Sequence[Member]) -> None:
        """Scale: the members now present (new ones are observed and configured next time)."""
        new = {m.name: m for m in members}
        for name in list(self.instances):
            if name not in new or new[name] != self.members.get(name):
                self.instances.pop(name).close()
        for m in members:
            if m.name not in self.instances:
                self.instances[m.name] = self.connect(m)
        self.members = new

    def _instance(self, m: Member) -> Instance:
        return Instance(
            m.host,
            m.port,
            self.admin.user,
            self.admin.password,
            name=m.name,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            connect_attempts=2,
            tls=self.tls,
            tls_name=m.source_host,
        )

    def close(self) -> None:
        for i in self.instances.values():
            i.close()

    # -- observe ---------------------------------------------------------------------------------
    def down_for(self, name: str) -> float | None:
        """Seconds `name` has been (or recently was) unreachable (observer.Observer.down_for)."""
        return self.observer.down_for(name, self.clock())

    def observe(self, only: Iterable[str] | None = None) -> list[t.InstanceState]:
        """Every member's state, or only those of `only`."""
        wanted = set(self.members if only is None else only)
        names = sorted(wanted & set(self.members), key=lambda n: self.members[n].ordinal)
        started = self.clock()
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            observations = dict(zip(names, pool.map(lambda n: self.instances[n].observe(), names)))
        for name in names:
            m = self.members[name]
            why = identity_mismatch(observations[name], m.server_id, m.hostname)
            if why:  # a stale address (deleted Pod, reused IP) reaching another server
                self.instances[name].close()
                observations[name] = Observation(
                    reachable=False, error=f"{name} at {m.host}:{m.port} {why}: not this instance"
                )
        now, wall = self.clock(), self.wall_clock()
        clones = {n: self.reseeds.stage(n, o, self.members[n].host, wall) for n, o in observations.items()}
        return self.observer.states(self.members, observations, clones, started, now, wall)

    # -- the pass --------------------------------------------------------------------------------
    def reconcile(
        self,
        state: ClusterState,
        desired_primary: str | None = None,
        *,
        record: Callable[[ClusterState, t.Decision], None] | None = None,
        announce: Callable[[t.Decision], None] | None = None,
        observed: list[t.InstanceState] | None = None,
    ) -> Outcome:
        """One pass. `record(state, decision)` persists a
        new primary before anything is done to a server (an exception from it stops the pass: nothing
        acts on a choice that is not durable); `announce(decision)` sees every decision before
        it acts (Events, logs). `observed`: this pass's `observe()`, when the caller made it."""
        if observed is None:
            observed = self.observe()
        decision = rules.decide(observed, self.settings, state.current_primary, desired_primary)

        def decide(seen: list[t.InstanceState]) -> t.Decision:
            return rules.decide(seen, self.settings, state.current_primary, desired_primary)

        observed, decision = self._confirm_target(observed, decision, decide)
        observed, decision = self._settle_received(observed, decision, decide)
        if isinstance(decision, t.PRIMARY_CHANGES):
            state.current_primary = new_primary(decision)
            if record is not None:
                record(state, decision)
        if announce is not None:
            announce(decision)
        steps = self.act(decision, observed)
        self.reseeds.withdraw_finished(steps)
        if isinstance(decision, t.STEADY):
            self.binlogs.maintain(
                observed, self.observer.last_observations, self.instances, self.clock(), steps
            )
        self.restart_stuck(state.current_primary, steps)
        return Outcome(decision, steps, observed)

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

    def act(self, d: t.Decision, observed: Sequence[t.InstanceState]) -> list[Step]:
        steps: list[Step] = []
        reachable = {s.name for s in observed if s.reachable}
        handler = {
            t.Fence: lambda: self.fence(d.instances, steps),
            t.Bootstrap: lambda: self.bootstrap(d.primary, d.replicas, steps),
            t.Failover: lambda: self.failover(d, reachable, steps),
            t.Promote: lambda: self.promote(d.name, d.replicas, reachable, steps),
            t.Switchover: lambda: self.switchover(d.from_, d.to, d.replicas, reachable, steps),
            t.ConfigureReplica: lambda: self.configure_replica(d.name, d.source, steps),
            t.Decommission: lambda: self.decommission(d.instances, steps),
            t.ConfigureSemiSync: lambda: self.configure_semisync(d.on, d.primary, d.replicas, steps),
            t.Errant: lambda: self.hold_out(d.instances, d.reasons, steps),
            t.Reseed: lambda: self.reseed(d, observed, steps),
            t.NeedsSeed: lambda: steps.append(Step(d.name, "needs-seed", d.reason, ok=False)),
        }.get(type(d))
        serving = {
            t.Healthy: lambda: d.primary,
            t.ConfigureReplica: lambda: d.source,
            t.ConfigureSemiSync: lambda: d.primary,
        }.get(type(d))  # a primary that serves
        if serving:
            self.converge_accounts(serving(), steps)
            self.carry_over_events(serving(), steps)
        if handler is None:
            return steps  # Healthy, WaitForDelay, Unrecoverable: nothing else to do here
        try:
            handler()
        except (
            InstanceError,
            ReplicationError,
            ReseedError,
        ) as e:  # its Event: the decision's kind + "Failed"
            steps.append(
                Step(
                    getattr(d, "to", None) or getattr(d, "name", "") or "cluster",
                    "".join("-" + ch.lower() if ch.isupper() else ch for ch in d.kind).lstrip("-"),
                    str(e),
                    ok=False,
                )
            )
        return steps

    # -- effects ---------------------------------------------------------------------------------
    def fence(self, names: Sequence[str], steps: list[Step]) -> None:
        for n in names:
            killed = self.instances[n].fence()
            steps.append(Step(n, "fence", f"{killed} client connections killed, read-only"))

    def _make_replica(self, name: str, source: str, steps: list[Step]) -> None:
        i, src = self.instances[name], self.members[source]
        i.set_read_only(True)
        i.set_semisync_source(False)
        i.set_semisync_replica(self.settings.semisync, restart_io=False)  # point_at restarts it
        i.point_at(
            src.replication_host,
            src.port,
            self.replication.user,
            self.replication.password,
            tls_ca=self.tls_ca_path,
        )
        self.observer.error_since.pop(name, None)  # a fresh start: an error must persist again
        steps.append(
            Step(
                name,
                "replicate",
                f"read-only replica of {source}" + (" over verified TLS" if self.tls_ca_path else ""),
            )
        )

    def _make_primary(self, name: str, replicas: int, steps: list[Step]) -> None:
        i = self.instances[name]
        if i.replica_status() is not None:
            i.reset_replica()
        i.set_semisync_replica(False)
        if self.settings.semisync and replicas > 0:
            i.set_semisync_source(
                True, self.semisync_acks, self.semisync_timeout_ms
            )  # before the first write
        else:
            i.set_semisync_source(False)
        i.set_read_only(False)
        if self.promoted is not None:
            try:
                self.promoted(name)
            except Exception as e:  # noqa: BLE001 - the Kubernetes API's: the pass's end labels it
                steps.append(Step(name, "route", f"not routed to yet: {e}", warn=True))
        steps.append(
            Step(
                name,
                "promote",
                "writable primary" + (", semi-sync" if self.settings.semisync and replicas else ""),
            )
        )

    def bootstrap(self, primary: str, replicas: Sequence[str], steps: list[Step]) -> None:
        self._make_primary(primary, 0, steps)  # semi-sync comes once replicas are attached
        self.converge_accounts(primary, steps)
        for n in replicas:
            self._make_replica(n, primary, steps)

    def converge_accounts(self, primary: str, steps: list[Step]) -> None:
        """duties.Accounts on a primary that serves, as this engine's accounts are now."""
        wanted = AccountSet(
            self.admin,
            self.replication,
            self.app,
            self.app_database,
            self.backup,
            self.monitor,
            self.binlog,
            self.reduce_admin,
        )
        p, acknowledged = self.instances[primary], self._acknowledged(primary)
        self.primary_accounts.converge(primary, p, wanted, acknowledged, self.clock(), steps)

    def carry_over_events(self, primary: str, steps: list[Step]) -> None:
        """duties.Events: the events that ran on the former primary run on this one."""
        p = self.instances[primary]
        acknowledged = self._acknowledged(primary)
        seen = self.observer.last_observations

        def executed(name: str):
            o = seen.get(name)
            return o.executed if o is not None and o.reachable else None

        others = tuple((name, ops, executed(name)) for name, ops in self.instances.items() if name != primary)
        self.primary_events.carry_over(
            primary,
            p,
            acknowledged,
            self.clock(),
            self.app,
            self.admin,
            steps,
            Seen(executed(primary), others),
        )

    def _acknowledged(self, primary: str) -> bool:
        return acknowledged_now(self.observer.last_observations.get(primary))

    def rotate(self, primary: str, accounts: Sequence[Credentials], steps: list[Step]) -> Rotation:
        """New passwords for `accounts` (user, host), set on the primary with ALTER USER (the
        statements replicate). Connections already open stay open; the engine keeps using the
        credentials it was made with until the caller makes one with the new passwords. When the
        replication account's changes, every replica of the primary is pointed at it again with
        the new password, one at a time (a replica's IO thread would otherwise fail at its next
        connect)."""
        p = self.instances[primary]
        done, denied = set(), set()
        if not acknowledged_now(self.observer.last_observations.get(primary)):
            return Rotation(frozenset())  # at a pass that sees a replica acknowledging
        for a in accounts:
            try:
                p.set_password(a.user, a.host, a.password)
                steps.append(Step(primary, "rotate", f"new password for {a.user}@{a.host}"))
            except InstanceError as e:
                if e.errno in ACCESS_DENIED:  # the caller says what to do: no retry helps
                    denied.add((a.user, a.host))
                    steps.append(Step(primary, "rotate", f"{a.user}@{a.host}: {e}", warn=True))
                else:
                    steps.append(Step(primary, "rotate", f"{a.user}@{a.host}: {e}", ok=False))
                continue
            done.add((a.user, a.host))
            if a.user == self.replication.user and a.host == self.replication.host:
                self.replication = a
                self._repoint_in_turn(primary, steps)
        return Rotation(frozenset(done), frozenset(denied))

    REPOINT_WAIT_SECONDS = 20.0

    def _repoint_in_turn(self, primary: str, steps: list[Step]) -> None:
        """Every replica of `primary` pointed at it again (the replication account's new
        password), one at a time: the next only once this one is connected again, so that the
        others go on acknowledging commits meanwhile (a reconnect resolves the source's name and
        logs in again; with every replica reconnecting at once, each commit would wait for the
        slowest). One that does not reconnect within REPOINT_WAIT_SECONDS leaves the rest as they
        are: their open connections stay valid, and one that drops later fails with the old
        password and is repointed then."""
        replicas = [
            name
            for name, obs in sorted(self.observer.last_observations.items())
            if name != primary and obs.replica is not None
        ]
        for k, name in enumerate(replicas):
            try:  # a replica failing here reconnects with the old password: the
                self._make_replica(name, primary, steps)  # error repoints it later
            except InstanceError as e:
                steps.append(Step(name, "replicate", str(e), ok=False))
                continue
            rest = replicas[k + 1 :]
            if rest and not self._reconnected(name):
                steps.append(
                    Step(
                        name,
                        "replicate",
                        f"not connected to {primary} again within {self.REPOINT_WAIT_SECONDS:.0f}s: "
                        f"{', '.join(rest)} keep their connection and are repointed when it drops",
                        warn=True,
                    )
                )
                return

    def _reconnected(self, name: str) -> bool:
        try:
            return self.instances[name].wait_connected(self.REPOINT_WAIT_SECONDS)
        except InstanceError:
            return False

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

    def configure_replica(self, name: str, source: str, steps: list[Step]) -> None:
        self._make_replica(name, source, steps)

    def decommission(self, names: Sequence[str], steps: list[Step]) -> None:
        for n in names:
            i = self.instances[n]
            i.set_read_only(True)
            i.set_semisync_replica(False)
            i.reset_replica()
            steps.append(Step(n, "decommission", "replication stopped and reset; ready to remove"))

    def configure_semisync(self, on: bool, primary: str, replicas: Sequence[str], steps: list[Step]) -> None:
        p = self.instances[primary]
        if not on:
            p.set_semisync_source(False)
        for n in replicas:
            self.instances[n].set_semisync_replica(on)
        if on:
            p.set_semisync_source(True, self.semisync_acks, self.semisync_timeout_ms)
        steps.append(
            Step(
                primary,
                "semi-sync",
                ("on" if on else "off") + (f", {self.semisync_acks} ack(s)" if on else ""),
            )
        )

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
