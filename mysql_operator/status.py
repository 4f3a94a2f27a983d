"""The MySQLCluster status and its Events, derived from one Summary of a pass: phase,
conditions (Ready, Available, Progressing, Degraded, SpecValid), per-instance entries, the Events a
decision or a step posts, and when the periodic pass may skip work. Also the spec a pass acts on:
the cluster's own, or while that is refused the last that parsed (status.lastValidSpec, recorded
here). Pure: no I/O here."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping, Sequence


from mysql_operator import manifests as m
from mysql_operator import certificates, rolling
from mysql_operator import reasons as R
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster, SpecError, parse
from mysql_operator.db.gtid import GtidParseError, parser_for
from mysql_operator.redaction import redact
from mysql_operator.members import Step
from dataclasses import field
from mysql_operator.pods import NO_MOVES, LabelMoves, PodView, pod_waiting


T = t.Transition
# transitions that act: condition Progressing True, its reason the decision's kind
ACTING = (T.REPAIRING, T.BOOTSTRAPPING, T.FAILING_OVER, T.SWITCHING_OVER, T.PROMOTING)


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


CONDITION_TYPES = ("Ready", "Available", "Progressing", "Degraded", "SpecValid")
INVALID_SPEC = R.INVALID_SPEC  # the reason of a refused spec's conditions and of its Warning Event
LAST_VALID_SPEC = "lastValidSpec"  # status: {generation, spec} of the last spec that parsed
# the reason of Ready False / Degraded True while a commit on the primary would wait for a
# semi-sync acknowledgement that no connected replica can give yet
SEMISYNC_ACKS_MISSING = R.SEMISYNC_ACKS_MISSING
LAGGING = "lagging"  # status.instances[].role of a replica out of -ro for its lag
RESEEDING = "reseeding"  # status.instances[].role of an instance whose data is being replaced


def _camel(action: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in action.replace("_", "-").split("-"))


def events_from_steps(steps: Iterable[Step], secrets: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    secrets = list(secrets)
    out = []
    for s in steps:
        message = redact(f"{s.instance}: {s.detail}" if s.detail else s.instance, secrets)
        etype = "Normal" if s.ok and not s.warn else "Warning"
        out.append((etype, _camel(s.action) + ("" if s.ok else "Failed"), message))
    return out


def decision_event(d: t.Decision | None, secrets: Iterable[str] = ()) -> tuple[str, str, str] | None:
    """The Event announcing a decision that changes the topology (before its steps' Events)."""
    if isinstance(d, (t.Failover, t.Switchover, t.Bootstrap, t.Promote)):
        etype = "Warning" if isinstance(d, t.Failover) else "Normal"
        return etype, d.kind, redact(d.reason or d.kind, list(secrets))
    return None


# where a field of an object the operator renders comes from in the MySQLCluster spec
_SPEC_FIELDS = (
    (r"spec\.template\.spec\.(?:initContainers|containers)\[\d+\]\.resources", "spec.resources"),
    (r"spec\.template\.spec\.affinity", "spec.affinity"),
    (r"spec\.template\.spec\.tolerations", "spec.tolerations"),
    (r"spec\.template\.spec\.nodeSelector", "spec.nodeSelector"),
    (r"spec\.template\.spec\.priorityClassName", "spec.priorityClassName"),
    (r"spec\.template\.metadata\.labels", "spec.podLabels"),
    (r"spec\.template\.metadata\.annotations", "spec.podAnnotations"),
    (r"spec\.volumeClaimTemplates\[\d+\]\.spec\.storageClassName", "spec.storage.storageClassName"),
    (r"spec\.volumeClaimTemplates\[\d+\]\.spec\.resources", "spec.storage.size"),
)


def apply_refusal(kind: str, name: str, status: int | None, message: str) -> str:
    """Pure: why an object the operator renders was not applied, for the status and an Event:
    the MySQLCluster fields the API server's message points at (through the rendered object's
    paths), the object, and the API's own words."""
    fields = sorted({f for pattern, f in _SPEC_FIELDS if re.search(pattern, message)})
    answer = f"refused by the API server (HTTP {status}): {message}" if status else f"not applied: {message}"
    if fields:
        return f"{', '.join(fields)}: {kind} {name} {answer}: fix {' and '.join(fields)}"
    return f"{kind} {name} {answer}"


@dataclass(frozen=True)
class ArchiverState:
    """The binlog archiver as the condition BinlogArchiving says it: `why` it does not archive
    ("" while it does) and the condition's reason."""

    why: str = ""
    reason: str = R.ARCHIVING


@dataclass(frozen=True)
class Summary:
    """Everything the status is computed from; plain data."""

    instances: int
    generation: int | None = None  # of the spec in effect (status.observedGeneration)
    # the spec in effect, as the MySQLCluster had it at `generation`: recorded as
    # status.lastValidSpec; None: no spec is in effect
    spec: Mapping[str, Any] | None = None
    # why the cluster's current spec (of `refused_generation`) is refused: with `spec` the pass
    # acted on the last spec that parsed (the cluster runs on, condition SpecValid False), without
    # it on nothing (phase Invalid)
    spec_error: str | None = None
    refused_generation: int | None = None
    secret_error: str | None = None
    # why an owned object (StatefulSet, Service, ...) could not be applied (apply_refusal)
    apply_error: str | None = None
    # why the certificate is missing or cannot be renewed (certificates.TLSProblem); tls_blocking:
    # the cluster has no certificate yet, so it waits
    tls_problem: certificates.TLSProblem | None = None
    tls_blocking: bool = False
    ready: int = 0
    primary: str | None = None
    primary_serving: bool = False
    # the primary Pod carries role=primary and is Ready, i.e. it is the -rw Service's endpoint
    # (as listed at the start of the pass: labels moved in this pass count from the next one)
    primary_in_service: bool = False
    decision: str | None = None  # kind, None when the engine did not run
    decision_reason: str = ""
    held_out: tuple[str, ...] = ()
    reseeding: tuple[str, ...] = ()  # "<instance>: <progress>" of instances being re-seeded
    unreachable: tuple[str, ...] = ()
    lagging: tuple[str, ...] = ()  # replicas out of -ro (spec.replication.maxReadLagSeconds)
    # why a commit on the serving primary would wait now (fewer semi-sync replicas connected than
    # a commit waits for: replication.commits_wait); "" when it would not
    commits_wait: str = ""
    max_read_lag_seconds: int = 0
    failed_steps: tuple[str, ...] = ()
    entries: tuple[Mapping[str, Any], ...] = ()
    # the version of the credentials Secret whose passwords the servers have
    credentials_version: str = ""
    # spec.backup.binlogs: None when off, else what the archiver does (archiver_state)
    binlog_archiver: ArchiverState | None = None
    # a rolling update under way (Pods on an older template): what it does now; "" when none
    rolling: str = ""
    # a Pod template a new operator version wants, staged (rolling.StageTemplate); None: none
    restart_pending: rolling.StageTemplate | None = None
    # switchover requests' records (switchover.settle: status.switchover, status.primaryRequest;
    # None removes one); a key left out stays as it is
    requests: Mapping[str, Any] = field(default_factory=dict)


def primary_in_service(pods: Mapping[int, PodView], primary_ordinal: int | None) -> bool:
    """The -rw Service routes to the primary: its Pod is labelled role=primary and Ready."""
    pod = pods.get(primary_ordinal) if primary_ordinal is not None else None
    return bool(pod and pod.ready and pod.role == m.ROLE_PRIMARY and not pod.deleting)


def phase(s: Summary) -> str:
    if s.spec_error and s.spec is None:
        return "Invalid"
    now = t.transition(s.decision)
    if s.secret_error or now is T.LOST or (s.apply_error and s.primary is None):
        return "Failed"
    if s.tls_problem is not None and s.tls_blocking and s.tls_problem.warning:
        return "Failed"  # the user must act (the timer keeps looking: the fix is seen within seconds)
    if s.primary is None:
        return "Bootstrapping" if now is not None else "Pending"
    if now is T.FAILING_OVER:
        return "FailingOver"
    if now is T.SWITCHING_OVER:
        return "SwitchingOver"
    if now is T.BOOTSTRAPPING and not s.primary_serving:
        return "Bootstrapping"
    if not s.primary_serving:
        return "Unavailable"
    tls_degraded = s.tls_problem is not None and s.tls_problem.warning
    if (
        s.ready >= s.instances
        and not s.held_out
        and not s.reseeding
        and not s.unreachable
        and not s.lagging
        and not s.commits_wait
        and not s.failed_steps
        and not s.apply_error
        and not tls_degraded
    ):
        # writable is not enough: clients connect through -rw; and Ready means the spec is in
        # effect: while Pods still run an older template the cluster is Updating
        if not s.primary_in_service:
            return "Unavailable"
        return "Updating" if s.rolling else "Ready"
    return "Degraded"


def _cond(ctype: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": reason, "message": message}


def spec_valid(s: Summary) -> dict[str, Any]:
    """Condition SpecValid: False while the cluster's current spec is refused (observedGeneration:
    the refused generation), saying whether the last spec that parsed stays in effect."""
    if not s.spec_error:
        return _cond("SpecValid", True, R.VALID, "")
    message = s.spec_error
    if s.spec is not None:
        message += (
            f"; generation {s.refused_generation} is not applied: the cluster runs on the spec of "
            f"generation {s.generation} (status.{LAST_VALID_SPEC}), failover included, until it is fixed"
        )
    out = _cond("SpecValid", False, INVALID_SPEC, message)
    if s.refused_generation is not None:
        out["observedGeneration"] = s.refused_generation
    return out


def conditions(s: Summary) -> list[dict[str, Any]]:
    now = t.transition(s.decision)
    if s.spec_error and s.spec is None:  # nothing in effect: nothing is touched
        msg = s.spec_error
        refused = [
            _cond("Ready", False, INVALID_SPEC, msg),
            _cond("Available", False, INVALID_SPEC, msg),
            _cond("Progressing", False, INVALID_SPEC, msg),
            _cond("Degraded", True, INVALID_SPEC, msg),
        ]
        if s.refused_generation is not None:  # computed for the refused spec: none is in effect
            refused = [{**c, "observedGeneration": s.refused_generation} for c in refused]
        return [*refused, spec_valid(s)]
    ph = phase(s)
    ready_msg = f"{s.ready}/{s.instances} instances ready"
    stuck = [f"{e['name']}: {e['waiting']}" for e in s.entries if e.get("waiting")]
    if stuck:
        ready_msg += "; " + "; ".join(stuck)
    not_in_service = s.primary_serving and not s.primary_in_service
    if ph == "Ready":
        ready = _cond("Ready", True, R.ALL_INSTANCES_READY, ready_msg)
    elif s.apply_error:
        ready = _cond("Ready", False, R.APPLY_FAILED, s.apply_error)
    elif s.ready < s.instances:
        ready = _cond("Ready", False, R.INSTANCES_NOT_READY, ready_msg)
    elif ph == "Updating":
        ready = _cond("Ready", False, R.UPDATING, f"rolling update: {s.rolling}")
    elif ph == "Degraded" and s.commits_wait:
        ready = _cond("Ready", False, SEMISYNC_ACKS_MISSING, s.commits_wait)
    elif ph == "Unavailable" and not_in_service:
        ready = _cond(
            "Ready",
            False,
            R.PRIMARY_NOT_IN_SERVICE,
            f"{s.primary} accepts writes but is not yet a ready endpoint of the -rw Service",
        )
    else:
        ready = _cond("Ready", False, ph, ready_msg)
    if s.primary_serving:
        available = _cond("Available", True, R.PRIMARY_SERVING, f"{s.primary} accepts writes")
    elif s.primary is None:
        available = _cond(
            "Available",
            False,
            R.NO_PRIMARY,
            "no primary yet: one is chosen once every instance answers (condition Progressing says "
            "what it waits for)",
        )
    else:
        available = _cond(
            "Available",
            False,
            R.PRIMARY_NOT_SERVING,
            f"{s.primary} does not accept writes: condition Progressing says how the operator makes it, "
            "or another instance, a writable primary",
        )

    tls_wait = s.tls_problem if s.tls_blocking else None
    if s.secret_error:
        progressing = _cond("Progressing", False, R.CREDENTIALS_SECRET, s.secret_error)
    elif tls_wait is not None:
        progressing = _cond("Progressing", not tls_wait.warning, tls_wait.reason, tls_wait.message)
    elif now in ACTING:
        progressing = _cond("Progressing", True, str(s.decision), s.decision_reason)
    elif now is T.WAITING:
        progressing = _cond("Progressing", True, R.WAITING, s.decision_reason)
    elif now is T.HELD:  # nothing moves until replicas return or a person forces it
        progressing = _cond("Progressing", False, R.FAILOVER_HELD, s.decision_reason)
    elif s.apply_error:  # the user must act: nothing progresses towards the spec until then
        progressing = _cond("Progressing", False, R.APPLY_FAILED, s.apply_error)
    elif s.rolling:
        progressing = _cond("Progressing", True, R.ROLLING_UPDATE, s.rolling)
    elif s.ready < s.instances:
        progressing = _cond("Progressing", True, R.WAITING_FOR_INSTANCES, ready_msg)
    elif not_in_service:
        progressing = _cond(
            "Progressing",
            True,
            R.WAITING_FOR_SERVICE,
            f"waiting for {s.primary} to be a ready endpoint of the -rw Service (its readiness probe)",
        )
    else:
        progressing = _cond("Progressing", False, R.STABLE, "nothing to do")

    if s.secret_error:
        degraded = _cond("Degraded", True, R.CREDENTIALS_SECRET, s.secret_error)
    elif now in (T.LOST, T.HELD):
        degraded = _cond("Degraded", True, str(s.decision), s.decision_reason)
    elif s.apply_error:
        degraded = _cond("Degraded", True, R.APPLY_FAILED, s.apply_error)
    elif s.failed_steps:
        degraded = _cond(
            "Degraded", True, R.ACTION_FAILED, "; ".join(s.failed_steps) + " (tried again at the next pass)"
        )
    elif s.primary is not None and s.primary in s.unreachable:
        # a stable message (no duration): the Warning Event is posted once per outage. Failover is
        # enabled here (disabled: Unrecoverable, above), but it may wait for more replicas
        degraded = _cond(
            "Degraded",
            True,
            R.PRIMARY_UNREACHABLE,
            f"primary {s.primary} unreachable: unless it answers again, a replica is promoted once "
            "spec.replication.failover.delaySeconds have passed (condition Progressing says when)",
        )
    elif s.reseeding:
        degraded = _cond("Degraded", True, R.RESEEDING, "; ".join(s.reseeding))
    elif s.held_out:
        degraded = _cond(
            "Degraded",
            True,
            R.INSTANCES_HELD_OUT,
            f"{', '.join(s.held_out)} held out: it serves no reads and is never promoted. Errant "
            "transactions (its HeldOutFailed Event names them): set spec.replication.errantPolicy: "
            "Reseed, or delete its PVC and Pod, to rebuild it from a healthy instance; or it lacks "
            "transactions purged from the primary's binary logs: it is re-seeded in turn",
        )
    elif s.primary is not None and s.unreachable:
        degraded = _cond(
            "Degraded",
            True,
            R.INSTANCES_UNREACHABLE,
            f"{', '.join(s.unreachable)} unreachable: out of the Services until it answers again "
            "(kubectl describe pod; status.instances[].error)",
        )
    elif s.commits_wait:
        degraded = _cond("Degraded", True, SEMISYNC_ACKS_MISSING, s.commits_wait)
    elif s.lagging:
        degraded = _cond(
            "Degraded",
            True,
            R.REPLICAS_LAGGING,
            f"{', '.join(s.lagging)} more than spec.replication.maxReadLagSeconds "
            f"({s.max_read_lag_seconds} s) behind the primary: out of the -ro Service until caught up",
        )
    elif s.tls_problem is not None and s.tls_problem.warning:  # also posted as a Warning Event
        degraded = _cond("Degraded", True, s.tls_problem.reason, s.tls_problem.message)
    else:
        degraded = _cond("Degraded", False, R.AS_EXPECTED if s.primary else "Bootstrapping", "")
    out = [ready, available, progressing, degraded, spec_valid(s)]
    if s.restart_pending is not None:  # present only while one is staged
        out.append(_cond("RestartPending", True, s.restart_pending.reason, s.restart_pending.message))
    if s.binlog_archiver is not None:  # spec.backup.binlogs.enabled
        if s.binlog_archiver.why:
            out.append(_cond("BinlogArchiving", False, s.binlog_archiver.reason, s.binlog_archiver.why))
        else:
            out.append(
                _cond("BinlogArchiving", True, R.ARCHIVING, "the binary logs reach the backup storage")
            )
    return out


def archiver_state(
    name: str, deployment_status: Mapping[str, Any] | None, pod_trouble: str = ""
) -> ArchiverState:
    """Summary.binlog_archiver from the archiver Deployment's status (None: not seen, or
    deleted) and what its Pod's trouble is (archiver_pod_trouble): archiving while its Pod is
    ready (it archived from the primary lately: its readiness probe)."""
    if deployment_status is None:
        return ArchiverState(
            f"the archiver Deployment {name} does not exist yet: it is made at the operator's next apply",
            R.ARCHIVER_NOT_READY,
        )
    if (deployment_status.get("readyReplicas") or 0) >= 1:
        return ArchiverState()
    if pod_trouble:
        return ArchiverState(
            f"the archiver Pod (Deployment {name}) cannot archive: {pod_trouble}", R.ARCHIVER_FAILING
        )
    return ArchiverState(
        f"the archiver Pod (Deployment {name}) is not ready: no transaction reaches the backup storage "
        f"until it is (its log says why: kubectl logs deploy/{name} -c archiver)",
        R.ARCHIVER_NOT_READY,
    )


def archiver_pod_trouble(pod: Mapping[str, Any]) -> str:
    """Why an archiver Pod cannot run or keeps failing, in its own words: the message its last
    run ended with (the archiver's report: `{"ok": false, "message": ...}`, or its log's last
    lines), else why it waits (an image that cannot be pulled, an unschedulable Pod); "" when
    neither. Its words stay while it restarts, so the condition does not flap with its back-off."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != "archiver":
            continue
        last = (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get("terminated")
        if last and last.get("exitCode"):
            text = last.get("message") or ""
            try:
                said = json.loads(text)
                text = said.get("message") if isinstance(said, dict) else None
            except ValueError:
                pass
            text = " ".join(str(text or "").split())[-1024:]
            return (
                text or f"its last run ended with exit status {last['exitCode']} ({last.get('reason') or ''})"
            )
    return pod_waiting(pod)


def archiving_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when binary-log archiving stops (BinlogArchiving True -> False), not while the
    archiver starts for the first time; one when its Pod starts failing (reason ArchiverFailing:
    a tool image it cannot use, an image that cannot be pulled), once per episode."""

    def archiving(st):
        return next((c for c in st.get("conditions") or [] if c.get("type") == "BinlogArchiving"), {})

    old, new = archiving(previous), archiving(status)
    if old.get("status") == "True" and new.get("status") == "False":
        return [("Warning", R.BINLOG_ARCHIVING_STOPPED, new.get("message") or "")]
    if new.get("reason") == R.ARCHIVER_FAILING and old.get("reason") != R.ARCHIVER_FAILING:
        return [("Warning", R.ARCHIVER_FAILING, new.get("message") or "")]
    return []


def waiting_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when an instance's Pod gets stuck (status.instances[].waiting appears: an image
    that cannot be pulled, a volume that cannot be mounted, a crash loop), once per episode: not
    again while the kubelet's words change (ErrImagePull, then ImagePullBackOff...)."""
    before = {e.get("name"): e.get("waiting") for e in previous.get("instances") or []}
    return [
        ("Warning", R.INSTANCE_WAITING, f"{e['name']} cannot start: {e['waiting']}")
        for e in status.get("instances") or []
        if e.get("waiting") and not before.get(e.get("name"))
    ]


def merge_conditions(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], now: str, generation: int | None
) -> list[dict[str, Any]]:
    """lastTransitionTime moves only when a condition's status changes; observedGeneration is
    `generation` unless the condition names its own (SpecValid: the refused one)."""
    before = {c.get("type"): c for c in old or []}
    out = []
    for c in new:
        prev = before.get(c["type"])
        changed = prev is None or prev.get("status") != c["status"]
        item = dict(c)
        item["lastTransitionTime"] = now if changed else prev.get("lastTransitionTime", now)
        if generation is not None:
            item.setdefault("observedGeneration", generation)
        out.append(item)
    return out


