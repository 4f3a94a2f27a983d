"""The field walk: every property under spec in the CRD is either immutable or applied on change.

The walk's data is in tests/support/specs.py (also used by tests/integration/test_crds.py, which
proves the immutable half against the real apiserver); this file proves the applied half with the
pure builders.
"""

from __future__ import annotations

import pytest

from mysql_operator.api import parse
from mysql_operator.manifests import build_all
from tests.support.specs import CHANGES, RECONCILE_INPUTS, body, changed_spec, is_immutable, spec_schema


def leaf_paths(schema: dict, prefix: str = "") -> list[str]:
    """Dotted paths of every property under spec; objects with declared properties are walked
    into, everything else (scalars, maps, lists, free-form objects) is a leaf."""
    out = []
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if sub.get("type") == "object" and sub.get("properties"):
            out += leaf_paths(sub, path + ".")
        else:
            out.append(path)
    return out


def _pw(key: str) -> str:
    return f"pw-{key}"


# ---------------------------------------------------------------- tests


def test_every_spec_field_has_a_change_in_the_walk():
    paths = set(leaf_paths(spec_schema()))
    assert len(paths) > 40
    assert paths == set(CHANGES), (
        f"fields without a change in the walk: {sorted(paths - set(CHANGES))}; "
        f"changes for fields that no longer exist: {sorted(set(CHANGES) - paths)}"
    )


def test_classifications_are_disjoint_and_name_real_fields():
    paths = set(leaf_paths(spec_schema()))
    assert RECONCILE_INPUTS <= paths
    assert not {p for p in RECONCILE_INPUTS if is_immutable(p)}


@pytest.mark.parametrize("path", sorted(CHANGES))
def test_change_is_valid_for_the_parser(path):
    base, new = changed_spec(path)
    assert parse(body(base)) != parse(body(new)), f"{path}: the change is invisible to the parser"


@pytest.mark.parametrize(
    "path", sorted(p for p in CHANGES if not is_immutable(p) and p not in RECONCILE_INPUTS)
)
def test_mutable_field_changes_a_built_object(path):
    base, new = changed_spec(path)
    before = build_all(parse(body(base)), _pw)
    after = build_all(parse(body(new)), _pw)
    assert before != after, f"changing spec.{path} changes no built object: it would be ignored"
