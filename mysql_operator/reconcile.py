"""Level-triggered reconcile of one MySQLCluster: one pass observes, decides, acts, then
publishes one status.

`Reconciler._reconcile(body)` is the one pass: kopf's create/update/resume handlers, the periodic
timer (`tick`) and the watches on owned Pods/StatefulSets (`nudge`) all end there. It is
idempotent, and it observes everything before it writes anything:

  parse the spec; one refused (SpecError) -> condition SpecValid False + a Warning Event, and the
    pass acts on the last spec that parsed (status.lastValidSpec, recorded by the status patch of
    the pass that first acts on a generation); with none recorded: phase Invalid, nothing touched
  observe (reads only): the Pods and the StatefulSet (the stores; and the API server's
    StatefulSet when the owned objects are applied), the certificate's Secrets when a check is
    due (tls_upkeep.py), the credentials (`Logins`: the Secret and the record of what the
    servers have; a new cluster's Secret is created here, without a read first) -> one
    `Observed` value; the restore gate's observation and plan (restore_gate.py,
    restore_plan.py); unless a restore holds the servers: every server observed (the engine,
    kept across passes), what each serves of the certificate when due, and whether -rw reaches
    the recorded primary (routing.py)
  plan: what needs no server, as values (writes.py): the unknown fields said, the certificate
    (tls_upkeep.py), every owned object when due (owned.py)
  act, in this order, every write through the one executor (executor.py) but the replication
  step's own:
  - a restore that has ended: its writes (its account dropped, its record)
  - the replication step: the wanted primary (a switchover request: switchover.py; the rolling
    update moves it), then the ReplicationEngine's pass (decide -> survey -> record -> act; the
    same code the benchmarks and integration tests drive) with this module's hooks: a new
    primary is recorded in the status BEFORE acting. A failover's quiesce (the replicas stop
    receiving and are observed again) and its steps (each reads the replication state of the
    server it acts on) are the one place a pass reads after it has begun to write
  - the upkeep plan, in one executor call; a restore that holds the cluster: its writes, and
    the pass ends
  - a stuck outdated Pod replaced; a pending password rotation and a forced failover's record
    (the replication step's); a rolling restart, the servers reload a renewed certificate
  - conclude: who serves (pods.serving, pure), the SQL objects (their own sync, through the
    serving primary), then the role labels taken away, the Events, one status (with the
    switchover request's record: a finished one's annotation is removed after it) and the role
    labels given (pods.label_plan: never two Pods carry role=primary, never a role the status
    does not give)

Every Kubernetes write of the pass - owned objects, Secrets (credentials, their record,
certificates), status records, Events, Pod labels and annotations, Pod restarts, Jobs, volumes
grown, the archiver's Deployment deleted, the SQL objects' status and Secrets - goes through
`KubeOps` (k8s/ops.py), and every read through `reads` (k8s/cache.py: Reads): a pass runs without
an API client (tests/unit/test_pass_effects.py); tests/unit/test_pass_order.py runs whole passes
against the recording fakes of both sides and checks the order above, and that every write
outside the replication step is the executor's. The cluster's status has no other writer
(the backup controller reports its fields: `report`). What the pass decides with
lives in pure modules: pods.py (Pods, roles, who serves), status.py (the status and its Plan; conditions.py, status_events.py, instance_status.py),
credentials.py (Secret keys, passwords), rolling.py (the rolling update's plan; its effects:
rollout.py), restoring.py (the restore record), topology.py (replication decisions;
replication.py acts on them, engine_config.py builds its engine from the spec). Secrets never
leave it except into server connections: step texts and errors are redacted before Events,
status or logs.

`Reconciler` is a chain of classes, one stage of the pass a module, each extending the stage
that follows it in the pass; every method is `Reconciler`'s:
- cluster_entries.py: `ClusterEntries`, what is kept of each cluster between passes (and the
  settings every stage uses), what other controllers and watches report into it;
- pass_status.py: `PassStatus`, conclude: who serves, the SQL objects, the one status;
- pass_replication.py: `PassReplication`, replicate (the engine's pass and its hooks) and after it;
- pass_restore.py: `PassRestore`, the restore gate;
- pass_upkeep.py: `PassUpkeep`, the unknown fields said, the credentials, the certificate and
  the owned objects;
- here: `Reconciler`, the entry points (`reconcile`, `idle`, `tick`, `nudge`) and the pass in
  order (`_reconcile`).
"""

