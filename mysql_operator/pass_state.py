"""What one cluster's pass works with: the state kept between its passes (`ClusterEntry`), the
credentials it logs in with (`Logins`), the snapshot it starts from (`Observed`) and what its
replication step did (`Replicated`). Values and their derived fields; no I/O."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping


from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import switchover as sw
from mysql_operator import topology as t
from mysql_operator.api import GROUP, MySQLCluster
from mysql_operator.members import ClusterState, Member, Outcome
from mysql_operator.replication import ReplicationEngine
from mysql_operator.pods import (
    PodView,
    member_ordinals,
    pod_ordinal,
    pod_views,
    ready_count,
)
from mysql_operator.tls_upkeep import TLSUpkeep


@dataclass
class ClusterEntry:
    uid: str | None = None  # of the object it holds the state of (None: not known yet)
    lock: threading.Lock = field(default_factory=threading.Lock)
    engine: ReplicationEngine | None = None
    fingerprint: str = ""
    last_apply: float = 0.0
    apply_error: str | None = None  # as the last apply found it (status.apply_refusal)
    claims: tuple[str, str] | None = None  # as the last apply found them (owned.Applied.claims)
    ignored_said: tuple = ()  # (generation, fields) of the last UnknownFields and SupersededFields Events
    again: bool = False  # another pass was asked for while one ran: it runs at that one's end
    # and applies the owned objects if one of those asking said so (else when due): the essence
    # they had seen ("": an apply is wanted whatever ran since; None: nobody asked to apply);
    # and the one the last apply that went through applied (`essence`)
    apply_asked: str | None = None
    applied_essence: str = ""
    routed_to: str | None = None  # the primary a connection through -rw was seen to reach
    last_decision: str | None = None  # logged when it changes
    tls: TLSUpkeep = field(default_factory=TLSUpkeep)
    # the binlog archiver Deployment's status as last seen (its apply, its watch); None: none seen
    archiver: Mapping[str, Any] | None = None
    archiver_pod_trouble: str = ""  # of its Pod (status.archiver_pod_trouble), from the Pods' watch
    # a Pod template a new operator version wants, staged (rolling.template_step); None: none
    restart_pending: rolling.StageTemplate | None = None
    # status fields others report (the backup controller's lastBackup, schedule), published by
    # the pass with its own; None removes one
    reported: dict[str, Any] = field(default_factory=dict)


# kopf's record of the last essence it handled (operator.SpecDiffBase): its own write, no change
KOPF_RECORD = f"{GROUP}/last-handled-configuration"


def essence(body: Mapping[str, Any]) -> str:
    """Pure: what an ask to apply is about - the cluster's generation (its spec), labels and
    annotations (an approved restart is one), as kopf compares them for its create and update
    handlers. Not its status, finalizers or resourceVersion: kopf's finalizer and record, and the
    pass's own status, change those and no owned object."""
    meta = body.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != KOPF_RECORD}
    return json.dumps([meta.get("generation"), meta.get("labels") or {}, annotations], sort_keys=True)


def merge_asks(held: str | None, asked: str | None) -> str:
    """Pure: one ask to apply after another (the essence each asker saw; None or "": an ask
    whatever was applied): the later one, or "" when one of them asks whatever."""
    if held is None:
        return asked or ""
    return asked if held and asked else ""


def apply_still_wanted(asked: str, applied: str) -> bool:
    """Pure: whether an ask to apply (the essence its asker saw; "": whatever) is not met by the
    last apply that went through, which applied a body of essence `applied`. A new cluster's
    create handler and its loop's first pass each asked, and each applied every owned object
    (1.5 Service applies per new cluster at 1,000 clusters): the second finds the first applied
    that essence."""
    return not (asked and asked == applied)