PASS_OVERDUE = R.PASS_OVERDUE  # the condition (and Event reason) of a pass past its deadline


def overdue_conditions(
    conditions: Iterable[Mapping[str, Any]], seconds: float | None, now: str, generation: int | None
) -> list[dict[str, Any]] | None:
    """The cluster's conditions with PassOverdue True (`seconds`: the deadline it ran past;
    `generation`: the cluster's metadata.generation the overdue pass runs for) or without it
    (None); None when they would not change. The per-cluster loop writes it, not the pass: the
    pass it reports on is the one that cannot."""
    conditions = list(conditions)
    kept = [dict(c) for c in conditions if c.get("type") != PASS_OVERDUE]
    if seconds is None:
        return kept if len(kept) != len(conditions) else None
    return kept + [
        {
            "type": PASS_OVERDUE,
            "status": "True",
            "reason": PASS_OVERDUE,
            "message": (
                f"the operator's pass over this cluster has run for more than {seconds:g} s: it "
                "waits on a server or the API server (the operator's log names where); no other "
                "pass of this cluster starts until it ends, and other clusters' passes go on"
            ),
            "lastTransitionTime": now,
            **({"observedGeneration": generation} if generation is not None else {}),
        }
    ]


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


def _condition(status: Mapping[str, Any], ctype: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), {})


