"""MySQLCluster handlers: create/update/resume, a loop per cluster and watches on owned Pods and
StatefulSets all end in the same idempotent pass, `Reconciler._reconcile` (through `nudge`, which
never waits behind a running pass, and `tick`, the per-cluster loop's)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from mysql_operator import metrics
from mysql_operator.api import CLUSTER_PLURAL, GROUP, VERSION
from mysql_operator.k8s.cache import Reads
from mysql_operator.k8s.reflector import start_reflectors
from mysql_operator.k8s.client import api_client, in_cluster
from mysql_operator.manifests import MANAGED_BY
from mysql_operator.pass_state import essence
from mysql_operator.passes import Passes
from mysql_operator.reconcile import Reconciler
from mysql_operator.instance_status import archiver_pod_trouble

log = logging.getLogger(__name__)
_OWNED = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "database"}
_ARCHIVER = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "binlog-archiver"}
_state: dict[str, Any] = {}


def reconciler() -> Reconciler:
    return _state["reconciler"]


def register(cfg) -> None:
    """Register the handlers on kopf's default registry (once), with cfg's intervals."""
    if _state.get("registered"):
        return
    # what each pass reads comes from watches (their own API client: a watch holds a connection);
    # namespace patterns (kopf's globs) cannot be listed: those passes read from the API server
    api = api_client()
    listable = not any(set(ns) & set("*?[!") for ns in cfg.namespaces)
    stores = (
        start_reflectors(
            api_client(),
            () if cfg.all_namespaces else cfg.namespaces,
            f"app.kubernetes.io/managed-by={MANAGED_BY}",
        )[:3]
        if listable
        else ()
    )
    reads = Reads(api, *stores, cache_secrets=True)
    _state["reconciler"] = Reconciler(
        api,
        resolver_mode=cfg.resolver,
        resync_seconds=cfg.resync_seconds,
        reads=reads,
        operator_upgrades=cfg.operator_upgrades,
        observe=metrics.observed,
    )

    @kopf.on.login()
    def login(**kwargs):
        """In a Pod: kopf's own (token file re-read on expiry). Elsewhere: the kubeconfig we
        loaded (--kubeconfig or KUBECONFIG at run time, not at import time)."""
        if in_cluster():
            return kopf.login_via_client(**kwargs)
        c = reconciler().api.configuration
        header = c.get_api_key_with_prefix("BearerToken") or c.get_api_key_with_prefix("authorization")
        scheme, _, token = (header or "").rpartition(" ")
        return kopf.ConnectionInfo(
            server=c.host,
            ca_path=c.ssl_ca_cert,
            insecure=not c.verify_ssl,
            scheme=scheme or ("Bearer" if token else None),
            token=token or None,
            certificate_path=c.cert_file,
            private_key_path=c.key_file,
        )

    @kopf.on.resume(GROUP, VERSION, CLUSTER_PLURAL)
    @kopf.on.create(GROUP, VERSION, CLUSTER_PLURAL)
    @kopf.on.update(GROUP, VERSION, CLUSTER_PLURAL)
    def cluster_changed(body, namespace, name, **_):
        # the status is the reconciler's to publish; a reconcile already running runs once more
        # with the new spec
        reconciler().reads.seen(body)
        reconciler().nudge(namespace, name, apply=True, seen=essence(body))

    # One async daemon per cluster looks at it every loop interval. An idle cluster costs one
    # asyncio wake-up and a check of the body kopf keeps current (no thread, no kopf handler
    # machinery: 100 idle clusters cost 2.4 % of a core, 4.3 % with a kopf timer each); a pass
    # runs in the pool. An unexpected error in a pass is logged with its traceback and the next
    # pass runs one interval later (kopf's default backoff, 60 s, would pause failover detection
    # that long). kopf stops the daemon when the cluster is deleted or the operator paused, as it
    # stopped the timer: it cancels the task (cancellation_timeout), which ends its sleep or its
    # wait for a pass; the pass itself runs on in its thread, and `drain` waits for the last ones.
    # The wait between passes is asyncio.sleep, not `stopped.wait`: that one costs a task and a
    # timer per wake-up (at 300 idle clusters about half of the operator's CPU).
    # At most `workers` passes at once; one past cfg.pass_deadline_seconds runs on without its
    # slot and is reported on its cluster (mysql_operator/passes.py)
    def report_overdue(body, seconds):
        meta = body["metadata"]
        metrics.pass_overdue(meta["namespace"], meta["name"], seconds is not None)
        reconciler().pass_overdue(dict(body), seconds)

    passes = _state["passes"] = Passes(cfg.workers, cfg.pass_deadline_seconds, report_overdue)

    @kopf.daemon(GROUP, VERSION, CLUSTER_PLURAL, cancellation_timeout=10.0)
    async def cluster_loop(body, namespace, name, stopped, **_):
        while not stopped:
            wait = cfg.loop_seconds
            if not reconciler().idle(body):
                reconciler().reads.seen(body)
                try:
                    result = await passes.run(body, lambda: reconciler().tick(dict(body)))
                except Exception:
                    log.exception("%s/%s: the pass failed; the next one runs in %ss", namespace, name, wait)
                    result = None
                # a failover delay ending before the next tick: look again exactly when it ends
                if result is not None and result.recheck_in is not None:
                    wait = min(wait, max(result.recheck_in, 0.05))
            await asyncio.sleep(wait)

    @kopf.on.delete(GROUP, VERSION, CLUSTER_PLURAL, optional=True)
    def cluster_deleted(namespace, name, **_):
        reconciler().forget(namespace, name)  # owned objects go by garbage collection
        metrics.forget(namespace, name)
        # its MySQLDatabases, MySQLUsers and MySQLGrants: the server is gone with it
        reconciler().sql.without_cluster(namespace, name, f"MySQLCluster {name} was deleted")

    @kopf.on.event("", "v1", "pods", labels=_OWNED)
    def pod_event(event, body, namespace, labels, **_):
        owner = labels.get("app.kubernetes.io/instance")
        if owner:
            if event.get("type") != "DELETED":
                reconciler().reads.seen_owned("Pod", body)
            reconciler().nudge(namespace, owner)

    @kopf.on.event("apps", "v1", "statefulsets", labels=_OWNED)
    def statefulset_event(event, body, namespace, labels, **_):
        owner = labels.get("app.kubernetes.io/instance")
        meta, status = body.get("metadata") or {}, body.get("status") or {}
        if owner and event.get("type") != "DELETED":
            reconciler().reads.seen_owned("StatefulSet", body)
        if owner:  # a spec changed by hand is re-applied at once (one this process applied is not)
            changed = meta.get("generation") != status.get("observedGeneration")
            reconciler().nudge(
                namespace,
                owner,
                apply=True if changed and not reconciler().reads.applied_here(body) else None,
            )

    @kopf.on.event("", "v1", "pods", labels=_ARCHIVER)
    def archiver_pod_event(event, body, namespace, labels, **_):
        """Why the binlog archiver's Pod cannot run (a tool image it cannot use, an image that
        cannot be pulled): condition BinlogArchiving at once."""
        owner = labels.get("app.kubernetes.io/instance")
        if owner:
            gone = event.get("type") == "DELETED" or (body.get("metadata") or {}).get("deletionTimestamp")
            reconciler().archiver_pod_seen(namespace, owner, "" if gone else archiver_pod_trouble(body))
            reconciler().nudge(namespace, owner)

    @kopf.on.event("apps", "v1", "deployments", labels=_ARCHIVER)
    def archiver_event(event, body, namespace, labels, **_):
        """The binlog archiver's readiness: status condition BinlogArchiving at once."""
        owner = labels.get("app.kubernetes.io/instance")
        if owner:
            gone = event.get("type") == "DELETED"
            reconciler().archiver_seen(namespace, owner, None if gone else body.get("status") or {})
            reconciler().nudge(namespace, owner)

    _state["registered"] = True


def drain() -> None:
    """Wait for the passes still running (the operator is stopping: before it releases the Lease,
    so a standby never acts on a cluster this process still acts on)."""
    passes = _state.get("passes")
    if passes is not None:
        passes.shutdown(wait=True)
