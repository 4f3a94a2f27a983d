"""The decision procedure: what should happen next to a replicated cluster, rule by rule.

    decision = decide(instances, settings, current_primary, desired_primary)

Input: plain `topology.InstanceState`s (one per instance, from observation), `Settings`, the primary the
operator recorded (status.currentPrimary) and the desired primary (a switchover request not done
yet, switchover.py, or the rolling update's move: rollout.roll_desired).
Output: ONE `Decision`, the most urgent; the caller acts on it, observes again and decides again
(level-triggered). The caller records a decision's new primary (Bootstrap/Failover/Switchover
target) BEFORE acting on it, so a restart in the middle resumes the same way.

Priorities, first match wins:
  1. a writable instance that is not the recorded primary      -> Fence
  2. no recorded primary, all reachable: all fresh               -> Bootstrap
     holding data (retained volumes): the one with every transaction -> Bootstrap (adopt) / Unrecoverable
  3. recorded primary unreachable                               -> WaitForDelay / Failover / Unrecoverable,
     or FailoverHeld while too few replicas answer to be sure one holds every acknowledged commit
     or none that may be promoted answers (it may come back: not Unrecoverable)
     (or one that may be promoted lacks what another instance holds); WaitForDelay up to the
     partition grace while a replica still receives from it (only the operator lost it), and
     until a second observation found it silent too (one round past its deadline on a busy
     machine is not an outage); no delay when it is shown not running (down_evidence) and no
     replica is connected to it
  4. recorded primary reachable but not yet (or no longer) writable or still replicating
                                                                -> Promote (or Failover to a more advanced one;
                                                                   a restarted primary is replaced by a replica
                                                                   holding everything it has)
  5. the primary is being removed (scale down) or another is desired -> Switchover
     (a desired primary that cannot take over now - `switchover_blocker` - does not stop the
     rules below: the cluster is repaired while the switchover waits)
  6. instances being removed                                     -> Decommission
  7. a replica not replicating from the primary                  -> ConfigureReplica / NeedsSeed
                                                                   (Reseed where a physical copy is possible)
  8. semi-sync not as configured                                 -> ConfigureSemiSync
  9. replicas with errant transactions or diverged               -> Errant (held out, read-only), or
                                                                   Reseed (errantPolicy Reseed); a copy
                                                                   under way                -> Reseed
 10. all reachable and replicating, a replica of the primary without verified TLS (replication_tls)
                                                                -> ConfigureReplica (one at a time)
 11. otherwise                                                   -> Healthy
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from mysql_operator import histories as h
from mysql_operator import promotion
from mysql_operator.db.gtid import errant as gtid_errant
from mysql_operator.topology import (
    Bootstrap,
    ConfigureReplica,
    ConfigureSemiSync,
    Decision,
    Decommission,
    Errant,
    Failover,
    Fence,
    Healthy,
    InstanceState,
    NeedsSeed,
    Promote,
    Reseed,
    Settings,
    Switchover,
    Unrecoverable,
    WaitForDelay,
    semisync_acks,
)
from mysql_operator.rule_views import Serving, View

# a primary silent in one observation only, past the failover delay: the next pass comes this
# soon, and its observation confirms the outage or ends it
CONFIRM_SECONDS = 0.05


# -- the decision ------------------------------------------------------------------------------
def decide(
    instances: Sequence[InstanceState],
    settings: Settings,
    current_primary: str | None,
    desired_primary: str | None = None,
) -> Decision:
    """The one decision of a pass: the first rule, in order, that has one (docs/design.md lists
    them). Rules 1-4 look at the primary's own state; from rule 5 on the primary serves and the
    others are classified once (`Serving`)."""
    v = View.of(instances, settings, current_primary, desired_primary)
    early = _fence_strays(v) or _first_creation(v)
    if early is not None:
        return early
    p = v.by_name[current_primary or ""]
    if not p.reachable:
        return _primary_down(v, p)
    if p.read_only or p.is_replica:
        return _primary_not_serving(v, p)
    s = Serving.of(v, p)
    for rule in (_switchover, _scale_down, _replicas, _semisync, _held_out_or_reseeded, _tls):
        d = rule(v, s)
        if d is not None:
            return d
    degraded = s.degraded
    return Healthy(
        p.name, degraded, reason="degraded: " + ", ".join(degraded) + " unreachable" if degraded else ""
    )


def _fence_strays(v: View) -> Decision | None:
    """1. Nobody but the recorded primary may be writable, whatever else is going on."""
    strays = [i for i in v.reachable if not i.read_only and i.name != v.current_primary]
    if not strays:
        return None
    return Fence(
        h.names(strays),
        reason="writable but not the primary: "
        + ", ".join(h.names(strays))
        + ": made read-only, its clients disconnected",
    )


def _first_creation(v: View) -> Decision | None:
    """2. No primary recorded yet: bootstrap, or adopt what the instances hold."""
    current_primary, wanted, settings = v.current_primary, v.wanted, v.settings
    if current_primary is not None and current_primary in v.by_name:
        return None
    if current_primary is not None:
        return Unrecoverable(
            reason=f"recorded primary {current_primary} (status.currentPrimary) is not an instance: "
            "scale spec.instances back up to include it"
        )
    down = [i.name for i in wanted if not i.reachable or i.reseeding]
    if down:
        return WaitForDelay(
            0.0,
            reason="bootstrap waits for every instance: " + ", ".join(down) + " not reachable or re-seeding",
        )
    if any(i.has_data or i.is_replica or h.replication_broken(i, settings) for i in wanted):
        return promotion.adopt(wanted, settings, v.desired_primary)
    # spec.primary only among the wanted instances (the others are checked for nothing above)
    primary = (
        v.desired_primary
        if v.desired_primary in {i.name for i in wanted}
        else min(wanted, key=lambda i: i.ordinal).name
    )
    return Bootstrap(
        primary,
        tuple(n for n in h.names(wanted) if n != primary),
        reason=f"new cluster: {primary} becomes primary",
    )


def _primary_down(v: View, p: InstanceState) -> Decision:
    """3. The primary does not answer: wait out the delay and a partition's grace, then fail over."""
    settings = v.settings
    if not settings.failover_enabled:
        return Unrecoverable(
            reason=f"primary {p.name} unreachable for {p.unreachable_for:.1f}s and automatic failover "
            "is disabled (spec.replication.failover.enabled: false): bring its Pod back, or set it "
            "to true to promote the most advanced replica"
        )
    # the delay guards against taking silence for death; evidence that the server does not run
    # needs no wait, unless a replica's IO thread is still connected to it (then it does run)
    receiving = [i.name for i in v.reachable if i.source == p.name and i.io_running]
    if settings.act_on_evidence and p.down_evidence and not receiving:
        decision = promotion.choose_failover(p, v.instances, settings, v.desired_primary)
        if isinstance(decision, Failover) and p.unreachable_for < settings.failover_delay_seconds:
            decision = replace(
                decision,
                reason=f"{decision.reason}; not waiting the {settings.failover_delay_seconds:g}s "
                f"failover delay: {p.down_evidence}, and no replica is connected to it",
            )
        return decision
    if p.unreachable_for < settings.failover_delay_seconds:
        remaining = settings.failover_delay_seconds - p.unreachable_for
        return WaitForDelay(
            remaining,
            reason=f"primary {p.name} unreachable for {p.unreachable_for:.1f}s: failover in "
            f"{remaining:.1f}s unless it answers again",
        )
    if p.missed_once:  # one slow round is not an outage: asked again at once
        return WaitForDelay(
            CONFIRM_SECONDS,
            reason=f"primary {p.name} did not answer one observation ({p.unreachable_for:.1f}s): "
            "asked again before a failover",
        )
    hearing = [i.name for i in v.reachable if i.source == p.name and i.source_heard]
    if hearing and not settings.force_failover and p.unreachable_for < settings.partition_grace_seconds:
        return WaitForDelay(
            settings.partition_grace_seconds - p.unreachable_for,
            reason=f"primary {p.name} does not answer the operator for {p.unreachable_for:.1f}s, "
            f"but {', '.join(hearing)} still receive from it: a partition between the operator "
            f"and the primary, not a failure; its failover waits up to "
            f"{settings.partition_grace_seconds:.0f}s",
        )
    return promotion.choose_failover(p, v.instances, settings, v.desired_primary)


