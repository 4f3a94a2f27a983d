"""Level-triggered reconcile of one MySQLCluster: observe -> decide -> act, then publish status.

`Reconciler._reconcile(body)` is the one pass: kopf's create/update/resume handlers, the periodic
timer (`tick`) and the watches on owned Pods/StatefulSets (`nudge`) all end there. It is idempotent:

  parse spec (SpecError -> condition + Event, nothing touched)
  ensure the generated Secret (created only if missing; never regenerated; missing keys added)
  server-side apply every owned object (owner references; hand-made drift is overwritten)
  observe Pods; run the ReplicationEngine's pass (observe -> decide -> act; the same code the
  benchmarks and integration tests drive) when there is something to observe, with this module's
  hooks: the rolling update steers the wanted primary, a new primary is recorded in status
  BEFORE acting; move the role labels (demote first, so
  never two Pods carry role=primary); publish status; post Events for what was done.

This module holds the pass and its effects (Kubernetes API, SQL probes); passwords.py keeps the
credentials Secret and the applied-passwords record, tls_upkeep.py the server certificate. What it
decides with lives in pure modules: pods.py (Pods, roles, labels), status.py (phase,
conditions, Events), credentials.py (Secret keys, passwords), rolling.py (the rolling update's
plan; its effects: rollout.py), restoring.py (the restore record; its gate: restore_gate.py),
topology.py (replication decisions; replication.py acts on them). Secrets never leave it except
into server connections: step texts and errors are redacted before Events, status or logs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import __version__, clock
from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster, SpecError, binlog_max_bytes, parse
from mysql_operator.binlogs import Retention
from mysql_operator.db.instance import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.k8s.resolve import resolve
from mysql_operator.db.instance import Instance, InstanceError
from mysql_operator.k8s import jobs
from mysql_operator.backup import storage
from mysql_operator.manifests.backup_jobs import evidence_job
from mysql_operator.replication import (
    ClusterState,
    Credentials,
    Member,
    ReplicationEngine,
)
from mysql_operator.credentials import (
    not_rotated,
    rotation_denied,
    rotation_accounts,
    rotation_pending,
)
from mysql_operator.pods import (
    PodView,
    expected_identity,
    label_plan,
    member_ordinals,
    pod_ordinal,
    pod_views,
    ready_count,
    promotion_succeeded,
    serving,
    statefulset_replicas,
)
from mysql_operator.passwords import PasswordStore
from mysql_operator.restore_gate import restore_gate
from mysql_operator.sql_objects import Owned, SqlObjects
from mysql_operator.db.flavor import Flavor
from mysql_operator.rollout import (
    RestartGate,
    place_template,
    replace_stuck,
    roll_delete,
    roll_desired,
    roll_step,
)
from mysql_operator.tls_upkeep import TLSUpkeep, serves_tls
from mysql_operator.status import (
    Result,
    Summary,
    apply_refusal,
    archiver_state,
    build_status,
    decision_event,
    degraded_events,
    waiting_events,
    archiving_events,
    events_from_steps,
    instance_entries,
    primary_change_status,
    primary_in_service,
    primary_since,
    reseed_progress,
    status_changed,
    timer_can_skip,
    were_lagging,
)

log = logging.getLogger(__name__)

APPLY_RETRY_SECONDS = 10.0  # while an owned object is not applied (and at once on a spec change)


def service_routes_to(
    host: str | None, port: int, user: str, password: str, primary: str, tls_ctx: ssl.SSLContext | None = None
) -> bool:
    """A connection through a Service's ClusterIP reaches `primary` (its @@hostname, the Pod name)
    and it accepts writes: kube-proxy routes the -rw Service to the new primary, not to a stale
    endpoint (with none the connection is refused)."""
    if not host or host == "None":
        return False
    probe = Instance(host, port, user, password, connect_timeout=1.0, read_timeout=2.0, tls=tls_ctx)
    try:
        hostname, read_only = probe.execute("SELECT @@hostname, @@read_only")[0]
        return hostname == primary and not int(read_only)
    except InstanceError:
        return False
    finally:
        probe.close()


# ---------------------------------------------------------------------------------------- effects
@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: ReplicationEngine | None = None
    fingerprint: str = ""
    last_apply: float = 0.0
    apply_error: str | None = None  # as the last apply found it (status.apply_refusal)
    ignored_said: tuple = ()  # (generation, fields) of the last UnknownFields Event
    again: bool = False
    routed_to: str | None = None  # the primary a connection through -rw was seen to reach
    last_decision: str | None = None  # logged when it changes
    tls: TLSUpkeep = field(default_factory=TLSUpkeep)
    # the binlog archiver Deployment's status as last seen (its apply, its watch); None: none seen
    archiver: Mapping[str, Any] | None = None
    # a Pod template a new operator version wants, staged (rolling.template_step); None: none
    restart_pending: rolling.StageTemplate | None = None
    # status fields others report (the backup controller's lastBackup, schedule), published by
    # the pass with its own; None removes one
    reported: dict[str, Any] = field(default_factory=dict)


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
        self._entries: dict[tuple[str, str], _Entry] = {}
        self.restarts = RestartGate(clock, operator_upgrades)
        self.job_image = job_image or jobs.job_image()  # of the Jobs that work on tenant bytes
        self._guard = threading.Lock()

    def _entry(self, namespace: str, name: str) -> _Entry:
        with self._guard:
            return self._entries.setdefault((namespace, name), _Entry())

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
        entry = self._entry(meta["namespace"], meta["name"])
        with entry.lock:
            return self._observe(meta["namespace"], meta["name"], lambda: self._reconcile(body, entry, apply))

    def idle(self, body: Mapping[str, Any]) -> bool:
        """Cheap, no I/O: a cluster with nothing to observe (no Pod running, no primary: status
        Pending) only needs the resync; Pod watch events wake it when a Pod starts."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
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

    def nudge(self, namespace: str, name: str, apply: bool | None = None) -> Result | None:
        """From a watch: reconcile unless one is running (then it runs once more at its end)."""
        entry = self._entry(namespace, name)
        if not entry.lock.acquire(blocking=False):
            entry.again = True
            return None
        try:
            result = None
            while True:
                entry.again = False
                body = self.reads.cluster(namespace, name)
                if body is None or body["metadata"].get("deletionTimestamp"):
                    return None
                result = self._observe(namespace, name, lambda: self._reconcile(body, entry, apply))
                if not entry.again:
                    return result
        finally:
            entry.lock.release()

    # -- the reconcile -----------------------------------------------------------------------------
    def _reconcile(self, body: Mapping[str, Any], entry: _Entry, apply: bool | None) -> Result:
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        previous = dict(body.get("status") or {})
        try:
            c = parse(body)
        except SpecError as e:
            return self._publish(
                body,
                previous,
                Summary(instances=0, generation=meta.get("generation"), spec_error=str(e)),
                [],
                None,
            )
        if c.ignored and entry.ignored_said != (c.generation, c.ignored):
            entry.ignored_said = (c.generation, c.ignored)
            said = (
                f"{', '.join(c.ignored)}: not known to this operator version ({__version__}), ignored. "
                "The CRD is newer than the operator (a rollback, or an upgrade under way): upgrade "
                "the operator, or remove the field"
            )
            log.warning("%s/%s %s", ns, name, said)
            self.kube.post_events(body, [("Warning", "UnknownFields", said)])

        passwords, secret_error = self.passwords.current(c, k.owner_of(body))
        on_servers: dict[str, str] = {}  # the passwords the servers have (the applied record)
        applied_version = ""
        pending: tuple[str, ...] = ()
        if secret_error is None:
            on_servers, applied_version = self.passwords.applied(c, k.owner_of(body), passwords)
            pending = rotation_pending(passwords, on_servers)
        # until a rotation is applied the servers have the passwords of the record: log in with them
        current = {**passwords, **{key: on_servers[key] for key in pending}}
        secrets = list(passwords.values()) + [on_servers[key] for key in pending]
        entry.tls.ensure(self.api, c, body, self.resync_seconds, self.clock())
        current_primary = previous.get("currentPrimary")
        primary_ordinal = pod_ordinal(current_primary or "", c.name)

        applied = False
        every = self.resync_seconds
        if entry.apply_error or entry.restart_pending:  # again soon: it may go through now
            every = min(APPLY_RETRY_SECONDS, every)
        due = self.clock() - entry.last_apply >= every
        if apply or (apply is None and due) or previous.get("observedGeneration") != c.generation:
            error = self._apply_objects(c, body, entry, passwords, primary_ordinal, secrets)
            if error != entry.apply_error:
                log.log(
                    logging.WARNING if error else logging.INFO, "%s/%s apply: %s", ns, name, error or "ok"
                )
            entry.apply_error, entry.last_apply = error, self.clock()
            applied = error is None

        listed = self.reads.list_pods(ns, m.selector_labels(c))
        pods = pod_views(c.name, listed)
        raw_pods = {pod_ordinal(p["metadata"]["name"], c.name): p for p in listed}
        ordinals = member_ordinals(c.spec.instances, pods, primary_ordinal)
        names = {o: m.pod_name(c, o) for o in ordinals}
        ready = ready_count(pods, c.spec.instances)

        held = restore_gate(
            self.api,
            self.job_image,
            body,
            c,
            previous,
            pods,
            names,
            passwords,
            ready,
            applied,
            secret_error,
            patch_status=self.kube.patch_status,
        )
        if held is not None:
            return held
        replaced = replace_stuck(self.api, self.reads, body, c, listed)
        if replaced:  # going down now, with the spec's current template coming up
            ready = ready_count(pods, c.spec.instances, replaced)

        # the operator never talks to the servers without the CA to verify them (entry.tls.state)
        run_engine = (
            secret_error is None
            and entry.tls.state is not None
            and (current_primary is not None or any(p.running for p in pods.values()))
        )
        if not run_engine:
            summary = Summary(
                instances=c.spec.instances,
                generation=c.generation,
                secret_error=secret_error,
                apply_error=entry.apply_error,
                binlog_archiver=self._archiver_summary(c, entry),
                restart_pending=entry.restart_pending,
                tls_problem=entry.tls.problem,
                tls_blocking=entry.tls.state is None,
                ready=ready,
                primary=current_primary,
                entries=tuple(instance_entries(ordinals, names, pods, {}, {}, {}, current_primary)),
            )
            if self.sql.due(ns, name):
                self._sync_sql(c, entry, None, None, [], {})
            return self._publish(body, previous, summary, [], None, applied=applied)

        # replicas configured before TLS move to it (topology rule 10)
        force = t.FORCE_FAILOVER_ANNOTATION in (meta.get("annotations") or {})
        settings = engine_settings(
            c, replication_tls=entry.tls.state is not None and serves_tls(listed), force_failover=force
        )
        members = [
            Member(
                names[o],
                o,
                *resolve(c, o, raw_pods.get(o), self.resolver_mode),
                **expected_identity(names[o], o, raw_pods.get(o)),
                source_host=m.pod_host(c, o),
            )
            for o in ordinals
        ]
        engine = self._engine(entry, c, current, settings, members)
        state = ClusterState(current_primary)
        desired = m.pod_name(c, c.spec.primary) if c.spec.primary is not None else None

        engine.primary_since = primary_since(previous, current_primary)
        roll: list[rolling.RollStep | None] = [None]

        def steer(observed: Sequence[t.InstanceState], wanted: str | None) -> str | None:
            roll[0], revision = roll_step(self.reads, c, listed, observed, current_primary)
            return roll_desired(wanted, roll[0], revision, listed)

        def record(st: ClusterState, decision: t.Decision) -> None:
            changing = Summary(
                instances=c.spec.instances,
                generation=c.generation,
                ready=ready,
                primary=st.current_primary,
                decision=decision.kind,
                decision_reason=redact(decision.reason, secrets),
            )
            status = primary_change_status(changing, previous, clock.stamp())
            self.kube.patch_status(ns, name, {**status, "primarySince": clock.stamp(precise=True)})

        def announce(decision: t.Decision) -> None:
            pre = decision_event(decision, secrets)
            if pre:
                self.kube.post_events(body, [pre])
            if decision.kind != entry.last_decision:  # what the loop thinks, once per change
                log.info(
                    "%s/%s decision %s: %s", ns, name, decision.kind, redact(decision.reason or "-", secrets)
                )
                entry.last_decision = decision.kind

        engine.keep_evidence = lambda instance, gtids, events: self._keep_evidence(
            body, c, instance, gtids, events
        )
        engine.request_seed = lambda instance, _donor, host: self._request_seed(body, c, instance, host)
        engine.restart_instance = lambda instance: self.kube.delete_pod(c.namespace, instance)
        engine.seed_done = lambda instance: self.kube.apply(
            m.owned(m.reseed_request(c, None), k.owner_of(body))
        )
        started = time.monotonic()
        outcome = engine.reconcile(state, desired, steer=steer, record=record, announce=announce)
        decision, steps, observed = outcome.decision, outcome.steps, outcome.observed
        self.restarts.seen(f"{ns}/{name}", roll[0], settled=ready >= c.spec.instances)
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
        if pending and isinstance(decision, t.Healthy) and state.current_primary:
            # a changed password in the credentials Secret: ALTER USER through the primary, once
            # nothing else is going on; the next pass's engine logs in with the new passwords
            accounts = rotation_accounts(c, pending, passwords)
            rotation = engine.rotate(state.current_primary, list(accounts.values()), steps)
            rotated = [key for key, a in accounts.items() if (a.user, a.host) in rotation.done]
            manual = [(key, why) for key in pending if (why := not_rotated(c, key))] + [
                (key, rotation_denied(c, key, a.user, a.host))
                for key, a in accounts.items()
                if (a.user, a.host) in rotation.denied
            ]
            if manual:
                self.kube.post_events(body, [("Warning", "PasswordNotRotated", why) for _, why in manual])
                rotated += [key for key, _ in manual]
            if rotated:
                self.passwords.record_applied(
                    c, k.owner_of(body), {**on_servers, **{key: passwords[key] for key in rotated}}
                )
                log.info("%s/%s passwords rotated: %s", ns, name, ", ".join(rotated))
        if force:
            self._force_failover_done(body, decision, steps, secrets)
        restarted = roll_delete(self.api, body, decision, roll[0])
        if restarted:  # the status must not count it ready: it is going down now
            ready = ready_count(pods, c.spec.instances, restarted)
        if state.current_primary != current_primary:
            # the StatefulSet's size depends on the primary (a scale down keeps the primary's Pod
            # until it moved away): the next pass applies it again
            entry.last_apply = float("-inf")
        entry.tls.serve_current(c, engine.instances, self.clock())
        failed = [s for s in steps if not s.ok]

        primary = state.current_primary
        lags = {
            n: (o.replica.seconds_behind if o.replica else None) for n, o in engine.last_observations.items()
        }
        served = serving(
            decision,
            steps,
            observed,
            primary,
            settings,
            lags,
            c.spec.replication.max_read_lag_seconds,
            were_lagging(previous),
        )
        if self.sql.due(ns, name):
            self._sync_sql(c, entry, decision, primary if served.primary_ok else None, members, current)
        self._move_labels(ns, pods, names, served.roles)
        waiting = {p.name: p.waiting for p in pods.values() if p.waiting}
        summary = Summary(
            instances=c.spec.instances,
            generation=c.generation,
            ready=ready,
            primary=primary,
            primary_serving=served.writes,
            decision=decision.kind,
            apply_error=entry.apply_error,
            binlog_archiver=self._archiver_summary(c, entry),
            restart_pending=entry.restart_pending,
            rolling=rolling.in_progress(roll[0]),
            tls_problem=entry.tls.problem,
            primary_in_service=self._primary_in_service(c, pods, primary, served.writes, entry, current),
            credentials_version=applied_version,
            decision_reason=redact(decision.reason, secrets),
            held_out=served.held,
            reseeding=tuple(reseed_progress(i, waiting.get(i.name, "")) for i in observed if i.reseeding),
            unreachable=served.unreachable,
            lagging=tuple(sorted(served.lagging)),
            max_read_lag_seconds=c.spec.replication.max_read_lag_seconds,
            failed_steps=tuple(redact(f"{s.instance} {s.action}: {s.detail}", secrets) for s in failed),
            entries=tuple(
                instance_entries(
                    ordinals,
                    names,
                    pods,
                    {i.name: i for i in observed},
                    lags,
                    served.roles,
                    primary,
                    secrets,
                    served.lagging,
                )
            ),
        )
        result = self._publish(
            body, previous, summary, events_from_steps(steps, secrets), decision, applied=applied
        )
        result.steps = steps
        result.recheck_in = t.next_pass_in(decision, float("inf"))
        if isinstance(decision, (t.Failover, t.Switchover)):
            result.cause = decision.cause
        if isinstance(decision, t.Failover) and served.primary_ok:
            result.failover_seconds = engine.down_for(decision.from_)
            result.forced = decision.forced
        return result

    def _keep_evidence(self, body, c: MySQLCluster, instance: str, gtids: str, events: list[str]) -> str:
        """Effect: an instance's errant transactions recorded in a ConfigMap before a re-seed
        discards them (an API error raises: then nothing is discarded). Returns its name."""
        cm = m.errant_evidence(c, instance, gtids, events, clock.now().strftime("%Y%m%d%H%M%S"))
        if c.spec.deletion_policy == "Delete":
            cm = m.owned(cm, k.owner_of(body))
        kept = self.kube.apply(cm)
        name = cm["metadata"]["name"]
        s3 = c.spec.backup.s3 if c.spec.backup else None
        if s3 is None:
            return f"ConfigMap {name}"
        # a copy in the backup bucket, made by a tokenless Job (the bucket is the tenant's)
        job = evidence_job(c, name, s3, self.job_image, image_pull_policy=c.spec.image_pull_policy)
        job = m.owned(job, k.owner_of({**kept, "apiVersion": "v1", "kind": "ConfigMap"}))
        # (blocking the record's deletion would need a right on configmaps/finalizers)
        job["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
        jobs.create_job(self.api, job)
        where = storage.describe(s3, storage.join_key(s3.prefix, "evidence", name))
        return f"ConfigMap {name}, copied to {where} by Job {job['metadata']['name']}"

    def _request_seed(self, body, c: MySQLCluster, instance: str, donor_host: str) -> None:
        """Effect (MariaDB re-seed): the request for `instance`'s Pod to start on a copy of the
        donor's data (ConfigMap <name>-reseed, read by the Pod's `seed` init container), then the
        Pod deleted so that its StatefulSet starts it again. One request at a time: it replaces
        any earlier one (those were carried out, or are no longer wanted)."""
        cm = m.reseed_request(c, instance, donor_host, clock.now().strftime("%Y%m%d%H%M%S"))
        self.kube.apply(m.owned(cm, k.owner_of(body)))
        self.kube.delete_pod(c.namespace, instance)

    def _force_failover_done(self, body, decision: t.Decision, steps, secrets) -> None:
        """Effect: a forced failover is recorded (status.forcedFailover, a Warning Event) and its
        annotation removed; an annotation no failover needed is removed too (it must never force
        a later one). Kept while the failover may still come (the delay is running)."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        asked = redact(str((meta.get("annotations") or {}).get(t.FORCE_FAILOVER_ANNOTATION, "")), secrets)
        if isinstance(decision, t.WaitForDelay):
            return
        if isinstance(decision, t.Failover) and decision.forced:
            if not promotion_succeeded(decision.to, steps):
                return  # tried again next pass, still forced
            event = (
                "Warning",
                "FailoverForced",
                f"{decision.to} promoted on request ({asked[:256]}): {decision.reason}",
            )
            self.kube.post_events(body, [event])  # before the status, as in _publish
            self.kube.patch_status(
                ns,
                name,
                {
                    "forcedFailover": {
                        "at": clock.stamp(),
                        "from": decision.from_,
                        "to": decision.to,
                        "requestedBy": asked[:256],
                        "reason": redact(decision.reason, secrets)[:1024],
                    }
                },
            )
        else:
            event = (
                "Normal",
                "ForceFailoverUnused",
                f"annotation {t.FORCE_FAILOVER_ANNOTATION} removed: no failover needed forcing ({decision.kind})",
            )
            self.kube.post_events(body, [event])
        self.kube.remove_cluster_annotation(ns, name, t.FORCE_FAILOVER_ANNOTATION)
        log.warning("%s/%s %s: %s", ns, name, event[1], event[2])

    def _publish(self, body, previous, summary: Summary, events, decision, applied=False) -> Result:
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
        with self._guard:
            reported = dict(entry.reported)
        status = {**reported, **build_status(summary, previous, clock.stamp())}
        events = [
            *events,
            *degraded_events(previous, status),
            *archiving_events(previous, status),
            *waiting_events(previous, status),
        ]
        if events:  # first: whoever sees the new status can already read the Event that says why
            self.kube.post_events(body, events)
        if status_changed(previous, status):
            self.kube.patch_status(meta["namespace"], meta["name"], status)
        for etype, reason, message in events:
            log.log(
                logging.WARNING if etype == "Warning" else logging.INFO,
                "%s/%s %s: %s",
                meta["namespace"],
                meta["name"],
                reason,
                message,
            )
        return Result(
            phase=status["phase"],
            applied=applied,
            decision=decision.kind if decision is not None else None,
            status={**previous, **status},
        )

    def _apply_objects(
        self, c: MySQLCluster, body, entry: _Entry, passwords, primary_ordinal, secrets
    ) -> str | None:
        """Effect: server-side apply every owned object. One the API server refuses (a spec the
        CRD admits but the StatefulSet API does not) stops neither the others nor the pass:
        replication is looked after whatever the spec. The StatefulSet's Pod template is the one
        rollout.place_template chooses (a restart a new operator version needs may be staged).
        Returns why, or None when all applied."""
        owner = k.owner_of(body)
        refused = []
        for obj in m.build_all(c, lambda key: passwords.get(key) or "unused"):
            if obj["kind"] == "Secret":
                continue  # created only if missing (see _credentials)
            obj = m.owned(obj, owner)
            kind, obj_name = obj["kind"], obj["metadata"]["name"]
            try:
                step = None
                if kind == "StatefulSet":
                    existing = k.read_statefulset(self.api, c.namespace, obj_name)
                    current, claimed = k.statefulset_sizing(existing)
                    obj["spec"]["replicas"] = statefulset_replicas(c.spec.instances, primary_ordinal, current)
                    if claimed is not None:  # immutable in a StatefulSet: the volumes grow instead
                        obj["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = (
                            claimed
                        )
                    step = place_template(
                        self.api, self.restarts, c, body, obj, existing, self.reads.owned_statefulsets
                    )
                    entry.restart_pending = step if isinstance(step, rolling.StageTemplate) else None
                self.kube.apply(obj)
                approval = rolling.APPROVE_RESTART_ANNOTATION
                if isinstance(step, rolling.WriteTemplate) and approval in (
                    body["metadata"].get("annotations") or {}
                ):
                    self.kube.remove_cluster_annotation(c.namespace, c.name, approval)  # carried out
            except k.ApplyError as e:
                refused.append(apply_refusal(kind, obj_name, e.status, e.message))
            except ApiException as e:
                refused.append(apply_refusal(kind, obj_name, e.status, str(e.reason)))
            except urllib3.exceptions.HTTPError as e:
                refused.append(apply_refusal(kind, obj_name, None, f"no answer from the API server ({e})"))
        refused += self._binlog_archiver(c, owner) + self._grow_volumes(c)
        return redact("; ".join(refused), secrets) if refused else None

    def _binlog_archiver(self, c: MySQLCluster, owner) -> list[str]:
        """Effect: the binary-log archiver's Deployment applied (spec.backup.binlogs.enabled) or
        deleted (off). Why the API server refused, if it did."""
        dep = m.binlog_archiver(c, self.job_image, image_pull_policy=c.spec.image_pull_policy)
        name = m.binlog_archiver_name(c)
        try:
            if dep is not None:
                applied = self.kube.apply(m.owned(dep, owner))
                self.archiver_seen(c.namespace, c.name, applied.get("status") or {})
            else:
                client.AppsV1Api(self.api).delete_namespaced_deployment(name, c.namespace)
        except k.ApplyError as e:
            return [apply_refusal("Deployment", name, e.status, e.message)]
        except ApiException as e:
            if e.status != 404:
                return [apply_refusal("Deployment", name, e.status, str(e.reason))]
        except urllib3.exceptions.HTTPError as e:
            return [apply_refusal("Deployment", name, None, f"no answer from the API server ({e})")]
        return []

    def report(self, namespace: str, name: str, fields: Mapping[str, Any]) -> None:
        """Status fields another controller owns (backup/controller.py: lastBackup, the
        schedule's runs): the cluster's next pass publishes them (this operator's passes are
        the cluster status's one writer)."""
        with self._guard:
            self._entries.setdefault((namespace, name), _Entry()).reported.update(fields)

    def archiver_seen(self, namespace: str, name: str, status: Mapping[str, Any] | None) -> None:
        """From the archiver Deployment's watch (None: deleted) and its apply."""
        self._entry(namespace, name).archiver = status

    @staticmethod
    def _archiver_summary(c: MySQLCluster, entry: _Entry) -> str | None:
        """Summary.binlog_archiver: None while archiving is off."""
        b = c.spec.backup
        if b is None or not b.binlogs.enabled:
            return None
        return archiver_state(m.binlog_archiver_name(c), entry.archiver)

    def _grow_volumes(self, c: MySQLCluster) -> list[str]:
        """Effect: every server's data volume asks for spec.storage.size (raised: expanded where
        the StorageClass allows it). Why not, for each claim the API server refused."""
        refused = []
        for o in range(c.spec.instances):
            claim = m.data_claim_name(c, o)
            try:
                why = k.grow_claim(self.api, c.namespace, claim, c.spec.storage.size)
            except urllib3.exceptions.HTTPError as e:
                why = f"no answer from the API server ({e})"
            if why:
                refused.append(
                    f"spec.storage.size: PersistentVolumeClaim {claim} cannot grow to {c.spec.storage.size}: "
                    f"{why} (its StorageClass must allow volume expansion)"
                )
        return refused

    def _engine(
        self,
        entry: _Entry,
        c: MySQLCluster,
        passwords: Mapping[str, str],
        settings: t.Settings,
        members: Sequence[Member],
    ) -> ReplicationEngine:
        app_user = c.spec.database.user if c.spec.database else None
        ca_pem = entry.tls.state.ca_pem if entry.tls.state is not None else None
        fp = hashlib.sha256(
            repr(
                (
                    dataclasses.replace(settings, force_failover=False),
                    c.spec.replication.semi_sync_acks,
                    sorted(passwords.items()),
                    app_user,
                    c.spec.database,
                    ca_pem,
                )
            ).encode()
        ).hexdigest()
        if entry.engine is None or entry.fingerprint != fp:
            if entry.engine is not None:
                entry.engine.close()
            entry.engine = build_engine(
                c, members, passwords, settings, apply_timeout=self.apply_timeout, tls=entry.tls.context()
            )
            entry.fingerprint = fp
        else:
            entry.engine.set_members(members)
            entry.engine.settings = settings  # the fingerprint leaves out a force-failover request
        entry.engine.binlog_retention = binlog_retention(c)
        return entry.engine

    def _sync_sql(
        self,
        c: MySQLCluster,
        entry: _Entry,
        decision: t.Decision | None,
        primary: str | None,
        members: Sequence[Member],
        passwords: Mapping[str, str],
    ) -> None:
        """The cluster's MySQLDatabases, MySQLUsers and MySQLGrants, through its primary as the SQL
        account, once nothing else is going on (sql_objects.py)."""
        member = next((mb for mb in members if mb.name == primary), None)
        password = passwords.get(m.SQL_PASSWORD_KEY)
        connect = None
        if decision is None:
            unavailable = f"cluster {c.name} has no server running yet: applied once it has a primary"
        elif not isinstance(decision, t.STEADY) or member is None or member.host is None:
            unavailable = (
                f"cluster {c.name} has no primary serving writes ({decision.kind}): applied once it has"
            )
        elif not password:
            unavailable = (
                f"the credentials Secret of cluster {c.name} has no {m.SQL_PASSWORD_KEY}: add it (README)"
            )
        else:
            unavailable = ""
            host, port, tls = member.host, member.port, entry.tls.context()

            def connect() -> Instance:
                return Instance(
                    host,
                    port,
                    m.SQL_USER,
                    password,
                    name=f"{member.name} ({m.SQL_USER})",
                    tls=tls,
                    read_timeout=10,
                )

        try:
            db = c.spec.database
            owned = Owned(c.name, db.name if db else None, db.user if db else None)
            self.sql.sync(c.namespace, c.name, connect, Flavor(c.spec.flavor), unavailable, owned)
        except Exception:  # noqa: BLE001 - never the cluster's pass: retried at the next sync
            log.exception("%s/%s: SQL objects", c.namespace, c.name)

    def _move_labels(
        self, ns: str, pods: Mapping[int, PodView], names: Mapping[int, str], roles: Mapping[str, str | None]
    ) -> None:
        current = {p.name: p.role for p in pods.values() if not p.deleting}
        for pod, value in label_plan(current, roles):
            if not self.kube.set_pod_label(ns, pod, m.ROLE_LABEL, value) and value == m.ROLE_PRIMARY:
                return  # gone: no other Pod is given the role in its place

    def _primary_in_service(
        self,
        c: MySQLCluster,
        pods: Mapping[int, PodView],
        primary: str | None,
        serving: bool,
        entry: _Entry,
        passwords: Mapping[str, str],
    ) -> bool:
        """The primary Pod is labelled and Ready, and a connection through -rw reaches it (an
        endpoint lags its Pod by seconds: EndpointSlice, kube-proxy). Probed once per primary."""
        if not serving or not primary_in_service(pods, pod_ordinal(primary or "", c.name)):
            entry.routed_to = None
            return False
        if entry.routed_to == primary:
            return True
        try:
            svc = client.CoreV1Api(self.api).read_namespaced_service(m.primary_service_name(c), c.namespace)
        except ApiException:
            return False
        if service_routes_to(
            svc.spec.cluster_ip,
            m.PORT,
            m.OPERATOR_USER,
            passwords[m.OPERATOR_PASSWORD_KEY],
            primary,
            entry.tls.context(),
        ):
            entry.routed_to = primary
            return True
        return False


def engine_settings(
    c: MySQLCluster, replication_tls: bool = False, force_failover: bool = False
) -> t.Settings:
    """Pure: what the replication decisions and the engine take from the spec."""
    r = c.spec.replication
    return t.Settings(
        instances=c.spec.instances,
        failover_enabled=r.failover.enabled,
        failover_delay_seconds=float(r.failover.delay_seconds),
        semisync=r.mode == "semisync",
        async_fallback=r.allow_async_fallback,
        replication_tls=replication_tls,
        # what the primary waits for: MariaDB's semi-sync waits for one acknowledgement, always
        semisync_acks=t.semisync_acks(c.spec.instances, r.semi_sync_acks) if c.spec.flavor == "mysql" else 1,
        force_failover=force_failover,
        # a physical copy: MySQL's CLONE, MariaDB's mariadb-backup (sh/seed.sh)
        reseed=True,
        reseed_errant=r.reseed_errant,
    )


def binlog_retention(c: MySQLCluster) -> Retention:
    """Pure: spec.replication.binlogRetention as the engine purges by it."""
    return Retention(c.spec.replication.binlog_retention_hours * 3600, binlog_max_bytes(c.spec))


def build_engine(
    c: MySQLCluster,
    members: Sequence[Member],
    passwords: Mapping[str, str],
    settings: t.Settings,
    apply_timeout: float = 30.0,
    tls: ssl.SSLContext | None = None,
    connect: Callable[[Member], Any] | None = None,
) -> ReplicationEngine:
    """The engine for a cluster, with its accounts and the semi-sync values of its spec: the
    same values manifests/config.py renders into my.cnf (tests/unit/test_replication_actions.py
    compares them)."""
    app_user = c.spec.database.user if c.spec.database else None
    app = (
        Credentials(app_user, passwords[m.APP_PASSWORD_KEY])
        if app_user and passwords.get(m.APP_PASSWORD_KEY)
        else None
    )
    backup = (
        Credentials(m.BACKUP_USER, passwords[m.BACKUP_PASSWORD_KEY])
        if passwords.get(m.BACKUP_PASSWORD_KEY)
        else None
    )
    monitor = (
        Credentials(m.MONITOR_USER, passwords[m.MONITOR_PASSWORD_KEY], "localhost")
        if passwords.get(m.MONITOR_PASSWORD_KEY)
        else None
    )
    binlog = (
        Credentials(m.BINLOG_USER, passwords[m.BINLOG_PASSWORD_KEY])
        if passwords.get(m.BINLOG_PASSWORD_KEY)
        else None
    )
    return ReplicationEngine(
        members,
        Credentials(m.OPERATOR_USER, passwords[m.OPERATOR_PASSWORD_KEY]),
        Credentials(m.REPLICATION_USER, passwords[m.REPLICATION_PASSWORD_KEY]),
        settings,
        app=app,
        app_database=c.spec.database.name if c.spec.database else None,
        semisync_acks=c.spec.replication.semi_sync_acks,
        apply_timeout=apply_timeout,
        backup=backup,
        monitor=monitor,
        binlog=binlog,
        reduce_admin=True,
        # replicas verify their source against the CA mounted in their Pod; the operator
        # verifies every server against the same CA
        tls_ca_path=m.TLS_CA if settings.replication_tls else None,
        tls=tls,
        connect=connect,
    )
