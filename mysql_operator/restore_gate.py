"""The restore gate of a new cluster with spec.restore, in three parts: `observe_restore` reads
what it needs (the restore Job and its result, where spec.restore points), `plan_restore` (pure)
decides - start the restore Job, follow it, ask every MariaDB instance for the Job's physical
copy, record the outcome - and gives the ordered writes, the Events and the status of a held
cluster, `carry_out` makes the writes. Replication stays held off until every instance is
loaded. The record's lifecycle is restoring.py; the Job's manifest manifests/restore_jobs.py."""

from __future__ import annotations


import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import certificates, clock
from mysql_operator import manifests as m
from mysql_operator import restoring
from mysql_operator.api import MySQLCluster, SpecError, parse
from mysql_operator.db.instance import Instance
from mysql_operator.db.observation import InstanceError
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION, parse_backup
from mysql_operator.backup.controller import key_problem
from mysql_operator.backup.restore_types import Source
from mysql_operator.k8s import jobs
from mysql_operator.manifests.restore_jobs import (
    restore_dns_names,
    restore_job,
    restore_job_name,
    restore_network_policy,
    restore_service,
)
from mysql_operator.manifests.common import LOAD_USER, RESTORE_USER
from mysql_operator.pods import PodView
from mysql_operator.instance_status import instance_entries
from mysql_operator.status import Event, build_status, status_changed
from mysql_operator.summary import Summary
from mysql_operator import reasons as R


log = logging.getLogger(__name__)


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


def restore_source(api, c: MySQLCluster) -> Source:
    """Effect (reads Kubernetes objects only): where spec.restore points. ValueError naming the
    field and the fix when it cannot be used. The bucket itself is only read by the restore Job."""
    r = c.spec.restore
    assert r is not None
    if r.from_backup is not None:
        try:
            backup = client.CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, c.namespace, BACKUP_PLURAL, r.from_backup
            )
        except ApiException as e:
            if e.status != 404:
                raise
            backup = None
        location = restoring.backup_location(backup, r.from_backup)
        try:
            cluster_name = parse_backup(backup).cluster_name
        except SpecError as e:
            raise ValueError(f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup}: {e}") from None
        s3 = parse_backup(backup).s3
        if s3 is None:
            owner = k.read_cluster(api, c.namespace, cluster_name)
            spec = parse(owner).spec if owner is not None else None
            s3 = spec.backup.s3 if spec is not None and spec.backup else None
        if s3 is None:
            raise ValueError(
                f"spec.restore.fromBackup.name: MySQLBackup {r.from_backup} names no storage "
                f"and its cluster {cluster_name} is gone: use spec.restore.s3 instead"
            )
        source = Source(s3, location)
    else:
        assert r.s3 is not None
        s3 = r.s3
        source = Source(s3, s3.path or "")
    secret = k.read_secret_data(api, c.namespace, s3.credentials_secret.name) or {}
    keys = (s3.credentials_secret.access_key_id_key, s3.credentials_secret.secret_access_key_key)
    missing = [key for key in keys if not secret.get(key)]
    if missing:
        raise ValueError(
            f"S3 credentials: Secret {s3.credentials_secret.name} lacks {', '.join(missing)} "
            "(or does not exist): create it with the access key id and secret access key"
        )
    sse_key_problem = key_problem(api, c.namespace, s3.sse and s3.sse.customer_key, "s3.serverSideEncryption")
    if sse_key_problem:
        raise ValueError(sse_key_problem)
    return source


def observe_restore(
    api, c: MySQLCluster, previous: Mapping[str, Any], not_ready: Sequence[str]
) -> RestoreSeen:
    """Effect (reads only): the restore Job while one runs; where spec.restore points and its key
    once a restore could start (no record yet, no primary, every instance Ready)."""
    assert c.spec.restore is not None
    record = previous.get("restore")
    phase = (record or {}).get("phase")
    if phase == restoring.RUNNING:
        found, job_pods = jobs.read_job(api, c.namespace, restore_job_name(c))
        if found is None:
            return RestoreSeen(record, None)
        job = jobs.job_result(found, job_pods, f"the restore Job {restore_job_name(c)}")
        return RestoreSeen(record, job or restoring.JOB_RUNNING, serving(job_pods))
    if phase is not None or previous.get("currentPrimary") is not None or not_ready:
        return RestoreSeen(record, None)
    key = key_problem(api, c.namespace, c.spec.restore.encryption, "spec.restore.encryption")
    try:
        return RestoreSeen(record, None, source=restore_source(api, c), key_problem=key)
    except ValueError as e:
        return RestoreSeen(record, None, source_error=str(e), key_problem=key)


def serving(job_pods: list[dict]) -> bool:
    """Pure: the restore Job serves a physical copy (MariaDB): its container is ready (its port
    answers: manifests.restore_jobs.restore_job)."""
    return any(
        st.get("name") == "restore" and st.get("ready")
        for p in job_pods
        for st in (p.get("status") or {}).get("containerStatuses") or []
    )


def not_ready(c: MySQLCluster, pods: Mapping[int, PodView], names: Mapping[int, str]) -> list[str]:
    """Pure: the wanted instances whose Pod is not Ready."""
    return [
        names.get(o, m.pod_name(c, o)) for o in range(c.spec.instances) if not (pods.get(o) and pods[o].ready)
    ]


