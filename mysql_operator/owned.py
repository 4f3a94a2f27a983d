"""Effects: a cluster's owned objects brought to its spec - every object server-side applied (the
StatefulSet's size and Pod template as rollout.place_template chooses), the binary log archiver's
Deployment applied or deleted, the data volumes grown. One the API server refuses stops neither
the others nor the pass (replication is looked after whatever the spec): why is returned, for the
status. The claims are read only while one may be smaller than spec.storage.size
(`must_check_claims`). The credentials Secret is not applied here: it is created only if
missing (passwords.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import urllib3
from kubernetes.client.rest import ApiException
from kubernetes.utils.quantity import parse_quantity

from mysql_operator import manifests as m
from mysql_operator import rolling
from mysql_operator.api import MySQLCluster
from mysql_operator.redaction import redact
from mysql_operator.k8s import objects as k
from mysql_operator.k8s.ops import KubeOps
from mysql_operator.pods import statefulset_replicas
from mysql_operator.rollout import RestartGate, place_template
from mysql_operator.spec_record import apply_refusal


@dataclass(frozen=True)
class Applied:
    refused: str | None  # why some object was not applied (redacted); None: all were
    placed: bool  # the StatefulSet's template was chosen (then `staged` says whether it waits)
    staged: rolling.StageTemplate | None  # a Pod template a new operator version wants, staged
    archiver: Mapping[str, Any] | None  # the archiver Deployment's status as applied; None: not
    # (StatefulSet uid, spec.storage.size) every data claim was seen asking for; None: not yet
    claims: tuple[str, str] | None = None


def apply_owned(
    live: Mapping[str, Any] | None,
    kube: KubeOps,
    restarts: RestartGate,
    restarting: Callable[[], set[str]],
    job_image: str,
    exporter_image: str,
    tools_repository: str,
    c: MySQLCluster,
    body: Mapping[str, Any],
    passwords: Mapping[str, str],
    primary_ordinal: int | None,
    secrets: Sequence[str],
    claims: tuple[str, str] | None = None,
) -> Applied:
    """`live`: the StatefulSet as the API server has it (read before the pass wrote anything;
    None: there is none); `claims`: what the last Applied said of the data claims."""
    owner = k.owner_of(body)
    refused = []
    placed, staged = False, None
    statefulset = None
    for obj in m.build_all(c, lambda key: passwords.get(key) or "unused", exporter_image):
        if obj["kind"] == "Secret":
            continue  # created only if missing (passwords.py)
        obj = m.owned(obj, owner)
        kind, obj_name = obj["kind"], obj["metadata"]["name"]
        try:
            step = None
            if kind == "StatefulSet":
                existing = statefulset = live
                current, claimed = k.statefulset_sizing(existing)
                obj["spec"]["replicas"] = statefulset_replicas(c.spec.instances, primary_ordinal, current)
                if claimed is not None:  # immutable in a StatefulSet: the volumes grow instead
                    obj["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = (
                        claimed
                    )
                step = place_template(kube, restarts, c, body, obj, existing, restarting)
                placed, staged = True, step if isinstance(step, rolling.StageTemplate) else None
            kube.apply(obj)
            approval = rolling.APPROVE_RESTART_ANNOTATION
            if isinstance(step, rolling.WriteTemplate) and approval in (
                body["metadata"].get("annotations") or {}
            ):
                kube.remove_cluster_annotation(body, approval)  # carried out
        except k.ApplyError as e:
            refused.append(apply_refusal(kind, obj_name, e.status, e.message))
        except ApiException as e:
            refused.append(apply_refusal(kind, obj_name, e.status, str(e.reason)))
        except urllib3.exceptions.HTTPError as e:
            refused.append(apply_refusal(kind, obj_name, None, f"no answer from the API server ({e})"))
    archiver_refused, archiver = binlog_archiver(kube, job_image, tools_repository, c, owner)
    refused += archiver_refused
    if must_check_claims(statefulset, c.spec.storage.size, claims):
        not_grown, all_asking = grow_volumes(kube, c)
        refused += not_grown
        uid = (statefulset or {}).get("metadata", {}).get("uid")
        claims = (uid, c.spec.storage.size) if all_asking and uid else None
    return Applied(redact("; ".join(refused), secrets) if refused else None, placed, staged, archiver, claims)


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


def binlog_archiver(
    kube: KubeOps,
    job_image: str,
    tools_repository: str,
    c: MySQLCluster,
    owner: Mapping[str, Any],
) -> tuple[list[str], Mapping[str, Any] | None]:
    """The binary-log archiver's Deployment applied (spec.backup.binlogs.enabled) or deleted
    (off): why the API server refused, if it did, and the status of the one applied."""
    dep = m.binlog_archiver(
        c, job_image, image_pull_policy=c.spec.image_pull_policy, tools_repository=tools_repository
    )
    name = m.binlog_archiver_name(c)
    try:
        if dep is not None:
            return [], kube.apply(m.owned(dep, owner)).get("status") or {}
        kube.delete_deployment(c.namespace, name)
    except k.ApplyError as e:
        return [apply_refusal("Deployment", name, e.status, e.message)], None
    except ApiException as e:
        return [apply_refusal("Deployment", name, e.status, str(e.reason))], None
    except urllib3.exceptions.HTTPError as e:
        return [apply_refusal("Deployment", name, None, f"no answer from the API server ({e})")], None
    return [], None


def grow_volumes(kube: KubeOps, c: MySQLCluster) -> tuple[list[str], bool]:
    """Every server's data volume asks for spec.storage.size (raised: expanded where the
    StorageClass allows it). Why not, for each claim the API server refused, and whether every
    claim exists and asks for it now."""
    refused, all_asking = [], True
    for o in range(c.spec.instances):
        claim = m.data_claim_name(c, o)
        try:
            asking, why = kube.grow_claim(c.namespace, claim, c.spec.storage.size)
        except urllib3.exceptions.HTTPError as e:
            asking, why = False, f"no answer from the API server ({e})"
        all_asking = all_asking and asking
        if why:
            refused.append(
                f"spec.storage.size: PersistentVolumeClaim {claim} cannot grow to {c.spec.storage.size}: "
                f"{why} (its StorageClass must allow volume expansion)"
            )
    return refused, all_asking