def degraded_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning when Degraded turns True or changes its reason/message (not on every loop); not
    for a refused spec (spec_events says that), nor for a re-seed's progress (its message counts
    the bytes copied: one Event per re-seed, the Reseed steps' Events say the rest)."""
    old, new = _condition(previous, "Degraded"), _condition(status, "Degraded")
    if new.get("status") != "True" or new.get("reason") == INVALID_SPEC:
        return []
    same = ("True", new.get("reason")) == (old.get("status"), old.get("reason"))
    if same and (new.get("reason") == R.RESEEDING or old.get("message") == new.get("message")):
        return []
    return [("Warning", new.get("reason") or "Degraded", new.get("message") or "")]


def spec_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A Warning InvalidSpec naming the refused field and the fix, once per refused generation
    (SpecValid False with another observedGeneration or message than before), not every pass."""
    old, new = _condition(previous, "SpecValid"), _condition(status, "SpecValid")
    if new.get("status") != "False":
        return []
    key = ("status", "observedGeneration", "message")
    if [old.get(k) for k in key] == [new.get(k) for k in key]:
        return []
    return [("Warning", INVALID_SPEC, new.get("message") or "")]


def replacing(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: `new`, with null for every
    key of a nested object that only `old` has (a merge patch of `new` alone would keep those)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    return {**{k: None for k in old if k not in new}, **{k: replacing(old.get(k), v) for k, v in new.items()}}


def _without_nulls(value: Any) -> Any:
    """A JSON value as a merge patch stores it: no null member in an object (a list is a value)."""
    if not isinstance(value, Mapping):
        return value
    return {k: _without_nulls(v) for k, v in value.items() if v is not None}


def spec_record(s: Summary, previous: Mapping[str, Any]) -> dict[str, Any]:
    """status.lastValidSpec for a status patch: the spec in effect and its generation, when they
    are not what is recorded already ({} then: no write for it). Only the spec: it names Secrets,
    it holds no secret value."""
    if s.spec is None:
        return {}
    old = previous.get(LAST_VALID_SPEC)
    new = {"generation": s.generation, "spec": _without_nulls(s.spec)}
    if isinstance(old, Mapping) and all(old.get(k) == v for k, v in new.items()):
        return {}
    return {LAST_VALID_SPEC: replacing(old, new)}


def last_valid_body(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MySQLCluster as status.lastValidSpec recorded it: its metadata with the recorded
    generation, and the recorded spec; None when none is recorded (a cluster whose first spec was
    refused, or one an earlier operator version made, until a spec of it parses)."""
    recorded = (body.get("status") or {}).get(LAST_VALID_SPEC)
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("spec"), Mapping):
        return None
    meta = {**body.get("metadata", {}), "generation": recorded.get("generation")}
    return {**body, "metadata": meta, "spec": dict(recorded["spec"])}


