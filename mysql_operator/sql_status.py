"""The status of a MySQLDatabase, MySQLUser or MySQLGrant from the outcome of its last sync
(`status_for`), and whether it changed. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass
class Result:
    """What one object's pass ends in: its Ready condition and what the status adds."""

    ok: bool
    reason: str
    message: str
    done: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def status_for(
    result: Result, previous: Mapping[str, Any], generation: int | None, now: str
) -> dict[str, Any]:
    """Pure: the object's status (lastTransitionTime moves only when Ready's status changes)."""
    old: Mapping[str, Any] = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    status = "True" if result.ok else "False"
    cond = {
        "type": "Ready",
        "status": status,
        "reason": result.reason,
        "message": result.message,
        "lastTransitionTime": old.get("lastTransitionTime", now) if old.get("status") == status else now,
        "observedGeneration": generation,
    }
    return {"observedGeneration": generation, "conditions": [cond], **result.extra}


def status_changed(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return any(previous.get(key) != value for key, value in new.items())
