"""DrillController: restore drills (backup/drill.py decides) carried out over the Kubernetes API -
the throwaway cluster created and deleted, the Events posted, the source cluster's status.drill
reported (the cluster's pass publishes it: its status has one writer). handlers/backups.py calls
`tick` for every cluster with spec.backup on the backup timer.

The throwaway cluster restores as any new cluster does (its restore Job holds no API credentials);
the operator reads only its status. A cluster of that name that is not this one's drill (no
drill-of label naming it) is never touched: the drill fails, saying so."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from mysql_operator import clock
from mysql_operator import reasons as R
from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.api.types import Drill
from mysql_operator.backup import drill
from mysql_operator.backup.backup_status import SUCCEEDED, cluster_in_effect
from mysql_operator.k8s.objects import post_events
from mysql_operator.k8s.jobs import job_image
from mysql_operator.manifests.drill_cluster import anchor_job, drill_cluster


@dataclass
class DrillController:
    api: k8s.ApiClient
    image: str = field(default_factory=job_image)  # the anchor Job's (never run)
    # where status.drill goes: the cluster's pass publishes it (Reconciler.report); None: patched here
    report: Callable[[str, str, dict], None] | None = None
    # (namespace, cluster) -> the record last reported, until the status shows it: a tick before
    # the pass published it must not take a drill it started for one left over
    _reported: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def custom(self):
        return k8s.CustomObjectsApi(self.api)

    @property
    def batch(self):
        return k8s.BatchV1Api(self.api)

    def tick(self, body: dict, now: dt.datetime | None = None) -> drill.Decision | None:
        now = now or clock.now()
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if (meta.get("labels") or {}).get(drill.DRILL_OF_LABEL):
            return None  # a drill's own cluster runs no drills
        cluster = cluster_in_effect(body)
        bk = cluster.spec.backup
        request = (meta.get("annotations") or {}).get(drill.REQUEST_ANNOTATION)
        status = body.get("status") or {}
        record = self._record(ns, name, status.get("drill") or {})
        if bk is None or (bk.drill is None and request is None and record.get("phase") != drill.RUNNING):
            return None
        throwaway = self._throwaway(ns, name)
        if throwaway is False:
            message = (
                f"a cluster named {drill.throwaway_name(name)} exists that is not this cluster's drill "
                f"(no label {drill.DRILL_OF_LABEL}={name}): rename it, or drills cannot run"
            )
            if record.get("message") != message:
                self._write(body, {**record, "phase": drill.FAILED, "message": message})
                self._event(body, R.RESTORE_DRILL_FAILED, message, warning=True)
            return None
        settings = bk.drill or Drill()  # a drill asked for without spec.backup.drill: the defaults
        primary = status.get("currentPrimary")
        source_gtid = next(
            (
                str(i.get("gtidExecuted") or "")
                for i in status.get("instances") or []
                if i.get("name") == primary
            ),
            "",
        )
        view = drill.View(
            now=now,
            cluster=name,
            flavor=cluster.spec.flavor,
            schedule=settings.schedule,
            timeout_seconds=settings.timeout_seconds,
            created_at=clock.parse(meta.get("creationTimestamp")) or now,
            record=record,
            throwaway=throwaway,
            newest_backup=None,
            source_gtid=source_gtid,
            request=request,
            binlogs=bk.binlogs.enabled,
        )
        if drill.starts(view):  # the backups are listed only then: decide reads them then alone
            view = dataclasses.replace(view, newest_backup=self._newest_backup(ns, name))
        d = drill.decide(view)
        if isinstance(d, drill.Start):
            self._start(body, d, bk.binlogs.enabled, now)
        elif isinstance(d, drill.Finish):
            self._write(body, d.record)
            reason = R.RESTORE_DRILL_SUCCEEDED if d.passed else R.RESTORE_DRILL_FAILED
            self._event(body, reason, d.message, warning=not d.passed)
            self._delete_anchor(ns, name)
        elif isinstance(d, drill.Remove):
            self._delete_anchor(ns, name)
        if isinstance(d, drill.Idle) and d.record:
            self._write(body, d.record)
            self._event(body, R.RESTORE_DRILL_FAILED, d.reason, warning=True)
        elif not isinstance(d, (drill.Start, drill.Finish)) and record:
            # said again each tick: the pass publishes it (a restarted operator's condition
            # Restorable comes back from it: Summary.drill)
            self._write(body, record)
        return d

    def _start(self, body: dict, d: drill.Start, binlogs: bool, now: dt.datetime) -> None:
        """The record first (a restarted operator finds the drill it started), the anchor, then
        the throwaway cluster; a refusal ends the drill saying why."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        self._write(body, d.record)
        anchor = self._created(
            lambda: self.batch.create_namespaced_job(ns, anchor_job(body, self.image)),
            lambda: self.batch.read_namespaced_job(drill.throwaway_name(name), ns),
        )
        if (anchor.metadata.labels or {}).get(drill.DRILL_OF_LABEL) != name:
            self._refuse(
                body,
                d.record,
                now,
                f"a Job named {drill.throwaway_name(name)} exists that is not this cluster's drill "
                f"anchor (no label {drill.DRILL_OF_LABEL}={name}): rename it, or drills cannot run",
            )
            return
        try:
            self._created(
                lambda: self.custom.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    ns,
                    CLUSTER_PLURAL,
                    drill_cluster(body, d.backup, binlogs, anchor.metadata.uid),
                ),
                lambda: None,
            )
        except ApiException as e:
            if e.status not in (400, 403, 422):
                raise
            self._delete_anchor(ns, name)
            self._refuse(
                body,
                d.record,
                now,
                f"the API refused the drill's cluster {drill.throwaway_name(name)}: {_api_message(e)}",
            )
            return
        self._event(body, R.RESTORE_DRILL_STARTED, f"restore drill of backup {d.backup} started ({d.reason})")

    def _refuse(self, body: dict, record: dict[str, Any], now: dt.datetime, message: str) -> None:
        self._write(
            body, {**record, "phase": drill.FAILED, "completedAt": clock.stamp(now), "message": message}
        )
        self._event(body, R.RESTORE_DRILL_FAILED, message, warning=True)

    # ------------------------------------------------------------------ reads
    def _record(self, ns: str, name: str, published: dict[str, Any]) -> dict[str, Any]:
        """status.drill, or the record reported since when the status does not show it yet."""
        with self._lock:
            mine = self._reported.get((ns, name))
            if mine is None or mine == published:
                self._reported.pop((ns, name), None)
                return dict(published)
            return dict(mine)

    def _throwaway(self, ns: str, name: str) -> drill.Throwaway | None | bool:
        """The drill's cluster (None: there is none; False: one of that name that is not ours)."""
        try:
            o = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, CLUSTER_PLURAL, drill.throwaway_name(name)
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        if (o["metadata"].get("labels") or {}).get(drill.DRILL_OF_LABEL) != name:
            return False
        s = o.get("status") or {}
        ready = [
            c.get("lastTransitionTime")
            for c in s.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        ]
        return drill.Throwaway(
            s.get("phase"),
            s.get("restore") or {},
            bool(o["metadata"].get("deletionTimestamp")),
            _instant(ready[0]) if ready else None,
        )

    def _newest_backup(self, ns: str, name: str) -> str | None:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, BACKUP_PLURAL)["items"]
        done = [
            ((o.get("status") or {}).get("completedAt") or "", o["metadata"]["name"])
            for o in items
            if (o.get("spec") or {}).get("clusterRef", {}).get("name") == name
            and (o.get("status") or {}).get("phase") == SUCCEEDED
        ]
        return max(done)[1] if done else None

    # ------------------------------------------------------------------ writes
    def _write(self, body: dict, record: dict[str, Any]) -> None:
        """status.drill = record: keys of the previous record it lacks are removed (a merge patch
        would keep them)."""
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        old = (body.get("status") or {}).get("drill") or {}
        patch = {**dict.fromkeys(k for k in old if k not in record), **record}
        with self._lock:
            self._reported[(ns, name)] = dict(record)
        if self.report is not None:
            self.report(ns, name, {"drill": patch})
        else:
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, ns, CLUSTER_PLURAL, name, {"status": {"drill": patch}}
            )

    def _created(self, create: Callable[[], Any], read: Callable[[], Any]) -> Any:
        """What `create` made, or what `read` finds when it exists already."""
        try:
            return create()
        except ApiException as e:
            if e.status != 409:
                raise
            return read()

    def _delete_anchor(self, ns: str, name: str) -> None:
        """The anchor Job goes, and the garbage collector takes the throwaway cluster it owns."""
        try:
            self.batch.delete_namespaced_job(drill.throwaway_name(name), ns, propagation_policy="Background")
        except ApiException as e:
            if e.status != 404:
                raise

    def _event(self, body: dict, reason: str, message: str, warning: bool = False) -> None:
        post_events(
            self.api,
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MySQLCluster", "metadata": body["metadata"]},
            [("Warning" if warning else "Normal", reason, message)],
        )


def _api_message(e: ApiException) -> str:
    """The API server's own message (a validation's names the field), else its reason."""
    try:
        return str(json.loads(e.body or "{}").get("message") or e.reason)
    except ValueError:
        return str(e.reason)


def _instant(stamp: Any) -> dt.datetime | None:
    """An RFC 3339 time of a status (seconds or finer) as a UTC datetime; None if it is not one."""
    try:
        t = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