def spec_in_effect(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], MySQLCluster | None, str | None]:
    """What a pass acts on: (body, parsed, why the cluster's own spec is refused). The cluster's
    own spec when it parses; else the last that parsed (`last_valid_body`), so that a spec the
    CRD admits but the parser refuses never stops failover; else nothing (None: phase Invalid).
    A recorded spec this operator version refuses counts as none."""
    try:
        return body, parse(body), None
    except SpecError as e:
        refused = str(e)
    last = last_valid_body(body)
    if last is not None:
        try:
            return last, parse(last), refused
        except SpecError:
            pass
    return body, None, refused


def status_changed(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether patching `status` would change anything. Only its own keys count: a merge patch
    leaves the others as they are."""

    def strip(st):
        out = {k: st.get(k) for k in status if k != "conditions"}
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in st.get("conditions") or []
        ]
        return out

    return strip(previous) != strip(status)


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


def instance_entries(
    ordinals: Sequence[int],
    names: Mapping[int, str],
    pods: Mapping[int, PodView],
    observed: Mapping[str, t.InstanceState],
    lags: Mapping[str, int | None],
    roles: Mapping[str, str | None],
    primary: str | None,
    secrets: Iterable[str] = (),
    lagging: Collection[str] = (),
) -> list[dict[str, Any]]:
    secrets = list(secrets)
    out = []
    for o in ordinals:
        name = names[o]
        pod, obs = pods.get(o), observed.get(name)
        role = roles.get(name)
        if role is None and name in lagging:
            role = LAGGING
        elif obs is not None and obs.reseeding:
            role = RESEEDING
        elif role is None:
            role = "held-out" if obs is not None and obs.reachable and name in roles else "unknown"
        if name == primary and roles.get(name) is None and obs is not None:
            role = "primary-not-serving"
        e: dict[str, Any] = {
            "name": name,
            "role": role,
            "ready": bool(pod and pod.ready),
            "reachable": bool(obs and obs.reachable),
        }
        # unreachable: what it had when it last answered (what a failover compares with)
        executed = None if obs is None else obs.executed if obs.reachable else obs.last_executed
        if executed is not None:
            e["gtidExecuted"] = str(executed)
        lag = lags.get(name)
        if lag is not None:
            e["lagSeconds"] = int(lag)
        if obs is not None and obs.clone is not None:
            e["reseed"] = reseed_entry(obs)
        if obs is not None and obs.last_error:
            e["error"] = redact(obs.last_error, secrets)[:512]
        if pod and pod.waiting:
            e["waiting"] = redact(pod.waiting, secrets)
        out.append(e)
    return out


def _copy_bytes(i: t.InstanceState) -> tuple[int, int]:
    """(bytes copied, bytes expected). MariaDB's expected bytes are the donor's estimate, made
    before the copy: the copy also carries the redo log written while it runs, so an estimate
    passed is raised to what was copied (never more copied than expected in the status)."""
    done, total = i.clone_bytes
    return done, max(total, done) if total else total


def reseed_entry(i: t.InstanceState) -> dict[str, Any]:
    """status.instances[].reseed: the stage of the physical copy onto it and the bytes copied."""
    done, total = _copy_bytes(i)
    out: dict[str, Any] = {"phase": i.clone, "bytesCopied": done, "bytesTotal": total}
    if i.clone_error:
        out["error"] = i.clone_error[:512]
    return out


def reseed_progress(i: t.InstanceState, waiting: str = "") -> str:
    """For the Degraded condition: which instance is re-seeded, and how far it is - or why its
    Pod does not get on with it (`waiting`: pods.pod_waiting, e.g. the seed container failing)."""
    done, total = _copy_bytes(i)
    if waiting:
        return f"{i.name} re-seeding: {waiting}"
    if i.clone == t.CLONE_COPIED:
        return f"{i.name} re-seeded: restarting on the copied data"
    mb = 1024 * 1024
    return (
        f"{i.name} re-seeding: {done // mb} of {total // mb} MiB copied" if total else f"{i.name} re-seeding"
    )


def were_lagging(status: Mapping[str, Any]) -> frozenset[str]:
    """The replicas the last published status showed out of -ro for their lag."""
    return frozenset(e.get("name", "") for e in status.get("instances") or [] if e.get("role") == LAGGING)


def recorded_executed(status: Mapping[str, Any], flavor: str) -> dict[str, Any]:
    """status.instances[].gtidExecuted by instance name, parsed (`flavor`'s GTIDs); an entry that
    does not parse is left out."""
    parse = parser_for(flavor)
    out: dict[str, Any] = {}
    for e in status.get("instances") or []:
        if not isinstance(e, Mapping) or not isinstance(e.get("name"), str):
            continue
        raw = e.get("gtidExecuted")
        if isinstance(raw, str):
            try:
                out[e["name"]] = parse(raw)
            except GtidParseError:
                continue
    return out


def primary_since(status: Mapping[str, Any], primary: str | None) -> tuple[str, float] | None:
    """(primary, when it was made primary as a Unix time) from status.primarySince, if recorded."""
    raw = status.get("primarySince")
    if not primary or not raw:
        return None
    try:
        return primary, dt.datetime.fromisoformat(raw).timestamp()
    except (TypeError, ValueError):
        return None


def timer_can_skip(
    status: Mapping[str, Any], generation: int | None, since_apply: float, resync_seconds: float
) -> bool:
    return (
        status.get("phase") == "Pending"
        and not status.get("currentPrimary")
        and status.get("observedGeneration") == generation
        and since_apply < resync_seconds
    )
