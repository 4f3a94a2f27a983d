"""Every benchmark script imports: a module moved or renamed in the product fails here, not the
next time someone runs the benchmark (they run outside `make test`)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("name", [b for b in BENCHMARKS if b != "__init__"])
def test_the_benchmark_imports(name):
    importlib.import_module(f"benchmarks.{name}")
