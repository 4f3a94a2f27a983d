"""The restore gate of a new cluster with spec.restore: find the backup to restore, start the
restore Job, follow it, and hold replication off until every instance is loaded. The record's
lifecycle is restoring.py; the Job's manifest manifests/backup_jobs.py."""

from __future__ import annotations


import logging
import re
from typing import Any, Callable, Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import certificates, clock
from mysql_operator import manifests as m
from mysql_operator import restoring
from mysql_operator.api import MySQLCluster, SpecError, parse
from mysql_operator.db.instance import redact
from mysql_operator.k8s import objects as k
from mysql_operator.api import BACKUP_PLURAL, GROUP, VERSION, parse_backup
from mysql_operator.backup.controller import key_problem
from mysql_operator.backup.restore import Source
from mysql_operator.k8s import jobs
from mysql_operator.manifests.backup_jobs import (
    restore_dns_names,
    restore_job,
    restore_job_name,
    restore_service,
)
from mysql_operator.status import Result, Summary, build_status, instance_entries, status_changed


log = logging.getLogger(__name__)


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


def restore_gate(
    api,
    job_image: str,
    body,
    c: MySQLCluster,
    previous,
    pods,
    names,
    passwords,
    ready: int,
    applied: bool,
    secret_error: str | None = None,
    patch_status: Callable[[str, str, Mapping[str, Any]], Any] | None = None,
) -> Result | None:
    """spec.restore at creation: None when the reconcile may go on (no restore, or it succeeded);
    else the Result of a loop that held the cluster (Restoring / RestoreFailed) and published it.
    The load itself runs in the restore Job (see mysql_operator.restoring). `patch_status`: how
    the cluster's status is written (the reconciler's, which reads its own writes back)."""
    if c.spec.restore is None:
        return None
    write = patch_status or (lambda ns, name, status: k.patch_status(api, ns, name, status))
    record = previous.get("restore")
    not_ready = [
        names.get(o, m.pod_name(c, o)) for o in range(c.spec.instances) if not (pods.get(o) and pods[o].ready)
    ]
    job: Mapping[str, Any] | str | None = None
    waiting_key: str | None = None
    if (record or {}).get("phase") == restoring.RUNNING:
        found, job_pods = jobs.read_job(api, c.namespace, restore_job_name(c))
        if found is not None:
            job = (
                jobs.job_result(found, job_pods, f"the restore Job {restore_job_name(c)}")
                or restoring.JOB_RUNNING
            )
        if job == restoring.JOB_RUNNING and c.spec.flavor == "mariadb" and serving(job_pods):
            record = request_restore_copies(api, c, body, record or {}, write)
    action = restoring.decide(True, record, previous.get("currentPrimary"), not_ready, job)
    if isinstance(action, restoring.Proceed):
        return None
    if isinstance(action, restoring.Start):
        # e.g. the user's Secret lacks restore-password, or the encryption key's Secret is missing
        waiting_key = key_problem(api, c.namespace, c.spec.restore.encryption, "spec.restore.encryption")
        waiting = secret_error or waiting_key
        if waiting:
            action = restoring.WaitForInstances(waiting)
    secrets = list(passwords.values())
    events: list[tuple[str, str, str]] = []
    if isinstance(action, restoring.WaitForInstances) and action.reason in (secret_error, waiting_key):
        if action.reason not in _condition_messages(previous):  # once per reason, not every pass
            events.append(("Warning", "RestoreWaiting", redact(action.reason, secrets)))
    patch: dict[str, Any] = {}
    if isinstance(action, restoring.Start):
        described = restoring.describe_source(c.spec.restore.from_backup, c.spec.restore.s3)
        started = clock.stamp()
        try:
            source = restore_source(api, c)
            record = restoring.record(restoring.RUNNING, described, started, job=restore_job_name(c))
            write(c.namespace, c.name, {"restore": record})  # before the Job exists
            # where it serves a physical copy (only its manifest says if it is one), with what
            certificates.ensure_restore_certificate(api, c, k.owner_of(body), clock.now())
            k.server_side_apply(api, m.owned(restore_service(c), k.owner_of(body)))
            jobs.create_job(
                api,
                m.owned(
                    restore_job(
                        c, source.s3, source.path, job_image, image_pull_policy=c.spec.image_pull_policy
                    ),
                    k.owner_of(body),
                ),
            )
        except (ValueError, ApiException) as e:
            message = redact(
                str(e) if isinstance(e, ValueError) else f"creating the restore Job: {e.reason}", secrets
            )
            record = restoring.record(restoring.FAILED, described, started, clock.stamp(), message)
            patch["restore"] = record
            events.append(("Warning", "RestoreFailed", message))
            action = restoring.Failed(message)
        else:
            events.append(
                (
                    "Normal",
                    "RestoreStarted",
                    f"restoring {described} into every instance (Job {restore_job_name(c)})",
                )
            )
            action = restoring.InProgress()
    elif isinstance(action, restoring.Finished):
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
            record.get("startedAt", clock.stamp()),
            clock.stamp(),
            message,
            **({"job": record["job"]} if record.get("job") else {}),
            **extra,
        )
        patch["restore"] = record
        if ok:
            primary = m.pod_name(c, c.spec.primary if c.spec.primary is not None else 0)
            patch["currentPrimary"] = primary  # the engine adopts: promote it, attach the others
        events.append(
            ("Normal", "RestoreSucceeded", message) if ok else ("Warning", "RestoreFailed", message)
        )
        log.log(logging.INFO if ok else logging.WARNING, "%s/%s restore: %s", c.namespace, c.name, message)
        action = restoring.InProgress() if ok else restoring.Failed(message)
    elif isinstance(action, restoring.Failed) and (record or {}).get("phase") != restoring.FAILED:
        # the Job is gone, or a primary without a record: recorded once, with its Event
        record = restoring.record(
            restoring.FAILED,
            (record or {}).get("source", ""),
            (record or {}).get("startedAt", clock.stamp()),
            clock.stamp(),
            action.message,
        )
        patch["restore"] = record
        events.append(("Warning", "RestoreFailed", action.message))
    if patch:
        write(c.namespace, c.name, patch)

    ordinals = sorted(set(range(c.spec.instances)) | set(pods))
    all_names = {o: m.pod_name(c, o) for o in ordinals}
    summary = Summary(
        instances=c.spec.instances,
        generation=c.generation,
        ready=ready,
        entries=tuple(instance_entries(ordinals, all_names, pods, {}, {}, {}, None)),
    )
    now = clock.stamp()
    status = restoring.overlay_status(build_status(summary, previous, now), action, record, now)
    if "currentPrimary" in patch:
        status["currentPrimary"] = patch["currentPrimary"]
    if status_changed(previous, status):
        write(c.namespace, c.name, status)
    if events:
        k.post_events(api, body, events)
    return Result(phase=status["phase"], applied=applied, status={**previous, **status})


