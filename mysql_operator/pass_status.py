"""The end of a cluster's pass: who serves, the SQL objects synced, the switchover request
settled, and the one status published with its Events and role labels (or the status of a
cluster with no server to talk to yet); a pass overdue said on the status.

`PassStatus` extends `ClusterEntries` (cluster_entries.py). What the status says is decided by
pure modules (status.py, pods.py, switchover.py) and carried out by executor.py."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import switchover as sw
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.server_facts import commits_wait
from mysql_operator.pods import NO_MOVES, label_plan, promotion_succeeded, serving
from mysql_operator.conditions import PASS_OVERDUE, overdue_conditions
from mysql_operator.instance_status import archiver_state, instance_entries, reseed_progress, were_lagging
from mysql_operator.status import Result, plan
from mysql_operator.status_events import events_from_steps
from mysql_operator.summary import Summary, ArchiverState
from mysql_operator import writes as w
from mysql_operator.pass_state import ClusterEntry, Observed, Replicated
from mysql_operator.routing import primary_reached
from mysql_operator.sql_sync import sync_sql_objects
from mysql_operator.cluster_entries import ClusterEntries


class PassStatus(ClusterEntries):
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
        return self._publish(
            seen.body,
            seen.previous,
            summary,
            list(settled.events),
            None,
            applied=applied,
            then=self._request_done(settled),
        )

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
            primary_in_service=primary_reached(c, seen.pods, primary, served.writes, entry),
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
            then=self._request_done(settled),
        )
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

    @staticmethod
    def _request_done(settled: sw.Settled) -> list[w.Write]:
        """Pure: a finished request's annotation removed, once its record is in the status (an
        operator stopped before this resumes it: the record then says it again)."""
        return [w.RemoveAnnotation(sw.ANNOTATION)] if settled.remove_annotation else []

    def _publish(
        self, body, previous, summary: Summary, events, decision, applied=False, labels=NO_MOVES, then=()
    ) -> Result:
        """The end of the pass: its Plan (status.plan, pure), then the writes `then`, carried out."""
        meta = body["metadata"]
        entry = self._entry(meta["namespace"], meta["name"])
        with self._guard:
            reported = dict(entry.reported)
        todo = plan(summary, previous, events, clock.stamp(), labels, reported)
        self.execute(self.kube, body, [*todo.writes(), *then])
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
