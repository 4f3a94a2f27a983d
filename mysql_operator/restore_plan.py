"""The restore gate's plan (restore_gate.py carries it out): from what a pass found of a cluster
restored at creation (`RestoreSeen`), the writes in order - the record, the restore Job, its
certificate, the copies asked of MariaDB instances, the restore account dropped - then the
Events and the status (`plan_restore`). Pure."""

from __future__ import annotations


import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


from mysql_operator import manifests as m
from mysql_operator import restoring
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.backup.restore_types import Source
from mysql_operator.manifests.restore_jobs import (
    restore_dns_names,
    restore_job,
    restore_job_name,
    restore_network_policy,
    restore_service,
)
from mysql_operator.pods import PodView
from mysql_operator.instance_status import instance_entries
from mysql_operator.status import Event, build_status, status_changed
from mysql_operator.summary import Summary
from mysql_operator.writes import Apply, Call, CreateJob, DeletePod, PatchStatus, Write
from mysql_operator import reasons as R


# -- observe ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RestoreSeen:
    """What the gate reads before it decides."""

    record: Mapping[str, Any] | None  # status.restore
    job: Mapping[str, Any] | str | None  # the Job's result, restoring.JOB_RUNNING, None: no Job
    job_serving: bool = False  # the Job serves a physical copy (MariaDB): its container is ready
    source: Source | None = None  # where spec.restore points (read once every instance is Ready)
    source_error: str | None = None  # why it cannot be used, naming the field and the fix
    key_problem: str | None = None  # the restore's encryption key Secret is missing or incomplete


def not_ready(c: MySQLCluster, pods: Mapping[int, PodView], names: Mapping[int, str]) -> list[str]:
    """Pure: the wanted instances whose Pod is not Ready."""
    return [
        names.get(o, m.pod_name(c, o)) for o in range(c.spec.instances) if not (pods.get(o) and pods[o].ready)
    ]


# -- decide ----------------------------------------------------------------------------------------
# the restore's two named effects, carried out by restore_gate.carry_out in their place:
# the restore Job's serving certificate (restore_gate.ensure_restore_certificate)
RESTORE_CERTIFICATE = Call("restore certificate")
# the restore has ended (succeeded, failed, its Job gone or past its deadline): the restore
# account goes from every instance, as the operator's account (drop_restore_account). The Job
# drops it itself when it ends normally; this covers every other end. Planned in the pass that
# records the end, before the record: a pass whose drop fails records nothing and the next pass
# plans it again.
DROP_RESTORE_ACCOUNT = Call("drop restore account")


@dataclass(frozen=True)
class RestorePlan:
    """What the gate does in one pass. `held` False: the restore is done (or none was asked for),
    the pass goes on. Otherwise `writes` in order (an error stops the pass), then `start` - the
    restore Job's creation, in order; when it is refused the pass plans again with the error -
    then the Events and the status (written when `changed`)."""

    held: bool
    writes: tuple[Write, ...] = ()
    start: tuple[Write, ...] = ()
    events: tuple[Event, ...] = ()
    status: dict[str, Any] | None = None
    changed: bool = False