def serving(job_pods: list[dict]) -> bool:
    """Pure: the restore Job serves a physical copy (MariaDB): its container is ready (its port
    answers: manifests.backup_jobs.restore_job)."""
    return any(
        st.get("name") == "restore" and st.get("ready")
        for p in job_pods
        for st in (p.get("status") or {}).get("containerStatuses") or []
    )


def request_restore_copies(api, c: MySQLCluster, body, record: Mapping[str, Any], write) -> dict[str, Any]:
    """Effect (MariaDB, a physical backup's restore): every instance is asked to start on a copy
    from the restore Job (the re-seed request, marked restore, named after the restore's start;
    when, recorded in status.restore.copiesRequestedAt), and every Pod that started before that
    is deleted, for its StatefulSet to start it again: its `seed` init container then receives the
    copy. Level-triggered: a pass after an operator restart deletes the Pods the last one did not.
    Returns the record."""
    requested_at = record.get("copiesRequestedAt")
    if not requested_at:
        stamp = re.sub(r"[^0-9]", "", str(record.get("startedAt", ""))) or "0"
        line = f"{restore_dns_names(c)[0]} {stamp} restore"
        cm = m.reseed_requests(c, {m.pod_name(c, i): line for i in range(c.spec.instances)})
        k.server_side_apply(api, m.owned(cm, k.owner_of(body)))
        requested_at = clock.stamp()
        record = {**record, "copiesRequestedAt": requested_at}
        write(c.namespace, c.name, {"restore": record})
        log.info("%s/%s restore: every instance asked for a copy from the restore Job", c.namespace, c.name)
    wanted = {m.pod_name(c, i) for i in range(c.spec.instances)}
    selector = ",".join(f"{key}={value}" for key, value in m.selector_labels(c).items())
    core = client.CoreV1Api(api)
    for pod in core.list_namespaced_pod(c.namespace, label_selector=selector).items:
        started = pod.status.start_time
        if pod.metadata.name in wanted and started is not None and clock.stamp(started) < requested_at:
            try:
                core.delete_namespaced_pod(pod.metadata.name, c.namespace)
            except ApiException as e:
                if e.status != 404:
                    raise
    return dict(record)


def _condition_messages(status: Mapping[str, Any]) -> set[str]:
    return {str(cond.get("message", "")) for cond in status.get("conditions") or []}
