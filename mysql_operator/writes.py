"""What a pass plans to write, as values: every Kubernetes write and the statements the operator
runs outside the replication engine's own steps. The planners (owned.plan_owned, the certificate's
TLSUpkeep.plan, status.Plan.writes, restore_plan.plan_restore) return sequences of these, and
executor.carry_out makes them, in order, through KubeOps (and the servers, for `ReloadTLS`).

A `Chain` is writes that each wait on the one before: when one is refused, the rest of its chain
is not made (a Secret to create that exists already, a StatefulSet the API server refused before
the annotation of the restart it carries out is removed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union

Event = tuple[str, str, str]  # (type, reason, message)


@dataclass(frozen=True)
class Apply:
    """The object server-side applied (the API server's answer is the write's result)."""

    obj: Mapping[str, Any]


@dataclass(frozen=True)
class Post:
    """Events on the cluster."""

    events: tuple[Event, ...]


@dataclass(frozen=True)
class PatchStatus:
    """Fields of the cluster's status (a merge patch)."""

    fields: Mapping[str, Any]


@dataclass(frozen=True)
class RemoveAnnotation:
    """One annotation of the cluster removed (a request carried out)."""

    key: str


@dataclass(frozen=True)
class SetPodLabel:
    pod: str
    key: str
    value: str | None  # None: removed


@dataclass(frozen=True)
class AnnotatePod:
    pod: str
    key: str
    value: str


@dataclass(frozen=True)
class DeletePod:
    pod: str
    uid: str | None = None  # that Pod only, not the one its StatefulSet starts in its place


@dataclass(frozen=True)
class CreateJob:
    obj: Mapping[str, Any]


@dataclass(frozen=True)
class DeleteDeployment:
    namespace: str
    name: str


@dataclass(frozen=True)
class GrowClaim:
    """The PersistentVolumeClaim asks for at least `size` (refused in the API server's words)."""

    namespace: str
    claim: str
    size: str


@dataclass(frozen=True)
class SecretWrite:
    """One write of a certificate Secret: `body` created (only if missing), or its keys set in the
    existing one (`create` False); `or_keys`: a create that finds one sets its keys instead. A
    create that finds one without `or_keys` is refused (the rest of its chain is not made)."""

    body: dict[str, Any]
    create: bool
    or_keys: bool = False


@dataclass(frozen=True)
class ReloadTLS:
    """The server reloads its certificate files (ALTER INSTANCE RELOAD TLS / FLUSH SSL)."""

    server: str


@dataclass(frozen=True)
class Call:
    """A named effect the caller of the executor carries out itself (the restore's account
    dropped on every server, its certificate issued): named here to keep its place in the order."""

    name: str


Write = Union[
    Apply,
    Post,
    PatchStatus,
    RemoveAnnotation,
    SetPodLabel,
    AnnotatePod,
    DeletePod,
    CreateJob,
    DeleteDeployment,
    GrowClaim,
    SecretWrite,
    ReloadTLS,
    Call,
]


@dataclass(frozen=True)
class Chain:
    """Writes that each wait on the one before."""

    writes: tuple[Write, ...]


Step = Union[Write, Chain]


def flat(steps: tuple[Step, ...] | list[Step]) -> list[Write]:
    """Pure: every write of `steps`, in order."""
    return [w for s in steps for w in (s.writes if isinstance(s, Chain) else (s,))]