def plan_restore(
    c: MySQLCluster,
    owner: Mapping[str, Any],
    seen: RestoreSeen,
    previous: Mapping[str, Any],
    pods: Mapping[int, PodView],
    listed: Sequence[Mapping[str, Any]],
    ready: int,
    secrets: Sequence[str],
    secret_error: str | None,
    job_image: str,
    tools_repository: str,
    now: str,
    start_error: str | None = None,
) -> RestorePlan:
    """Pure: the gate's pass (see RestorePlan). `listed`: the cluster's Pods; `secrets`: redacted
    from every message; `start_error`: why the restore Job could not be created (a second plan)."""
    assert c.spec.restore is not None
    names = {o: m.pod_name(c, o) for o in range(c.spec.instances)}
    record = seen.record
    writes: list[Write] = []
    events: list[Event] = []
    if seen.job == restoring.JOB_RUNNING and c.spec.flavor == "mariadb" and seen.job_serving:
        asked = bool((record or {}).get("copiesRequestedAt"))
        record, writes = copies(c, owner, record or {}, listed, now)
        if not asked:
            events.append(
                (
                    "Normal",
                    R.RESTORE_COPYING,
                    "every instance restarts to receive the restore Job's physical copy",
                )
            )
    action = restoring.decide(
        True, record, previous.get("currentPrimary"), not_ready(c, pods, names), seen.job
    )
    if isinstance(action, restoring.Proceed):
        return RestorePlan(held=False, writes=tuple(writes))
    if isinstance(action, restoring.Start):
        # e.g. the user's Secret lacks restore-password, or the encryption key's Secret is missing
        waiting = secret_error or seen.key_problem
        if waiting:
            action = restoring.WaitForInstances(waiting)
    if isinstance(action, restoring.WaitForInstances) and action.reason in (secret_error, seen.key_problem):
        if action.reason not in condition_messages(previous):  # once per reason, not every pass
            events.append(("Warning", R.RESTORE_WAITING, redact(action.reason, secrets)))
    start: list[Write] = []
    primary: str | None = None
    if isinstance(action, restoring.Start):
        described = restoring.describe_source(c.spec.restore.from_backup, c.spec.restore.s3)
        error = seen.source_error or start_error
        if error is None and seen.source is not None:
            record = restoring.record(restoring.RUNNING, described, now, job=restore_job_name(c))
            job = restore_job(
                c,
                seen.source.s3,
                seen.source.path,
                job_image,
                image_pull_policy=c.spec.image_pull_policy,
                tools_repository=tools_repository,
            )
            start = [
                PatchStatus({"restore": record}),  # before the Job exists
                # where it serves a physical copy (only its manifest says if it is one), with what
                RESTORE_CERTIFICATE,
                Apply(m.owned(restore_service(c), owner)),
                Apply(m.owned(restore_network_policy(c), owner)),  # its port: this cluster's servers only
                CreateJob(m.owned(job, owner)),
            ]
            events.append(
                (
                    "Normal",
                    R.RESTORE_STARTED,
                    f"restoring {described} into every instance (Job {restore_job_name(c)})",
                )
            )
            action = restoring.InProgress()
        else:
            message = redact(error or "spec.restore: no source", secrets)
            record = restoring.record(restoring.FAILED, described, now, now, message)
            events.append(("Warning", R.RESTORE_FAILED, message))
            action = restoring.Failed(message)
    elif isinstance(action, restoring.Finished):
        assert record is not None
        result = action.result
        ok = bool(result.get("ok"))
        message = redact(str(result.get("message") or ""), secrets)[:1024]
        extra = {
            key: result[key]
            for key in (
                "durationSeconds",
                "gtidPosition",
                "bytesLoaded",
                "pointInTime",
                "tablesChecked",
                "checksPassed",
                "phases",
            )
            if key in result
        }
        record = restoring.record(
            restoring.SUCCEEDED if ok else restoring.FAILED,
            record.get("source", ""),
            record.get("startedAt", now),
            now,
            message,
            **({"job": record["job"]} if record.get("job") else {}),
            **extra,
        )
        if ok:  # the engine adopts: promote it, attach the others
            primary = m.pod_name(c, c.spec.primary if c.spec.primary is not None else 0)
        events.append(
            ("Normal", R.RESTORE_SUCCEEDED, message) if ok else ("Warning", R.RESTORE_FAILED, message)
        )
        action = restoring.InProgress() if ok else restoring.Failed(message)
    elif isinstance(action, restoring.Failed) and (record or {}).get("phase") != restoring.FAILED:
        # the Job is gone, or a primary without a record: recorded once, with its Event
        record = restoring.record(
            restoring.FAILED,
            (record or {}).get("source", ""),
            (record or {}).get("startedAt", now),
            now,
            action.message,
        )
        events.append(("Warning", R.RESTORE_FAILED, action.message))

    if job_ended(record) and job_ended(record) != job_ended(seen.record):
        writes.append(DROP_RESTORE_ACCOUNT)
    ordinals = sorted(set(range(c.spec.instances)) | set(pods))
    summary = Summary(
        instances=c.spec.instances,
        generation=c.generation,
        ready=ready,
        entries=tuple(
            instance_entries(ordinals, {o: m.pod_name(c, o) for o in ordinals}, pods, {}, {}, {}, None)
        ),
    )
    status = restoring.overlay_status(build_status(summary, previous, now), action, record, now)
    if primary is not None:
        status["currentPrimary"] = primary
    return RestorePlan(
        True, tuple(writes), tuple(start), tuple(events), status, status_changed(previous, status)
    )


def copies(
    c: MySQLCluster,
    owner: Mapping[str, Any],
    record: Mapping[str, Any],
    listed: Sequence[Mapping[str, Any]],
    now: str,
) -> tuple[dict[str, Any], list[Write]]:
    """Pure (MariaDB, a physical backup's restore, once the Job serves its copy): every instance
    is asked to start on a copy from the restore Job (the re-seed request, marked restore, named
    after the restore's start; when, recorded in status.restore.copiesRequestedAt), and every Pod
    that started before that is restarted, for its `seed` init container to receive the copy.
    Level-triggered: a pass after an operator restart restarts the Pods the last one did not.
    The record and the writes."""
    writes: list[Write] = []
    requested_at = record.get("copiesRequestedAt")
    if not requested_at:
        stamp = re.sub(r"[^0-9]", "", str(record.get("startedAt", ""))) or "0"
        line = f"{restore_dns_names(c)[0]} {stamp} restore"
        cm = m.reseed_requests(c, {m.pod_name(c, i): line for i in range(c.spec.instances)})
        requested_at = now
        record = {**record, "copiesRequestedAt": requested_at}
        writes += [Apply(m.owned(cm, owner)), PatchStatus({"restore": record})]
    wanted = {m.pod_name(c, i) for i in range(c.spec.instances)}
    for pod in listed:
        started = (pod.get("status") or {}).get("startTime")
        name = pod["metadata"]["name"]
        if (
            name in wanted
            and started
            and not pod["metadata"].get("deletionTimestamp")
            and started[:19] < requested_at[:19]  # to the second, in any ISO form
        ):
            writes.append(DeletePod(name, pod["metadata"].get("uid", "")))
    return dict(record), writes


def job_ended(record: Mapping[str, Any] | None) -> str | None:
    phase = (record or {}).get("phase")
    return phase if phase in (restoring.SUCCEEDED, restoring.FAILED) else None


def condition_messages(status: Mapping[str, Any]) -> set[str]:
    return {str(cond.get("message", "")) for cond in status.get("conditions") or []}
