"""Pure: cron evaluation (cronsim) and what a schedule should do now.

    decide(now, cron, last_scheduled, created_at, active) -> Decision

The schedule's state is derived from the MySQLBackups it created (each carries the fire time it
was created for), so a failed run, an operator restart or a lost status never stops it: the next
fire time is computed from the last one created, whatever that run's outcome.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cronsim import CronSim

from mysql_operator.api.cron import check_cron

DEFAULT_STARTING_DEADLINE = dt.timedelta(minutes=30)


def parse_cron(expr: str) -> str:
    """The 5-field form of expr; ValueError (the messages admission gives) for a bad expression."""
    return check_cron(expr)


def next_after(cron: str, t: dt.datetime) -> dt.datetime:
    """The first fire time strictly after t (UTC, minute resolution)."""
    try:
        return next(CronSim(cron, t.astimezone(dt.timezone.utc)))
    except StopIteration:  # cronsim looks 50 years ahead
        raise ValueError("the schedule never fires") from None


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
