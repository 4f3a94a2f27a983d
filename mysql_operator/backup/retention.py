"""Pure: which backups a retention policy removes.

    expired(backups, now, keep_last, max_age_seconds) -> names

Counted and aged are the successful backups only. Failed backups (no data: their upload was
aborted) are removed once a newer successful one exists or they exceed the age. The newest
successful backup is never removed, whatever the policy; running ones are never touched.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

SUCCEEDED, FAILED = "Succeeded", "Failed"


@dataclass(frozen=True)
class BackupInfo:
    name: str
    phase: str | None
    time: dt.datetime  # completedAt if known, else creation time


def expired(
    backups: list[BackupInfo], now: dt.datetime, keep_last: int | None, max_age_seconds: int | None
) -> list[str]:
    if keep_last is None and max_age_seconds is None:
        return []
    done = sorted((b for b in backups if b.phase == SUCCEEDED), key=lambda b: (b.time, b.name), reverse=True)
    newest = done[0] if done else None
    out = []
    for i, b in enumerate(done):
        if b is newest:
            continue
        too_many = keep_last is not None and i >= keep_last
        too_old = max_age_seconds is not None and (now - b.time).total_seconds() > max_age_seconds
        if too_many or too_old:
            out.append(b.name)
    for b in backups:
        if b.phase != FAILED:
            continue
        superseded = newest is not None and newest.time > b.time
        too_old = max_age_seconds is not None and (now - b.time).total_seconds() > max_age_seconds
        if superseded or too_old:
            out.append(b.name)
    return sorted(out)
