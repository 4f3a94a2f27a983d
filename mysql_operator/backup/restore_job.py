"""What the restore Job runs (`mysql-operator restore`): the same backup into every instance of the
new cluster at once, a dump loaded by backup/restore.py (`load_all`) or a physical copy by
backup/restore_physical.py (MySQL) or backup/restore_mariadb_physical.py (MariaDB); archived
binary logs replayed after it for a point in time. Its result is what the Job reports.

    from mysql_operator.backup.restore_job import restore_all
    result = restore_all(targets, source, s3_credentials, app_database, donor=donor)
"""

from __future__ import annotations

import time

from mysql_operator.backup import physical, pitr, restore_mariadb_physical, restore_physical, storage
from mysql_operator.backup.manifest import Manifest
from mysql_operator.backup.restore import load_all
from mysql_operator.backup.restore_source import check_key, pick_base, read_manifest, replay_plan
from mysql_operator.backup.restore_types import Donor, RestoreError, RestoreResult, Source, Target
from mysql_operator.backup.user_checks import Check


def restore_all(
    targets: dict[str, Target],
    source: Source,
    creds: storage.Credentials,
    app_database: str | None,
    drop_account: bool = False,
    donor: Donor | None = None,
    primary: str | None = None,
    check_tables: bool = False,
    checks: tuple[Check, ...] = (),
) -> dict[str, object]:
    """Restore the same backup into every instance at once (what the restore Job runs); a
    physical one through `donor` (restore_physical). `primary`: the instance the new cluster
    starts with as its primary (default: the first target), which gets the source's events'
    statuses; the others get them replica-side disabled (settle_events). Returns the result to report: {"ok",
    "message", "gtidPosition", "bytesLoaded", "durationSeconds"}; messages never contain a
    password (the caller redacts the environment's secrets too). `check_tables`: the backup's tables,
    once loaded into the primary (a dump) or the primary started on it (a physical copy),
    are compared with those the backup recorded (before any replay): "tablesChecked" {"tables", "rows"} when they were, a failure naming each
    table that differs. `checks`: the user's (backup/user_checks.py), run on the primary once
    everything is loaded and replayed: "checksPassed" [their names], a failure naming each that
    failed."""
    t0 = time.monotonic()
    errors: list[str] = []
    results: list[RestoreResult] = []
    chain = None
    client = storage.make_client(source.s3, creds)
    try:
        if source.stop is not None:  # refused before any instance is touched
            source = pick_base(client, source)
            m = read_manifest(client, source, physical=True)
            check_key(source.s3, m, source.key)
            chain = replay_plan(client, source, m)
            copy = m if m.method == physical.METHOD_PHYSICAL else None
        else:
            copy = physical_manifest(client, source)
    except (RestoreError, storage.StorageError) as e:
        return {"ok": False, "message": str(e), "durationSeconds": round(time.monotonic() - t0, 1)}
    if copy is not None:
        how = restore_mariadb_physical if copy.flavor == "mariadb" else restore_physical
        results, errors = how.restore(
            client,
            targets,
            source,
            copy,
            donor,
            app_database,
            drop_account=drop_account,
            chain=chain,
            primary=primary or next(iter(targets), None),
            checks=checks,
            check_tables=check_tables,
        )
    else:
        load_all(
            targets,
            source,
            creds,
            app_database,
            drop_account,
            chain,
            primary,
            results,
            errors,
            check_tables,
            checks,
        )
    seconds = round(time.monotonic() - t0, 1)
    if errors:
        return {"ok": False, "message": "; ".join(sorted(errors)), "durationSeconds": seconds}
    r = results[0]
    out: dict[str, object] = {
        "ok": True,
        "message": f"restored into {', '.join(targets)} in {seconds}s",
        "gtidPosition": r.gtid_position or "",
        "bytesLoaded": r.bytes_loaded,
        "backupCompletedAt": r.manifest.completed_at,
        "durationSeconds": seconds,
    }
    checked = next((x.table_check for x in results if x.table_check is not None), None)
    if checked is not None:
        out["tablesChecked"] = {"tables": checked.tables, "rows": checked.rows}
    passed = next((x.checks_passed for x in results if x.checks_passed), ())
    if passed:
        out["checksPassed"] = list(passed)
    # where the primary's restore spent its time (the first result's: all load at once)
    timed = next((x for x in results if x.table_check is not None or x.checks_passed), r)
    if timed.phases:
        out["phases"] = dict(timed.phases)
    if source.stop is not None:
        last = max((s.last_event_at for s in r.replayed), default=None)
        out["pointInTime"] = {
            "target": source.stop.describe(),
            "base": r.manifest.data_key.rsplit("/", 1)[0],
            "binlogFilesReplayed": len(r.replayed),
            **({"lastReplayedEventAt": pitr.stamp(last)} if last is not None else {}),
        }
        out["message"] = (
            f"restored into {', '.join(targets)} in {seconds}s, then {len(r.replayed)} archived "
            f"binary logs replayed up to {source.stop.describe()}"
        )
    return out


def physical_manifest(client, source: Source) -> Manifest | None:
    """The manifest of `source` when it is a physical backup; None otherwise, and when it cannot
    be read (each instance's load then says why)."""
    try:
        m = read_manifest(client, source, physical=True)
    except (RestoreError, storage.StorageError):
        return None
    return m if m.method == physical.METHOD_PHYSICAL else None