def _primary_not_serving(v: View, p: InstanceState) -> Decision:
    """4. The recorded primary answers but does not serve yet (an interrupted promotion, a
    restart): made writable again, unless a replica holds everything it has and it restarted."""
    settings, by_name = v.settings, v.by_name
    cands = [i for i in v.reachable if i.ordinal < settings.instances and not i.reseeding]
    held = {
        i.name
        for i in cands
        if (
            h.errant_among_peers(i, cands, settings, source=p)
            if i.name != p.name
            else h.replication_broken(i, settings)
        )
    }
    cands = [i for i in cands if i.name not in held]
    best = h.most_advanced(cands, prefer=p.name)
    if best is None:
        return Unrecoverable(
            reason="no instance has every transaction the others have: histories diverged "
            "(status.instances[].gtidExecuted shows each one's): restore a backup into a new cluster"
        )
    kept = f"{p.name} is the recorded primary but not writable: making it writable again"
    if best.name == p.name and p.restarted and settings.failover_enabled:
        # a primary that crashed and came back is replaced by a replica holding everything it
        # has (its clients lost their connections anyway); with more than any replica it stays
        alt = h.most_advanced([i for i in cands if i.name != p.name])
        if alt is not None and p.known is not None:
            if alt.known.contains(p.known):
                best = alt
            else:
                kept = (
                    f"{p.name} restarted holding transactions no replica has "
                    f"({p.known.subtract(alt.known)}): it stays primary"
                )
    others = tuple(
        n for n in h.names(v.wanted) if n != best.name and n not in held and not by_name[n].reseeding
    )
    if best.name == p.name:
        return Promote(p.name, others, reason=kept)
    why = (
        f"recorded primary {p.name} restarted; {best.name} has every transaction it has"
        if p.restarted
        else f"{best.name} is ahead of recorded primary {p.name}"
    )
    return Failover(
        p.name,
        best.name,
        tuple(n for n in h.names(v.reachable) if n != best.name),
        others,
        cause="PrimaryRestarted" if p.restarted else "PrimaryNotWritable",
        reason=why,
    )


