"""The one clock: UTC now, and the RFC 3339 stamps the operator writes into statuses, Events,
backup records and names."""

from __future__ import annotations

import datetime as dt

_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
_MICROSECONDS = "%Y-%m-%dT%H:%M:%S.%fZ"


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def stamp(t: dt.datetime | None = None, precise: bool = False) -> str:
    """'2026-11-25T06:40:00Z' for `t` (default: now); with microseconds when `precise`."""
    return (t or now()).strftime(_MICROSECONDS if precise else _SECONDS)


def parse(s: str | None) -> dt.datetime | None:
    """A stamp() in seconds back to a UTC datetime; None for an empty or missing value."""
    if not s:
        return None
    return dt.datetime.strptime(s, _SECONDS).replace(tzinfo=dt.timezone.utc)
