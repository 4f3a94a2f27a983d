"""Pure: cron evaluation and what a schedule should do now.

    decide(now, cron, last_scheduled, created_at, active) -> Decision

The schedule's state is derived from the MySQLBackups it created (each carries the fire time it
was created for), so a failed run, an operator restart or a lost status never stops it: the next
fire time is computed from the last one created, whatever that run's outcome.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from mysql_operator.api import check_cron

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("dom", 1, 31), ("month", 1, 12), ("dow", 0, 7))
_NAMES = {
    "month": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "dow": ("sun", "mon", "tue", "wed", "thu", "fri", "sat"),
}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
DEFAULT_STARTING_DEADLINE = dt.timedelta(minutes=30)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_any: bool
    dow_any: bool

    def matches_day(self, d: dt.date) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.dom_any or self.dow_any:  # Vixie cron: both restricted -> either may match
            return dom and dow
        return dom or dow


def _value(text: str, name: str) -> int:
    names = _NAMES.get(name, ())
    if text.lower() in names:
        return names.index(text.lower()) + (1 if name == "month" else 0)
    return int(text)


def parse_cron(expr: str) -> Cron:
    """Raises ValueError (the same messages admission gives) for a bad expression."""
    check_cron(expr)
    expr = _MACROS.get(expr, expr)
    sets = []
    for text, (name, lo, hi) in zip(expr.split(), _FIELDS):
        values: set[int] = set()
        for item in text.split(","):
            rng, _, step = item.partition("/")
            if rng == "*":
                a, b = lo, hi
            elif "-" in rng:
                x, y = rng.split("-")
                a, b = _value(x, name), _value(y, name)
            else:
                a = _value(rng, name)
                b = hi if step else a
            values.update(range(a, b + 1, int(step) if step else 1))
        if name == "dow" and 7 in values:
            values.discard(7)
            values.add(0)
        sets.append(frozenset(values))
    parts = expr.split()
    return Cron(*sets, dom_any=parts[2].startswith("*"), dow_any=parts[4].startswith("*"))


def next_after(cron: Cron, t: dt.datetime) -> dt.datetime:
    """The first fire time strictly after t (UTC, minute resolution)."""
    t = t.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    limit = t + dt.timedelta(days=366 * 5)
    while t < limit:
        if t.month not in cron.months:
            t = (t.replace(day=1, hour=0, minute=0) + dt.timedelta(days=32)).replace(day=1)
            continue
        if not cron.matches_day(t.date()):
            t = t.replace(hour=0, minute=0) + dt.timedelta(days=1)
            continue
        if t.hour not in cron.hours:
            t = t.replace(minute=0) + dt.timedelta(hours=1)
            continue
        if t.minute not in cron.minutes:
            t += dt.timedelta(minutes=1)
            continue
        return t
    raise ValueError("the schedule never fires (e.g. 30 February)")


@dataclass(frozen=True)
class Decision:
    create_for: dt.datetime | None  # fire time to create a MySQLBackup for, or None
    reason: str
    next_run: dt.datetime  # the next fire time after now (for status and requeue)


def decide(
    now: dt.datetime,
    cron_expr: str,
    last_scheduled: dt.datetime | None,
    created_at: dt.datetime,
    active: list[str],
    starting_deadline: dt.timedelta = DEFAULT_STARTING_DEADLINE,
) -> Decision:
    """What a schedule does at `now`.

    - `last_scheduled`: fire time of the newest MySQLBackup this schedule created (None: never);
    - `created_at`: when the cluster was created (no run for fire times before it);
    - `active`: names of this cluster's MySQLBackups still Pending/Running (any origin).

    The newest fire time in (max(last_scheduled, created_at), now] is due; older missed ones are
    skipped (one backup, not a burst). A due time older than `starting_deadline` is skipped too.
    While another backup of the cluster runs, nothing is created (no concurrent runs); the due time
    stays due until its deadline passes.
    """
    cron = parse_cron(cron_expr)
    since = max(last_scheduled or created_at, created_at, now - starting_deadline - dt.timedelta(minutes=1))
    due = None
    t = next_after(cron, since)
    while t <= now:
        due = t
        t = next_after(cron, t)
    nxt = t
    if due is None:
        return Decision(None, "not due", nxt)
    if now - due > starting_deadline:
        return Decision(None, f"missed the run of {due:%Y-%m-%dT%H:%MZ} by more than the deadline", nxt)
    if active:
        return Decision(None, f"backup {', '.join(sorted(active))} still running: not starting another", nxt)
    return Decision(due, "due", nxt)


def backup_name(cluster: str, fire_time: dt.datetime) -> str:
    """Deterministic: two operators (or a retry) creating the same run collide instead of doubling."""
    return f"{cluster}-{fire_time:%Y%m%d%H%M}"
