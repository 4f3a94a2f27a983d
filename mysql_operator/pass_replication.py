"""The replication step of a cluster's pass: the members resolved, the wanted primary, then
ReplicationEngine.reconcile with this operator's Kubernetes hooks; after it, a pending password
rotation, a forced failover's record, the rolling update's next restart.

`PassReplication` extends `PassStatus` (pass_status.py): the status written when a new primary
is chosen says what every status says (`_standing`)."""

from __future__ import annotations

import logging
import time

from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator import topology as t
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.resolve import resolve
from mysql_operator.members import ClusterState, Member, Step
from mysql_operator.replication import ReplicationEngine
from mysql_operator.server_facts import leaving_primary
from mysql_operator.credentials import not_rotated, rotation_denied, rotation_accounts
from mysql_operator.pods import expected_identity, ready_count, ended_pod, server_not_running
from mysql_operator.engine_config import engine_settings
from mysql_operator.rollout import restarted, roll_delete, roll_desired, roll_step
from mysql_operator.tls_upkeep import serves_tls
from mysql_operator.instance_status import primary_since, recorded_executed
from mysql_operator.status import primary_change_status
from mysql_operator.status_events import decision_event
from mysql_operator.summary import Summary
from mysql_operator import reasons as R
from mysql_operator.engine_cache import engine_for
from mysql_operator.engine_hooks import force_failover_done, keep_evidence, request_seed
from mysql_operator.pass_state import ClusterEntry, Engaged, Observed, Replicated
from mysql_operator.pass_status import PassStatus

log = logging.getLogger(__name__)

# a server the engine restarts (stuck, or an old primary fenced at a failover) is killed after this
# rather than the Pod's 120 s: a hung process never shuts down cleanly, and one that wakes must not
# serve its clients in between
RESTART_GRACE_SECONDS = 2

# how much longer than its grace an old primary's deleted Pod is waited for before a failover
# promotes anyway (a node the kubelet of which does not answer never confirms the kill)
STOP_WAIT_SECONDS = 10