@dataclass
class Logins:
    """The credentials a pass logs in with (passwords.py: the Secret, the record of what the
    servers have)."""

    passwords: dict[str, str]  # the credentials Secret's
    error: str | None = None  # why the Secret cannot be used: then no server is talked to
    on_servers: dict[str, str] = field(default_factory=dict)  # the applied record
    version: str = ""  # of the Secret whose passwords the servers have
    pending: tuple[str, ...] = ()  # changed in the Secret, not yet on the servers

    @property
    def current(self) -> dict[str, str]:
        """What logs in: until a rotation is applied, the servers have the record's passwords."""
        return {**self.passwords, **{key: self.on_servers[key] for key in self.pending}}

    @property
    def secrets(self) -> list[str]:
        """Every password either side may hold: redacted from step texts, Events, status, logs."""
        return list(self.passwords.values()) + [self.on_servers[key] for key in self.pending]


@dataclass
class Observed:
    """What one pass starts from, read once: the cluster (its spec, its status as last
    published), its credentials, its Pods (from the stores)."""

    body: Mapping[str, Any]  # the cluster with the spec in effect (`c`'s)
    c: MySQLCluster
    previous: dict[str, Any]
    logins: Logins
    listed: list[dict]  # the cluster's Pods
    statefulset: dict | None  # its StatefulSet (the rolling update's revisions)
    # the cluster's own spec, refused: why, and its generation (`body` is the last that parsed)
    spec_error: str | None = None
    refused_generation: int | None = None
    pods: dict[int, PodView] = field(init=False)
    raw_pods: dict[int | None, dict] = field(init=False)
    ordinals: list[int] = field(init=False)  # of the instances the pass looks after
    names: dict[int, str] = field(init=False)
    ready: int = field(init=False)  # less any Pod this pass restarts
    instances: list[t.InstanceState] = field(default_factory=list)  # the servers, once observed
    # switchover requests not finished, the one acted on first (switchover.pending)
    requests: list[sw.Request] = field(init=False)
    restore_found: Any = None  # the restore gate's observation (restore_gate.RestoreSeen), once read

    def __post_init__(self) -> None:
        c = self.c
        self.pods = pod_views(c.name, self.listed, clock.now())
        self.raw_pods = {pod_ordinal(p["metadata"]["name"], c.name): p for p in self.listed}
        self.ordinals = member_ordinals(c.spec.instances, self.pods, self.primary_ordinal)
        self.names = {o: m.pod_name(c, o) for o in self.ordinals}
        self.ready = ready_count(self.pods, c.spec.instances)
        self.requests = sw.pending(
            self.body["metadata"].get("annotations") or {},
            c.name,
            c.spec.instances,
            c.spec.primary,
            c.generation,
            self.previous,
            clock.stamp(),
        )

    def spec_fields(self) -> dict[str, Any]:
        """The Summary's spec fields: the spec in effect, and why the cluster's own is refused."""
        return {
            "spec": self.body["spec"],
            "spec_error": self.spec_error,
            "refused_generation": self.refused_generation,
        }

    @property
    def current_primary(self) -> str | None:
        return self.previous.get("currentPrimary")

    @property
    def primary_ordinal(self) -> int | None:
        return pod_ordinal(self.current_primary or "", self.c.name)


@dataclass(frozen=True)
class Engaged:
    """The replication pass's engine as observed at the start of a pass (pass_replication._engage):
    the engine with this pass's members and settings, whether a forced failover was asked for,
    and when its observation began (time.monotonic)."""

    engine: ReplicationEngine
    settings: t.Settings
    members: list[Member]
    force: bool
    started: float


@dataclass
class Replicated:
    """The replication pass of one Reconciler pass: its engine and settings, and what it did."""

    engine: ReplicationEngine
    settings: t.Settings
    members: list[Member]
    force: bool  # a forced failover was asked for (FORCE_FAILOVER_ANNOTATION)
    state: ClusterState  # the recorded primary, as the engine left it
    outcome: Outcome  # what it saw, decided and did
    roll: rolling.RollStep | None  # the rolling update's step (it moved the wanted primary)
    desired: str | None  # the primary the engine was asked for (a request's, or the roll's)
    # role labels this pass set while it ran (the promoted primary's, the leaving one's): the
    # labels its Pods carry now, where the pass's view of them is older
    relabelled: dict[str, str | None] = field(default_factory=dict)
