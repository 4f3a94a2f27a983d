"""The Jobs that work on a tenant's bytes (backups, restores): the image they run, creating one,
and reading what it reported.

Such a Job has no API credentials; it reports by writing one JSON object to its termination
message (`{"ok": bool, "message": str, ...}`), which the kubelet copies into the Pod's status.
`job_result` (pure) turns the Job and its Pods into that object once the Job finished.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

from mysql_operator import __version__
from mysql_operator.manifests.common import EXPORTER_IMAGE, TOOLS_REPOSITORY


def job_image() -> str:
    """The operator's own image (the chart sets MYSQL_OPERATOR_IMAGE to the image it runs)."""
    return os.environ.get("MYSQL_OPERATOR_IMAGE", f"localhost/mysql-operator:{__version__}")


def exporter_image() -> str:
    """The metrics sidecar's image (the chart sets MYSQL_OPERATOR_EXPORTER_IMAGE: exporterImage)."""
    return os.environ.get("MYSQL_OPERATOR_EXPORTER_IMAGE") or EXPORTER_IMAGE


def tools_repository() -> str:
    """The repository of the Jobs' tool images (the chart sets MYSQL_OPERATOR_TOOLS_IMAGE:
    toolsImage.repository); a cluster's tag is FLAVOR-SERIES (manifests.tenant_jobs.tools_image)."""
    return os.environ.get("MYSQL_OPERATOR_TOOLS_IMAGE") or TOOLS_REPOSITORY


def job_result(
    job: Mapping[str, Any] | None, pods: list[Mapping[str, Any]], what: str = "the Job"
) -> dict[str, Any] | None:
    """Pure: None while the Job runs; once it finished, what it reported, with "ok" True only if
    the Job completed AND its result says ok. A Job that is gone, or failed without a result
    (deadline, evicted, image not found), gets a message saying so."""
    if job is None:
        return {"ok": False, "message": f"{what} disappeared before it finished"}
    status = job.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    done = "Complete" in conditions or status.get("succeeded")
    failed = "Failed" in conditions or status.get("failed")
    if not done and not failed:
        return None
    result: dict[str, Any] = {}
    for p in pods:
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            msg = ((cs.get("state") or {}).get("terminated") or {}).get("message")
            if msg:
                try:
                    parsed = json.loads(msg)
                    result = (
                        parsed if isinstance(parsed, dict) else {"ok": False, "message": msg.strip()[-500:]}
                    )
                except ValueError:
                    result = {"ok": False, "message": msg.strip()[-500:]}
    if done and result.get("ok") is True:
        return result
    message = (
        result.get("message")
        or (conditions.get("Failed") or {}).get("message")
        or f"{what} failed without a message"
    )
    return {**result, "ok": False, "message": str(message)}


def owned_by(job: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pure: the Pods whose controller ownerReference is this Job, by its uid. The `job-name` label
    alone is anyone's to set: a Pod labelled so by someone who may create Pods in the namespace
    must not become the Job's result."""
    uid = (job.get("metadata") or {}).get("uid")
    return [
        p
        for p in pods
        if uid
        and any(
            ref.get("uid") == uid and ref.get("controller") is True
            for ref in (p.get("metadata") or {}).get("ownerReferences") or []
        )
    ]


def create_job(api: client.ApiClient, job: Mapping[str, Any]) -> None:
    """Create the Job; one that exists already (an earlier pass made it) is fine."""
    try:
        client.BatchV1Api(api).create_namespaced_job(job["metadata"]["namespace"], dict(job))
    except ApiException as e:
        if e.status != 409:
            raise


def read_job(api: client.ApiClient, namespace: str, name: str) -> tuple[dict | None, list[dict]]:
    """The Job (None if absent) and its Pods (those it owns: owned_by), as plain dicts."""
    try:
        job = api.sanitize_for_serialization(client.BatchV1Api(api).read_namespaced_job(name, namespace))
    except ApiException as e:
        if e.status != 404:
            raise
        return None, []
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
    return job, owned_by(job, [api.sanitize_for_serialization(p) for p in pods])
