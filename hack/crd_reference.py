"""Write docs/reference/: one page per CRD in crds/ (kind, names, printer columns, every field with its
type, required, default, limits, pattern and the API server's CEL rules) and an index page.
`pages(crds)` is pure (the CRD files' text in, markdown out); tests/unit/test_api_reference.py fails
when the checked-in pages differ from what it returns:

    make reference        (.venv/bin/python hack/crd_reference.py)
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CRDS = ROOT / "crds"
OUT = ROOT / "docs" / "reference"

# Every schema keyword the pages render; a CRD using another one fails test_api_reference (so a new
# keyword is not silently left out of the reference).
SCHEMA_KEYS = frozenset(
    "type format description properties required items additionalProperties default enum minimum "
    "maximum minLength maxLength minItems maxItems maxProperties pattern anyOf x-kubernetes-validations "
    "x-kubernetes-preserve-unknown-fields x-kubernetes-int-or-string x-kubernetes-list-type "
    "x-kubernetes-list-map-keys".split()
)
RULE_KEYS = frozenset({"rule", "message", "messageExpression", "reason", "fieldPath"})
# longer CEL rules are named, not printed (the cron schedule's is 9 KB); the message says what it checks
RULE_SHOWN_CHARS = 200
LIST_TYPES = {
    "set": "Each item at most once (list type set).",
    "atomic": "Replaced as a whole by a server-side apply (list type atomic).",
}
ROOT_METADATA = "Standard object metadata (name, namespace, labels, annotations): Kubernetes ObjectMeta."
Schema = dict[str, Any]


def summary(text: str) -> str:
    """The CRD file's leading comment up to its 'Single source of truth' line, on one line, without
    the 'Kind: ' it starts with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#") or line.startswith("# Single source of truth"):
            break
        lines.append(line.lstrip("#").strip())
    words = " ".join(lines)
    _, sep, rest = words.partition(": ")
    return rest[:1].upper() + rest[1:] if sep else words


def code(text: str) -> str:
    """`text` as a code span, whatever backticks it holds."""
    ticks = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


_PROSE_ESCAPES = {c: "\\" + c for c in "\\*_[]|"} | {"<": "&lt;"}


def prose(text: str) -> str:
    """Description or message text as markdown on one line: its `code spans` kept, every other
    character that markdown (or a table cell) would read as markup escaped."""
    parts = re.split(r"(`[^`]*`)", " ".join(str(text).split()))
    return "".join(
        p
        if p.startswith("`") and p.endswith("`") and len(p) > 1
        else "".join(_PROSE_ESCAPES.get(c, c) for c in p)
        for p in parts
    )


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default slugify)."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


