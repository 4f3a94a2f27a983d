"""docs/modules.md lists every module of the package with what it owns (its docstring's first
sentence): a module added, removed or re-described without regenerating it fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module_map():
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "hack" / "module_map.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_module_says_what_it_owns():
    mm = _module_map()
    silent = [str(p.relative_to(ROOT)) for p in sorted(mm.PACKAGE.rglob("*.py")) if not mm.owns(p)]
    assert not silent, f"modules without a docstring saying what they own: {silent}"


def test_the_module_map_is_current():
    expected = _module_map().render()
    assert (ROOT / "docs" / "modules.md").read_text() == expected, (
        "docs/modules.md is out of date: .venv/bin/python hack/module_map.py > docs/modules.md"
    )
