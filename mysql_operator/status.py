"""The MySQLCluster status a pass publishes, from one Summary (summary.py): built from the
conditions (conditions.py), the instances' entries (instance_status.py) and the spec record
(spec_record.py); the end of a pass as a Plan with its Events (status_events.py); and when the
periodic pass may skip work. Pure: no I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from mysql_operator import writes as w
from mysql_operator.conditions import conditions, merge_conditions, phase
from mysql_operator.members import Step
from mysql_operator.manifests.common import ROLE_LABEL
from mysql_operator.pods import NO_MOVES, LabelMoves
from mysql_operator.spec_record import replacing, spec_record
from mysql_operator.status_events import archiving_events, degraded_events, spec_events, waiting_events
from mysql_operator.summary import Summary


@dataclass
class Result:
    phase: str
    applied: bool = False
    decision: str | None = None
    steps: list[Step] = field(default_factory=list)
    recheck_in: float | None = None  # seconds until the loop should look again, if sooner
    # the cluster's status after the pass (what the metrics are derived from)
    status: Mapping[str, Any] = field(default_factory=dict)
    # a Failover promoted a new primary: seconds since the lost primary was first seen down
    failover_seconds: float | None = None
    forced: bool = False  # the promotion was a forced failover (the force-failover annotation)
    cause: str = ""  # a Failover's or Switchover's cause (topology.FAILOVER_CAUSES, SWITCHOVER_CAUSES)


def build_status(s: Summary, previous: Mapping[str, Any], now: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase(s),
        "conditions": merge_conditions(previous.get("conditions") or [], conditions(s), now, s.generation),
        "readyInstances": s.ready,
        "instances": [dict(e) for e in s.entries],
        # the largest lag among the replicas (kubectl get -o wide); null when none is known
        "replicaLagSeconds": max((e["lagSeconds"] for e in s.entries if "lagSeconds" in e), default=None),
    }
    if s.generation is not None:
        status["observedGeneration"] = s.generation
    primary = s.primary or previous.get("currentPrimary")
    if primary:
        status["currentPrimary"] = primary
    if s.credentials_version:
        status["appliedCredentialsVersion"] = s.credentials_version
    if previous.get("restore"):  # written by restore_gate; kept as it is
        status["restore"] = previous["restore"]
    for key, record in s.requests.items():  # a merge patch: a key the new record drops goes
        status[key] = replacing(previous.get(key), record)
    return status


def primary_change_status(s: Summary, previous: Mapping[str, Any], now: str) -> dict[str, Any]:
    """What is written when a new primary is chosen, before any server is touched: the new
    currentPrimary with the phase and conditions of a primary that does not serve yet, so the
    status never names the new primary while still calling the cluster Ready (the instances
    list stays the last pass's until this pass ends)."""
    return {
        "currentPrimary": s.primary,
        "phase": phase(s),
        "conditions": merge_conditions(previous.get("conditions") or [], conditions(s), now, s.generation),
    }


def status_changed(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether patching `status` would change anything. Only its own keys count: a merge patch
    leaves the others as they are."""

    def strip(st: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: st.get(k) for k in status if k != "conditions"}
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in st.get("conditions") or []
        ]
        return out

    return bool(strip(previous) != strip(status))


Event = tuple[str, str, str]  # (Normal|Warning, reason, message)


@dataclass(frozen=True)
class Plan:
    """What a pass writes to Kubernetes at its end, in this order: the role labels taken away,
    the Events (before the status, so that whoever reads the status can already read why), the
    status (only when it changes), the role labels given (pods.LabelMoves)."""

    labels: LabelMoves
    events: tuple[Event, ...]
    status: dict[str, Any]  # the pass's own fields, and those reported to it
    changed: bool  # patching `status` would change something

    def writes(self) -> list[w.Write]:
        """Pure: the writes that carry it out (executor.carry_out), in its order."""
        return [
            *(w.SetPodLabel(pod, ROLE_LABEL, None) for pod, _ in self.labels.take),
            *([w.Post(tuple(self.events))] if self.events else []),
            *([w.PatchStatus(self.status)] if self.changed else []),
            *(w.SetPodLabel(pod, ROLE_LABEL, value) for pod, value in self.labels.give),  # primary last
        ]


def plan(
    s: Summary,
    previous: Mapping[str, Any],
    events: Iterable[Event],
    now: str,
    labels: LabelMoves = NO_MOVES,
    reported: Mapping[str, Any] | None = None,
) -> Plan:
    """The end of a pass as a value: its status (`build_status`, the fields others reported:
    Reconciler.report, and status.lastValidSpec when the spec in effect is not the one recorded:
    `spec_record`, a merge patch), the Events of its steps and of what changed, and the label
    moves."""
    status = {**(reported or {}), **build_status(s, previous, now), **spec_record(s, previous)}
    said = (
        *events,
        *spec_events(previous, status),
        *degraded_events(previous, status),
        *archiving_events(previous, status),
        *waiting_events(previous, status),
    )
    return Plan(labels, said, status, status_changed(previous, status))


def timer_can_skip(
    status: Mapping[str, Any], generation: int | None, since_apply: float, resync_seconds: float
) -> bool:
    return (
        status.get("phase") == "Pending"
        and not status.get("currentPrimary")
        and status.get("observedGeneration") == generation
        and since_apply < resync_seconds
    )
