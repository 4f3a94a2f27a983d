"""docs/troubleshooting.md has one `### <Reason>` entry for every reason the operator can set on a
condition or an Event (mysql_operator/reasons.py), none for a reason it cannot set, and each entry
says where its reason appears as reasons.CARRIERS has it. The reasons are the code's: the step
Events are those of the replication engine's Step(...) calls (replication.py and the modules of
its chain), and no condition or Event is made with a reason the registry does not list."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mysql_operator import reasons, status_events

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
PACKAGE = ROOT / "mysql_operator"
WHERE = "Where: "
# the replication engine's chain of classes (replication.py's docstring), its pass last
ENGINE = (
    "replication_members.py",
    "replication_roles.py",
    "replication_accounts.py",
    "replication_failover.py",
    "replication_repair.py",
    "replication.py",
)


def _entries() -> dict[str, str]:
    """Each `### Reason` heading with the text under it (up to the next heading)."""
    text = PAGE.read_text()
    parts = re.split(r"^(#{2,3}) (.*)$", text, flags=re.M)
    out: dict[str, str] = {}
    seen: list[str] = []
    for level, title, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        if level == "###":
            seen.append(title.strip())
            out[title.strip()] = body
    duplicates = sorted({t for t in seen if seen.count(t) > 1})
    assert not duplicates, f"docs/troubleshooting.md: more than one entry for {duplicates}"
    return out


def test_every_reason_the_operator_sets_has_an_entry():
    missing = sorted(reasons.every_reason() - set(_entries()))
    assert not missing, f"docs/troubleshooting.md has no `### <Reason>` entry for {missing}"


def test_the_page_has_no_entry_for_a_reason_the_code_cannot_set():
    unknown = sorted(set(_entries()) - reasons.every_reason())
    assert not unknown, f"docs/troubleshooting.md has entries for reasons no code sets: {unknown}"


def test_each_entry_says_where_its_reason_appears():
    wrong = {}
    for reason, body in _entries().items():
        lines = [line for line in body.splitlines() if line.startswith(WHERE)]
        expected = WHERE + "; ".join(reasons.carriers_of(reason)) + "."
        if lines != [expected]:
            wrong[reason] = (lines, expected)
    assert not wrong, f"entries whose `{WHERE}` line is not the registry's (found, expected): {wrong}"


def _calls(path: Path, name: str):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
            yield node


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def test_the_step_events_are_those_replication_can_post():
    """status_events.events_from_steps names a step's Event after its action (+ "Failed" when not ok);
    every Step(...) in the engine's modules (ENGINE), duties.py, binlog_upkeep.py and reseed.py with a literal action, and the decisions whose action fails
    as a whole (the decision's kind as the action), give exactly reasons.STEP_EVENTS and ACTED_ON."""
    made = set()
    calls = [
        c
        for module in (*ENGINE, "duties.py", "binlog_upkeep.py", "reseed.py")
        for c in _calls(PACKAGE / module, "Step")
    ]
    for call in calls:
        action = _literal(call.args[1]) if len(call.args) > 1 else None
        if action is None:
            continue  # the decision's kind: reasons.ACTED_ON
        ok = next((k.value for k in call.keywords if k.arg == "ok"), None)
        failed = isinstance(ok, ast.Constant) and ok.value is False
        made.add(status_events.step_reason(action) + ("Failed" if failed else ""))
    assert made == set(reasons.STEP_EVENTS)
    handlers = [
        {k.attr for k in node.keys if isinstance(k, ast.Attribute)}
        for node in ast.walk(ast.parse((PACKAGE / "replication.py").read_text()))
        if isinstance(node, ast.Dict) and node.values and all(isinstance(v, ast.Lambda) for v in node.values)
    ]
    acted_on = next(kinds for kinds in handlers if "Fence" in kinds)
    assert acted_on == set(reasons.ACTED_ON)


def test_no_condition_or_event_is_made_with_an_unlisted_literal_reason():
    """A literal reason in an Event tuple ("Normal"|"Warning", reason, message) or a condition
    (conditions._cond) anywhere in the package must be in the registry (better: one of its names)."""
    known = reasons.every_reason()
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            reason = None
            if (
                isinstance(node, ast.Tuple)
                and len(node.elts) == 3
                and _literal(node.elts[0]) in ("Normal", "Warning")
            ):
                reason = _literal(node.elts[1])
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "_cond"
                and len(node.args) > 2
            ):
                reason = _literal(node.args[2])
            if reason is not None and reason not in known:
                found[reason] = str(path.relative_to(ROOT))
    assert not found, f"reasons set in code but missing from mysql_operator/reasons.py: {found}"


def test_the_certificate_problems_that_need_a_person_are_those_listed_as_warnings():
    """A TLSProblem made with warning=False (cert-manager still at work) is only on Progressing;
    every other is also on Degraded and its Event (reasons.TLS_WARNINGS)."""
    made = {}
    for name in ("certificates.py", "cert_manager.py", "tls_upkeep.py"):
        for call in _calls(PACKAGE / name, "TLSProblem"):
            reason = getattr(reasons, call.args[0].attr)
            quiet = any(
                k.arg == "warning" and getattr(k.value, "value", None) is False for k in call.keywords
            )
            made[reason] = not quiet
    assert set(made) == set(reasons.TLS_PROBLEMS)
    assert {r for r, warns in made.items() if warns} == set(reasons.TLS_WARNINGS)


def test_the_phases_that_can_be_readys_reason_are_those_listed():
    """Ready's reason is the phase when no other reason applies: every phase conditions.phase returns
    but Ready, Updating (its own reason) and Invalid (InvalidSpec everywhere)."""
    tree = ast.parse((PACKAGE / "conditions.py").read_text())
    phase = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "phase")
    returned = {
        c.value
        for r in ast.walk(phase)
        if isinstance(r, ast.Return)
        for c in ast.walk(r)
        if isinstance(c, ast.Constant) and isinstance(c.value, str)
    }
    assert returned - {"Ready", "Updating", "Invalid"} == set(reasons.PHASES_AS_READY_REASON)
