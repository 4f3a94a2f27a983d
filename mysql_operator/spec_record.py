"""The spec a pass acts on: the cluster's own, or while that is refused the last that parsed
(status.lastValidSpec, recorded here); an apply's refusal named by the spec field. Pure."""

from __future__ import annotations

import re
from typing import Any, Mapping

from mysql_operator.api.spec import parse
from mysql_operator.api.types import MySQLCluster, SpecError
from mysql_operator.summary import LAST_VALID_SPEC, Summary

# where a field of an object the operator renders comes from in the MySQLCluster spec
_SPEC_FIELDS = (
    (r"spec\.template\.spec\.(?:initContainers|containers)\[\d+\]\.resources", "spec.resources"),
    (r"spec\.template\.spec\.affinity", "spec.affinity"),
    (r"spec\.template\.spec\.tolerations", "spec.tolerations"),
    (r"spec\.template\.spec\.nodeSelector", "spec.nodeSelector"),
    (r"spec\.template\.spec\.priorityClassName", "spec.priorityClassName"),
    (r"spec\.template\.metadata\.labels", "spec.podLabels"),
    (r"spec\.template\.metadata\.annotations", "spec.podAnnotations"),
    (r"spec\.volumeClaimTemplates\[\d+\]\.spec\.storageClassName", "spec.storage.storageClassName"),
    (r"spec\.volumeClaimTemplates\[\d+\]\.spec\.resources", "spec.storage.size"),
)


def apply_refusal(kind: str, name: str, status: int | None, message: str) -> str:
    """Pure: why an object the operator renders was not applied, for the status and an Event:
    the MySQLCluster fields the API server's message points at (through the rendered object's
    paths), the object, and the API's own words."""
    fields = sorted({f for pattern, f in _SPEC_FIELDS if re.search(pattern, message)})
    answer = f"refused by the API server (HTTP {status}): {message}" if status else f"not applied: {message}"
    if fields:
        return f"{', '.join(fields)}: {kind} {name} {answer}: fix {' and '.join(fields)}"
    return f"{kind} {name} {answer}"


def replacing(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: `new`, with null for every
    key of a nested object that only `old` has (a merge patch of `new` alone would keep those)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    return {**{k: None for k in old if k not in new}, **{k: replacing(old.get(k), v) for k, v in new.items()}}


def _without_nulls(value: Any) -> Any:
    """A JSON value as a merge patch stores it: no null member in an object (a list is a value)."""
    if not isinstance(value, Mapping):
        return value
    return {k: _without_nulls(v) for k, v in value.items() if v is not None}


def spec_record(s: Summary, previous: Mapping[str, Any]) -> dict[str, Any]:
    """status.lastValidSpec for a status patch: the spec in effect and its generation, when they
    are not what is recorded already ({} then: no write for it). Only the spec: it names Secrets,
    it holds no secret value."""
    if s.spec is None:
        return {}
    old = previous.get(LAST_VALID_SPEC)
    new = {"generation": s.generation, "spec": _without_nulls(s.spec)}
    if isinstance(old, Mapping) and all(old.get(k) == v for k, v in new.items()):
        return {}
    return {LAST_VALID_SPEC: replacing(old, new)}


def last_valid_body(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MySQLCluster as status.lastValidSpec recorded it: its metadata with the recorded
    generation, and the recorded spec; None when none is recorded (a cluster whose first spec was
    refused, or one an earlier operator version made, until a spec of it parses)."""
    recorded = (body.get("status") or {}).get(LAST_VALID_SPEC)
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("spec"), Mapping):
        return None
    meta = {**body.get("metadata", {}), "generation": recorded.get("generation")}
    return {**body, "metadata": meta, "spec": dict(recorded["spec"])}


def spec_in_effect(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], MySQLCluster | None, str | None]:
    """What a pass acts on: (body, parsed, why the cluster's own spec is refused). The cluster's
    own spec when it parses; else the last that parsed (`last_valid_body`), so that a spec the
    CRD admits but the parser refuses never stops failover; else nothing (None: phase Invalid).
    A recorded spec this operator version refuses counts as none."""
    try:
        return body, parse(body), None
    except SpecError as e:
        refused = str(e)
    last = last_valid_body(body)
    if last is not None:
        try:
            return last, parse(last), refused
        except SpecError:
            pass
    return body, None, refused