def _switchover(v: View, s: Serving) -> Decision | None:
    """5. Switchover: the primary is being removed, or another is desired (and can take over
    now: else the rules below go on, and the caller says why the switchover waits)."""
    p, settings, desired_primary = s.p, v.settings, v.desired_primary
    target: InstanceState | None = None
    if p.ordinal >= settings.instances:
        cands = [i for i in s.healthy_replicas if i.ordinal < settings.instances]
        pick = v.by_name.get(desired_primary) if desired_primary else None
        target = pick if pick in cands else h.most_advanced(cands)
        if target is None:
            return Unrecoverable(
                reason=f"primary {p.name} is being removed but no healthy replica can take over: "
                "scale spec.instances back up, or bring a replica back to health first"
            )
    elif (
        desired_primary
        and desired_primary != p.name
        and not h.switchover_blocker(v.instances, settings, p.name, desired_primary)
    ):
        target = v.by_name[desired_primary]
    if target is None:
        return None
    others = tuple(n for n in h.names(v.wanted) if n != target.name and n not in s.errant)
    return Switchover(
        p.name,
        target.name,
        others,
        cause="PrimaryRemoved" if p.ordinal >= settings.instances else "Requested",
        reason=f"switchover from {p.name} to {target.name}",
    )


def _scale_down(v: View, s: Serving) -> Decision | None:
    """6. Scale down: replicas past spec.instances leave."""
    leaving = [
        i
        for i in s.healthy_replicas
        if i.ordinal >= v.settings.instances and (i.is_replica or not i.read_only)
    ]
    if not leaving:
        return None
    return Decommission(h.names(leaving), reason="scaled down: " + ", ".join(h.names(leaving)))


