"""Pure: restore drills (issue 49). A drill restores a cluster's newest successful backup - and,
when its binary logs are archived, every archived transaction after it - into a throwaway
one-instance cluster of the same namespace, checks the tables against what the backup recorded
(spec.restore.checkTables), measures the time to a serving server (RTO) and what it lacks of the
source (RPO), records the result in the source's status.drill, and deletes the throwaway cluster,
whatever happened.

    decide(view) -> Start | Finish | Remove | Idle

Level-based: everything is read again each pass from the source's status.drill (the running
drill's record), the throwaway cluster as it is, and the schedule, so an operator restarted in the
middle finishes or times out the drill it finds; a throwaway cluster without a running record is
removed before another drill starts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from mysql_operator import clock
from mysql_operator.backup import schedule
from mysql_operator.db.gtid import GtidParseError, MariaDBGtids, MySQLGtidSet

RUNNING, SUCCEEDED, FAILED = "Running", "Succeeded", "Failed"
DRILL_OF_LABEL = "mysql.operator.dev/drill-of"
REQUEST_ANNOTATION = "mysql.operator.dev/drill-request"  # any new value asks for a drill now


def throwaway_name(cluster: str) -> str:
    """The drill's cluster: one at a time per source (a name that is no client's by accident)."""
    return f"{cluster}-drill"


@dataclass(frozen=True)
class Throwaway:
    """The drill's cluster as it is: its status' phase, its status.restore, whether it is being
    deleted, and since when it serves (its Ready condition True: lastTransitionTime)."""

    phase: str | None
    restore: dict[str, Any]
    deleting: bool = False
    ready_since: dt.datetime | None = None


@dataclass(frozen=True)
class View:
    now: dt.datetime
    cluster: str
    flavor: str
    schedule: str | None  # spec.backup.drill.schedule
    timeout_seconds: int
    created_at: dt.datetime  # the source cluster's creation: no run for fire times before it
    record: dict[str, Any]  # status.drill, {} when none ran
    throwaway: Throwaway | None
    newest_backup: str | None  # the newest Succeeded MySQLBackup of the cluster
    source_gtid: str  # the source primary's executed GTIDs now (status)
    request: str | None = None  # the drill-request annotation's value
    binlogs: bool = False  # archived binary logs: the drill replays every one


@dataclass(frozen=True)
class Start:
    """Create the throwaway cluster restoring `backup`; the record is written first."""

    backup: str
    record: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class Finish:
    """The drill ended: write `record`, post the Event, delete the throwaway cluster."""

    record: dict[str, Any]
    passed: bool
    message: str


@dataclass(frozen=True)
class Remove:
    """A throwaway cluster no running drill owns: delete it (nothing else starts meanwhile)."""

    reason: str


@dataclass(frozen=True)
class Idle:
    reason: str
    next_run: dt.datetime | None = None
    record: dict[str, Any] = field(default_factory=dict)  # a refusal to record (no backup)


Decision = Start | Finish | Remove | Idle


def decide(v: View) -> Decision:
    if v.record.get("phase") == RUNNING:
        return _running(v)
    if v.throwaway is not None:
        return Remove(f"the drill's cluster {throwaway_name(v.cluster)} is left from an ended drill")
    due, next_run, why = _due(v)
    if due is None:
        return Idle(why, next_run)
    # what started it, beside what started the ones before (a request does not reset the schedule)
    base = {k: v.record[k] for k in ("scheduledAt", "request", "lastSucceededAt") if v.record.get(k)}
    base.update(due)
    if v.newest_backup is None:
        message = "no backup of the cluster has succeeded: nothing to drill"
        return Idle(
            message,
            next_run,
            record={
                **base,
                "phase": FAILED,
                "startedAt": clock.stamp(v.now),
                "completedAt": clock.stamp(v.now),
                "message": message,
            },
        )
    record = {
        **base,
        "phase": RUNNING,
        "cluster": throwaway_name(v.cluster),
        "backup": v.newest_backup,
        "startedAt": clock.stamp(v.now),
        "sourceGtid": v.source_gtid,
        "pointInTime": "latest" if v.binlogs else "",
    }
    return Start(v.newest_backup, record, why)


def starts(v: View) -> bool:
    """Whether decide would start a drill (given a backup): none runs, no throwaway cluster is
    left, and one is due."""
    return v.record.get("phase") != RUNNING and v.throwaway is None and _due(v)[0] is not None


def _due(v: View) -> tuple[dict[str, str] | None, dt.datetime | None, str]:
    """(what the drill due now records as its cause, the next fire time, why): a new request is
    due now; else a schedule's fire time after the last drill's."""
    if v.request is not None and v.request != v.record.get("request"):
        return {"request": v.request}, None, f"asked for ({REQUEST_ANNOTATION}: {v.request})"
    if not v.schedule:
        return None, None, "no spec.backup.drill.schedule"
    last = clock.parse(v.record.get("scheduledAt"))
    d = schedule.decide(v.now, v.schedule, last, v.created_at, [])
    if d.create_for is None:
        return None, d.next_run, d.reason
    return {"scheduledAt": clock.stamp(d.create_for)}, d.next_run, "scheduled"


def _running(v: View) -> Decision:
    r, t = v.record, v.throwaway
    started = clock.parse(r.get("startedAt")) or v.now
    elapsed = (v.now - started).total_seconds()
    if t is None or t.deleting:
        return _failed(v, f"the drill's cluster {r.get('cluster')} was deleted before the drill ended")
    restore = t.restore
    if restore.get("phase") == FAILED:
        return _failed(v, f"the restore failed: {restore.get('message') or 'no message'}")
    if restore.get("phase") == SUCCEEDED and t.phase == "Ready":
        # the RTO ends when the restored cluster began to serve, not when this pass (on the backup
        # timer) saw it: a Ready condition older than the drill is not this restore's
        serving = t.ready_since if t.ready_since is not None and t.ready_since >= started else v.now
        return _passed(v, restore, (serving - started).total_seconds())
    if elapsed > v.timeout_seconds:
        where = f"phase {t.phase or 'not reported'}, restore {restore.get('phase') or 'not started'}"
        return _failed(v, f"not restored and serving within {v.timeout_seconds}s ({where})")
    return Idle(f"the drill runs ({elapsed:.0f}s)")


def _failed(v: View, message: str) -> Finish:
    record = {**v.record, "phase": FAILED, "completedAt": clock.stamp(v.now), "message": message}
    return Finish(record, False, f"restore drill of backup {v.record.get('backup')} failed: {message}")


def _passed(v: View, restore: dict[str, Any], rto: float) -> Finish:
    r = v.record
    restored = str(restore.get("gtidPosition") or "")
    missing = missing_transactions(v.flavor, str(r.get("sourceGtid") or ""), restored)
    started = clock.parse(r.get("startedAt")) or v.now
    last_event = clock.parse((restore.get("pointInTime") or {}).get("lastReplayedEventAt"))
    backup_done = clock.parse(restore.get("backupCompletedAt"))
    newest = last_event or backup_done
    # RPO: 0 when the restore held every transaction the source had when the drill started; else
    # the time from the newest restored write (or the backup) to then: a bound on what is lost
    rpo = 0.0 if missing == 0 else max(0.0, (started - newest).total_seconds()) if newest else None
    seconds = float(restore.get("durationSeconds") or 0)
    loaded = int(restore.get("bytesLoaded") or 0)
    checked = restore.get("tablesChecked")
    record = {
        **r,
        "phase": SUCCEEDED,
        "completedAt": clock.stamp(v.now),
        "lastSucceededAt": clock.stamp(v.now),
        "rtoSeconds": round(rto, 1),
        "restoreSeconds": seconds,
        "bytesPerSecond": int(loaded / seconds) if seconds > 0 else 0,
        "restoredGtid": restored,
        "missingTransactions": missing,
        **({"rpoSeconds": round(rpo, 1)} if rpo is not None else {}),
        **({"tablesChecked": checked} if checked else {}),
        **({"checksPassed": restore["checksPassed"]} if restore.get("checksPassed") else {}),
        **({"phases": restore["phases"]} if restore.get("phases") else {}),
    }
    tables = (
        f"{checked['tables']} tables, {checked['rows']} rows as backed up"
        if checked
        else "tables not checked (a backup without table digests)"
    )
    lacks = (
        "every transaction the source had"
        if missing == 0
        else f"{missing} transactions fewer than the source"
    )
    checks = f"; {len(restore['checksPassed'])} user checks passed" if restore.get("checksPassed") else ""
    message = f"restored and serving in {rto:.0f}s; {tables}{checks}; holds {lacks}"
    record["message"] = message
    return Finish(record, True, f"restore drill of backup {r.get('backup')} passed: {message}")


def missing_transactions(flavor: str, source: str, restored: str) -> int:
    """How many of the source's transactions the restored server lacks (MariaDB: per domain, the
    difference of the highest seq_nos). -1 when a set cannot be read."""
    try:
        if flavor == "mariadb":
            src, got = MariaDBGtids.parse(source), MariaDBGtids.parse(restored)
            top: dict[int, int] = {}
            for d, _, n in got.entries:
                top[d] = max(n, top.get(d, 0))
            best: dict[int, int] = {}
            for d, _, n in src.entries:
                best[d] = max(n, best.get(d, 0))
            return sum(max(0, n - top.get(d, 0)) for d, n in best.items())
        return MySQLGtidSet.parse(source).subtract(MySQLGtidSet.parse(restored)).count()
    except GtidParseError:
        return -1
