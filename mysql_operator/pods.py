"""A cluster's Pods as the operator sees them (ordinal, readiness, role label, why waiting), and
who serves after a pass: the role labels it wants on them and what the status says of the
instances left without one (`serving`). Pure: tables in tests/unit/test_reconcile_decisions.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping, Sequence


from mysql_operator import manifests as m
from mysql_operator import histories
from mysql_operator import topology as t
from mysql_operator.members import Step


@dataclass(frozen=True)
class PodView:
    name: str
    ordinal: int
    running: bool = False
    ready: bool = False
    role: str | None = None  # the ROLE_LABEL value it carries now
    deleting: bool = False
    waiting: str = ""  # why it does not run yet, when that is not a normal step (see pod_waiting)


def ready_count(pods: Mapping[int, PodView], instances: int, going_down: str | None = None) -> int:
    """The wanted instances whose Pod is Ready (not counting `going_down`, deleted just now)."""
    return sum(1 for o, p in pods.items() if o < instances and p.ready and p.name != going_down)


# waiting reasons every Pod passes through on its way to running: not worth a word in the status
_ROUTINE_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
# a new Pod's first refusals by the scheduler are routine too while they are this young: its
# claim not yet in the scheduler's cache ("persistentvolumeclaim ... not found" right after the
# StatefulSet controller made both), a node that is still starting
UNSCHEDULED_GRACE_SECONDS = 15.0


def pod_waiting(pod: Mapping[str, Any], now: dt.datetime | None = None) -> str:
    """Why a Pod is stuck, in the kubelet's or scheduler's words ("mysqld ErrImagePull: ...",
    "Unschedulable: 0/3 nodes ..."), or "" when it runs or is on its normal way there. With
    `now`, a scheduler's refusal younger than UNSCHEDULED_GRACE_SECONDS is on the normal way."""
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason"):
            since = _parse_time(c.get("lastTransitionTime"))
            if (
                now is not None
                and since is not None
                and (now - since).total_seconds() < UNSCHEDULED_GRACE_SECONDS
            ):
                return ""
            return f"{c['reason']}: {c.get('message') or ''}".strip().rstrip(":")[:256]
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason not in _ROUTINE_WAITING:
            # a container that keeps failing: why it failed last (its termination message, or its
            # last log lines), not the back-off's changing delay
            last = ((cs.get("lastState") or {}).get("terminated") or {}).get("message") or ""
            detail = " ".join(last.split()[-40:]) if reason == "CrashLoopBackOff" and last else ""
            text = f"{cs.get('name')} {reason}: {detail or waiting.get('message') or ''}"
            return text.strip().rstrip(":")[:256]
    return ""


def server_not_running(pod: Mapping[str, Any] | None) -> str:
    """What a server's Pod says that shows its server does not run in it (failover evidence,
    observer.down_evidence), in a few words: the Pod not Running (Pending, Failed, Succeeded),
    or its server container terminated or waiting (the kubelet saw it end). For a Pod being
    deleted only an end counts (Failed, Succeeded, the container terminated: the kubelet saw the
    server's shutdown end; before that its server runs, and may serve). "" otherwise, and for no
    Pod at all (a force-deleted Pod's containers may still run on the node)."""
    if pod is None:
        return ""
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    status = pod.get("status") or {}
    # (not Unknown: the kubelet's node stopped reporting; its server may run and serve there)
    ended = ("Failed", "Succeeded") if deleting else ("Pending", "Failed", "Succeeded")
    if status.get("phase") in ended:
        return f"its Pod is {status['phase']}"
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") != m.SERVER_CONTAINER:
            continue
        state = cs.get("state") or {}
        for how in ("terminated",) if deleting else ("terminated", "waiting"):
            if how in state:
                reason = (state[how] or {}).get("reason") or ""
                return f"its container {m.SERVER_CONTAINER} is {how}" + (f" ({reason})" if reason else "")
    return ""


