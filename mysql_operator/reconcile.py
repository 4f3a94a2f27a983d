"""Level-triggered reconcile of one MySQLCluster: one pass observes, decides, acts, then
publishes one status.

`Reconciler._reconcile(body)` is the one pass: kopf's create/update/resume handlers, the periodic
timer (`tick`) and the watches on owned Pods/StatefulSets (`nudge`) all end there. It is
idempotent, in this order:

  parse the spec; one refused (SpecError) -> condition SpecValid False + a Warning Event, and the
    pass acts on the last spec that parsed (status.lastValidSpec, recorded by the status patch of
    the pass that first acts on a generation); with none recorded: phase Invalid, nothing touched
  observe: the credentials (`Logins`: the Secret, created only if missing, and the record of what
    the servers have), then - after the upkeep - the Pods: one `Observed` value
  upkeep of what needs no server: the certificate (tls_upkeep.py), every owned object applied
    when due (owned.py)
  the restore gate (restore_gate.py): a cluster being restored goes no further
  replicate: the servers observed, the wanted primary (a switchover request: switchover.py; the
    rolling update moves it), then the ReplicationEngine's pass (decide -> record -> act; the
    same code the benchmarks and integration tests drive) with this module's hooks: a new
    primary is recorded in the status BEFORE acting
  after it: a pending password rotation, a forced failover's record, a rolling restart
  conclude: who serves (pods.serving, pure), the SQL objects, then the role labels taken away,
    the Events, one status (with the switchover request's record: a finished one's annotation
    is removed after it) and the role labels given (pods.label_plan: never two Pods carry
    role=primary, never a role the status does not give)

The pass's own Kubernetes writes - owned objects, status records, Events, Pod labels and
annotations, Pod restarts, Jobs - go through `KubeOps` (k8s/ops.py). These still take the API
client: what holds key material (the certificates' Secrets and cert-manager objects, the
credentials Secret and its record), the volume growth, the archiver Deployment's removal
(owned.py) and the SQL objects' own writes (sql_objects.py: their Events, status and password
Secrets). The cluster's status has no other writer
(the backup controller reports its fields: `report`). What the pass decides with
lives in pure modules: pods.py (Pods, roles, who serves), status.py (the status and its Plan; conditions.py, status_events.py, instance_status.py),
credentials.py (Secret keys, passwords), rolling.py (the rolling update's plan; its effects:
rollout.py), restoring.py (the restore record), topology.py (replication decisions;
replication.py acts on them, engine_config.py builds its engine from the spec). Secrets never
leave it except into server connections: step texts and errors are redacted before Events,
status or logs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from typing import Any, Callable, Mapping

from kubernetes.client.rest import ApiException

from mysql_operator import __version__, clock
from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import switchover as sw
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.k8s.resolve import resolve
from mysql_operator.db.instance import Instance
from mysql_operator.k8s import jobs
from mysql_operator.members import ClusterState, Member, Step
from mysql_operator.replication import ReplicationEngine
from mysql_operator.server_facts import commits_wait, leaving_primary
from mysql_operator.credentials import (
    not_rotated,
    rotation_denied,
    rotation_accounts,
    rotation_pending,
)
from mysql_operator.pods import (
    NO_MOVES,
    expected_identity,
    label_plan,
    pod_ordinal,
    ready_count,
    promotion_succeeded,
    ended_pod,
    server_not_running,
    serving,
)
from mysql_operator.engine_config import engine_settings
from mysql_operator.owned import apply_owned
from mysql_operator.passwords import PasswordStore
from mysql_operator import restore_gate as gate
from mysql_operator import restore_plan
from mysql_operator.sql_objects import SqlObjects
from mysql_operator.rollout import (
    RestartGate,
    replace_stuck,
    restarting_now,
    roll_delete,
    roll_desired,
    roll_step,
)
from mysql_operator.tls_upkeep import serves_tls
from mysql_operator.tls_upkeep import renewed as tls_renewed
from mysql_operator.conditions import PASS_OVERDUE, overdue_conditions
from mysql_operator.instance_status import (
    archiver_state,
    instance_entries,
    primary_since,
    recorded_executed,
    reseed_progress,
    were_lagging,
)
from mysql_operator.spec_record import spec_in_effect
from mysql_operator.status import Plan, Result, plan, primary_change_status, timer_can_skip
from mysql_operator.status_events import decision_event, events_from_steps
from mysql_operator.summary import Summary, ArchiverState
from mysql_operator import reasons as R
from mysql_operator.engine_cache import engine_for
from mysql_operator.engine_hooks import force_failover_done, keep_evidence, request_seed
from mysql_operator.executor import carry_out
from mysql_operator.pass_state import (
    ClusterEntry,
    Logins,
    Observed,
    Replicated,
    apply_still_wanted,
    essence,
    merge_asks,
)
from mysql_operator.routing import primary_reached
from mysql_operator.sql_sync import sync_sql_objects

log = logging.getLogger(__name__)

APPLY_RETRY_SECONDS = 10.0  # while an owned object is not applied (and at once on a spec change)
# a server the engine restarts (stuck, or an old primary fenced at a failover) is killed after this
# rather than the Pod's 120 s: a hung process never shuts down cleanly, and one that wakes must not
# serve its clients in between
RESTART_GRACE_SECONDS = 2
# how much longer than its grace an old primary's deleted Pod is waited for before a failover
# promotes anyway (a node the kubelet of which does not answer never confirms the kill)
STOP_WAIT_SECONDS = 10


# ---------------------------------------------------------------------------------------- effects


class Reconciler:
    """Holds one ReplicationEngine per cluster (it measures outages across loops) and a lock per
    cluster (handlers, timer and watches never act on one cluster at the same time)."""

    def __init__(
        self,
        api,
        resolver_mode: str = "auto",
        resync_seconds: float = 60.0,
        apply_timeout: float = 30.0,
        password_factory: Callable[[], str] = m.random_password,
        clock: Callable[[], float] = time.monotonic,
        job_image: str | None = None,
        reads: Reads | None = None,
        exporter_image: str | None = None,
        tools_repository: str | None = None,
        observe: Callable[[str, str, Callable[[], Result]], Result] | None = None,
        operator_upgrades: str = "Auto",
        kube: KubeOps | None = None,
    ):
        self.api = api
        # wraps every pass (metrics.observed in the operator: outcome, duration, what it did)
        self._observe = observe or (lambda namespace, name, run: run())
        # what a pass reads (watched stores in the operator; the API server itself by default)
        self.reads = reads or Reads(api)
        self.kube: KubeOps = kube or self.reads  # what the pass writes
        self.resolver_mode = resolver_mode
        self.resync_seconds = resync_seconds
        self.apply_timeout = apply_timeout
        self.passwords = PasswordStore(api, self.reads, password_factory, resync_seconds)
        self.sql = SqlObjects(api, password_factory)  # MySQLDatabase, MySQLUser, MySQLGrant
        self.clock = clock
        self._entries: dict[tuple[str, str], ClusterEntry] = {}
        self.restarts = RestartGate(clock, operator_upgrades, alive=self._exists)
        self.job_image = job_image or jobs.job_image()  # of the Jobs that work on tenant bytes
        self.exporter_image = exporter_image or jobs.exporter_image()  # the metrics sidecar's
        self.tools_repository = tools_repository or jobs.tools_repository()  # the Jobs' client tools
        self._guard = threading.Lock()

    def _entry(self, namespace: str, name: str, uid: str | None = None) -> ClusterEntry:
        """What is kept of the cluster `namespace/name` between its passes; with `uid`, of that
        object: one left by an earlier object of that name (deleted and created again before
        its deletion was seen) is replaced, and its engine closed, as `forget` does. A pass of
        the old object still running keeps its own entry and its lock; the new object's passes
        never read its state (its recorded primary, its re-seeds under way)."""
        stale = None
        with self._guard:
            entry = self._entries.get((namespace, name))
            if entry is not None and uid and entry.uid and entry.uid != uid:
                stale, entry = entry, None
            if entry is None:
                entry = self._entries[(namespace, name)] = ClusterEntry(uid=uid)
            elif entry.uid is None:
                entry.uid = uid
        if stale is not None and stale.engine:
            stale.engine.close()
        return entry

    def _exists(self, key: str) -> bool:
        """Whether the cluster `namespace/name` exists (true when that cannot be read now)."""
        try:
            return self.reads.cluster(*key.split("/", 1)) is not None
        except ApiException:
            return True

    def forget(self, namespace: str, name: str) -> None:
        self.reads.forget(namespace, name)
        self.restarts.forget(f"{namespace}/{name}")
        with self._guard:
            e = self._entries.pop((namespace, name), None)
        if e and e.engine:
            e.engine.close()

    def close(self) -> None:
        for key in list(self._entries):
            self.forget(*key)

    # -- entry points ------------------------------------------------------------------------------
    def reconcile(self, body: Mapping[str, Any], apply: bool | None = None) -> Result | None:
        """Reconcile now (waiting for a running reconcile of the same cluster to finish)."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"], meta.get("uid"))
        with entry.lock:
            return self._observe(meta["namespace"], meta["name"], lambda: self._reconcile(body, entry, apply))

    def idle(self, body: Mapping[str, Any]) -> bool:
        """Cheap, no I/O: a cluster with nothing to observe (no Pod running, no primary: status
        Pending) only needs the resync; Pod watch events wake it when a Pod starts."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"], meta.get("uid"))
        return timer_can_skip(
            body.get("status") or {},
            meta.get("generation"),
            self.clock() - entry.last_apply,
            self.resync_seconds,
        )

    def tick(self, body: Mapping[str, Any]) -> Result | None:
        """The periodic pass (the per-cluster loop's): nothing when idle, else `nudge`."""
        if self.idle(body):
            return None
        return self.nudge(body["metadata"]["namespace"], body["metadata"]["name"])

    def nudge(
        self, namespace: str, name: str, apply: bool | None = None, seen: str | None = None
    ) -> Result | None:
        """From a watch: reconcile unless one is running (then it runs once more at its end).
        Of the object that has the name now (its uid): not of an earlier one of that name.
        `apply` True with `seen` (the essence of the cluster body the asker saw): the owned
        objects are applied unless the last apply that went through applied that essence."""
        current = self.reads.cluster(namespace, name)
        if current is None:
            return None
        entry = self._entry(namespace, name, current["metadata"].get("uid"))
        if not entry.lock.acquire(blocking=False):
            if apply:
                entry.apply_asked = merge_asks(entry.apply_asked, seen)
            entry.again = True
            return None
        try:
            result, asked = None, merge_asks(None, seen)
            while True:
                # a pass run again applies only if one of those asking for it said so: the
                # pass before it applied what `apply` asked for (a new cluster's create handler,
                # its loop's first tick and its StatefulSet's first events each applied everything again)
                entry.again, entry.apply_asked = False, None
                body = self.reads.cluster(namespace, name)  # again: with what a pass just wrote
                meta = (body or {}).get("metadata") or {}
                if body is None or meta.get("deletionTimestamp") or meta.get("uid") != entry.uid:
                    return None
                this_apply = apply if apply_still_wanted(asked, entry.applied_essence) else None
                result = self._observe(namespace, name, lambda: self._reconcile(body, entry, this_apply))
                if not entry.again:
                    return result
                asked = entry.apply_asked  # None: nobody asked this one to apply
                apply = None if asked is None else True
        finally:
            entry.lock.release()

    # -- the reconcile -----------------------------------------------------------------------------
    def _reconcile(self, body: Mapping[str, Any], entry: ClusterEntry, apply: bool | None) -> Result:
        """One pass: the spec in effect (status.spec_in_effect) -> observe (the cluster, its
        credentials, its Pods) -> upkeep of what needs no server (TLS, owned objects) -> the
        restore gate -> the replication pass (observe the servers, decide, record, act) ->
        conclude (who serves, role labels, one status)."""
        generation = body["metadata"].get("generation")
        previous = dict(body.get("status") or {})
        body, c, spec_error = spec_in_effect(body)
        if c is None:  # refused, and no spec that parsed before: nothing to act on
            summary = Summary(
                instances=0, generation=generation, spec_error=spec_error, refused_generation=generation
            )
            return self._publish(body, previous, summary, [], None)
        refused_generation = generation if spec_error else None
        self._unknown_fields(body, c, entry)
        logins = self._logins(c, body)
        applied = self._upkeep(body, c, entry, logins, previous, apply)
        seen = Observed(
            body,
            c,
            previous,
            logins,
            self.reads.list_pods(c.namespace, m.selector_labels(c)),
            self.reads.statefulset(c.namespace, m.statefulset_name(c)),
            spec_error,
            refused_generation,
        )

        held = self._restore(seen, entry, applied)
        if held is not None:
            return held
        replaced = replace_stuck(self.kube, body, c, seen.listed, seen.statefulset)
        if replaced:  # going down now, with the spec's current template coming up
            seen.ready = ready_count(seen.pods, c.spec.instances, replaced)

        # the operator never talks to the servers without the CA to verify them (entry.tls.state)
        if (
            logins.error is not None
            or entry.tls.state is None
            or (seen.current_primary is None and not any(p.running for p in seen.pods.values()))
        ):
            return self._without_servers(seen, entry, applied)
        run = self._replicate(seen, entry)
        self._after(seen, entry, run)
        return self._conclude(seen, entry, run, applied)

    def _unknown_fields(self, body: Mapping[str, Any], c: MySQLCluster, entry: ClusterEntry) -> None:
        """Effect: Warnings, once per generation, naming the spec fields this version ignores: ones
        it does not know, and older spellings set beside the newer field that supersedes them."""
        said_now = (c.generation, c.ignored, c.superseded)
        if not (c.ignored or c.superseded) or entry.ignored_said == said_now:
            return
        entry.ignored_said = said_now
        events = []
        if c.ignored:
            said = (
                f"{', '.join(c.ignored)}: not known to this operator version ({__version__}), ignored. "
                "The CRD is newer than the operator (a rollback, or an upgrade under way): upgrade "
                "the operator, or remove the field"
            )
            log.warning("%s/%s %s", c.namespace, c.name, said)
            events.append(("Warning", R.UNKNOWN_FIELDS, said))
        if c.superseded:
            said = "; ".join(f"{older} is ignored: {newer} is set" for older, newer in c.superseded) + (
                " (the older spelling; an object created before the newer field has the older one's "
                "default stored): remove the older field"
            )
            events.append(("Warning", R.SUPERSEDED_FIELDS, said))
        self.kube.post_events(body, events)

    def _logins(self, c: MySQLCluster, body: Mapping[str, Any]) -> Logins:
        """The credentials Secret (created if missing) and the record of what the servers have."""
        new_cluster = not body.get("status")  # its Secrets are created without reads first
        passwords, error = self.passwords.current(c, k.owner_of(body), new_cluster)
        if error is not None:
            return Logins(passwords, error)
        on_servers, version = self.passwords.applied(c, k.owner_of(body), passwords, new_cluster)
        return Logins(passwords, None, on_servers, version, rotation_pending(passwords, on_servers))

    def _upkeep(
        self,
        body: Mapping[str, Any],
        c: MySQLCluster,
        entry: ClusterEntry,
        logins: Logins,
        previous: Mapping[str, Any],
        apply: bool | None,
    ) -> bool:
        """Effects that need no server: the certificate, and every owned object applied when due
        (`apply` True: now; None: at the resync, sooner while one is refused, and on a new
        generation). Whether everything applied in this pass."""
        renewal = entry.tls.ensure(self.api, c, body, self.resync_seconds, self.clock())
        if renewal is not None:
            tls_renewed(self.kube, body, self.reads.list_pods(c.namespace, m.selector_labels(c)), renewal)
        every = self.resync_seconds
        if entry.apply_error or entry.restart_pending:  # again soon: it may go through now
            every = min(APPLY_RETRY_SECONDS, every)
        due = self.clock() - entry.last_apply >= every
        if not (apply or (apply is None and due) or previous.get("observedGeneration") != c.generation):
            return False
        done = apply_owned(
            self.api,
            self.kube,
            self.restarts,
            lambda: restarting_now(self.reads),
            self.job_image,
            self.exporter_image,
            self.tools_repository,
            c,
            body,
            logins.passwords,
            pod_ordinal(previous.get("currentPrimary") or "", c.name),
            logins.secrets,
            entry.claims,
        )
        entry.claims = done.claims
        if done.placed:
            entry.restart_pending = done.staged
        if done.archiver is not None:
            entry.archiver = done.archiver
        error = done.refused
        if error != entry.apply_error:
            log.log(
                logging.WARNING if error else logging.INFO,
                "%s/%s apply: %s",
                c.namespace,
                c.name,
                error or "ok",
            )
        entry.apply_error, entry.last_apply = error, self.clock()
        if error is None:
            entry.applied_essence = essence(body)
        return error is None

    def _restore(self, seen: Observed, entry: ClusterEntry, applied: bool) -> Result | None:
        """The restore gate (restore_gate.py: observe, carry out; restore_plan.py: plan): the Result of a pass held
        by a restore (it is starting, running, or failed), None when the pass may go on."""
        c, body, logins = seen.c, seen.body, seen.logins
        if c.spec.restore is None:
            return None
        owner = k.owner_of(body)
        found = gate.observe_restore(
            self.api, c, seen.previous, restore_plan.not_ready(c, seen.pods, seen.names)
        )
        now = clock.stamp()

        def plan_(start_error: str | None = None) -> restore_plan.RestorePlan:
            return restore_plan.plan_restore(
                c,
                owner,
                found,
                seen.previous,
                seen.pods,
                seen.listed,
                seen.ready,
                logins.secrets,
                logins.error,
                self.job_image,
                self.tools_repository,
                now,
                start_error,
            )

        todo = plan_()
        gate.carry_out(
            self.api, self.kube, c, owner, todo.writes, lambda: self._drop_restore_account(seen, entry)
        )
        if not todo.held:
            return None
        refused = gate.start(self.api, self.kube, c, owner, todo.start)
        if refused is not None:
            todo = plan_(refused)
        assert todo.status is not None
        carry_out(self.kube, body, Plan(NO_MOVES, todo.events, todo.status, todo.changed))
        return Result(phase=todo.status["phase"], applied=applied, status={**seen.previous, **todo.status})

    def _drop_restore_account(self, seen: Observed, entry: ClusterEntry) -> None:
        """Effect: gate.drop_restore_account on every server whose Pod runs, as the operator's
        account over TLS (one that does not run has nothing to log in to: left, and logged)."""
        c, password = seen.c, seen.logins.current.get(m.OPERATOR_PASSWORD_KEY)
        if not password or entry.tls.state is None:
            log.warning("%s/%s: the restore account is left: no credentials or CA yet", c.namespace, c.name)
            return
        servers = []
        for o in seen.ordinals:
            host, port = resolve(c, o, seen.raw_pods.get(o), self.resolver_mode)
            name = seen.names[o]
            if host is None or not (seen.pods.get(o) and seen.pods[o].running):
                log.warning(
                    "%s/%s: the restore account is left on %s: not running", c.namespace, c.name, name
                )
                continue
            servers.append(
                (
                    name,
                    functools.partial(
                        Instance,
                        host,
                        port,
                        m.OPERATOR_USER,
                        password,
                        name=name,
                        tls=entry.tls.context(),
                        read_timeout=10,
                    ),
                )
            )
        gate.drop_restore_account(servers)

    def _without_servers(self, seen: Observed, entry: ClusterEntry, applied: bool) -> Result:
        """The status of a cluster with no server to talk to yet (or no credentials, no CA)."""
        c = seen.c
        summary = Summary(
            instances=c.spec.instances,
            generation=c.generation,
            **seen.spec_fields(),
            secret_error=seen.logins.error,
            **self._standing(c, entry),
            tls_blocking=entry.tls.state is None,
            ready=seen.ready,
            primary=seen.current_primary,
            entries=tuple(
                instance_entries(seen.ordinals, seen.names, seen.pods, {}, {}, {}, seen.current_primary)
            ),
        )
        if self.sql.due(c.namespace, c.name):
            sync_sql_objects(self.sql, c, entry.tls.context(), None, None, [], {})
        asked = seen.requests[0] if seen.requests else None
        settled = self._settle(seen, sw.no_servers(asked) if asked else None)
        summary = dataclasses.replace(summary, requests=settled.fields)
        result = self._publish(seen.body, seen.previous, summary, list(settled.events), None, applied=applied)
        self._request_done(seen, settled)
        return result

    def _replicate(self, seen: Observed, entry: ClusterEntry) -> Replicated:
        """The replication pass: the servers observed (into `seen.instances`), the wanted primary
        (a switchover request's target, moved by the rolling update's next step), then
        ReplicationEngine.reconcile (decide, record a new primary BEFORE acting, act) with this
        operator's hooks: the record and the decision's Event go through KubeOps."""
        c, body, previous, secrets = seen.c, seen.body, seen.previous, seen.logins.secrets
        ns, name = c.namespace, c.name
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
        engine = engine_for(entry, c, seen.logins.current, settings, members, self.apply_timeout)
        state = ClusterState(seen.current_primary)
        engine.observer.primary_since = primary_since(previous, seen.current_primary)
        engine.observer.recorded_executed = recorded_executed(previous, c.spec.flavor)
        started = time.monotonic()
        seen.instances = engine.observe()
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
        """What follows the replication pass: a pending password rotation, a forced failover's
        record, a rolling update's next Pod restart, the certificate each server serves."""
        c, body, logins = seen.c, seen.body, seen.logins
        decision, steps = run.outcome.decision, run.outcome.steps
        primary = run.state.current_primary
        if logins.pending and isinstance(decision, t.Healthy) and primary:
            self._rotate(seen, run.engine, primary, steps)
        if run.force:
            force_failover_done(self.kube, body, decision, steps, logins.secrets)
        restarted = roll_delete(self.kube, body, decision, run.roll)
        if restarted:  # the status must not count it ready: it is going down now
            seen.ready = ready_count(seen.pods, c.spec.instances, restarted)
        if primary != seen.current_primary:
            # the StatefulSet's size depends on the primary (a scale down keeps the primary's Pod
            # until it moved away): the next pass applies it again
            entry.last_apply = float("-inf")
        entry.tls.serve_current(c, run.engine.instances, self.clock())

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

    def _conclude(self, seen: Observed, entry: ClusterEntry, run: Replicated, applied: bool) -> Result:
        """Who serves (pods.serving, pure), then the SQL objects through a serving primary, the
        role labels, and the one status with its Events."""
        c, secrets = seen.c, seen.logins.secrets
        decision, steps, observed = run.outcome.decision, run.outcome.steps, run.outcome.observed
        primary = run.state.current_primary
        lags = {
            n: (o.replica.seconds_behind if o.replica else None)
            for n, o in run.engine.observer.last_observations.items()
        }
        served = serving(
            decision,
            steps,
            observed,
            primary,
            run.settings,
            lags,
            c.spec.replication.max_read_lag_seconds,
            were_lagging(seen.previous),
        )
        if self.sql.due(c.namespace, c.name):
            sync_sql_objects(
                self.sql,
                c,
                entry.tls.context(),
                decision,
                primary if served.primary_ok else None,
                run.members,
                seen.logins.current,
            )
        waiting = {p.name: p.waiting for p in seen.pods.values() if p.waiting}
        failed = [s for s in steps if not s.ok]
        summary = Summary(
            instances=c.spec.instances,
            generation=c.generation,
            **seen.spec_fields(),
            ready=seen.ready,
            primary=primary,
            primary_serving=served.writes,
            decision=decision.kind,
            **self._standing(c, entry),
            rolling=rolling.in_progress(run.roll),
            primary_in_service=primary_reached(
                self.api, c, seen.pods, primary, served.writes, entry, seen.logins.current
            ),
            credentials_version=seen.logins.version,
            decision_reason=redact(decision.reason, secrets),
            held_out=served.held,
            reseeding=tuple(reseed_progress(i, waiting.get(i.name, "")) for i in observed if i.reseeding),
            unreachable=served.unreachable,
            lagging=tuple(sorted(served.lagging)),
            commits_wait=commits_wait(primary, run.engine.observer.last_observations.get(primary))
            if served.writes and primary
            else "",
            max_read_lag_seconds=c.spec.replication.max_read_lag_seconds,
            failed_steps=tuple(redact(f"{s.instance} {s.action}: {s.detail}", secrets) for s in failed),
            entries=tuple(
                instance_entries(
                    seen.ordinals,
                    seen.names,
                    seen.pods,
                    {i.name: i for i in observed},
                    lags,
                    served.roles,
                    primary,
                    secrets,
                    served.lagging,
                )
            ),
        )
        settled = self._settle(seen, self._judge(seen, run))
        summary = dataclasses.replace(summary, requests=settled.fields)
        # the labels the Pods carry now: the pass's own label patches count (the new primary's
        # taken away again and given back once the status is written left -rw without an
        # endpoint for a moment after each failover and switchover: writes refused)
        labelled = {p.name: run.relabelled.get(p.name, p.role) for p in seen.pods.values() if not p.deleting}
        result = self._publish(
            seen.body,
            seen.previous,
            summary,
            [*events_from_steps(steps, secrets), *settled.events],
            decision,
            applied=applied,
            labels=label_plan(labelled, served.roles),
        )
        self._request_done(seen, settled)
        result.steps = steps
        result.recheck_in = t.next_pass_in(decision, float("inf"))
        if isinstance(decision, (t.Failover, t.Switchover)):
            result.cause = decision.cause
        if isinstance(decision, t.Failover) and served.primary_ok:
            result.failover_seconds = run.engine.down_for(decision.from_)
            result.forced = decision.forced
        return result

    @staticmethod
    def _judge(seen: Observed, run: Replicated) -> sw.Verdict | None:
        """The switchover request acted on (switchover.judge, pure), after the replication pass."""
        if not seen.requests:
            return None
        asked, decision = seen.requests[0], run.outcome.decision
        primary = run.state.current_primary
        promoted = not isinstance(decision, t.PRIMARY_CHANGES) or promotion_succeeded(
            primary, run.outcome.steps
        )
        return sw.judge(
            asked,
            run.outcome.observed,
            run.settings,
            seen.current_primary,
            primary,
            promoted,
            sw.waiting(decision, run.desired, asked.to),
        )

    @staticmethod
    def _settle(seen: Observed, verdict: sw.Verdict | None) -> sw.Settled:
        """The requests' status records and Events (switchover.settle, pure)."""
        return sw.settle(
            seen.requests, verdict, seen.previous, seen.c.spec.primary, clock.stamp(), seen.logins.secrets
        )

    def _request_done(self, seen: Observed, settled: sw.Settled) -> None:
        """Effect: a finished request's annotation removed, once its record is in the status (an
        operator stopped before this resumes it: the record then says it again)."""
        if settled.remove_annotation:
            self.kube.remove_cluster_annotation(seen.body, sw.ANNOTATION)

    def _publish(
        self, body, previous, summary: Summary, events, decision, applied=False, labels=NO_MOVES
    ) -> Result:
        """The end of the pass: its Plan (status.plan, pure) carried out."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
        with self._guard:
            reported = dict(entry.reported)
        todo = plan(summary, previous, events, clock.stamp(), labels, reported)
        carry_out(self.kube, body, todo)
        return Result(
            phase=todo.status["phase"],
            applied=applied,
            decision=decision.kind if decision is not None else None,
            status={**previous, **todo.status},
        )

    def pass_overdue(self, body: Mapping[str, Any], seconds: float | None) -> None:
        """The cluster's pass has run past its deadline of `seconds` (the per-cluster loop saw it;
        None: that pass has ended): condition PassOverdue and a Warning Event when it starts, the
        condition gone when it ends (the pass's own status is unchanged when nothing else is)."""
        meta = body["metadata"]
        current = self.reads.cluster(meta["namespace"], meta["name"])  # with the pass's edits
        if current is None or current["metadata"].get("uid") != meta.get("uid"):
            current = body
        conditions = (current.get("status") or {}).get("conditions") or []
        changed = overdue_conditions(
            conditions, seconds, clock.stamp(), current["metadata"].get("generation")
        )
        if seconds is not None:
            self.kube.post_events(
                body, [("Warning", PASS_OVERDUE, changed[-1]["message"])] if changed else []
            )
        if changed is not None:
            self.kube.patch_status(body, {"conditions": changed})

    def report(self, namespace: str, name: str, fields: Mapping[str, Any]) -> None:
        """Status fields another controller owns (BackupController: lastBackup, the
        schedule's runs): the cluster's next pass publishes them (this operator's passes are
        the cluster status's one writer)."""
        with self._guard:
            self._entries.setdefault((namespace, name), ClusterEntry()).reported.update(fields)

    def archiver_seen(self, namespace: str, name: str, status: Mapping[str, Any] | None) -> None:
        """From the archiver Deployment's watch (None: deleted) and its apply."""
        self._entry(namespace, name).archiver = status

    def archiver_pod_seen(self, namespace: str, name: str, trouble: str) -> None:
        """From the archiver Pods' watch: status.archiver_pod_trouble of the latest one seen
        ("": none, or it was deleted)."""
        self._entry(namespace, name).archiver_pod_trouble = trouble

    @classmethod
    def _standing(cls, c: MySQLCluster, entry: ClusterEntry) -> dict[str, Any]:
        """What every status write says whatever the servers do: the last apply's refusal, the
        archiver's state, a staged restart, a TLS problem. The write made when a new primary is
        chosen carries it too: without it, a failover's write dropped ApplyFailed for a moment."""
        return {
            "apply_error": entry.apply_error,
            "binlog_archiver": cls._archiver_summary(c, entry),
            "restart_pending": entry.restart_pending,
            "tls_problem": entry.tls.problem,
            "drill": _drill_record(entry.reported.get("drill")),
        }

    @staticmethod
    def _archiver_summary(c: MySQLCluster, entry: ClusterEntry) -> ArchiverState | None:
        """Summary.binlog_archiver: None while archiving is off."""
        b = c.spec.backup
        if b is None or not b.binlogs.enabled:
            return None
        return archiver_state(m.binlog_archiver_name(c), entry.archiver, entry.archiver_pod_trouble)


def _drill_record(patch: Any) -> dict[str, Any] | None:
    """The drill's record as reported (a merge patch: its null keys are gone)."""
    if not isinstance(patch, Mapping) or not patch:
        return None
    return {k: v for k, v in patch.items() if v is not None}
