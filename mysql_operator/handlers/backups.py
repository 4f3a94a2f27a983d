"""kopf wiring for MySQLBackup and backup schedules/retention: each handler calls one method of
the one BackupController (mysql_operator/backup/controller.py). Importing this module registers
the handlers."""

from __future__ import annotations

import kopf

from mysql_operator.api import BACKUP_PLURAL, CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.backup.backup_status import PENDING, RUNNING
from mysql_operator.backup.controller import BackupController
from mysql_operator.backup.drill import REQUEST_ANNOTATION
from mysql_operator.backup.drill_controller import DrillController
from mysql_operator.handlers.cluster import reconciler
from mysql_operator.k8s.client import api_client
from mysql_operator.manifests.backup_jobs import DELETE_DATA_ANNOTATION

_controller: BackupController | None = None
_drills: DrillController | None = None


def controller() -> BackupController:
    global _controller
    if _controller is None:
        # what the cluster's status says of its backups goes out with the cluster's next pass
        _controller = BackupController(
            api_client(), report=lambda ns, name, fields: reconciler().report(ns, name, fields)
        )
    return _controller


def drills() -> DrillController:
    global _drills
    if _drills is None:
        _drills = DrillController(
            api_client(), report=lambda ns, name, fields: reconciler().report(ns, name, fields)
        )
    return _drills


# ---------------------------------------------------------------------- kopf handlers (thin)


@kopf.on.resume(GROUP, VERSION, BACKUP_PLURAL)
@kopf.on.create(GROUP, VERSION, BACKUP_PLURAL)
def backup_created(body, **_):
    if ((body.get("status") or {}).get("phase")) is None:
        controller().start(dict(body))


@kopf.timer(
    GROUP,
    VERSION,
    BACKUP_PLURAL,
    interval=10,
    sharp=False,
    when=lambda body, **_: (body.get("status") or {}).get("phase") in (PENDING, RUNNING),
)
def backup_progress(body, **_):
    controller().track(dict(body))


@kopf.timer(
    GROUP,
    VERSION,
    CLUSTER_PLURAL,
    interval=30,
    sharp=False,
    when=lambda spec, **_: bool((spec or {}).get("backup")),
)
def backup_schedule(body, **_):
    controller().tick(dict(body))


def _drills_concern(body) -> bool:
    """spec.backup.drill set, a drill asked for, or one running (it ends even if the spec lost it)."""
    spec, meta = body.get("spec") or {}, body.get("metadata") or {}
    return (
        bool((spec.get("backup") or {}).get("drill"))
        or REQUEST_ANNOTATION in (meta.get("annotations") or {})
        or ((body.get("status") or {}).get("drill") or {}).get("phase") == RUNNING
    )


@kopf.timer(
    GROUP, VERSION, CLUSTER_PLURAL, interval=10, sharp=False, when=lambda body, **_: _drills_concern(body)
)
def restore_drills(body, **_):
    drills().tick(dict(body))


@kopf.on.delete(GROUP, VERSION, BACKUP_PLURAL, annotations={DELETE_DATA_ANNOTATION: "true"})
def backup_deleted(body, **_):
    if not controller().data_deleted(dict(body)):
        raise kopf.TemporaryError("waiting for the delete Job to remove the backup's objects", delay=10)