def ended_pod(deleted: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(uid, what showed it) of a deleted Pod whose last state shows its server ended (the
    kubelet removes a Pod deleted gracefully once its containers stopped, and reports them
    first); None for a Pod removed while its server may run (a force delete: its containers may
    still run on the node)."""
    uid = ((deleted or {}).get("metadata") or {}).get("uid")
    down = server_not_running(deleted)
    return (uid, down) if uid and down else None


def pod_ordinal(name: str, cluster_name: str) -> int | None:
    prefix = f"{cluster_name}-"
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def _parse_time(text: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def pod_views(
    cluster_name: str, pods: Iterable[Mapping[str, Any]], now: dt.datetime | None = None
) -> dict[int, PodView]:
    """Each Pod of the cluster by ordinal; `now`: what counts as a young refusal (pod_waiting)."""
    out = {}
    for p in pods:
        meta, status = p.get("metadata") or {}, p.get("status") or {}
        ordinal = pod_ordinal(meta.get("name", ""), cluster_name)
        if ordinal is None:
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        out[ordinal] = PodView(
            meta["name"],
            ordinal,
            running=status.get("phase") == "Running",
            ready=ready,
            role=(meta.get("labels") or {}).get(m.ROLE_LABEL),
            deleting=bool(meta.get("deletionTimestamp")),
            waiting=pod_waiting(p, now),
        )
    return out


def member_ordinals(instances: int, pod_ordinals: Iterable[int], primary_ordinal: int | None) -> list[int]:
    """Every instance the engine must know: the wanted ones, Pods still present beyond them
    (leaving after a scale down), and the recorded primary wherever it is."""
    extra = set(pod_ordinals) | ({primary_ordinal} if primary_ordinal is not None else set())
    return sorted(set(range(instances)) | extra)


def statefulset_replicas(instances: int, primary_ordinal: int | None, current: int | None) -> int:
    """Scale down never removes the primary's Pod: keep it until a switchover moved the primary."""
    if primary_ordinal is not None and primary_ordinal >= instances:
        return max(primary_ordinal + 1, min(current or 0, primary_ordinal + 1))
    return instances


def lagging_replicas(
    lags: Mapping[str, int | None], max_lag: int, were_lagging: Iterable[str] = ()
) -> frozenset[str]:
    """The replicas too far behind to serve reads: lagging more than `max_lag` seconds, or, for
    one already out (`were_lagging`), more than half of it (so a replica near the limit does not
    flap in and out of the -ro Service). `max_lag` 0: none. An unknown lag (replication not
    running) is judged by the other rules, not this one."""
    if max_lag <= 0:
        return frozenset()
    out = set(were_lagging)
    return frozenset(
        n
        for n, lag in lags.items()
        if lag is not None and (lag > max_lag or (n in out and lag > max_lag // 2))
    )


def desired_roles(
    observed: Sequence[t.InstanceState],
    primary: str | None,
    instances: int,
    settings: t.Settings,
    primary_ok: bool,
) -> dict[str, str | None]:
    """ROLE_LABEL value per instance: the recorded primary (when its promotion did not fail) is
    `primary`; instances the operator cannot reach, that replicate an errant history, lack purged
    transactions, are being re-seeded or are leaving get no role (neither Service selects them: an unreachable one may be an old primary
    still taking writes); every other wanted instance is `replica`."""
    by_name = {i.name: i for i in observed}
    p = by_name.get(primary) if primary else None
    roles: dict[str, str | None] = {}
    for i in observed:
        if i.name == primary:
            roles[i.name] = m.ROLE_PRIMARY if primary_ok else None
        elif i.ordinal >= instances or not i.reachable or i.reseeding:
            roles[i.name] = None
        elif p is not None and p.reachable and histories.needs_seed(i, p):
            roles[i.name] = None  # it can never catch up: stale data, no reads
        elif (
            p is not None and p.reachable and i.reachable and histories.errant_against_primary(i, p, settings)
        ):
            roles[i.name] = None
        elif p is None or primary is None:
            roles[i.name] = None  # not bootstrapped: nothing replicates yet
        else:
            roles[i.name] = m.ROLE_REPLICA
    return roles


def without_lagging(
    roles: Mapping[str, str | None], lagging: Collection[str]
) -> tuple[dict[str, str | None], frozenset[str]]:
    """The roles with the lagging replicas out of -ro (no role), and which replicas that took out
    (one already without a role for another reason keeps that reason)."""
    out = frozenset(n for n in lagging if roles.get(n) == m.ROLE_REPLICA)
    return {n: (None if n in out else r) for n, r in roles.items()}, out


@dataclass(frozen=True)
class LabelMoves:
    """A pass's role-label patches in two parts. `take`: labels taken away (a role changed is
    taken away first), patched before the pass's status; `give`: labels given, patched after it.
    So a Pod never carries a role its latest status does not give it (no Service routes to an
    instance the status calls re-seeding, lagging or held out), and every `primary` is taken
    before one is given: at no moment do two Pods carry role=primary (the -rw Service never has
    two endpoints)."""

    take: tuple[tuple[str, None], ...] = ()
    give: tuple[tuple[str, str], ...] = ()


NO_MOVES = LabelMoves()


def label_plan(current: Mapping[str, str | None], desired: Mapping[str, str | None]) -> LabelMoves:
    """The label patches from the labels Pods carry (`current`; a Pod not in it is not patched)
    to the roles wanted: `primary` taken first, given last."""
    primary = [n for n, v in desired.items() if v == m.ROLE_PRIMARY]
    changes = {n: v for n, v in desired.items() if n in current and current[n] != v}
    # a Pod labelled primary that is not the wanted primary loses the label, even when the
    # desired map does not mention it
    changes.update(
        {n: None for n, v in current.items() if v == m.ROLE_PRIMARY and n not in desired and n not in primary}
    )
    take = sorted(
        (n for n in changes if current[n] is not None), key=lambda n: (current[n] != m.ROLE_PRIMARY, n)
    )
    give = sorted(
        ((n, v) for n, v in changes.items() if v is not None), key=lambda c: (c[1] == m.ROLE_PRIMARY, c[0])
    )
    return LabelMoves(tuple((n, None) for n in take), tuple(give))


def expected_identity(name: str, ordinal: int, pod: Mapping[str, Any] | None) -> dict[str, Any]:
    """Who must answer at a member's address: server_id from the ordinal (start.sh), the Pod's
    name as @@hostname or @@report_host, and the Pod's uid (a recreated Pod gets a new connection)."""
    return {"server_id": ordinal + 1, "hostname": name, "uid": ((pod or {}).get("metadata") or {}).get("uid")}


def promotion_succeeded(primary: str | None, steps: Sequence[Step]) -> bool:
    """After a Bootstrap/Failover/Switchover/Promote: the new primary serves unless a step on it
    failed (a replica that could not be repointed does not make the primary unavailable)."""
    return primary is not None and not any(not s.ok and s.instance == primary for s in steps)


@dataclass(frozen=True)
class Serving:
    """Who serves after a pass: the role label each instance gets, and what the status says of
    those left without one."""

    primary_ok: bool  # the recorded primary is one (and its promotion, if any, went through)
    writes: bool  # the status may call the primary serving writes
    roles: dict[str, str | None]
    lagging: frozenset[str]  # replicas out of -ro for their lag
    held: tuple[str, ...]  # answering and wanted, yet no role (errant, lacking purged GTIDs)
    unreachable: tuple[str, ...]


def serving(
    decision: t.Decision,
    steps: Sequence[Step],
    observed: Sequence[t.InstanceState],
    primary: str | None,
    settings: t.Settings,
    lags: Mapping[str, int | None],
    max_lag: int,
    were_lagging: Iterable[str] = (),
) -> Serving:
    """What a pass concludes from what the engine saw (`observed`), decided and did (`steps`),
    `primary` being the recorded primary after it."""
    instances = settings.instances
    by_name = {i.name: i for i in observed}
    p = by_name.get(primary) if primary else None
    waiting = isinstance(decision, t.WaitForDelay)  # the primary is lost; its failover waits
    if isinstance(decision, t.PRIMARY_CHANGES):
        primary_ok = promotion_succeeded(primary, steps)
    else:
        primary_ok = bool(p and p.reachable and not p.read_only and not p.is_replica) or (
            waiting and p is not None
        )
    lagging = lagging_replicas({n: lag for n, lag in lags.items() if n != primary}, max_lag, were_lagging)
    roles, lagging = without_lagging(
        desired_roles(observed, primary, instances, settings, primary_ok), lagging
    )
    held = tuple(
        n
        for n, r in roles.items()
        if r is None
        and n != primary
        and n not in lagging
        and p is not None
        and by_name[n].reachable
        and not by_name[n].reseeding
        and by_name[n].ordinal < instances
    )
    unreachable = tuple(i.name for i in observed if not i.reachable and i.ordinal < instances)
    writes = (primary_ok and not waiting) or (waiting and bool(p and p.reachable and not p.read_only))
    return Serving(primary_ok, writes and primary is not None, roles, lagging, held, unreachable)
