"""Restore at creation (`spec.restore`): every wanted instance is loaded from the same verified
backup BEFORE replication is set up; only then is a primary recorded and the replication engine
adopts the instances (promote the primary, attach the replicas).

Why every instance and not "primary, then seed the replicas from it": `restore_into` loads the
dump outside the binary log and sets the server's GTID position to the backup's. Loading the
same checksum-verified object into each new, empty instance gives every instance exactly the
primary's data at exactly the same GTID position - what a dump of the primary would give -
without a second dump/copy mechanism. Nothing can write in between: the engine is held off (no
instance is writable, no Pod carries a role label, so no Service routes to any of them).
Replicas then replicate everything the primary writes after the restore.

Never a half-restored Ready cluster: while a restore runs the phase is Restoring and Ready is
False (reason Restoring); a failure (any instance) is phase Failed, Ready False reason
RestoreFailed, a Warning Event, and the engine stays held off. A restore interrupted by an
operator restart is a failure too (the instances may hold a partial load).

Pure functions first (table-tested in tests/unit/test_restoring.py), then the runner (threads,
so the operator never blocks other clusters for the minutes a load takes).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from mysql_operator.api import S3

log = logging.getLogger(__name__)

RUNNING, SUCCEEDED, FAILED = "Running", "Succeeded", "Failed"


# ------------------------------------------------------------------------------------ decisions
@dataclass(frozen=True)
class Proceed:
    """No restore to do (none asked, or it succeeded): reconcile as usual."""


@dataclass(frozen=True)
class WaitForInstances:
    reason: str


@dataclass(frozen=True)
class Start:
    pass


@dataclass(frozen=True)
class InProgress:
    pass


@dataclass(frozen=True)
class Failed:
    message: str


RestoreAction = Proceed | WaitForInstances | Start | InProgress | Failed

INTERRUPTED = ("the restore was interrupted (operator restarted): the instances may hold a partial "
               "load, so this cluster never becomes Ready; delete the MySQLCluster and its "
               "PersistentVolumeClaims and create it again")


def decide(wants_restore: bool, record: Mapping[str, Any] | None, current_primary: str | None,
           not_ready: Sequence[str], running_here: bool) -> RestoreAction:
    """What to do about spec.restore this loop.

    record: status.restore; not_ready: wanted instances whose Pod is not Ready yet;
    running_here: this operator process runs the restore now."""
    if not wants_restore:
        return Proceed()
    phase = (record or {}).get("phase")
    if phase == SUCCEEDED:
        return Proceed()
    if phase == FAILED:
        return Failed(record.get("message") or "the restore failed")
    if phase == RUNNING:
        return InProgress() if running_here else Failed(INTERRUPTED)
    if current_primary is not None:
        # a primary was recorded without a restore record: never load over a serving cluster
        return Failed("spec.restore: the cluster already has a primary and no restore record; a "
                      "restore only goes into a new cluster: create a new MySQLCluster")
    if not_ready:
        return WaitForInstances("restore waits for every instance: " + ", ".join(not_ready) + " not Ready")
    return Start()


def describe_source(from_backup: str | None, s3: S3 | None) -> str:
    if from_backup is not None:
        return f"mysqlbackup/{from_backup}"
    assert s3 is not None
    prefix = f"{s3.prefix.strip('/')}/" if s3.prefix.strip("/") else ""
    return f"s3://{s3.bucket}/{prefix}{(s3.path or '').strip('/')}"


def backup_location(backup_body: Mapping[str, Any] | None, name: str) -> str:
    """The Succeeded MySQLBackup's status.location; ValueError with the fix otherwise."""
    if backup_body is None:
        raise ValueError(f"spec.restore.fromBackup.name: MySQLBackup {name} does not exist in this "
                         "namespace: name an existing backup, or use spec.restore.s3")
    status = backup_body.get("status") or {}
    if status.get("phase") != SUCCEEDED or not status.get("location"):
        raise ValueError(f"spec.restore.fromBackup.name: MySQLBackup {name} is "
                         f"{status.get('phase') or 'not finished'}, not Succeeded: restore from a "
                         "backup that succeeded")
    return status["location"]


