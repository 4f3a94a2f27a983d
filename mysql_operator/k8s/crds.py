"""The operator's own CRDs brought up to date at its start (`mysql-operator run --apply-crds DIR`;
the chart mounts its crds/ there, so `helm upgrade` delivers new CRD versions, which Helm itself
never does for a chart's crds/).

Each CRD is server-side applied (field manager mysql-operator) with the sha256 of its file in the
annotation mysql.operator.dev/crd-digest, which `helm test` compares with the chart's. A CRD whose
file would take away a property (or a served version) the live CRD has is not applied: objects may
use it, and the schema would prune it from them; the operator says so in its log and goes on with
the live CRD. Pure parts: `removed_properties`, `plan`."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from mysql_operator.api import GROUP
from mysql_operator.k8s import objects as k
from mysql_operator import reasons as R

log = logging.getLogger(__name__)
DIGEST_ANNOTATION = f"{GROUP}/crd-digest"
FIELD_MANAGER = "mysql-operator"


@dataclass(frozen=True)
class CRDFile:
    name: str
    body: dict[str, Any]
    digest: str  # sha256 of the file's bytes


def load(folder: Path | str) -> list[CRDFile]:
    out = []
    for path in sorted(Path(folder).glob("*.yaml")):
        raw = path.read_bytes()
        body = yaml.safe_load(raw)
        if not isinstance(body, dict) or body.get("kind") != "CustomResourceDefinition":
            continue
        out.append(CRDFile(body["metadata"]["name"], body, hashlib.sha256(raw).hexdigest()))
    return out


def _properties(schema: Mapping[str, Any] | None, prefix: str = "") -> set[str]:
    """Every property path of an OpenAPI schema: spec, spec.backup, spec.instances[]..."""
    out: set[str] = set()
    if not isinstance(schema, Mapping):
        return out
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        out |= _properties(sub, path)
    if isinstance(schema.get("items"), Mapping):
        out |= _properties(schema["items"], f"{prefix}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        out |= _properties(schema["additionalProperties"], f"{prefix}{{}}")
    return out


def _versions(crd: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        v["name"]: ((v.get("schema") or {}).get("openAPIV3Schema") or {})
        for v in (crd.get("spec") or {}).get("versions") or []
        if v.get("served", True)
    }


def removed_properties(live: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What applying `new` over `live` would take away: served versions, and properties of a
    version both serve ("v1alpha1: spec.backup.s3.prefix")."""
    old_v, new_v = _versions(live), _versions(new)
    out = [f"version {name}" for name in sorted(set(old_v) - set(new_v))]
    for name in sorted(set(old_v) & set(new_v)):
        out += [f"{name}: {p}" for p in sorted(_properties(old_v[name]) - _properties(new_v[name]))]
    return out


@dataclass(frozen=True)
class Apply:
    crd: CRDFile


@dataclass(frozen=True)
class Missing:
    crd: CRDFile


@dataclass(frozen=True)
class Refuse:
    crd: CRDFile
    removed: tuple[str, ...]


def plan(
    files: list[CRDFile], live: Mapping[str, Mapping[str, Any] | None]
) -> list[Apply | Missing | Refuse]:
    """Pure: per file, apply it (its digest differs), refuse it (it would remove something), say
    it is missing (the operator may update its CRDs, not create one: RBAC cannot narrow `create`
    to names), or nothing (the live CRD carries its digest)."""
    out: list[Apply | Missing | Refuse] = []
    for f in files:
        cur = live.get(f.name)
        if cur is None:
            out.append(Missing(f))
            continue
        if ((cur.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION) == f.digest:
            continue
        removed = removed_properties(cur, f.body)
        out.append(Refuse(f, tuple(removed)) if removed else Apply(f))
    return out


def apply(
    api, folder: Path | str, warn: Callable[[str, str], None] = lambda reason, message: None
) -> list[str]:
    """Effect: bring the CRDs of `folder` to the cluster (see the module's docstring). Returns
    what it did or refused, one line each (also logged); what it could not do is also given to
    `warn(reason, message)` (the operator posts it as a Warning Event)."""
    from kubernetes import client

    files = load(folder)
    if not files:
        raise ValueError(f"--apply-crds {folder}: no CustomResourceDefinition in its *.yaml files")
    ext = client.ApiextensionsV1Api(api)
    live = {}
    for f in files:
        found = ext.list_custom_resource_definition(field_selector=f"metadata.name={f.name}").items
        live[f.name] = api.sanitize_for_serialization(found[0]) if found else None
    said = []
    for step in plan(files, live):
        if isinstance(step, Missing):
            line = (
                f"CRD {step.crd.name} is not installed, and the operator may only update its CRDs: "
                "kubectl apply --server-side -f on the chart's crds/ (a first `helm install` does it)"
            )
            log.error(line)
            warn(R.CRD_NOT_INSTALLED, line)
        elif isinstance(step, Refuse):
            line = (
                f"CRD {step.crd.name} not updated: this version's file would remove "
                f"{', '.join(step.removed)}, which existing objects may use"
            )
            log.error(line)
            warn(R.CRD_NOT_UPDATED, line)
        else:
            body = {**step.crd.body, "metadata": {**step.crd.body["metadata"]}}
            body["metadata"]["annotations"] = {
                **(body["metadata"].get("annotations") or {}),
                DIGEST_ANNOTATION: step.crd.digest,
            }
            try:
                k.server_side_apply(api, body, FIELD_MANAGER)
            except k.ApplyError as e:  # the operator goes on with the live CRD; `helm test` tells
                line = f"CRD {step.crd.name} not updated: {e.message}"
                log.error(line)
                warn(R.CRD_NOT_UPDATED, line)
            else:
                line = f"CRD {step.crd.name} applied (digest {step.crd.digest[:12]})"
                log.info(line)
        said.append(line)
    return said
