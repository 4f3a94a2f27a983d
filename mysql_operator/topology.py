"""Pure decisions over observed instances: what should happen next to a replicated cluster.

Input: plain `InstanceState`s (one per instance, from observation), `Settings`, the primary the
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
     partition grace while a replica still receives from it (only the operator lost it)
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

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from mysql_operator.db.gtid import errant as gtid_errant

DIVERGENCE_ERRNOS = frozenset({1236, 1950, 1951, 13114})
# set on a MySQLCluster (any value: who and why) to fail over without the replicas' quorum
FORCE_FAILOVER_ANNOTATION = "mysql.operator.dev/force-failover"


@dataclass(frozen=True)
class InstanceState:
    name: str
    ordinal: int
    reachable: bool
    origin: str | None = None  # server_id (MariaDB) / server_uuid (MySQL): id on its own GTIDs
    read_only: bool = True
    source: str | None = None  # name of the instance it replicates from; None: not a replica
    io_running: bool = False  # IO thread state "Yes": connected and receiving
    io_connecting: bool = False  # IO thread on but (re)connecting ("Connecting", "Preparing")
    sql_running: bool = False
    io_errno: int = 0
    sql_errno: int = 0
    last_error: str = ""
    error_for: float = 0.0  # seconds the current IO/SQL error has been observed without a break
    executed: Any = None  # GtidSet
    received: Any = None  # GtidSet (retrieved into the relay log)
    purged: Any = None  # GtidSet no longer in its binary logs
    unreachable_for: float = 0.0  # seconds since it last answered
    # executed and purged when it last answered (kept while it is unreachable; None: never)
    last_executed: Any = None
    last_purged: Any = None
    semisync_source: bool = False
    semisync_replica: bool = False
    semisync_ack_count: int | None = None  # what its semi-sync commits wait for (None: not known)
    restarted: bool = False  # its server restarted since it last served as the writable primary
    tls_verified: bool = False  # replicates over TLS verifying its source's certificate and name
    # its IO thread received something from its source (a heartbeat, transactions) since the
    # operator's previous observation of it: the source is alive as its replicas see it
    source_heard: bool = False
    # a physical copy onto it (re-seed): None, or COPYING / COPIED (waits for its restart) / FAILED
    clone: str | None = None
    clone_error: str = ""
    clone_bytes: tuple[int, int] = (0, 0)  # (copied, to copy)

    @property
    def known(self) -> Any:
        """Everything it has or will apply: executed plus relay log."""
        if self.received is None:
            return self.executed
        if self.executed is None:
            return self.received
        return self.executed.union(self.received)

    @property
    def is_replica(self) -> bool:
        return self.source is not None

    @property
    def has_data(self) -> bool:
        return self.executed is not None and not self.executed.is_empty()

    @property
    def reseeding(self) -> bool:
        """Its data is being replaced (or was, and it has not restarted on it yet): it holds
        nothing anyone may rely on, serves no reads and is never promoted."""
        return self.clone in (CLONE_COPYING, CLONE_COPIED)


CLONE_COPYING, CLONE_COPIED, CLONE_FAILED = "copying", "copied", "failed"


@dataclass(frozen=True)
class Settings:
    instances: int
    failover_enabled: bool = True
    failover_delay_seconds: float = 3.0
    semisync: bool = False
    # spec.replication.allowAsyncFallback: semi-sync may be turned off while no replica can
    # acknowledge (writes go on, acknowledged by the primary alone)
    async_fallback: bool = False
    divergence_errnos: frozenset[int] = DIVERGENCE_ERRNOS
    # a replication error must persist this long before the replica is reconfigured: one
    # observation of a thread that is retrying on its own is no reason to repoint it
    replica_error_grace_seconds: float = 10.0
    # replicas must replicate over TLS verifying their source: those configured without it
    # (before TLS existed) are reconfigured once, one at a time, in a healthy cluster (rule 10)
    replication_tls: bool = False
    # spec.replication.semiSyncAcks (None: the default, see semisync_acks)
    semisync_acks: int | None = None
    # a person asked for a failover even without proof that no acknowledged commit is lost
    # (the cluster's force-failover annotation)
    force_failover: bool = False
    # the flavor can replace an instance's data by a physical copy from another (MySQL's CLONE):
    # a replica that lacks purged transactions is re-seeded instead of only reported
    reseed: bool = False
    # spec.replication.errantPolicy Reseed: a replica holding transactions the primary lacks is
    # re-seeded (its extra transactions discarded, their record kept) instead of held out
    reseed_errant: bool = False
    # a primary that does not answer the operator while a replica still hears from it (a
    # partition between the operator and the primary) is failed over only after this long:
    # its replicas cannot tell a serving primary from one stuck behind a stalled disk (0: never
    # waits on what the replicas hear)
    partition_grace_seconds: float = 30.0


def semisync_acks(instances: int, explicit: int | None = None) -> int:
    """Replica acknowledgements a semi-sync commit waits for: `explicit`
    (spec.replication.semiSyncAcks), else enough that a majority of the instances holds every
    acknowledged commit: (instances - 1) // 2, at least 1."""
    return explicit or max(1, (instances - 1) // 2)


def failover_quorum(settings: Settings, replicas: int) -> int:
    """Replicas that must answer before one may replace a lost primary. With semi-sync and no
    asynchronous fallback every acknowledged commit is on at least A of the N replicas, so any
    N - A + 1 of them include one holding it (and the most advanced of them holds all). Without
    that guarantee (asynchronous replication, or a fallback the user allowed) one is enough."""
    if not settings.semisync or settings.async_fallback or replicas == 0:
        return min(1, replicas)
    acks = min(semisync_acks(settings.instances, settings.semisync_acks), replicas)
    return replicas - acks + 1


# -- decisions ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    reason: str = field(default="", kw_only=True)

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Healthy(Decision):
    primary: str
    degraded: tuple[str, ...] = ()  # unreachable or held-out instances


@dataclass(frozen=True)
class Bootstrap(Decision):
    primary: str
    replicas: tuple[str, ...]


@dataclass(frozen=True)
class Fence(Decision):
    instances: tuple[str, ...]  # make read-only now


@dataclass(frozen=True)
class ConfigureReplica(Decision):
    name: str
    source: str


@dataclass(frozen=True)
class NeedsSeed(Decision):
    name: str  # the source's binary logs no longer hold what it lacks: copy data first


@dataclass(frozen=True)
class Reseed(Decision):
    """Replace `name`'s data by a physical copy of `donor`'s (or watch the copy under way)."""

    name: str
    donor: str
    errant: str = ""  # the transactions discarded with its data (kept as evidence first)


@dataclass(frozen=True)
class Failover(Decision):
    from_: str
    to: str
    fence: tuple[str, ...]  # every other instance: stop IO threads; old primary read-only
    replicas: tuple[str, ...]  # to repoint at the new primary afterwards
    # asked for by a person (Settings.force_failover) while too few replicas answered to prove
    # that `to` holds every acknowledged commit
    forced: bool = False
    cause: str = "PrimaryUnreachable"  # one of FAILOVER_CAUSES (a metric label: a fixed set)


@dataclass(frozen=True)
class Promote(Decision):
    name: str
    replicas: tuple[str, ...]


@dataclass(frozen=True)
class Switchover(Decision):
    from_: str
    to: str
    replicas: tuple[str, ...]
    cause: str = "Requested"  # one of SWITCHOVER_CAUSES (a metric label: a fixed set)


# why a primary changed, as few words as a metric label can carry
FAILOVER_CAUSES = ("PrimaryUnreachable", "PrimaryRestarted", "PrimaryNotWritable")
SWITCHOVER_CAUSES = ("Requested", "PrimaryRemoved")


@dataclass(frozen=True)
class Decommission(Decision):
    instances: tuple[str, ...]


@dataclass(frozen=True)
class ConfigureSemiSync(Decision):
    on: bool
    primary: str
    replicas: tuple[str, ...]


@dataclass(frozen=True)
class Errant(Decision):
    instances: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class WaitForDelay(Decision):
    remaining_seconds: float


@dataclass(frozen=True)
class Unrecoverable(Decision):
    pass  # needs a person; reason says what and why


@dataclass(frozen=True)
class FailoverHeld(Decision):
    """The primary is lost and too few replicas answer to be sure that the one promoted would
    hold every acknowledged commit: nothing is promoted until enough come back, or a person
    forces it (reason says how). Also (`answering` empty) when no replica that may be promoted
    answers at all, while one may still come back by itself."""

    primary: str
    answering: tuple[str, ...]
    needed: int


class Transition(enum.Enum):
    """What a decision does to the cluster's primary: the state the status's phase and
    conditions derive from (status.py), whatever the decision's name."""

    STEADY = "steady"  # the primary serves; nothing to change (or only instances held out)
    REPAIRING = "repairing"  # the primary stays; instances around it are put right
    BOOTSTRAPPING = "bootstrapping"
    FAILING_OVER = "failing-over"
    SWITCHING_OVER = "switching-over"
    PROMOTING = "promoting"  # the recorded primary made writable (again)
    WAITING = "waiting"  # the primary is lost; its failover waits for the delay
    HELD = "held"  # lost, and too few replicas answer to promote safely: a person may force it
    LOST = "lost"  # lost, and nothing the operator may do brings it back: a person must act


TRANSITIONS: dict[type[Decision], Transition] = {
    Healthy: Transition.STEADY,
    Errant: Transition.STEADY,
    NeedsSeed: Transition.STEADY,
    Fence: Transition.REPAIRING,
    ConfigureReplica: Transition.REPAIRING,
    Decommission: Transition.REPAIRING,
    ConfigureSemiSync: Transition.REPAIRING,
    Reseed: Transition.REPAIRING,
    Bootstrap: Transition.BOOTSTRAPPING,
    Failover: Transition.FAILING_OVER,
    Switchover: Transition.SWITCHING_OVER,
    Promote: Transition.PROMOTING,
    WaitForDelay: Transition.WAITING,
    FailoverHeld: Transition.HELD,
    Unrecoverable: Transition.LOST,
}
_BY_KIND = {d.__name__: tr for d, tr in TRANSITIONS.items()}


def transition(kind: str | None) -> Transition | None:
    """The transition of a decision, by its kind (Decision.kind); None when none was made."""
    return _BY_KIND[kind] if kind is not None else None


# decisions that make a (possibly new) primary writable: recorded before acting
PRIMARY_CHANGES = (Bootstrap, Failover, Promote, Switchover)
# decisions under which the primary serves as recorded: binary logs may be purged then
STEADY = (Healthy, ConfigureReplica, ConfigureSemiSync, Errant, Reseed, NeedsSeed)


# -- helpers -----------------------------------------------------------------------------------
def _union(sets: Iterable[Any]) -> Any:
    out = None
    for s in sets:
        if s is None:
            continue
        out = s if out is None else out.union(s)
    return out


def replication_broken(i: InstanceState, settings: Settings) -> str | None:
    """Why `i` can never catch up by restarting replication (history diverged), or None."""
    for errno, thread in ((i.io_errno, "IO"), (i.sql_errno, "SQL")):
        if errno in settings.divergence_errnos:
            return f"{i.name}: replication {thread} error {errno}: {i.last_error}".rstrip(": ")
    return None


def errant_against_primary(i: InstanceState, primary: InstanceState, settings: Settings) -> str | None:
    """Why replica `i` must be held out while `primary` serves, or None.

    GTIDs written by the primary itself are ignored: observations are not simultaneous, and a
    replica may already have applied what the primary committed after it was observed."""
    broken = replication_broken(i, settings)
    if broken:
        return broken
    if i.executed is None or primary.executed is None:
        return None
    extra = gtid_errant(i.executed, primary.executed)
    if primary.origin is not None:
        extra = extra.without_origins([primary.origin])
    if not extra.is_empty():
        return f"{i.name} has transactions the primary {primary.name} lacks: {extra}"
    return None


def source_behind(i: InstanceState, source: InstanceState | None) -> bool:
    """`i` holds everything its source has: a replication error on its source (MariaDB's 1236,
    "the GTID is not in the master's binlog") then says the source lost a tail it had sent - a
    semi-sync primary truncates at restart what it sent but never committed - not that `i`
    diverged."""
    return (
        source is not None
        and i.source == source.name
        and not i.sql_errno
        and i.known is not None
        and source.known is not None
        and i.known.contains(source.known)
    )


def errant_among_peers(
    i: InstanceState, peers: Sequence[InstanceState], settings: Settings, source: InstanceState | None = None
) -> str | None:
    """With no primary to compare to: `i` is errant if it wrote transactions itself that no peer
    has (a local write on a replica), or its replication broke on divergence (unless its
    `source` is merely behind it: `source_behind`). A peer that does not answer counts with what
    it had when it last answered: the old primary had what `i` wrote as an earlier primary."""
    broken = replication_broken(i, settings)
    if broken and not source_behind(i, source):
        return broken
    if i.executed is None or i.origin is None:
        return None
    others = _union(p.known if p.reachable else p.last_executed for p in peers if p.name != i.name)
    own_only = i.executed.subtract(others) if others is not None else i.executed
    own_only = own_only.subtract(own_only.without_origins([i.origin]))  # keep only its own origin
    if not own_only.is_empty():
        return f"{i.name} wrote transactions no other instance has: {own_only}"
    return None


def _held(i: InstanceState) -> Any:
    """What `i` holds: its known set when it answers, else what it had when it last answered."""
    return i.known if i.reachable else i.last_executed


def may_be_acknowledged(i: InstanceState, peers: Sequence[InstanceState]) -> Any:
    """What `i` holds (or held when it last answered) that may have been acknowledged to a
    client: everything but what it wrote itself that no peer has (errant: a local write, or a
    commit of a primary that nobody received). A replica acknowledged what it received; a
    former primary's own writes were acknowledged on a replica's word, and that replica (a
    peer, maybe the lost primary with its last answer) has them too. None: nothing known."""
    mine = _held(i)
    if mine is None or i.origin is None:
        return mine
    others = _union(_held(q) for q in peers if q.name != i.name)
    theirs = mine.without_origins([i.origin])
    own = mine.subtract(theirs)
    return theirs if others is None else theirs.union(own.intersect(others))


def replica_needs_configuring(i: InstanceState, source: str, settings: Settings) -> str | None:
    """Why replica `i` must be (re)pointed at `source`, or None when it is on its way.

    An IO thread that is connected or still connecting to the right source, with a running SQL
    thread and no error, is left alone: repointing it restarts the connection and would turn a
    slow connect into churn. An error counts only once it has persisted for the grace period."""
    if not i.is_replica:
        return "not a replica"
    if i.source != source:
        return f"replicates from {i.source}"
    if i.io_errno or i.sql_errno:
        if i.error_for < settings.replica_error_grace_seconds:
            return None
        return f"replication error for {i.error_for:.0f}s: {i.last_error}".rstrip(": ")
    if not (i.io_running or i.io_connecting) or not i.sql_running:
        return "replication stopped"
    return None


def most_advanced(cands: Sequence[InstanceState], prefer: str | None = None) -> InstanceState | None:
    """The candidate whose known set contains every other candidate's, preferring `prefer`,
    then the lowest ordinal; None if none contains all (histories diverged)."""

    def covers_all(c: InstanceState) -> bool:
        return all(c.known.contains(o.known) for o in cands if o.name != c.name and o.known is not None)

    ok = [c for c in cands if c.known is not None and covers_all(c)]
    if not ok:
        return None
    ok.sort(key=lambda c: (c.name != prefer, c.ordinal))
    return ok[0]


def _by_name(instances: Sequence[InstanceState]) -> dict[str, InstanceState]:
    return {i.name: i for i in instances}


def _names(xs: Iterable[InstanceState]) -> tuple[str, ...]:
    return tuple(x.name for x in sorted(xs, key=lambda i: i.ordinal))


def switchover_blocker(
    instances: Sequence[InstanceState], settings: Settings, current_primary: str | None, desired: str
) -> str:
    """Why `desired` cannot take over from the serving recorded primary now ("" when it can): it
    is no instance among `settings.instances`, does not answer, is being re-seeded, or is held
    out (errant against the primary). Rule 5's test; the reconciler says it of a waiting request."""
    by_name = _by_name(instances)
    d = by_name.get(desired)
    if d is None or d.ordinal >= settings.instances:
        return f"{desired} is not among the {settings.instances} instances"
    if not d.reachable:
        return f"{d.name} is unreachable"
    if d.reseeding:
        return f"{d.name} is being re-seeded"
    p = by_name.get(current_primary or "")
    if p is not None and p.name != d.name and p.reachable and not p.read_only and not p.is_replica:
        diverged = errant_against_primary(d, p, settings)  # only against a primary that serves
        if diverged and not only_behind(d, p):
            return f"held out: {diverged}"
    return ""


# -- the decision ------------------------------------------------------------------------------
def decide(
    instances: Sequence[InstanceState],
    settings: Settings,
    current_primary: str | None,
    desired_primary: str | None = None,
) -> Decision:
    by_name = _by_name(instances)
    wanted = [i for i in instances if i.ordinal < settings.instances]
    reachable = [i for i in instances if i.reachable]

    # 1. nobody but the recorded primary may be writable, whatever else is going on
    strays = [i for i in reachable if not i.read_only and i.name != current_primary]
    if strays:
        return Fence(
            _names(strays),
            reason="writable but not the primary: "
            + ", ".join(_names(strays))
            + ": made read-only, its clients disconnected",
        )

    # 2. first creation
    if current_primary is None or current_primary not in by_name:
        if current_primary is not None:
            return Unrecoverable(
                reason=f"recorded primary {current_primary} (status.currentPrimary) is not an instance: "
                "scale spec.instances back up to include it"
            )
        down = [i.name for i in wanted if not i.reachable or i.reseeding]
        if down:
            return WaitForDelay(
                0.0,
                reason="bootstrap waits for every instance: "
                + ", ".join(down)
                + " not reachable or re-seeding",
            )
        if any(i.has_data or i.is_replica or replication_broken(i, settings) for i in wanted):
            return _adopt(wanted, settings, desired_primary)
        # spec.primary only among the wanted instances (the others are checked for nothing above)
        primary = (
            desired_primary
            if desired_primary in {i.name for i in wanted}
            else min(wanted, key=lambda i: i.ordinal).name
        )
        return Bootstrap(
            primary,
            tuple(n for n in _names(wanted) if n != primary),
            reason=f"new cluster: {primary} becomes primary",
        )

    p = by_name[current_primary]

    # 3. the primary does not answer
    if not p.reachable:
        if not settings.failover_enabled:
            return Unrecoverable(
                reason=f"primary {p.name} unreachable for {p.unreachable_for:.1f}s and automatic failover "
                "is disabled (spec.replication.failover.enabled: false): bring its Pod back, or set it "
                "to true to promote the most advanced replica"
            )
        if p.unreachable_for < settings.failover_delay_seconds:
            remaining = settings.failover_delay_seconds - p.unreachable_for
            return WaitForDelay(
                remaining,
                reason=f"primary {p.name} unreachable for {p.unreachable_for:.1f}s: failover in "
                f"{remaining:.1f}s unless it answers again",
            )
        hearing = [i.name for i in reachable if i.source == p.name and i.source_heard]
        if hearing and not settings.force_failover and p.unreachable_for < settings.partition_grace_seconds:
            return WaitForDelay(
                settings.partition_grace_seconds - p.unreachable_for,
                reason=f"primary {p.name} does not answer the operator for {p.unreachable_for:.1f}s, "
                f"but {', '.join(hearing)} still receive from it: a partition between the operator "
                f"and the primary, not a failure; its failover waits up to "
                f"{settings.partition_grace_seconds:.0f}s",
            )
        return _choose_failover(p, instances, settings, desired_primary)

    # 4. recorded primary answers but is not serving yet (interrupted promotion, restart)
    if p.read_only or p.is_replica:
        cands = [i for i in reachable if i.ordinal < settings.instances and not i.reseeding]
        held = {
            i.name
            for i in cands
            if (
                errant_among_peers(i, cands, settings, source=p)
                if i.name != p.name
                else replication_broken(i, settings)
            )
        }
        cands = [i for i in cands if i.name not in held]
        best = most_advanced(cands, prefer=p.name)
        if best is None:
            return Unrecoverable(
                reason="no instance has every transaction the others have: histories diverged "
                "(status.instances[].gtidExecuted shows each one's): restore a backup into a new cluster"
            )
        kept = f"{p.name} is the recorded primary but not writable: making it writable again"
        if best.name == p.name and p.restarted and settings.failover_enabled:
            # a primary that crashed and came back is replaced by a replica holding everything it
            # has (its clients lost their connections anyway); with more than any replica it stays
            alt = most_advanced([i for i in cands if i.name != p.name])
            if alt is not None and p.known is not None:
                if alt.known.contains(p.known):
                    best = alt
                else:
                    kept = (
                        f"{p.name} restarted holding transactions no replica has "
                        f"({p.known.subtract(alt.known)}): it stays primary"
                    )
        others = tuple(
            n for n in _names(wanted) if n != best.name and n not in held and not by_name[n].reseeding
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
            tuple(n for n in _names(reachable) if n != best.name),
            others,
            cause="PrimaryRestarted" if p.restarted else "PrimaryNotWritable",
            reason=why,
        )

    # the primary serves. Classify the others.
    errant: dict[str, str] = {}
    reseeding = [i for i in reachable if i.name != p.name and i.reseeding]
    for i in reachable:
        if i.name != p.name and not i.reseeding:
            diverged = errant_against_primary(i, p, settings)
            if diverged and not only_behind(i, p):
                errant[i.name] = diverged
    healthy_replicas = [i for i in reachable if i.name != p.name and i.name not in errant and not i.reseeding]

    # 5. switchover: the primary is being removed, or another is desired (and can take over now:
    #    else the rules below go on, and the caller says why the switchover waits)
    target: InstanceState | None = None
    if p.ordinal >= settings.instances:
        cands = [i for i in healthy_replicas if i.ordinal < settings.instances]
        pick = by_name.get(desired_primary) if desired_primary else None
        target = pick if pick in cands else most_advanced(cands)
        if target is None:
            return Unrecoverable(
                reason=f"primary {p.name} is being removed but no healthy replica can take over: "
                "scale spec.instances back up, or bring a replica back to health first"
            )
    elif (
        desired_primary
        and desired_primary != p.name
        and not switchover_blocker(instances, settings, p.name, desired_primary)
    ):
        target = by_name[desired_primary]
    if target is not None:
        others = tuple(n for n in _names(wanted) if n != target.name and n not in errant)
        return Switchover(
            p.name,
            target.name,
            others,
            cause="PrimaryRemoved" if p.ordinal >= settings.instances else "Requested",
            reason=f"switchover from {p.name} to {target.name}",
        )

    # 6. scale down
    leaving = [
        i for i in healthy_replicas if i.ordinal >= settings.instances and (i.is_replica or not i.read_only)
    ]
    if leaving:
        return Decommission(_names(leaving), reason="scaled down: " + ", ".join(_names(leaving)))

    # 7. replicas
    for i in sorted(healthy_replicas, key=lambda i: i.ordinal):
        if i.ordinal >= settings.instances:
            continue
        if needs_seed(i, p):
            if settings.reseed and reseeding:
                continue  # one copy at a time
            if settings.reseed:
                return Reseed(
                    i.name,
                    choose_donor(p, healthy_replicas, settings, exclude=i.name),
                    reason=f"{i.name} lacks transactions already purged from {p.name}'s binary logs: "
                    "re-seeding it with a copy of the data",
                )
            return NeedsSeed(
                i.name,
                reason=f"{i.name} lacks transactions already purged from "
                f"{p.name}'s binary logs: it needs a copy of the data",
            )
        fix = replica_needs_configuring(i, p.name, settings)
        if fix:
            return ConfigureReplica(i.name, p.name, reason=f"{i.name}: {fix}")

    # 8. semi-sync. Without a replica that could acknowledge, semi-sync that is on stays on:
    #    writes wait for a replica to return. Turning it off would acknowledge writes only the
    #    primary has - lost if it fails next - unless the user allowed that fallback. (Before a
    #    first replica exists it is not turned on: nothing could acknowledge the bootstrap.)
    in_range = [i for i in healthy_replicas if i.ordinal < settings.instances]
    keep_waiting = p.semisync_source and settings.instances > 1 and not settings.async_fallback
    want_sync = settings.semisync and (bool(in_range) or keep_waiting)
    acks = semisync_acks(settings.instances, settings.semisync_acks)
    recount = want_sync and p.semisync_ack_count is not None and p.semisync_ack_count != acks
    if p.semisync_source != want_sync or any(i.semisync_replica != want_sync for i in in_range) or recount:
        why = f"{p.semisync_ack_count} -> {acks} acknowledgement(s)" if recount and p.semisync_source else ""
        return ConfigureSemiSync(
            want_sync, p.name, _names(in_range), reason=why or f"semi-sync {'on' if want_sync else 'off'}"
        )

    # 9. held out, or re-seeded (the policy says its extra transactions may go: never
    #    acknowledged to a client with semi-sync); a copy under way is watched
    if reseeding:
        i = min(reseeding, key=lambda i: i.ordinal)
        donor = choose_donor(p, healthy_replicas, settings, exclude=i.name)
        return Reseed(i.name, donor, reason=f"{i.name}: re-seeding ({i.clone})")
    if errant and settings.reseed and settings.reseed_errant:
        i = min((by_name[n] for n in errant), key=lambda i: i.ordinal)
        extra = (
            gtid_errant(i.executed, p.executed) if i.executed is not None and p.executed is not None else None
        )
        return Reseed(
            i.name,
            choose_donor(p, healthy_replicas, settings, exclude=i.name),
            errant="" if extra is None or extra.is_empty() else str(extra),
            reason=f"re-seeding {i.name} (errantPolicy Reseed): {errant[i.name]}",
        )
    if errant:
        names = tuple(sorted(errant, key=lambda n: by_name[n].ordinal))
        return Errant(
            names, tuple(errant[n] for n in names), reason="held out: " + "; ".join(errant[n] for n in names)
        )

    degraded = tuple(i.name for i in sorted(wanted, key=lambda i: i.ordinal) if not i.reachable)

    # 10. replication without verified TLS (configured before TLS existed): reconfigured only when
    #     every instance answers and every replica is connected and applying, so that a replica
    #     that fails over TLS (a missing CA file) costs one replica, never the cluster's
    #     redundancy or a semi-sync acknowledgement; once configured it shows TLS: never again
    if settings.replication_tls and not degraded:
        replicas = sorted(in_range, key=lambda i: i.ordinal)
        if all(i.io_running and i.sql_running and not (i.io_errno or i.sql_errno) for i in replicas):
            for i in replicas:
                if i.source == p.name and not i.tls_verified:
                    return ConfigureReplica(
                        i.name, p.name, reason=f"{i.name}: replicates without verified TLS"
                    )

    return Healthy(
        p.name, degraded, reason="degraded: " + ", ".join(degraded) + " unreachable" if degraded else ""
    )


def needs_seed(i: InstanceState, primary: InstanceState) -> bool:
    """`i` lacks transactions the primary no longer has in its binary logs: replication alone
    can never bring it up to date."""
    return bool(
        primary.purged is not None and i.executed is not None and not i.executed.contains(primary.purged)
    )


def newer_than(i: InstanceState, primary: InstanceState) -> str:
    """Why `i`'s data cannot hold what was acknowledged on `primary` before it became
    unreachable (its data directory is newer: a lost volume initialised again), or "": it lacks
    the transactions the primary had already purged from its binary logs, or it holds none at all
    while the primary had some. Promoting it would discard the cluster's data."""
    had, purged = primary.last_executed, primary.last_purged
    known = i.known
    if had is not None and not had.is_empty() and (known is None or known.is_empty()):
        return f"{i.name} holds no transaction (new data) while {primary.name} had {had}"
    if purged is not None and not purged.is_empty() and known is not None and not known.contains(purged):
        return (
            f"{i.name} lacks transactions {primary.name} had already purged from its binary logs "
            f"({purged}): its data is newer than the cluster's"
        )
    return ""


def only_behind(i: InstanceState, primary: InstanceState) -> bool:
    """`i` lacks transactions the primary purged and has none the primary lacks: its replication
    error (the source purged what it needs) is no divergence, and a copy discards nothing."""
    if not needs_seed(i, primary) or primary.executed is None:
        return False
    return bool(gtid_errant(i.executed, primary.executed).is_empty())


def choose_donor(
    primary: InstanceState, replicas: Sequence[InstanceState], settings: Settings, exclude: str
) -> str:
    """Where a re-seed copies from: the most advanced replica of the primary that replicates
    without error (the copy loads it, not the primary), else the primary."""
    cands = [
        i
        for i in replicas
        if i.name != exclude
        and i.ordinal < settings.instances
        and i.source == primary.name
        and i.io_running
        and i.sql_running
        and not (i.io_errno or i.sql_errno)
        and not needs_seed(i, primary)
    ]
    best = most_advanced(cands)
    return best.name if best is not None else primary.name


def _choose_failover(
    p: InstanceState, instances: Sequence[InstanceState], settings: Settings, desired: str | None
) -> Decision:
    cands = [i for i in instances if i.reachable and i.ordinal < settings.instances and not i.reseeding]
    peers = [i for i in instances if not i.reseeding]  # the unreachable ones with their last answer
    held = {i.name: why for i in cands if (why := errant_among_peers(i, peers, settings) or newer_than(i, p))}
    cands = [i for i in cands if i.name not in held]
    replicas = [i for i in instances if i.name != p.name]
    extra = ("; held out: " + "; ".join(held.values())) if held else ""
    # replicas that may come back by themselves (a restart, a node or a network back, the CPU
    # free again): while one may, nothing is lost for good and no person need act yet
    silent = _names(
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
    answering = _names(i for i in replicas if i.reachable and not i.reseeding and not newer_than(i, p))
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
    best = most_advanced(cands, prefer=desired)
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
        and (need := may_be_acknowledged(q, peers)) is not None
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
    fence = tuple(n for n in _names([i for i in instances if i.name != best.name]))
    repoint = tuple(n for n in _names(cands) if n != best.name)
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


def _adopt(wanted: Sequence[InstanceState], settings: Settings, desired: str | None) -> Decision:
    """Data but no recorded primary: a cluster created again over the volumes a deleted one
    retained (deletionPolicy Retain), or one whose status was lost. Every server starts fenced
    (and rule 1 fenced any that was not), so the one that has every transaction the others have
    becomes the primary and nothing anyone acknowledged is lost; replicas broken on divergence
    are not candidates (their extra transactions are errant). Histories that diverged need a
    person."""
    if any(i.known is None for i in wanted):
        return WaitForDelay(0.0, reason="adopting existing data: waiting to read every instance's GTID state")
    cands = [i for i in wanted if not replication_broken(i, settings)]
    best = most_advanced(cands, prefer=desired)
    if best is None:
        return Unrecoverable(
            reason="instances already hold data but no primary is recorded, and none has every "
            "transaction the others have (histories diverged): restore a backup into a new cluster"
        )
    return Bootstrap(
        best.name,
        tuple(n for n in _names(wanted) if n != best.name),
        reason=f"adopting existing data: {best.name} has every transaction the others have",
    )


def next_pass_in(decision: Decision, interval: float) -> float:
    """Seconds until the loop looks again: its interval, or sooner when a failover delay ends
    first (a failover then starts when the delay ends, not up to one interval later)."""
    if isinstance(decision, WaitForDelay) and decision.remaining_seconds > 0:
        return min(interval, decision.remaining_seconds)
    return interval


def planned_writable(decision: Decision, instances: Sequence[InstanceState]) -> set[str]:
    """Which instances are writable once the decision's effects have run (the effects' contract):
    every effect makes instances read-only before it makes one writable."""
    writable = {i.name for i in instances if i.reachable and not i.read_only}
    if isinstance(decision, Fence):
        return writable - set(decision.instances)
    if isinstance(decision, Bootstrap):
        return {decision.primary}
    if isinstance(decision, Failover):
        return {decision.to}
    if isinstance(decision, Promote):
        return {decision.name}
    if isinstance(decision, Switchover):
        return {decision.to}
    if isinstance(decision, ConfigureReplica):
        return writable - {decision.name}
    if isinstance(decision, Errant):
        return writable - set(decision.instances)
    if isinstance(decision, Reseed):
        return writable - {decision.name}
    return writable
