"""Which instance becomes the primary when the recorded one is lost (a failover: `choose_failover`)
or when none is recorded but the instances hold data (retained volumes: `adopt`). Pure; part
of the decision procedure (rules.py, rules 2 and 3).
"""

from __future__ import annotations

from typing import Sequence

from mysql_operator import histories as h
from mysql_operator.topology import (
    FORCE_FAILOVER_ANNOTATION,
    Bootstrap,
    Decision,
    Failover,
    FailoverHeld,
    InstanceState,
    Settings,
    Unrecoverable,
    WaitForDelay,
    failover_quorum,
    semisync_acks,
)


def choose_failover(
    p: InstanceState, instances: Sequence[InstanceState], settings: Settings, desired: str | None
) -> Decision:
    cands = [i for i in instances if i.reachable and i.ordinal < settings.instances and not i.reseeding]
    peers = [i for i in instances if not i.reseeding]  # the unreachable ones with their last answer
    held = {
        i.name: why for i in cands if (why := h.errant_among_peers(i, peers, settings) or h.newer_than(i, p))
    }
    cands = [i for i in cands if i.name not in held]
    replicas = [i for i in instances if i.name != p.name]
    extra = ("; held out: " + "; ".join(held.values())) if held else ""
    # replicas that may come back by themselves (a restart, a node or a network back, the CPU
    # free again): while one may, nothing is lost for good and no person need act yet
    silent = h.names(
        i for i in replicas if i.ordinal < settings.instances and (not i.reachable or i.reseeding)
    )
    if not cands and silent:
        return FailoverHeld(
            p.name,
            (),
            failover_quorum(settings, len(replicas)),
            reason=f"primary {p.name} unreachable and no replica answers ({', '.join(silent)} silent"
            f"{extra}): nothing can be promoted until one does; the operator keeps looking (bring "
            "the Pods, their node or their network back)",
        )
    if not cands:
        return Unrecoverable(
            reason=f"primary {p.name} unreachable and no replica can take over{extra}: bring it back (its "
            "Pod, node or volume)"
        )
    # an instance counts toward the quorum only with the data it acknowledged with: not one whose
    # data is being replaced, nor one whose data is newer than the cluster's (a lost volume)
    answering = h.names(i for i in replicas if i.reachable and not i.reseeding and not h.newer_than(i, p))
    needed = failover_quorum(settings, len(replicas))
    short = len(answering) < needed
    if short and not settings.force_failover:
        acks = semisync_acks(settings.instances, settings.semisync_acks)
        return FailoverHeld(
            p.name,
            answering,
            needed,
            reason=f"primary {p.name} unreachable and only {len(answering)} of {len(replicas)} replicas "
            f"answer ({', '.join(answering) or 'none'}): every acknowledged commit is on {acks} of them, so "
            f"{needed} must answer to promote one without losing any; bring the others back, or force "
            f"it with the annotation {FORCE_FAILOVER_ANNOTATION} (may lose acknowledged commits)",
        )
    best = h.most_advanced(cands, prefer=desired)
    if best is None:
        return Unrecoverable(
            reason="primary unreachable and no replica has every transaction the others have: "
            "histories diverged: bring the primary back, or restore a backup into a new cluster"
        )
    # with semi-sync's promise (no asynchronous fallback), every transaction another instance
    # holds and may have acknowledged - held-out and silent ones too: the quorum counted them -
    # must be on the one promoted
    promised = settings.semisync and not settings.async_fallback
    lacking = {
        q.name: gap
        for q in peers
        if promised
        and q.name not in (p.name, best.name)
        and (need := h.may_be_acknowledged(q, peers)) is not None
        and best.known is not None
        and not (gap := need.subtract(best.known)).is_empty()
    }
    if lacking and not settings.force_failover:
        return FailoverHeld(
            p.name,
            answering,
            needed,
            reason=f"primary {p.name} unreachable; {best.name}, the most advanced instance that may be "
            f"promoted, lacks transactions that "
            + "; ".join(f"{n} holds ({gap})" for n, gap in lacking.items())
            + f": they may have been acknowledged, so nothing is promoted until {p.name} answers again or "
            f"an instance holding them may be promoted; force it with the annotation "
            f"{FORCE_FAILOVER_ANNOTATION} (loses them)",
        )
    fence = tuple(n for n in h.names([i for i in instances if i.name != best.name]))
    repoint = tuple(n for n in h.names(cands) if n != best.name)
    forced = ""
    if short:
        forced = f" (forced: only {len(answering)} of the {needed} replicas needed answered; acknowledged commits may be lost)"
    elif lacking:
        forced = (
            f" (forced: {', '.join(lacking)} hold transactions it lacks; acknowledged commits may be lost)"
        )
    return Failover(
        p.name,
        best.name,
        fence,
        repoint,
        forced=short or bool(lacking),
        reason=f"primary {p.name} unreachable for {p.unreachable_for:.1f}s; "
        f"{best.name} is the most advanced replica{forced}",
    )


def adopt(wanted: Sequence[InstanceState], settings: Settings, desired: str | None) -> Decision:
    """Data but no recorded primary: a cluster created again over the volumes a deleted one
    retained (deletionPolicy Retain), or one whose status was lost. Every server starts fenced
    (and rule 1 fenced any that was not), so the one that has every transaction the others have
    becomes the primary and nothing anyone acknowledged is lost; replicas broken on divergence
    are not candidates (their extra transactions are errant). Histories that diverged need a
    person."""
    if any(i.known is None for i in wanted):
        return WaitForDelay(0.0, reason="adopting existing data: waiting to read every instance's GTID state")
    cands = [i for i in wanted if not h.replication_broken(i, settings)]
    best = h.most_advanced(cands, prefer=desired)
    if best is None:
        return Unrecoverable(
            reason="instances already hold data but no primary is recorded, and none has every "
            "transaction the others have (histories diverged): restore a backup into a new cluster"
        )
    return Bootstrap(
        best.name,
        tuple(n for n in h.names(wanted) if n != best.name),
        reason=f"adopting existing data: {best.name} has every transaction the others have",
    )
