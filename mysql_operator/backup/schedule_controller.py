"""ScheduleController: a cluster's backup schedule and retention (backup/schedule.py and
backup/retention.py decide) carried out over the Kubernetes API - MySQLBackups created on
schedule whatever the previous runs' outcome, status.nextScheduledBackup and
status.lastScheduledBackup reported, expired backups removed (their objects first, DataDeletion),
never the newest successful one."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubernetes.client.exceptions import ApiException

from mysql_operator import clock
from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION
from mysql_operator.backup import retention, schedule
from mysql_operator.backup.backup_status import PENDING, RUNNING, cluster_in_effect
from mysql_operator.backup.data_deletion import DataDeletion
from mysql_operator.manifests.backup_jobs import SCHEDULED_AT_ANNOTATION, scheduled_backup

ACTIVE = (None, PENDING, RUNNING)


class ScheduleController(DataDeletion):
    def tick(self, cluster_body: dict, now: dt.datetime | None = None) -> dict:
        """One schedule/retention pass for a cluster. Returns what it did (for logs and tests)."""
        now = now or clock.now()
        meta = cluster_body["metadata"]
        ns, cname = meta["namespace"], meta["name"]
        cluster = cluster_in_effect(cluster_body)
        bk = cluster.spec.backup
        done: dict[str, Any] = {"created": None, "deleted": []}
        if bk is None:
            return done
        backups = self.backups_of(ns, cname)
        stale = {"nextScheduledBackup", "lastScheduledBackup"} & set(cluster_body.get("status") or {})
        if not bk.schedule and stale:  # a schedule removed: no next run to announce
            self._cluster_status(ns, cname, dict.fromkeys(stale))
        if bk.schedule:
            scheduled = [
                clock.parse((o["metadata"].get("annotations") or {}).get(SCHEDULED_AT_ANNOTATION))
                for o in backups
            ]
            last = max((t for t in scheduled if t), default=None)
            created_at = clock.parse(meta.get("creationTimestamp")) or now
            active = [
                o["metadata"]["name"] for o in backups if (o.get("status") or {}).get("phase") in ACTIVE
            ]
            d = schedule.decide(now, bk.schedule, last, created_at, active)
            done["decision"] = d
            if d.create_for is not None:
                name = schedule.backup_name(cname, d.create_for)
                try:
                    self.custom.create_namespaced_custom_object(
                        GROUP, VERSION, ns, BACKUP_PLURAL, scheduled_backup(cluster, name, d.create_for)
                    )
                    done["created"] = name
                except ApiException as e:
                    if e.status != 409:
                        raise
            newest = max(((t, o) for t, o in zip(scheduled, backups) if t), default=None, key=lambda x: x[0])
            status = {"nextScheduledBackup": clock.stamp(d.next_run)}
            # scheduledAt: the fire time it ran for (the metric an alert on a late backup uses)
            if done["created"]:
                status["lastScheduledBackup"] = {
                    "name": done["created"],
                    "phase": PENDING,
                    "scheduledAt": clock.stamp(d.create_for),
                }
            elif newest is not None:
                o = newest[1]
                s = o.get("status") or {}
                status["lastScheduledBackup"] = {
                    "name": o["metadata"]["name"],
                    "phase": s.get("phase", PENDING),
                    "message": s.get("message", ""),
                    "scheduledAt": clock.stamp(newest[0]),
                }
            self._cluster_status(ns, cname, status)
        if bk.retention.keep_last is not None or bk.retention.max_age is not None:
            infos = [
                retention.BackupInfo(
                    o["metadata"]["name"],
                    (o.get("status") or {}).get("phase"),
                    clock.parse((o.get("status") or {}).get("completedAt"))
                    or clock.parse(o["metadata"].get("creationTimestamp"))
                    or now,
                )
                for o in backups
            ]
            for name in retention.expired(infos, now, bk.retention.keep_last, bk.retention.max_age_seconds):
                body = next(o for o in backups if o["metadata"]["name"] == name)
                if not self.data_deleted(body, cluster_body):
                    done.setdefault("deleting", []).append(name)  # its delete Job runs: next pass
                    continue
                self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL, name)
                done["deleted"].append(name)
        return done
