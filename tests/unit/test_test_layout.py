"""No file under tests/, e2e/ or benchmarks/ imports a test module (a `test_*.py` of tests/unit,
tests/integration or e2e): what tests share lives in a support module (tests/support/,
tests/integration/helpers_replication.py, e2e/'s modules not named test_*), so a test module
holds its own tests only, and a fixture one of them uses is imported from where it is defined.
Every import counts, a function-level one too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("tests", "e2e", "benchmarks")
TEST_PACKAGES = ("tests.unit", "tests.integration", "e2e")


def is_test_module(name: str) -> bool:
    """Whether a dotted module name is a test module: `test_*` right under a test package."""
    package, _, leaf = name.rpartition(".")
    return package in TEST_PACKAGES and leaf.startswith("test_")


def imported_test_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, test module) for each import of a test module in a file of `package`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from <package>.test_x import name` and `from <package> import test_x`
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if is_test_module(n)]
    return found


def offenders(root: Path = REPO) -> list[str]:
    """`file:line: module` for every import of a test module under the scanned folders."""
    out: list[str] = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            package = ".".join(path.parent.relative_to(root).parts)
            for line, name in imported_test_modules(path, package):
                out.append(f"{path.relative_to(root)}:{line}: imports {name}")
    return out


def test_the_checker_sees_each_form_of_import(tmp_path):
    (tmp_path / "tests").mkdir()
    # the packages filled in: a grep of the repository for test-module imports finds none here
    (tmp_path / "tests" / "a.py").write_text(
        "from {unit}.test_x import helper\n"
        "from {integration} import test_y as y\n"
        "def f():\n"
        "    import {e2e}.test_z\n"
        "from tests.support.chart import CHART\n"
        "from {unit} import conftest\n"
        "from {e2e}.helpers import kubectl\n".format(
            unit="tests.unit", integration="tests.integration", e2e="e2e"
        )
    )
    (tmp_path / "tests" / "unit").mkdir()
    (tmp_path / "tests" / "unit" / "b.py").write_text(
        "from .test_w import helper\nfrom . import test_v\nfrom .. import support\n"
    )
    assert offenders(tmp_path) == [
        "tests/a.py:1: imports tests.unit.test_x",
        "tests/a.py:2: imports tests.integration.test_y",
        "tests/a.py:4: imports e2e.test_z",
        "tests/unit/b.py:1: imports tests.unit.test_w",
        "tests/unit/b.py:2: imports tests.unit.test_v",
    ]


def test_no_module_imports_a_test_module():
    found = offenders()
    assert not found, "test modules imported (move what they share to a support module):\n" + "\n".join(found)
