"""Install CustomResourceDefinitions on a real apiserver for tests: create or replace, then wait
until the apiserver has established them."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml
from kubernetes import client

from tests.support.wait import wait_for

REPO = Path(__file__).resolve().parents[2]


def project_crds() -> list[dict]:
    """The operator's CRDs, from crds/."""
    return [yaml.safe_load(p.read_text()) for p in sorted((REPO / "crds").glob("*.yaml"))]


def apply_crds(api: client.ApiClient, crds: Iterable[dict], timeout: float = 60) -> list[str]:
    """Create each CRD (or replace it when it exists) and wait until every one is Established.
    Returns their names."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for crd in crds:
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            ext.create_custom_resource_definition(crd)
        except client.ApiException as e:
            if e.status != 409:
                raise
            existing = ext.read_custom_resource_definition(name)
            if existing.metadata.deletion_timestamp:  # an earlier test's, still being deleted
                wait_for(lambda: _gone(ext, name), timeout, f"CRD {name} deleted")
                ext.create_custom_resource_definition(crd)
            else:
                crd["metadata"]["resourceVersion"] = existing.metadata.resource_version
                ext.replace_custom_resource_definition(name, crd)

    def established(name: str) -> bool:
        conds = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conds)

    for name in names:
        wait_for(lambda: established(name), timeout, f"CRD {name} established")
    return names


def _gone(ext: client.ApiextensionsV1Api, name: str) -> bool:
    try:
        ext.read_custom_resource_definition(name)
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False