class _Anchors:
    """Unique heading ids in page order, as the toc extension makes them (a repeat gets _1, _2, ...)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def add(self, heading: str) -> str:
        base = anchor = slug(heading)
        n = 0
        while anchor in self.used or not anchor:
            n += 1
            anchor = f"{base}_{n}"
        self.used.add(anchor)
        return anchor


def _value(v: Any) -> str:
    return code(v if isinstance(v, str) else json.dumps(v, sort_keys=True))


def _container(s: Schema, path: str) -> tuple[Schema, str] | None:
    """The object schema (and its path) with properties that `s` holds: itself, its array items
    (path[]) or its map values (path{})."""
    if s.get("properties"):
        return s, path
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        sub = s.get(key)
        if isinstance(sub, dict):
            found = _container(sub, path + mark)
            if found:
                return found
    return None


def type_name(s: Schema) -> str:
    if s.get("x-kubernetes-int-or-string") or s.get("anyOf"):
        names = [a.get("type", "any") for a in s.get("anyOf", [])] or ["integer", "string"]
        return " or ".join(names)
    t = s.get("type", "any")
    if t == "array" and isinstance(s.get("items"), dict):
        return f"array of {type_name(s['items'])}"
    if t == "object" and isinstance(s.get("additionalProperties"), dict):
        return f"map of {type_name(s['additionalProperties'])}"
    if t == "object" and not s.get("properties") and s.get("x-kubernetes-preserve-unknown-fields"):
        return "object (any fields)"
    return f"{t} ({s['format']})" if s.get("format") else str(t)


def limits(s: Schema) -> list[str]:
    """The schema's enum and bounds as short sentences (patterns and rules go to the section's list)."""
    out = []
    if "enum" in s:
        out.append("One of " + ", ".join(_value(v) for v in s["enum"]) + ".")
    for low, high, unit in (
        ("minimum", "maximum", ""),
        ("minLength", "maxLength", " characters"),
        ("minItems", "maxItems", " items"),
        (None, "maxProperties", " keys"),
    ):
        lo, hi = s.get(low) if low else None, s.get(high)
        if lo is not None and hi is not None:
            out.append(f"From {lo} to {hi}{unit}.")
        elif lo is not None:
            out.append(f"At least {lo}{unit}.")
        elif hi is not None:
            out.append(f"At most {hi}{unit}.")
    if "x-kubernetes-list-type" in s:
        kind = s["x-kubernetes-list-type"]
        if kind == "map":
            keys = " and ".join(code(k) for k in s.get("x-kubernetes-list-map-keys", []))
            out.append(f"At most one item per {keys} (list type map).")
        else:
            out.append(LIST_TYPES.get(kind, f"List type {kind}."))
    for key, mark in (("items", "Items"), ("additionalProperties", "Values")):
        sub = s.get(key)
        if isinstance(sub, dict) and not sub.get("properties"):
            out += [f"{mark}: {x[0].lower()}{x[1:]}" for x in limits(sub)]
    return out


def checks(s: Schema, path: str) -> list[str]:
    """List items for the pattern and the CEL rules of `s` and of the array items and map values it
    holds that have no section of their own."""
    out = []
    if "pattern" in s:
        out.append(f"{code(path)} must match {code(s['pattern'])}.")
    for v in s.get("x-kubernetes-validations", []):
        when = " (on update)" if "oldSelf" in v["rule"] else ""
        msg = prose(v["message"]) if "message" in v else f"message from {code(v['messageExpression'])}"
        extra = [f"reason {v['reason']}"] if "reason" in v else []
        extra += [f"reported on {code(v['fieldPath'])}"] if "fieldPath" in v else []
        rule = v["rule"]
        shown = (
            code(rule)
            if len(rule) <= RULE_SHOWN_CHARS
            else f"a CEL rule of {len(rule)} characters, in the CRD"
        )
        out.append(f"{code(path)}{when}: {msg} ({'; '.join([shown, *extra])})")
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        sub = s.get(key)
        if isinstance(sub, dict) and not sub.get("properties"):
            out += checks(sub, path + mark)
    return out


def objects(s: Schema, path: str = "") -> list[tuple[Schema, str]]:
    """The object at `path` and every object with properties below it (array items: path[], map
    values: path{}), in schema order: the page's sections."""
    out = [(s, path)]
    for name, sub in s["properties"].items():
        container = _container(sub, f"{path}.{name}" if path else name)
        out += objects(*container) if container else []
    return out


def heading(path: str, kind: str) -> str:
    return code(path) if path else f"{kind} (top level)"


def section(s: Schema, path: str, kind: str, anchor: dict[str, str]) -> list[str]:
    """The markdown of the object at `path` (the top level: `kind`'s): its table of fields (an
    object field links to its section: `anchor`, path -> heading id) and its checks."""
    lines = [f"### {heading(path, kind)}", ""]
    if path and s.get("description"):
        lines += [prose(s["description"]), ""]
    elif path.endswith(("[]", "{}")):
        lines += [f"Each {'item' if path.endswith('[]') else 'value'} of {code(path[:-2])}.", ""]
    if s.get("x-kubernetes-preserve-unknown-fields"):
        lines += [
            "The API server also keeps fields not listed here (x-kubernetes-preserve-unknown-fields).",
            "",
        ]
    lines += ["| Field | Type | Required | Default | Description |", "|---|---|---|---|---|"]
    found = checks({"x-kubernetes-validations": s.get("x-kubernetes-validations", [])}, path or kind)
    required = set(s.get("required", []))
    for name, sub in s["properties"].items():
        sub_path = f"{path}.{name}" if path else name
        container = _container(sub, sub_path)
        field = f"[{code(sub_path)}](#{anchor[container[1]]})" if container else code(sub_path)
        if not container or container[0] is not sub:
            found += checks(sub, sub_path)
        described = sub.get("description") or (ROOT_METADATA if sub_path == "metadata" else "")
        cell = " ".join([prose(described), *limits(sub)]).strip()
        default = _value(sub["default"]) if "default" in sub else ""
        lines.append(
            f"| {field} | {type_name(sub)} | {'yes' if name in required else ''} | {default} | {cell} |"
        )
    lines.append("")
    if found:
        lines += ["Checked by the API server:", "", *[f"- {c}" for c in found], ""]
    return lines