from __future__ import annotations

from typing import Any, Mapping

from mysql_operator import manifests as m
from mysql_operator.pods import ready_count
from mysql_operator.rollout import replace_stuck, restarted
from mysql_operator.routing import probe_route
from mysql_operator.spec_record import spec_in_effect
from mysql_operator.status import Result, timer_can_skip
from mysql_operator.summary import Summary
from mysql_operator.pass_state import ClusterEntry, Observed, apply_still_wanted, merge_asks
from mysql_operator.pass_upkeep import PassUpkeep


class Reconciler(PassUpkeep):
    """Holds one ReplicationEngine per cluster (it measures outages across loops) and a lock per
    cluster (handlers, timer and watches never act on one cluster at the same time)."""

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
        # -- observe: everything the pass reads, before it writes anything --------------------
        # the Pods and the StatefulSet as the stores hold them (the watches bring what the
        # writes below change to the next pass), and as the API server has the StatefulSet when
        # the owned objects are applied (the apply decides on it)
        listed = self.reads.list_pods(c.namespace, m.selector_labels(c))
        statefulset = self.reads.statefulset(c.namespace, m.statefulset_name(c))
        due = self._apply_due(c, entry, previous, apply)
        live = self.reads.live_statefulset(c.namespace, m.statefulset_name(c)) if due else None
        tls_seen = entry.tls.observe(self.reads, c, body, self.resync_seconds, self.clock())
        logins = self._logins(c, body)  # (a new cluster's Secret is created without a read first)
        # the writes that need no server (unknown fields said, the certificate, the owned
        # objects), planned on what was read
        upkeep = self._plan_upkeep(c, body, entry, logins, previous, listed, tls_seen, live, due)
        seen = Observed(body, c, previous, logins, listed, statefulset, spec_error, refused_generation)
        restore = self._restore_plan(seen)
        # the operator never talks to the servers without the CA to verify them (entry.tls.state),
        # nor while a restore holds them. What fails on the servers' side fails the pass (it is
        # retried) once the owned objects are applied: a spec change never waits on the servers
        held = restore is not None and restore.held
        engaged, run, failed = None, None, None
        try:
            if (
                not held
                and logins.error is None
                and entry.tls.state is not None
                and (seen.current_primary is not None or any(p.running for p in seen.pods.values()))
            ):
                engaged = self._engage(seen, entry)
                probe_route(self.reads, c, seen.pods, seen.current_primary, entry, logins.current)

            # -- act, in this order --------------------------------------------------------------
            # the replication pass first: a new primary is recorded before anything else is
            # written (the engine's own reads between its decision and its actions are its
            # quiesce and its steps': replication.py)
            if not held:  # a restore that has ended: its record, its accounts dropped
                self._restore(seen, entry, False, restore)
            if engaged is not None:
                run = self._replicate(seen, entry, engaged)
        except Exception as e:  # noqa: BLE001 - raised again below, after the upkeep
            failed = e
        applied = self._upkeep(body, c, entry, logins, upkeep)
        if failed is not None:
            raise failed
        if held:  # (after the upkeep: the restore's cluster needs its objects)
            result = self._restore(seen, entry, applied, restore)
            assert result is not None
            return result
        replaced = restarted(self.execute(self.kube, body, replace_stuck(c, seen.listed, seen.statefulset)))
        if replaced:  # going down now, with the spec's current template coming up
            seen.ready = ready_count(seen.pods, c.spec.instances, replaced)
        if run is None:
            return self._without_servers(seen, entry, applied)
        self._after(seen, entry, run)
        return self._conclude(seen, entry, run, applied)