class PassReplication(PassStatus):
    def _engage(self, seen: Observed, entry: ClusterEntry) -> Engaged:
        """Observe: the cluster's engine (kept across passes) with this pass's members and
        settings, and every server observed into `seen.instances`. Reads only."""
        c, body, previous = seen.c, seen.body, seen.previous
        ns = c.namespace
        force = t.FORCE_FAILOVER_ANNOTATION in (body["metadata"].get("annotations") or {})
        # replicas configured before TLS move to it (topology rule 10)
        settings = engine_settings(
            c, replication_tls=entry.tls.state is not None and serves_tls(seen.listed), force_failover=force
        )
        members = [
            Member(
                seen.names[o],
                o,
                *resolve(c, o, seen.raw_pods.get(o), self.resolver_mode),
                **expected_identity(seen.names[o], o, seen.raw_pods.get(o)),
                source_host=m.pod_host(c, o),
                pod_down=server_not_running(seen.raw_pods.get(o)),
                ended_before=ended_pod(self.reads.deleted_pod(ns, seen.names[o])),
            )
            for o in seen.ordinals
        ]
        engine = engine_for(
            entry, c, seen.logins.current, settings, members, self.apply_timeout, self.connect
        )
        engine.observer.primary_since = primary_since(previous, seen.current_primary)
        engine.observer.recorded_executed = recorded_executed(previous, c.spec.flavor)
        started = time.monotonic()
        seen.instances = engine.observe()
        entry.tls.observe_served(engine.instances, self.clock())
        return Engaged(engine, settings, members, force, started)

    def _replicate(self, seen: Observed, entry: ClusterEntry, engaged: Engaged) -> Replicated:
        """The replication pass on the servers `_engage` observed: the wanted primary (a
        switchover request's target, moved by the rolling update's next step), then
        ReplicationEngine.reconcile (decide, record a new primary BEFORE acting, act) with this
        operator's hooks: the record and the decision's Event go through KubeOps."""
        c, body, previous, secrets = seen.c, seen.body, seen.previous, seen.logins.secrets
        ns, name = c.namespace, c.name
        engine, settings, members, force, started = (
            engaged.engine,
            engaged.settings,
            engaged.members,
            engaged.force,
            engaged.started,
        )
        state = ClusterState(seen.current_primary)
        # a switchover asked for (switchover.py); the rolling update moves the wanted primary off
        # the Pod it restarts next
        asked = seen.requests[0].target if seen.requests else None
        roll, revision = roll_step(seen.statefulset, c, seen.listed, seen.instances, seen.current_primary)
        desired = roll_desired(asked, roll, revision, seen.listed)
        relabelled: dict[str, str | None] = {}  # the role labels the hooks below set

        def record(st: ClusterState, decision: t.Decision) -> None:
            changing = Summary(
                instances=c.spec.instances,
                generation=c.generation,
                **seen.spec_fields(),
                **self._standing(c, entry),
                ready=seen.ready,
                primary=st.current_primary,
                decision=decision.kind,
                decision_reason=redact(decision.reason, secrets),
            )
            status = primary_change_status(changing, previous, clock.stamp())
            self.kube.patch_status(body, {**status, "primarySince": clock.stamp(precise=True)})

        def announce(decision: t.Decision) -> None:
            pre = decision_event(decision, secrets)
            if pre:
                self.kube.post_events(body, [pre])
            leaving = leaving_primary(decision)
            if leaving:  # -rw stops routing to it before it is fenced, not after the whole pass
                self.kube.set_pod_label(ns, leaving, m.ROLE_LABEL, None)
                relabelled[leaving] = None
            if decision.kind != entry.last_decision:  # what the loop thinks, once per change
                log.info(
                    "%s/%s decision %s: %s", ns, name, decision.kind, redact(decision.reason or "-", secrets)
                )
                entry.last_decision = decision.kind

        engine.reseeds.keep_evidence = lambda instance, gtids, events: keep_evidence(
            self.kube, self.job_image, body, c, instance, gtids, events
        )
        engine.reseeds.request_seed = lambda instance, _donor, host: request_seed(
            self.kube, body, c, instance, host
        )

        def promoted(instance: str) -> None:  # -rw routes to it now, not at the end of the pass
            self.kube.set_pod_label(ns, instance, m.ROLE_LABEL, m.ROLE_PRIMARY)
            relabelled[instance] = m.ROLE_PRIMARY

        engine.promoted = promoted
        engine.restart_instance = lambda instance: self.kube.delete_pod(
            ns, instance, grace_seconds=RESTART_GRACE_SECONDS
        )
        engine.stop_instance = lambda instance: self.kube.delete_pod_and_wait(
            ns, instance, RESTART_GRACE_SECONDS, RESTART_GRACE_SECONDS + STOP_WAIT_SECONDS
        )
        engine.reseeds.seed_done = lambda instance: self.kube.apply(
            m.owned(m.reseed_request(c, None), k.owner_of(body))
        )
        outcome = engine.reconcile(state, desired, record=record, announce=announce, observed=seen.instances)
        decision, steps, observed = outcome.decision, outcome.steps, outcome.observed
        self.restarts.seen(f"{ns}/{name}", roll, settled=seen.ready >= c.spec.instances)
        if steps or time.monotonic() - started > 1.0:  # acted, or an instance answered slowly
            log.info(
                "%s/%s %s pass took %.2fs (%d steps; unreachable: %s)",
                ns,
                name,
                decision.kind,
                time.monotonic() - started,
                len(steps),
                ", ".join(i.name for i in observed if not i.reachable) or "none",
            )
        return Replicated(engine, settings, members, force, state, outcome, roll, desired, relabelled)

    def _after(self, seen: Observed, entry: ClusterEntry, run: Replicated) -> None:
        """What follows the replication pass: a pending password rotation and a forced failover's
        record (the replication step's own), then, planned and through the executor, a rolling
        update's next Pod restart and the certificate each server serves."""
        c, body, logins = seen.c, seen.body, seen.logins
        decision, steps = run.outcome.decision, run.outcome.steps
        primary = run.state.current_primary
        if logins.pending and isinstance(decision, t.Healthy) and primary:
            self._rotate(seen, run.engine, primary, steps)
        if run.force:
            force_failover_done(self.kube, body, decision, steps, logins.secrets)
        # the next Pod of a rolling update restarted, the servers serving an older certificate
        # reloading it
        todo = [
            *roll_delete(body, decision, run.roll),
            *entry.tls.serve_current(c, list(run.engine.instances)),
        ]
        gone = restarted(self.execute(self.kube, body, todo, servers=run.engine.instances))
        if gone:  # the status must not count it ready: it is going down now
            seen.ready = ready_count(seen.pods, c.spec.instances, gone)
        if primary != seen.current_primary:
            # the StatefulSet's size depends on the primary (a scale down keeps the primary's Pod
            # until it moved away): the next pass applies it again
            entry.last_apply = float("-inf")

    def _rotate(self, seen: Observed, engine: ReplicationEngine, primary: str, steps: list[Step]) -> None:
        """A changed password in the credentials Secret: ALTER USER through the primary, once
        nothing else is going on; the next pass's engine logs in with the new passwords."""
        c, body, logins = seen.c, seen.body, seen.logins
        accounts = rotation_accounts(c, logins.pending, logins.passwords)
        rotation = engine.rotate(primary, list(accounts.values()), steps)
        rotated = [key for key, a in accounts.items() if (a.user, a.host) in rotation.done]
        manual = [(key, why) for key in logins.pending if (why := not_rotated(c, key))] + [
            (key, rotation_denied(c, key, a.user, a.host))
            for key, a in accounts.items()
            if (a.user, a.host) in rotation.denied
        ]
        if manual:
            self.kube.post_events(body, [("Warning", R.PASSWORD_NOT_ROTATED, why) for _, why in manual])
            rotated += [key for key, _ in manual]
        if rotated:
            self.passwords.record_applied(
                c, k.owner_of(body), {**logins.on_servers, **{key: logins.passwords[key] for key in rotated}}
            )
            log.info("%s/%s passwords rotated: %s", c.namespace, c.name, ", ".join(rotated))
