"""A cluster's owned objects brought to its spec, planned then carried out: `plan_owned` (reads
only, before the pass writes anything) says every write, in order - every object server-side
applied (the StatefulSet's size and Pod template as rollout.place_template chooses), the binary
log archiver's Deployment applied or deleted, the data volumes grown - which the executor makes
(executor.carry_out, keep_going) and `settle` reads: one the API server refuses stops neither the
others nor the pass (replication is looked after whatever the spec): why is returned, for the
status. The claims are grown only while
one may be smaller than spec.storage.size (`must_check_claims`). The credentials Secret is not
applied here: it is created only if missing (passwords.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kubernetes.client.rest import ApiException
from kubernetes.utils.quantity import parse_quantity

from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator import writes as w
from mysql_operator.executor import REFUSALS, Done
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.pods import statefulset_replicas
from mysql_operator.rollout import RestartGate, place_template
from mysql_operator.spec_record import apply_refusal


@dataclass(frozen=True)
class OwnedPlan:
    writes: tuple[w.Step, ...]  # in this order
    refused: tuple[str, ...]  # why an object is not written (its plan was refused: a dry run)
    placed: bool  # the StatefulSet's template was chosen (then `staged` says whether it waits)
    staged: rolling.StageTemplate | None  # a Pod template a new operator version wants, staged
    archiver: str  # the archiver Deployment's name (its apply's answer is its status)
    # the claims' record to keep when they are grown: (StatefulSet uid, spec.storage.size);
    # None: not grown in this plan
    claims_seen: tuple[str | None, str] | None
    claims: tuple[str, str] | None  # the record the plan was made with


@dataclass(frozen=True)
class Applied:
    refused: str | None  # why some object was not applied (redacted); None: all were
    placed: bool  # the StatefulSet's template was chosen (then `staged` says whether it waits)
    staged: rolling.StageTemplate | None  # a Pod template a new operator version wants, staged
    archiver: Mapping[str, Any] | None  # the archiver Deployment's status as applied; None: not
    # (StatefulSet uid, spec.storage.size) every data claim was seen asking for; None: not yet
    claims: tuple[str, str] | None = None


def plan_owned(
    live: Mapping[str, Any] | None,
    restarts: RestartGate,
    restarting: Callable[[], set[str]],
    dry_run: Callable[[dict], Mapping[str, Any]],
    job_image: str,
    exporter_image: str,
    tools_repository: str,
    c: MySQLCluster,
    body: Mapping[str, Any],
    passwords: Mapping[str, str],
    primary_ordinal: int | None,
    claims: tuple[str, str] | None = None,
) -> OwnedPlan:
    """Reads only (`restarting`, the operator's stores; `dry_run`, a dry-run apply, only for a
    StatefulSet an older operator wrote): every write that brings the owned objects to the spec.
    `live`: the StatefulSet as the API server has it (read before the pass wrote anything; None:
    there is none); `claims`: what the last Applied said of the data claims."""
    owner = k.owner_of(body)
    writes: list[w.Step] = []
    refused = []
    placed, staged = False, None
    approval = rolling.APPROVE_RESTART_ANNOTATION
    approved = approval in (body["metadata"].get("annotations") or {})
    for obj in m.build_all(c, lambda key: passwords.get(key) or "unused", exporter_image):
        if obj["kind"] == "Secret":
            continue  # created only if missing (passwords.py)
        obj = m.owned(obj, owner)
        if obj["kind"] != "StatefulSet":
            writes.append(w.Apply(obj))
            continue
        current, claimed = k.statefulset_sizing(live)
        obj["spec"]["replicas"] = statefulset_replicas(c.spec.instances, primary_ordinal, current)
        if claimed is not None:  # immutable in a StatefulSet: the volumes grow instead
            obj["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = claimed
        try:
            step, events = place_template(restarts, c, body, obj, live, dry_run, restarting)
        except REFUSALS as e:
            refused.append(_refusal("StatefulSet", obj["metadata"]["name"], e))
            continue
        placed, staged = True, step if isinstance(step, rolling.StageTemplate) else None
        done = approved and isinstance(step, rolling.WriteTemplate)  # the request carried out
        writes.append(
            w.Chain(
                (
                    *([w.Post(tuple(events))] if events else []),
                    w.Apply(obj),
                    *([w.RemoveAnnotation(approval)] if done else []),
                )
            )
        )
    dep = m.binlog_archiver(
        c, job_image, image_pull_policy=c.spec.image_pull_policy, tools_repository=tools_repository
    )
    archiver = m.binlog_archiver_name(c)
    writes.append(w.DeleteDeployment(c.namespace, archiver) if dep is None else w.Apply(m.owned(dep, owner)))
    claims_seen = None
    if must_check_claims(live, c.spec.storage.size, claims):
        writes += [
            w.GrowClaim(c.namespace, m.data_claim_name(c, o), c.spec.storage.size)
            for o in range(c.spec.instances)
        ]
        claims_seen = ((live or {}).get("metadata", {}).get("uid"), c.spec.storage.size)
    return OwnedPlan(tuple(writes), tuple(refused), placed, staged, archiver, claims_seen, claims)


def settle(plan: OwnedPlan, done: Sequence[Done], secrets: Sequence[str]) -> Applied:
    """Pure: what the plan's writes, as the executor made them (`done`, keep_going), applied: one
    refused stops none of the others (the removal of a request's annotation waits on its
    object's apply)."""
    refused, archiver, all_asking = list(plan.refused), None, True
    for d in done:
        write = d.write
        if isinstance(write, w.GrowClaim):
            asking, why = (False, _no_answer(d.error)) if d.error else d.answer
            all_asking = all_asking and asking
            if why:
                refused.append(
                    f"spec.storage.size: PersistentVolumeClaim {write.claim} cannot grow to {write.size}: "
                    f"{why} (its StorageClass must allow volume expansion)"
                )
        elif d.error is not None:
            kind, name = _kind_name(write)
            refused.append(_refusal(kind, name, d.error))
        elif isinstance(write, w.Apply) and _kind_name(write) == ("Deployment", plan.archiver):
            archiver = d.answer.get("status") or {}
    claims = plan.claims
    if plan.claims_seen is not None:
        uid, size = plan.claims_seen
        claims = (uid, size) if all_asking and uid else None
    why = redact("; ".join(refused), secrets) if refused else None
    return Applied(why, plan.placed, plan.staged, archiver, claims)


def _kind_name(write: w.Write) -> tuple[str, str]:
    """The kind and name a refusal of `write` names (the object the API server refused)."""
    if isinstance(write, w.DeleteDeployment):
        return "Deployment", write.name
    if isinstance(write, w.Apply):
        return write.obj["kind"], write.obj["metadata"]["name"]
    if isinstance(write, w.Post):
        return "Event", write.events[0][1]
    assert isinstance(write, w.RemoveAnnotation), write  # the only other write a plan holds
    return "MySQLCluster", write.key


def _no_answer(e: Exception) -> str:
    return f"no answer from the API server ({e})"


def _refusal(kind: str, name: str, e: Exception) -> str:
    if isinstance(e, k.ApplyError):
        return apply_refusal(kind, name, e.status, e.message)
    if isinstance(e, ApiException):
        return apply_refusal(kind, name, e.status, str(e.reason))
    return apply_refusal(kind, name, None, _no_answer(e))


def must_check_claims(statefulset: Mapping[str, Any] | None, size: str, seen: tuple[str, str] | None) -> bool:
    """Pure: whether a data claim may ask for less than `size`, the StatefulSet as read before
    this apply. Not before there is one (its claims come from the template just applied: a
    claim kept from an earlier cluster of the name is seen at the next apply). Always once the
    template asks for less (it is immutable: a claim made from it later, for a new server or
    a re-seed, is smaller); else until every claim of this StatefulSet was seen at `size`."""
    if statefulset is None:
        return False
    _, templated = k.statefulset_sizing(statefulset)
    if templated is not None and parse_quantity(templated) < parse_quantity(size):
        return True
    return seen != (statefulset.get("metadata", {}).get("uid"), size)