# -- decide ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """Status fields written before the writes that follow (a restore's record before its Job)."""

    fields: Mapping[str, Any]


@dataclass(frozen=True)
class Apply:
    obj: Mapping[str, Any]


@dataclass(frozen=True)
class CreateJob:
    obj: Mapping[str, Any]


@dataclass(frozen=True)
class RestoreCertificate:
    """The restore Job's serving certificate (certificates.ensure_restore_certificate)."""


@dataclass(frozen=True)
class Restart:
    pod: str
    uid: str  # that Pod, not the one its StatefulSet starts in its place


@dataclass(frozen=True)
class DropRestoreAccount:
    """The restore has ended (succeeded, failed, its Job gone or past its deadline): the restore
    account goes from every instance, as the operator's account (drop_restore_account). The Job
    drops it itself when it ends normally; this covers every other end. Planned in the pass
    that records the end, before the record: a pass whose drop fails records nothing and the
    next pass plans it again."""


Write = Record | Apply | CreateJob | RestoreCertificate | Restart | DropRestoreAccount


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
        if action.reason not in _condition_messages(previous):  # once per reason, not every pass
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
                Record({"restore": record}),  # before the Job exists
                # where it serves a physical copy (only its manifest says if it is one), with what
                RestoreCertificate(),
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
            for key in ("durationSeconds", "gtidPosition", "bytesLoaded", "pointInTime")
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

    if _ended(record) and _ended(record) != _ended(seen.record):
        writes.append(DropRestoreAccount())
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
        writes += [Apply(m.owned(cm, owner)), Record({"restore": record})]
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
            writes.append(Restart(name, pod["metadata"].get("uid", "")))
    return dict(record), writes


def _ended(record: Mapping[str, Any] | None) -> str | None:
    phase = (record or {}).get("phase")
    return phase if phase in (restoring.SUCCEEDED, restoring.FAILED) else None


def _condition_messages(status: Mapping[str, Any]) -> set[str]:
    return {str(cond.get("message", "")) for cond in status.get("conditions") or []}


# -- act -------------------------------------------------------------------------------------------
def carry_out(
    api,
    kube: KubeOps,
    c: MySQLCluster,
    owner: Mapping[str, Any],
    writes: Sequence[Write],
    drop_account: Callable[[], None] = lambda: None,
) -> None:
    """Effect: the writes, in order (an API error raises and stops the rest); `drop_account`
    carries out DropRestoreAccount (drop_restore_account on the cluster's servers)."""
    for w in writes:
        if isinstance(w, DropRestoreAccount):
            drop_account()
        elif isinstance(w, Record):
            kube.patch_status(c.ref, w.fields)
        elif isinstance(w, Apply):
            kube.apply(w.obj)
        elif isinstance(w, CreateJob):
            kube.create_job(w.obj)
        elif isinstance(w, RestoreCertificate):
            certificates.ensure_restore_certificate(api, c, owner, clock.now())
        else:
            kube.delete_pod(c.namespace, w.pod, uid=w.uid)


def start(
    api, kube: KubeOps, c: MySQLCluster, owner: Mapping[str, Any], writes: Sequence[Write]
) -> str | None:
    """Effect: the restore Job's creation carried out; why it was refused, or None."""
    try:
        carry_out(api, kube, c, owner, writes)
    except k.ApplyError as e:
        return f"creating the restore Job: {e.message}"
    except ApiException as e:
        return f"creating the restore Job: {e.reason}"
    return None


def drop_restore_account(servers: Iterable[tuple[str, Callable[[], Instance]]]) -> None:
    """Effect: the restore account and the load account its Job makes (backup/load_account.py)
    dropped from each (name, connect as the operator's account), outside the binary log (each
    instance had them made by its own init step or Job). Where both are gone already (the Job
    dropped them), only a read; where one is there, the server is writable for the DROP (MySQL's
    super_read_only refuses it to everyone) and read-only again in the same session.
    RuntimeError naming every server where it failed (the pass is retried)."""
    failed = []
    for name, connect in servers:
        inst = connect()
        try:
            if not inst.scalar(
                "SELECT COUNT(*) FROM mysql.user WHERE user IN (%s, %s)", (RESTORE_USER, LOAD_USER)
            ):
                continue
            fenced = bool(int(inst.scalar("SELECT @@GLOBAL.read_only") or 0))
            inst.execute("SET SESSION sql_log_bin = 0")
            if fenced:
                for sql in inst.dialect.set_read_only(False):
                    inst.execute(sql)
            for user in (LOAD_USER, RESTORE_USER):
                inst.execute("DROP USER IF EXISTS %s@'%%'", (user,))
            if fenced:
                for sql in inst.dialect.set_read_only(True):
                    inst.execute(sql)
            log.info("%s: the restore account is dropped (the restore has ended)", name)
        except InstanceError as e:
            failed.append(f"{name}: {e}")
        finally:
            inst.close()
    if failed:
        raise RuntimeError(f"dropping the restore account {RESTORE_USER}: {'; '.join(failed)}")
