"""Every property of every CRD the project ships has a description (issue 48): `kubectl explain`
prints it, and it is the only reference a user reads next to the cluster.

`missing(crd)` (tests/support/crd_schema.py) is the walker; run it on an older CRD to list what that
one lacks:
    .venv/bin/python -c 'import sys, yaml; from tests.support.crd_schema import missing; \
        print(missing(yaml.safe_load(open(sys.argv[1]))))' /tmp/old.yaml
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.crd_schema import missing, undescribed

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted((REPO / "crds").glob("*.yaml"))
# kubectl's client-side apply keeps the whole object in an annotation of at most 256 KiB
MAX_CRD_BYTES = 200 * 1024


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
