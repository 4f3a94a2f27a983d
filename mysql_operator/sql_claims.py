"""Which SQL objects a MySQLDatabase, MySQLUser or MySQLGrant claims on its cluster, and the
resources that claim what another already does or what the cluster itself manages (`conflicts`:
the later one is refused). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


from mysql_operator.api.sql import (
    DatabaseSpec,
    GrantSpec,
    SqlObject,
    UserSpec,
)


ObjectKey = tuple[str, str, str]  # (namespace, kind, name)


def object_key(body: Mapping[str, Any]) -> ObjectKey:
    meta = body.get("metadata") or {}
    return (meta.get("namespace") or "default", body.get("kind") or "", meta.get("name") or "")


@dataclass(frozen=True)
class Owned:
    """What the MySQLCluster itself keeps (spec.database): its application database and account,
    whose privileges it converges to exactly its own."""

    cluster: str = ""
    database: str | None = None
    user: str | None = None


NOTHING_OWNED = Owned()  # a cluster without spec.database


def what_it_manages(spec: DatabaseSpec | UserSpec | GrantSpec) -> tuple[str, ...]:
    """Pure: the server object a spec converges (two objects with one would undo each other)."""
    if isinstance(spec, DatabaseSpec):
        return ("database", spec.name)
    if isinstance(spec, UserSpec):
        return ("account", spec.name, spec.host.lower())
    return ("privileges", spec.user, spec.host.lower(), spec.target)


def _describe(managed: tuple[str, ...]) -> str:
    if managed[0] == "database":
        return f"the database {managed[1]}"
    if managed[0] == "account":
        return f"the account {managed[1]}@{managed[2]}"
    return f"the privileges of {managed[1]}@{managed[2]} on {managed[3]}"


def _the_clusters(spec: DatabaseSpec | UserSpec | GrantSpec, owned: Owned) -> str | None:
    """Why a spec names what the cluster keeps itself (its spec.database), or None."""
    of_cluster = f"spec.database of MySQLCluster {owned.cluster}"
    if isinstance(spec, DatabaseSpec):
        if spec.name != owned.database:
            return None
        return (
            f"spec.name: the database {spec.name} is the cluster's own ({of_cluster}): the "
            "cluster creates and keeps it; delete this object or name another database"
        )
    user = spec.name if isinstance(spec, UserSpec) else spec.user
    if user != owned.user:
        return None
    return (
        f"the account {user} is the cluster's own application account ({of_cluster}): the "
        "cluster sets its password and keeps its privileges to exactly its own; use another account"
    )


def conflicts(objects: Sequence[tuple[Mapping[str, Any], SqlObject]], owned: Owned) -> dict[ObjectKey, str]:
    """Pure: why each object that must not be applied is not - what the cluster keeps itself, or
    what an older object (creationTimestamp, then name) of the same kind already manages. An
    object being deleted whose target the cluster or a live object keeps is listed too: its
    deletion must not undo it."""

    def deleting(body: Mapping[str, Any]) -> bool:
        return bool((body.get("metadata") or {}).get("deletionTimestamp"))

    out: dict[ObjectKey, str] = {}
    first: dict[tuple[str, ...], str] = {}
    live = sorted(
        ((b, o) for b, o in objects if not deleting(b)),
        key=lambda o: ((o[0].get("metadata") or {}).get("creationTimestamp") or "", o[1].name),
    )
    for body, obj in live:
        managed, why = what_it_manages(obj.spec), _the_clusters(obj.spec, owned)
        if why is None and managed in first:
            why = (
                f"{obj.kind} {first[managed]} already manages {_describe(managed)}: two objects would "
                "undo each other, this one is not applied; delete one of them"
            )
        if why is not None:
            out[object_key(body)] = why
        else:
            first[managed] = obj.name
    for body, obj in objects:
        managed = what_it_manages(obj.spec)
        if deleting(body) and (managed in first or _the_clusters(obj.spec, owned)):
            out[object_key(body)] = f"{_describe(managed)} is kept by another object or the cluster"
    return out
