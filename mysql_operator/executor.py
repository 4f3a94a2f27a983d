"""The one executor of a pass's planned writes (writes.py): each made through KubeOps (a
certificate reload through the server's DbOps), in the order planned.

    done = carry_out(kube, body, steps)                      # an API refusal raises, stops the rest
    done = carry_out(kube, body, steps, keep_going=True)     # ... is kept in its Done instead

What the writes' planners make of the results (a refusal for the status, a certificate state)
is theirs: `Done` says, for each write, whether it was made, the answer, the refusal."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import urllib3
from kubernetes.client.rest import ApiException

from mysql_operator.db.observation import InstanceError
from mysql_operator.db_ops import DbOps
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.ops import KubeOps
from mysql_operator import writes as w

log = logging.getLogger(__name__)

# what the API server (or the way to it) answers when it does not make a write
REFUSALS = (k.ApplyError, ApiException, urllib3.exceptions.HTTPError)


@dataclass(frozen=True)
class Done:
    write: w.Write
    made: bool  # False: refused, skipped, or nothing to write to (a Pod gone, a Secret to create there)
    answer: Any = None  # what KubeOps answered
    error: Exception | None = None  # the refusal (keep_going)
    skipped: bool = False  # an earlier write of its chain was not made


def carry_out(
    kube: KubeOps,
    body: Mapping[str, Any],
    steps: Sequence[w.Step],
    *,
    servers: Mapping[str, DbOps] | None = None,
    calls: Mapping[str, Callable[[], None]] | None = None,
    keep_going: bool = False,
) -> list[Done]:
    """Effect: every write of `steps` on the cluster `body` (its metadata names it), in order;
    one Done per write (writes.flat's order). A write the API server refuses (REFUSALS) raises,
    which stops the rest - unless `keep_going`: then the refusal is in its Done, and the writes
    after it in its Chain are skipped. `servers`: the DbOps of each server (ReloadTLS); `calls`:
    the caller's named effects (writes.Call)."""
    done: list[Done] = []
    for step in steps:
        chain = step.writes if isinstance(step, w.Chain) else (step,)
        broken = False
        for write in chain:
            if broken:
                done.append(Done(write, False, skipped=True))
                continue
            try:
                answer = _make(kube, body, write, servers or {}, calls or {})
            except REFUSALS as e:
                if not keep_going:
                    raise
                done.append(Done(write, False, error=e))
                broken = True
                continue
            made = answer is not False
            done.append(Done(write, made, answer))
            broken = not made
    return done


def _make(
    kube: KubeOps,
    body: Mapping[str, Any],
    write: w.Write,
    servers: Mapping[str, DbOps],
    calls: Mapping[str, Callable[[], None]],
) -> Any:
    """One write; its answer (False: not made)."""
    ns = (body.get("metadata") or {}).get("namespace", "")
    if isinstance(write, w.Apply):
        return kube.apply(write.obj)
    if isinstance(write, w.Post):
        kube.post_events(body, write.events)
        for etype, reason, message in write.events:
            log.log(
                logging.WARNING if etype == "Warning" else logging.INFO,
                "%s/%s %s: %s",
                ns,
                body["metadata"].get("name"),
                reason,
                message,
            )
        return None
    if isinstance(write, w.PatchStatus):
        return kube.patch_status(body, write.fields)
    if isinstance(write, w.RemoveAnnotation):
        return kube.remove_cluster_annotation(body, write.key)
    if isinstance(write, w.SetPodLabel):
        return kube.set_pod_label(ns, write.pod, write.key, write.value)
    if isinstance(write, w.AnnotatePod):
        return kube.annotate_pod(ns, write.pod, write.key, write.value)
    if isinstance(write, w.DeletePod):
        return kube.delete_pod(ns, write.pod, uid=write.uid)
    if isinstance(write, w.CreateJob):
        return kube.create_job(write.obj)
    if isinstance(write, w.DeleteDeployment):
        return kube.delete_deployment(write.namespace, write.name)
    if isinstance(write, w.GrowClaim):
        return kube.grow_claim(write.namespace, write.claim, write.size)
    if isinstance(write, w.SecretWrite):
        return _secret(kube, write)
    if isinstance(write, w.ReloadTLS):
        try:
            servers[write.server].reload_tls()
        except InstanceError as e:  # asked again at the next check
            log.debug("%s: TLS reload: %s", write.server, e)
            return False
        return None
    calls[write.name]()
    return None


def _secret(kube: KubeOps, write: w.SecretWrite) -> bool:
    meta = write.body["metadata"]
    if not write.create:
        kube.add_secret_keys(meta["namespace"], meta["name"], write.body["data"])
        return True
    if kube.create_secret(write.body) is not None:
        return True
    if not write.or_keys:  # one exists already (an earlier object of the name, another writer)
        return False
    kube.add_secret_keys(meta["namespace"], meta["name"], write.body["data"])
    return True
