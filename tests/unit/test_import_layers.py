"""The package's modules import each other without a loop: every module stands above what it
imports, so each can be read knowing only the ones below it. Every import counts, a function-level
one (which would otherwise hide a loop until run time) and one made for type checking alone."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mysql_operator"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, known: set[str]) -> str | None:
    """The package module that `import name` / `from name import ...` loads, or None (outside)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _outside_imports(path: Path) -> set[str]:
    """The dotted names of what a file imports from outside the package."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in out if not n.startswith(PACKAGE.name + ".")}


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (a package's face `__init__` excluded: it only
    hands names on, and `from mysql_operator.backup import restore` names the module)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
                # `from pkg import module` imports the module; `from module import name`, the module
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for n in names:
                target = _resolve(n, known)
                if target and target != name and not files[target].name == "__init__.py":
                    targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def reached(graph: dict[str, set[str]], module: str) -> set[str]:
    """`module` and every package module it imports, directly or not."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, ())
    return seen


# what talks to a server or the API (kubernetes.utils.quantity, a parser, does not)
EFFECTS = (
    "pymysql",
    "boto3",
    "botocore",
    "kopf",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.watch",
)


def test_the_pure_modules_reach_no_client_of_a_server_or_the_api():
    """The decision modules (mypy --strict's list) import, directly or through other package
    modules, nothing that talks to a database, the object store or Kubernetes: their tests need
    none, and a value type they share lives below the effects (members.py, redaction.py)."""
    pure = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    graph = import_graph()
    wrong = {}
    for path in pure:
        module = _module_name(PACKAGE.parent / path)
        for m in sorted(reached(graph, module)):
            found = PACKAGE.parent / (m.replace(".", "/") + ".py")
            effects = (
                sorted(n for n in _outside_imports(found) if n.startswith(EFFECTS)) if found.exists() else []
            )
            if effects:
                wrong[module] = f"{m} imports {', '.join(effects)}"
                break
    assert not wrong, wrong


def test_the_graph_is_read_from_the_code():
    graph = import_graph()
    assert "mysql_operator.backup.restore" in graph["mysql_operator.backup.restore_job"]
    assert "mysql_operator.reconcile" in graph["mysql_operator.handlers.cluster"]
    assert "mysql_operator.db.gtid" in graph["mysql_operator.rules"]


def test_a_loop_is_found_however_long():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_through_others():
    found = cycles(import_graph())
    assert not found, "modules that import each other (move what they share into a module below both): " + (
        "; ".join(" <-> ".join(g) for g in found)
    )


def private_imports(root: Path) -> list[str]:
    """`from module import _name` in the Python files under `root`: a name its module keeps to
    itself, used elsewhere (it should be public, or stay where it is)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [
                    f"{path.relative_to(root.parent)}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def test_no_module_imports_a_name_another_keeps_to_itself():
    root = PACKAGE.parent
    found = [
        f for d in ("mysql_operator", "tests", "e2e", "benchmarks", "hack") for f in private_imports(root / d)
    ]
    assert found == []