def _replicas(v: View, s: Serving) -> Decision | None:
    """7. Each replica, in order: a copy of the data when it lacks purged transactions (one copy
    at a time), else its replication configured."""
    p, settings = s.p, v.settings
    for i in sorted(s.healthy_replicas, key=lambda i: i.ordinal):
        if i.ordinal >= settings.instances:
            continue
        if h.needs_seed(i, p):
            if settings.reseed and s.reseeding:
                continue  # one copy at a time
            if settings.reseed:
                return Reseed(
                    i.name,
                    h.choose_donor(p, s.healthy_replicas, settings, exclude=i.name),
                    reason=f"{i.name} lacks transactions already purged from {p.name}'s binary logs: "
                    "re-seeding it with a copy of the data",
                )
            return NeedsSeed(
                i.name,
                reason=f"{i.name} lacks transactions already purged from "
                f"{p.name}'s binary logs: it needs a copy of the data",
            )
        fix = h.replica_needs_configuring(i, p.name, settings)
        if fix:
            return ConfigureReplica(i.name, p.name, reason=f"{i.name}: {fix}")
    return None


def _semisync(v: View, s: Serving) -> Decision | None:
    """8. Semi-sync. Without a replica that could acknowledge, semi-sync that is on stays on:
    writes wait for a replica to return. Turning it off would acknowledge writes only the
    primary has - lost if it fails next - unless the user allowed that fallback. (Before a first
    replica exists it is not turned on: nothing could acknowledge the bootstrap.)"""
    p, settings, in_range = s.p, v.settings, s.in_range
    keep_waiting = p.semisync_source and settings.instances > 1 and not settings.async_fallback
    want_sync = settings.semisync and (bool(in_range) or keep_waiting)
    acks = semisync_acks(settings.instances, settings.semisync_acks)
    recount = want_sync and p.semisync_ack_count is not None and p.semisync_ack_count != acks
    if (
        p.semisync_source == want_sync
        and all(i.semisync_replica == want_sync for i in in_range)
        and not recount
    ):
        return None
    why = f"{p.semisync_ack_count} -> {acks} acknowledgement(s)" if recount and p.semisync_source else ""
    return ConfigureSemiSync(
        want_sync, p.name, h.names(in_range), reason=why or f"semi-sync {'on' if want_sync else 'off'}"
    )


def _held_out_or_reseeded(v: View, s: Serving) -> Decision | None:
    """9. Held out, or re-seeded (the policy says its extra transactions may go: never
    acknowledged to a client with semi-sync); a copy under way is watched."""
    p, settings, errant, by_name = s.p, v.settings, s.errant, v.by_name
    if s.reseeding:
        i = min(s.reseeding, key=lambda i: i.ordinal)
        donor = h.choose_donor(p, s.healthy_replicas, settings, exclude=i.name)
        return Reseed(i.name, donor, reason=f"{i.name}: re-seeding ({i.clone})")
    if errant and settings.reseed and settings.reseed_errant:
        i = min((by_name[n] for n in errant), key=lambda i: i.ordinal)
        extra = (
            gtid_errant(i.executed, p.executed) if i.executed is not None and p.executed is not None else None
        )
        return Reseed(
            i.name,
            h.choose_donor(p, s.healthy_replicas, settings, exclude=i.name),
            errant="" if extra is None or extra.is_empty() else str(extra),
            reason=f"re-seeding {i.name} (errantPolicy Reseed): {errant[i.name]}",
        )
    if errant:
        names = tuple(sorted(errant, key=lambda n: by_name[n].ordinal))
        return Errant(
            names, tuple(errant[n] for n in names), reason="held out: " + "; ".join(errant[n] for n in names)
        )
    return None


def _tls(v: View, s: Serving) -> Decision | None:
    """10. Replication without verified TLS (configured before TLS existed): reconfigured only
    when every instance answers and every replica is connected and applying, so that a replica
    that fails over TLS (a missing CA file) costs one replica, never the cluster's redundancy
    or a semi-sync acknowledgement; once configured it shows TLS: never again."""
    if not v.settings.replication_tls or s.degraded:
        return None
    replicas = sorted(s.in_range, key=lambda i: i.ordinal)
    if not all(i.io_running and i.sql_running and not (i.io_errno or i.sql_errno) for i in replicas):
        return None
    for i in replicas:
        if i.source == s.p.name and not i.tls_verified:
            return ConfigureReplica(i.name, s.p.name, reason=f"{i.name}: replicates without verified TLS")
    return None
