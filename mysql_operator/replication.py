"""The replication pass of a cluster on its servers: observe -> decide -> act, one step at a time.

`ReplicationEngine` knows the members (name, ordinal, address), the operator's admin credentials,
the replication and application credentials, the settings, and TLS: `tls_ca_path`, the CA file
in the servers' own file system that replicas verify their source with (its host name too), and
`tls`, the context the operator's connections verify every server with.

`reconcile(state)` is the one pass, the operator's (reconcile.Reconciler calls it with its
Kubernetes hooks) as the benchmarks' and tests': it observes every member, asks
`rules.decide` (a failover's quiesce: the replicas stop receiving and are observed again, and
it decides again), reads what acting on the decision reads (`survey`: survey.py), records a new
primary in `state` - and through `record`, in the cluster status - BEFORE acting (so a restart
in the middle resumes the same way), runs the effect and returns what was done as plain `Step`s
(for Events). Every effect is idempotent: a crash mid-way and a rerun from fresh observations
converge. Only the quiesce and a failover's own steps read after the pass has begun to write.

Effects reach a server only through `DbOps` (db/instance.Instance in production; a recording
fake in tests/support/fake_servers.py, with which tests/unit/test_replication_actions.py checks
the order of multi-step actions).
Kubernetes-free: the reconcile wiring supplies members through its resolver.

The engine is a chain of classes, one concern a module, each extending the one below; every
method is `ReplicationEngine`'s:
- replication_members.py: `EngineMembers`, what the engine is made with, the members'
  connections, `observe`;
- replication_roles.py: `ServerRoles`, one server made primary, replica, fenced, decommissioned;
- replication_accounts.py: `PrimaryAccounts`, the accounts and events of a serving primary,
  `rotate` and the repointing of the replicas;
- replication_failover.py: `PrimaryChanges`, bootstrap, failover, promote, switchover;
- replication_repair.py: `ServerRepairs`, re-seeds, servers held out, stuck servers restarted;
- here: `ReplicationEngine`, the pass (`reconcile`) and the effect each decision has (`act`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from mysql_operator import rules
from mysql_operator import topology as t
from mysql_operator.reseed import ReseedError
from mysql_operator.members import ClusterState, Outcome, Step
from mysql_operator.db.observation import InstanceError
from mysql_operator.server_facts import new_primary
from mysql_operator.survey import Survey, attempt
from mysql_operator.replication_failover import ReplicationError
from mysql_operator.replication_repair import ServerRepairs


class ReplicationEngine(ServerRepairs):
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
        survey = self.survey(decision, observed)
        if isinstance(decision, t.PRIMARY_CHANGES):
            state.current_primary = new_primary(decision)
            if record is not None:
                record(state, decision)
        if announce is not None:
            announce(decision)
        steps = self.act(decision, observed, survey)
        self.reseeds.withdraw_finished(steps)
        if isinstance(decision, t.STEADY):
            surveyed = {name: survey.ops(name, ops) for name, ops in self.instances.items()}
            self.binlogs.maintain(observed, self.observer.last_observations, surveyed, survey.now, steps)
        self.restart_stuck(state.current_primary, steps)
        return Outcome(decision, steps, observed)

    def survey(self, d: t.Decision, observed: Sequence[t.InstanceState]) -> Survey:
        """Effect (reads only): what acting on `d` reads beyond the observation (survey.py), read
        now, before anything is recorded or done: the events of the primary that serves (and of
        the servers its events' carry-over is checked on), the binary logs due for a look."""
        s = Survey(now=self.clock())
        reachable = {o.name for o in observed if o.reachable}
        primary = serving_primary(d)
        if primary in reachable:
            s.events[primary] = attempt(self.instances[primary].events)
            for name in self.primary_events.to_ask(primary, self._events_seen(primary)):
                if name in reachable:
                    s.events[name] = attempt(self.instances[name].events)
        if isinstance(d, t.STEADY):
            for name in self.binlogs.due(observed, s.now):
                s.binlogs[name] = attempt(self.instances[name].binary_logs)
        return s

    def act(
        self, d: t.Decision, observed: Sequence[t.InstanceState], survey: Survey | None = None
    ) -> list[Step]:
        """Effect: the decision carried out; what it reads beyond `observed` comes from `survey`
        (None: read when needed)."""
        survey = survey or Survey()
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
        serving = serving_primary(d)
        if serving:
            self.converge_accounts(serving, steps)
            self.carry_over_events(serving, steps, survey)
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


def serving_primary(d: t.Decision) -> str | None:
    """Pure: the primary that serves as `d` is carried out (its accounts and events are kept),
    or None."""
    if isinstance(d, (t.Healthy, t.ConfigureSemiSync)):
        return d.primary
    if isinstance(d, t.ConfigureReplica):
        return d.source
    return None