def record(phase: str, source: str, started: str, completed: str | None = None, message: str = "",
           **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": phase, "source": source, "startedAt": started, "message": message}
    if completed is not None:
        out["completedAt"] = completed
    out.update(extra)
    return out


def overlay_status(status: Mapping[str, Any], action: RestoreAction, restore_record: Mapping[str, Any] | None,
                   now: str) -> dict[str, Any]:
    """Pure: the cluster status while a restore holds it: phase Restoring/Failed, Ready and
    Available False (reason Restoring/RestoreFailed), Degraded True on failure, status.restore."""
    out = dict(status)
    if restore_record:
        out["restore"] = dict(restore_record)
    if isinstance(action, Proceed):
        return out
    failed = isinstance(action, Failed)
    reason = "RestoreFailed" if failed else "Restoring"
    if isinstance(action, Failed):
        message = action.message
    elif isinstance(action, WaitForInstances):
        message = action.reason
    else:
        message = f"restoring {(restore_record or {}).get('source', 'the backup')} into every instance"
    wanted = {"Ready": "False", "Available": "False", "Progressing": "False" if failed else "True",
              "Degraded": "True" if failed else "False"}
    out["phase"] = "Failed" if failed else "Restoring"
    conds = []
    for c in out.get("conditions") or []:
        c = dict(c)
        if c.get("type") in wanted:
            if c.get("status") != wanted[c["type"]]:
                c["lastTransitionTime"] = now
            c.update(status=wanted[c["type"]], reason=reason,
                     message="" if c["type"] == "Degraded" and not failed else message)
        conds.append(c)
    out["conditions"] = conds
    return out


# ------------------------------------------------------------------------------------ runner
@dataclass(frozen=True)
class Job:
    """One restore: `load(name)` restores one instance (raises on failure, with a redacted text)."""

    key: tuple[str, str]
    instances: tuple[str, ...]
    load: Callable[[str], Any]
    done: Callable[[bool, str, float], None]  # (ok, message, seconds)


class Runner:
    """Runs restores in background threads, one per cluster, the instances of one cluster in
    parallel. `running(key)` tells a reconcile whether this process runs that cluster's restore."""

    def __init__(self):
        self._threads: dict[tuple[str, str], threading.Thread] = {}
        self._final: dict[tuple[str, str], dict[str, Any]] = {}
        self._guard = threading.Lock()

    def set_final(self, key: tuple[str, str], restore_record: Mapping[str, Any]) -> None:
        """The outcome this process wrote: a reconcile whose body predates it waits for a fresh one."""
        with self._guard:
            self._final[key] = dict(restore_record)

    def final(self, key: tuple[str, str]) -> dict[str, Any] | None:
        with self._guard:
            return self._final.get(key)

    def forget(self, key: tuple[str, str]) -> None:
        with self._guard:
            self._final.pop(key, None)

    def running(self, key: tuple[str, str]) -> bool:
        with self._guard:
            t = self._threads.get(key)
            return t is not None and t.is_alive()

    def start(self, job: Job) -> bool:
        with self._guard:
            t = self._threads.get(job.key)
            if t is not None and t.is_alive():
                return False
            t = threading.Thread(target=self._run, args=(job,), name=f"restore-{job.key[0]}-{job.key[1]}",
                                 daemon=True)
            self._threads[job.key] = t
            t.start()
            return True

    def wait(self, key: tuple[str, str], timeout: float | None = None) -> None:
        with self._guard:
            t = self._threads.get(key)
        if t is not None:
            t.join(timeout)

    @staticmethod
    def _run(job: Job) -> None:
        t0 = time.monotonic()
        errors: list[str] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(job.instances))) as pool:
            futures = {pool.submit(job.load, n): n for n in job.instances}
            for f in concurrent.futures.as_completed(futures):
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 - reported, never raised in a thread
                    errors.append(f"{futures[f]}: {e}")
        seconds = time.monotonic() - t0
        try:
            if errors:
                job.done(False, "; ".join(sorted(errors)), seconds)
            else:
                job.done(True, f"restored into {', '.join(job.instances)} in {seconds:.1f}s", seconds)
        except Exception:  # noqa: BLE001
            log.exception("recording the outcome of restore %s/%s", *job.key)
