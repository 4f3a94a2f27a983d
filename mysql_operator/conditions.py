"""The MySQLCluster's phase and conditions (Ready, Available, Progressing, Degraded, SpecValid,
PassOverdue) from a pass's Summary, merged into those it had. Pure."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from mysql_operator import reasons as R
from mysql_operator import topology as t
from mysql_operator.summary import ACTING, INVALID_SPEC, LAST_VALID_SPEC, SEMISYNC_ACKS_MISSING, Summary, T


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
    out = [_ready(s), _available(s), _progressing(s), _degraded(s), spec_valid(s)]
    if s.restart_pending is not None:  # present only while one is staged
        out.append(_cond("RestartPending", True, s.restart_pending.reason, s.restart_pending.message))
    if s.drill:  # a restore drill ran (spec.backup.drill, or one asked for)
        out.append(_restorable(s.drill))
    if s.binlog_archiver is not None:  # spec.backup.binlogs.enabled
        if s.binlog_archiver.why:
            out.append(_cond("BinlogArchiving", False, s.binlog_archiver.reason, s.binlog_archiver.why))
        else:
            out.append(
                _cond("BinlogArchiving", True, R.ARCHIVING, "the binary logs reach the backup storage")
            )
    return out


def _restorable(d: Mapping[str, Any]) -> dict[str, Any]:
    """What the last restore drill proved: the backups restore (True), do not (False), or a drill
    runs (True if the one before passed, else Unknown)."""
    message = str(d.get("message") or "")
    if d.get("phase") == "Succeeded":
        return _cond("Restorable", True, R.RESTORE_DRILL_SUCCEEDED, message)
    if d.get("phase") == "Failed":
        return _cond("Restorable", False, R.RESTORE_DRILL_FAILED, message)
    running = f"a restore drill of backup {d.get('backup')} runs since {d.get('startedAt')}"
    if d.get("lastSucceededAt"):
        return _cond(
            "Restorable",
            True,
            R.RESTORE_DRILL_RUNNING,
            f"{running}; the last one passed at {d['lastSucceededAt']}",
        )
    return {"type": "Restorable", "status": "Unknown", "reason": R.RESTORE_DRILL_RUNNING, "message": running}


def _ready_message(s: Summary) -> str:
    """How many instances are ready, and why those waiting wait."""
    msg = f"{s.ready}/{s.instances} instances ready"
    stuck = [f"{e['name']}: {e['waiting']}" for e in s.entries if e.get("waiting")]
    return msg + ("; " + "; ".join(stuck) if stuck else "")


def _not_in_service(s: Summary) -> bool:
    """The primary accepts writes, but the -rw Service does not reach it yet."""
    return s.primary_serving and not s.primary_in_service


def _ready(s: Summary) -> dict[str, Any]:
    ph, ready_msg, not_in_service = phase(s), _ready_message(s), _not_in_service(s)
    if ph == "Ready":
        return _cond("Ready", True, R.ALL_INSTANCES_READY, ready_msg)
    if s.apply_error:
        return _cond("Ready", False, R.APPLY_FAILED, s.apply_error)
    if s.ready < s.instances:
        return _cond("Ready", False, R.INSTANCES_NOT_READY, ready_msg)
    if ph == "Updating":
        return _cond("Ready", False, R.UPDATING, f"rolling update: {s.rolling}")
    if ph == "Degraded" and s.commits_wait:
        return _cond("Ready", False, SEMISYNC_ACKS_MISSING, s.commits_wait)
    if ph == "Unavailable" and not_in_service:
        return _cond(
            "Ready",
            False,
            R.PRIMARY_NOT_IN_SERVICE,
            f"{s.primary} accepts writes but is not yet a ready endpoint of the -rw Service",
        )
    return _cond("Ready", False, ph, ready_msg)


def _available(s: Summary) -> dict[str, Any]:
    if s.primary_serving:
        return _cond("Available", True, R.PRIMARY_SERVING, f"{s.primary} accepts writes")
    if s.primary is None:
        return _cond(
            "Available",
            False,
            R.NO_PRIMARY,
            "no primary yet: one is chosen once every instance answers (condition Progressing says "
            "what it waits for)",
        )
    return _cond(
        "Available",
        False,
        R.PRIMARY_NOT_SERVING,
        f"{s.primary} does not accept writes: condition Progressing says how the operator makes it, "
        "or another instance, a writable primary",
    )


def _progressing(s: Summary) -> dict[str, Any]:
    now, ready_msg, not_in_service = t.transition(s.decision), _ready_message(s), _not_in_service(s)
    tls_wait = s.tls_problem if s.tls_blocking else None
    if s.secret_error:
        return _cond("Progressing", False, R.CREDENTIALS_SECRET, s.secret_error)
    if tls_wait is not None:
        return _cond("Progressing", not tls_wait.warning, tls_wait.reason, tls_wait.message)
    if now in ACTING:
        return _cond("Progressing", True, str(s.decision), s.decision_reason)
    if now is T.WAITING:
        return _cond("Progressing", True, R.WAITING, s.decision_reason)
    if now is T.HELD:  # nothing moves until replicas return or a person forces it
        return _cond("Progressing", False, R.FAILOVER_HELD, s.decision_reason)
    if s.apply_error:  # the user must act: nothing progresses towards the spec until then
        return _cond("Progressing", False, R.APPLY_FAILED, s.apply_error)
    if s.rolling:
        return _cond("Progressing", True, R.ROLLING_UPDATE, s.rolling)
    if s.ready < s.instances:
        return _cond("Progressing", True, R.WAITING_FOR_INSTANCES, ready_msg)
    if not_in_service:
        return _cond(
            "Progressing",
            True,
            R.WAITING_FOR_SERVICE,
            f"waiting for {s.primary} to be a ready endpoint of the -rw Service (its readiness probe)",
        )
    return _cond("Progressing", False, R.STABLE, "nothing to do")


def _degraded(s: Summary) -> dict[str, Any]:
    now = t.transition(s.decision)
    if s.secret_error:
        return _cond("Degraded", True, R.CREDENTIALS_SECRET, s.secret_error)
    if now in (T.LOST, T.HELD):
        return _cond("Degraded", True, str(s.decision), s.decision_reason)
    if s.apply_error:
        return _cond("Degraded", True, R.APPLY_FAILED, s.apply_error)
    if s.failed_steps:
        return _cond(
            "Degraded", True, R.ACTION_FAILED, "; ".join(s.failed_steps) + " (tried again at the next pass)"
        )
    if s.primary is not None and s.primary in s.unreachable:
        # a stable message (no duration): the Warning Event is posted once per outage. Failover is
        # enabled here (disabled: Unrecoverable, above), but it may wait for more replicas
        return _cond(
            "Degraded",
            True,
            R.PRIMARY_UNREACHABLE,
            f"primary {s.primary} unreachable: unless it answers again, a replica is promoted once "
            "spec.replication.failover.delaySeconds have passed (condition Progressing says when)",
        )
    if s.reseeding:
        return _cond("Degraded", True, R.RESEEDING, "; ".join(s.reseeding))
    if s.held_out:
        return _cond(
            "Degraded",
            True,
            R.INSTANCES_HELD_OUT,
            f"{', '.join(s.held_out)} held out: it serves no reads and is never promoted. Errant "
            "transactions (its HeldOutFailed Event names them): set spec.replication.errantPolicy: "
            "Reseed, or delete its PVC and Pod, to rebuild it from a healthy instance; or it lacks "
            "transactions purged from the primary's binary logs: it is re-seeded in turn",
        )
    if s.primary is not None and s.unreachable:
        return _cond(
            "Degraded",
            True,
            R.INSTANCES_UNREACHABLE,
            f"{', '.join(s.unreachable)} unreachable: out of the Services until it answers again "
            "(kubectl describe pod; status.instances[].error)",
        )
    if s.commits_wait:
        return _cond("Degraded", True, SEMISYNC_ACKS_MISSING, s.commits_wait)
    if s.lagging:
        return _cond(
            "Degraded",
            True,
            R.REPLICAS_LAGGING,
            f"{', '.join(s.lagging)} more than spec.replication.maxReadLagSeconds "
            f"({s.max_read_lag_seconds} s) behind the primary: out of the -ro Service until caught up",
        )
    if s.tls_problem is not None and s.tls_problem.warning:  # also posted as a Warning Event
        return _cond("Degraded", True, s.tls_problem.reason, s.tls_problem.message)
    return _cond("Degraded", False, R.AS_EXPECTED if s.primary else "Bootstrapping", "")


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
        item["lastTransitionTime"] = now if prev is None or changed else prev.get("lastTransitionTime", now)
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
