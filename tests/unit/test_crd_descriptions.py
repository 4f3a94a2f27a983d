"""Every property of every CRD the project ships has a description (issue 48): `kubectl explain`
prints it, and it is the only reference a user reads next to the cluster.

`missing(crd)` is the walker; run it on an older CRD to list what that one lacks:
    .venv/bin/python -c 'import sys, yaml; from tests.unit.test_crd_descriptions import missing; \
        print(missing(yaml.safe_load(open(sys.argv[1]))))' /tmp/old.yaml
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted((REPO / "crds").glob("*.yaml"))
# kubectl's client-side apply keeps the whole object in an annotation of at most 256 KiB
MAX_CRD_BYTES = 200 * 1024


def fields(schema: dict, prefix: str = "") -> list[tuple[str, dict]]:
    """(dotted path, schema) of every property under `schema`, walking into nested objects, array
    items ([] in the path) and map values ({} in the path); tests/unit/test_api_reference.py uses it."""
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        out += [(path, sub), *_below(sub, path)]
    return out


def _below(schema: dict, path: str) -> list[tuple[str, dict]]:
    out = fields(schema, path + ".")
    if isinstance(schema.get("items"), dict):
        out += _below(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _below(schema["additionalProperties"], path + "{}")
    return out


def undescribed(schema: dict) -> list[str]:
    """Dotted paths of the properties under `schema` without a non-empty description."""
    return [path for path, sub in fields(schema) if not str(sub.get("description") or "").strip()]


# The root metadata schema may hold nothing but `type: object` (and name/generateName
# restrictions): the API server refuses a CRD whose metadata has a description ("must not specify
# anything other than name and generateName"); kubectl explain describes ObjectMeta itself.
ROOT_EXEMPT = ("metadata",)


def missing(crd: dict) -> list[str]:
    """`<plural> <path>` of every property without a description, in every version of the CRD."""
    plural = crd["spec"]["names"]["plural"]
    return [
        f"{plural} {path}"
        for version in crd["spec"]["versions"]
        for path in undescribed(version["schema"]["openAPIV3Schema"])
        if path not in ROOT_EXEMPT
    ]


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_every_property_has_a_description(path: Path):
    assert missing(yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_root_metadata_schema_is_only_its_type(path: Path):
    for version in yaml.safe_load(path.read_text())["spec"]["versions"]:
        assert version["schema"]["openAPIV3Schema"]["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_crd_fits_kubectl_apply_annotation(path: Path):
    assert path.stat().st_size < MAX_CRD_BYTES, f"{path.name}: keep it under 200 KB for kubectl apply"


def test_walker_names_nested_item_and_map_properties():
    schema = {
        "properties": {
            "a": {"description": "x", "properties": {"b": {"type": "string"}}},
            "l": {
                "description": "x",
                "items": {"properties": {"c": {"description": " "}, "d": {"description": "x"}}},
            },
            "m": {"description": "x", "additionalProperties": {"properties": {"e": {}}}},
            "s": {"type": "string"},
        }
    }
    assert undescribed(schema) == ["a.b", "l[].c", "m{}.e", "s"]
