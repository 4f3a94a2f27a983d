"""The replication engine's value types, which the pure modules read too: a member instance
(where it answers, who must answer there), the credentials it is reached with, one step done to an
instance (what an Event says), what a pass remembers, and a pass's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

from mysql_operator import topology as t


@dataclass(frozen=True)
class Member:
    name: str
    ordinal: int
    host: str | None  # None: its Pod has no IP (unreachable)
    port: int
    # who must answer at host:port; None skips the check. A different uid (the Pod was
    # recreated) makes a new connection: an old one may still reach the old container.
    server_id: int | None = None
    hostname: str | None = None
    uid: str | None = None
    # where replicas reach it, when not `host`: the Pod's DNS name, resolved by the server itself,
    # so a Pod that is gone fails a replica's connect at once (its old IP would hang the connect,
    # and STOP REPLICA waits 2 s for that) and a recreated Pod is found at its new IP
    source_host: str | None = None
    # what its Pod says that shows its server does not run (pods.server_not_running): "" when
    # it does not say so, or when no Pod is known to the caller (a benchmark's servers)
    pod_down: str = ""
    # (uid, pods.server_not_running) of the Pod of its name deleted before the one it has now
    # (if it has one), when the kubelet saw that Pod's server end before it went (pods.ended_pod)
    ended_before: tuple[str, str] | None = None

    @property
    def replication_host(self) -> str | None:
        return self.source_host or self.host


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str = field(repr=False)
    host: str = "%"


@dataclass(frozen=True)
class Step:
    """One thing done (or refused) to one instance; safe to publish (no secrets)."""

    instance: str
    action: str
    detail: str = ""
    ok: bool = True
    warn: bool = False  # done, but something to look at (a Warning Event)


@dataclass
class ClusterState:
    """What the operator must remember between reconciles (status.currentPrimary)."""

    current_primary: str | None = None


@dataclass
class Outcome:
    decision: t.Decision
    steps: list[Step]
    observed: list[t.InstanceState]
