"""What a pass writes for its replication step, beside the status: the record of errant
transactions before a re-seed discards them (and its copy in the backup bucket), a MariaDB
re-seed's request, a forced failover's record and its annotation removed."""

from __future__ import annotations

import logging


from mysql_operator import clock
from mysql_operator import manifests as m
from mysql_operator import topology as t
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.backup import storage
from mysql_operator.manifests.backup_jobs import evidence_job
from mysql_operator.pods import promotion_succeeded
from mysql_operator import reasons as R

log = logging.getLogger(__name__)


def keep_evidence(
    kube: KubeOps, job_image: str, body, c: MySQLCluster, instance: str, gtids: str, events: list[str]
) -> str:
    """Effect: an instance's errant transactions recorded in a ConfigMap before a re-seed
    discards them (an API error raises: then nothing is discarded). Returns its name."""
    cm = m.errant_evidence(c, instance, gtids, events, clock.now().strftime("%Y%m%d%H%M%S"))
    if c.spec.deletion_policy == "Delete":
        cm = m.owned(cm, k.owner_of(body))
    kept = kube.apply(cm)
    name = cm["metadata"]["name"]
    s3 = c.spec.backup.s3 if c.spec.backup else None
    if s3 is None:
        return f"ConfigMap {name}"
    # a copy in the backup bucket, made by a tokenless Job (the bucket is the tenant's)
    job = evidence_job(c, name, s3, job_image, image_pull_policy=c.spec.image_pull_policy)
    job = m.owned(job, k.owner_of({**kept, "apiVersion": "v1", "kind": "ConfigMap"}))
    # (blocking the record's deletion would need a right on configmaps/finalizers)
    job["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
    kube.create_job(job)
    where = storage.describe(s3, storage.join_key(s3.prefix, "evidence", name))
    return f"ConfigMap {name}, copied to {where} by Job {job['metadata']['name']}"


def request_seed(kube: KubeOps, body, c: MySQLCluster, instance: str, donor_host: str) -> None:
    """Effect (MariaDB re-seed): the request for `instance`'s Pod to start on a copy of the
    donor's data (ConfigMap <name>-reseed, read by the Pod's `seed` init container), then the
    Pod deleted so that its StatefulSet starts it again. One request at a time: it replaces
    any earlier one (those were carried out, or are no longer wanted)."""
    cm = m.reseed_request(c, instance, donor_host, clock.now().strftime("%Y%m%d%H%M%S"))
    kube.apply(m.owned(cm, k.owner_of(body)))
    kube.delete_pod(c.namespace, instance)


def force_failover_done(kube: KubeOps, body, decision: t.Decision, steps, secrets) -> None:
    """Effect: a forced failover is recorded (status.forcedFailover, a Warning Event) and its
    annotation removed; an annotation no failover needed is removed too (it must never force
    a later one). Kept while the failover may still come (the delay is running)."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    asked = redact(str((meta.get("annotations") or {}).get(t.FORCE_FAILOVER_ANNOTATION, "")), secrets)
    if isinstance(decision, t.WaitForDelay):
        return
    if isinstance(decision, t.Failover) and decision.forced:
        if not promotion_succeeded(decision.to, steps):
            return  # tried again next pass, still forced
        event = (
            "Warning",
            R.FAILOVER_FORCED,
            f"{decision.to} promoted on request ({asked[:256]}): {decision.reason}",
        )
        kube.post_events(body, [event])  # before the status, as in executor.carry_out
        kube.patch_status(
            body,
            {
                "forcedFailover": {
                    "at": clock.stamp(),
                    "from": decision.from_,
                    "to": decision.to,
                    "requestedBy": asked[:256],
                    "reason": redact(decision.reason, secrets)[:1024],
                }
            },
        )
    else:
        event = (
            "Normal",
            R.FORCE_FAILOVER_UNUSED,
            f"annotation {t.FORCE_FAILOVER_ANNOTATION} removed: no failover needed forcing ({decision.kind})",
        )
        kube.post_events(body, [event])
    kube.remove_cluster_annotation(body, t.FORCE_FAILOVER_ANNOTATION)
    log.warning("%s/%s %s: %s", ns, name, event[1], event[2])
