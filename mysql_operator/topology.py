"""The decision procedure's value types: what it reads and what it returns.

`InstanceState` (one per instance, from observation: observer.py builds them), `Settings` (from
the spec), and the `Decision` kinds `rules.decide` returns, with how each changes the cluster
(`Transition`, `PRIMARY_CHANGES`, `planned_writable`). No I/O and no decision here: rules.py
decides, replication.py acts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence


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
    # unreachable in one observation only so far: a round slowed past its deadline by a busy
    # machine looks the same as the first round of an outage (a failover on silence waits for
    # a second one)
    missed_once: bool = False
    # unreachable, with evidence that its server is not running (observer.down_evidence): a
    # refused connection, its Pod gone or its container ended; "" when only silent (a timeout)
    down_evidence: str = ""
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
    # a primary shown not running (InstanceState.down_evidence) that no replica still receives
    # from is failed over without waiting failover_delay_seconds (False: always wait)
    act_on_evidence: bool = True


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
    conditions derive from (conditions.py), whatever the decision's name."""

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