def page(crd: Schema, intro: str, source: str) -> str:
    """The reference page of one CRD."""
    names, spec = crd["spec"]["names"], crd["spec"]
    anchors = _Anchors()
    lines = [
        f"# {names['kind']}",
        "",
        prose(intro),
        "",
        f"Generated from {code(source)} by `hack/crd_reference.py` (`make reference`); do not edit.",
        "",
        "| | |",
        "|---|---|",
        f"| Group | {code(spec['group'])} |",
        f"| Kind | {code(names['kind'])} (list: {code(names['listKind'])}) |",
        f"| Scope | {spec['scope']} |",
        f"| Names | {code(names['plural'])}, {code(names['singular'])} |",
        f"| Short names | {', '.join(code(n) for n in names.get('shortNames', [])) or 'none'} |",
        "",
    ]
    anchors.add(names["kind"])
    for v in spec["versions"]:
        roles = [r for r in ("served", "storage") if v.get(r)]
        subresources = ", ".join(sorted(v.get("subresources", {}))) or "none"
        anchors.add(f"Version {v['name']}")
        lines += [
            f"## Version {v['name']}",
            "",
            f"API version {code(spec['group'] + '/' + v['name'])}: {' and '.join(roles) or 'not served'}; "
            f"subresources: {subresources}.",
            "",
        ]
        columns = v.get("additionalPrinterColumns", [])
        if columns:
            anchors.add("Printer columns")
            lines += [
                "### Printer columns",
                "",
                "What `kubectl get` prints (`-o wide` adds the columns of priority 1 and above).",
                "",
                "| Column | Type | JSONPath | Shown | Description |",
                "|---|---|---|---|---|",
            ]
            for c in columns:
                shown = "-o wide" if c.get("priority", 0) else "always"
                lines.append(
                    f"| {prose(c['name'])} | {c['type']} | {code(c['jsonPath'])} | {shown} "
                    f"| {prose(c.get('description', ''))} |"
                )
            lines.append("")
        sections = objects(v["schema"]["openAPIV3Schema"])
        anchor = {path: anchors.add(heading(path, names["kind"])) for _, path in sections}
        for s, path in sections:
            lines += section(s, path, names["kind"], anchor)
    return "\n".join(lines).rstrip("\n") + "\n"


def page_name(crd: Schema) -> str:
    return f"{crd['spec']['names']['singular']}.md"


def pages(texts: dict[str, str]) -> dict[str, str]:
    """File name under docs/reference/ -> its markdown, for the CRD files' `texts` (file name -> text)."""
    out: dict[str, str] = {}
    rows = []
    for source, text in sorted(texts.items()):
        crd = yaml.safe_load(text)
        names = crd["spec"]["names"]
        about = summary(text)
        out[page_name(crd)] = page(crd, about, f"crds/{source}")
        short = ", ".join(code(n) for n in names.get("shortNames", []))
        rows.append(f"| [{names['kind']}]({page_name(crd)}) | {short} | {prose(about)} |")
    out["index.md"] = (
        "\n".join(
            [
                "# API reference",
                "",
                "The custom resources of the operator, one page each: every field with its type, default and "
                "limits, and the rules the API server checks on create and update. Generated from `crds/*.yaml` "
                "by `hack/crd_reference.py` (`make reference`); a unit test fails when a page differs from the "
                "CRDs. `kubectl explain mysqlcluster.spec` prints the same descriptions from a running cluster. "
                "Every field follows the same [conventions](../api-conventions.md) for choices, durations and Secret "
                "references; the spellings of earlier versions are still read.",
                "",
                "| Kind | Short names | What it is |",
                "|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )
    return out


def read_crds() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(CRDS.glob("*.yaml"))}


def main() -> None:
    wanted = pages(read_crds())
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in set(p.name for p in OUT.glob("*.md")) - set(wanted):
        (OUT / stale).unlink()
        print(f"removed docs/reference/{stale}", file=sys.stderr)
    for name, text in sorted(wanted.items()):
        (OUT / name).write_text(text)
    print(f"wrote {len(wanted)} pages to docs/reference/", file=sys.stderr)


if __name__ == "__main__":
    main()
