"""What admission admits, the parser accepts (issue 45, item 3).

A spec the CRD admits but the operator's parser refuses turns an unrelated edit into a cluster
the operator runs on its last valid spec (condition SpecValid False). So every check the parser
makes that the API server can express is in the CRD (schema or CEL), and this test proves it on
the real kube-apiserver: candidate objects of every kind - the schema's own values and bounds,
strings drawn from its patterns, targeted edge values (cron fields, quantities, times, GTID sets,
my.cnf lines, label keys), whole specs drawn by Hypothesis from the schema - are submitted with
server-side dry-run (dryRun=All, several at a time), and every one admitted must parse.

INEXPRESSIBLE lists the parser's checks admission cannot make, each with its reason; a refusal
of such a field is not a failure (the test prints the list and what it met of it).
"""

from __future__ import annotations

import copy
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kubernetes import client

from mysql_operator.api import GROUP, VERSION, parse, parse_backup
from mysql_operator.api.cron import CRON_PATTERN
from mysql_operator.api.restore_fields import GTID_PATTERN, POINT_IN_TIME_PATTERN
from mysql_operator.api.sql import PLURALS as SQL_PLURALS
from mysql_operator.api.sql import parse_sql_object
from tests.support.crds import crds  # noqa: F401  (the module's CRDs, installed from crds/)
from tests.support.specs import FULL, FULL_RESTORE_S3

pytestmark = pytest.mark.controlplane

REPO = Path(__file__).resolve().parents[2]
PLURALS = {"MySQLCluster": "mysqlclusters", "MySQLBackup": "mysqlbackups", **SQL_PLURALS}

# The parser's checks admission cannot make: field -> why. A candidate the CRD admits and the
# parser refuses on one of these fields is reported, not failed. None is left: every check of
# mysql_operator/api (cron fields and ranges, a day its month has, GTID sets, my.cnf lines,
# quantities, label keys) is a schema rule or a CEL rule of the CRDs.
INEXPRESSIBLE: dict[str, str] = {}
# What no rule can close, and the operator copes with instead (status.lastValidSpec, condition
# SpecValid False, a Warning Event InvalidSpec; failover goes on)
BEYOND_ADMISSION = {
    "an object stored before a rule was added": "the API server's validation ratcheting admits "
    "later updates that leave the invalid field as it is, and the operator's parser refuses it",
}

PARSERS: dict[str, Callable[[dict], Any]] = {
    "MySQLCluster": parse,
    "MySQLBackup": parse_backup,
    **{kind: parse_sql_object for kind in SQL_PLURALS},
}

# kind -> (spec, the paths it is the base for: every one when empty)
BASES: dict[str, list[tuple[dict, tuple[str, ...]]]] = {
    "MySQLCluster": [
        (FULL, ()),  # every optional section present
        ({"instances": 3}, ()),  # none: no other field's rule in the way
        (FULL_RESTORE_S3, ("spec.restore",)),
        (
            {"instances": 3, "flavor": "mariadb", "version": "10.11"},
            ("spec.version", "spec.image", "spec.replication"),
        ),
    ],
    "MySQLBackup": [({"clusterRef": {"name": "c"}}, ())],
    "MySQLDatabase": [({"clusterRef": {"name": "c"}, "name": "app"}, ())],
    "MySQLUser": [({"clusterRef": {"name": "c"}, "name": "app"}, ())],
    "MySQLGrant": [
        ({"clusterRef": {"name": "c"}, "user": "app", "database": "app", "privileges": ["SELECT"]}, ())
    ],
}

# ---------------------------------------------------------------- targeted values

CRON = [
    "0 25 * * *",  # issue 45: admitted, refused by the parser, failover stopped
    "60 * * * *",
    "* 24 * * *",
    "0 0 0 * *",
    "0 0 32 * *",
    "0 0 * 0 *",
    "0 0 * 13 *",
    "0 0 * * 8",
    "5-3 * * * *",
    "*/0 * * * *",
    "1/0 * * * *",
    "*/100 * * * *",
    "*/99 * * * *",
    "5-5/2 * * * *",
    "1,,2 * * * *",
    ",1 * * * *",
    "*-5 * * * *",
    "? * * * *",
    "0 0 ? * *",
    "0 0 30 2 *",
    "0 0 31 2,4 *",
    "0 0 31 4,6,9,11 *",
    "0 0 31 1-12/2 *",
    "0 0 30,31 feb *",
    "0 0 30 2 1",
    "0 0 30 feb *",
    "0 0 30 FEB-feb *",
    "0 0 31 4-6/2 *",
    "0 0 31 4-7/2 *",
    "0 0 31 2-11/9 *",
    "0 0 30 2/11 *",
    "0 0 30 2/10 *",
    "0 0 30-31/1 2-2 *",
    "0 0 31 apr,jun,sep,nov *",
    "0 0 31 apr,jun,sep,nov,dec *",
    "0 0 31 */2 *",
    "0 0 31 2/2 *",
    "0 0 30 02 *",
    "0 0 031 4 *",
    "0 0 L 2 *",
    "0 0 30,L 2 *",
    "0 0 30 2 */2",
    "0 0 30 */12 *",
    "0 0 31 */2 *",
    "0 0 L * *",
    "0 0 LW * *",
    "0 0 L/2 * *",
    "0 0 W * *",
    "0 0 * * 5L",
    "0 0 * * L",
    "0 0 * * monL",
    "0 0 * * mon#2",
    "0 0 * * 1#6",
    "0 0 * * 1#0",
    "0 0 * * 1-5#2",
    "0 0 * * MON-FRI",
    "0 0 * * fri-mon",
    "0 0 * * sun,7",
    "0 0 * jan-mar *",
    "0 0 * mar-jan *",
    "0 0 * JAN/2 *",
    "0 0 * 1-dec *",
    "0 0 * * sunday",
    "00 00 01 01 0",
    "000059 023 031 012 07",
    "0\t0 * * *",
    "0  0 * * *",
    " 0 0 * * *",
    "0 0 * * * ",
    "0 0 * * * *",
    "0 0 * *",
    "@daily",
    "@DAILY",
    "@every 5m",
    "@reboot",
    "0 0 * * 0\n",
    "0 0 * * \u0660",
    "0 0 * * \u017fun",
    "0 0 * * 1\u00a0",
    "0\u00a00 * * * *",
    "59 23 31 12 7",
    "0-59/15 0-23/6 1-31/10 1-12/3 0-7/2",
]
QUANTITIES = [
    "0",
    "0Gi",
    "0.0",
    "00.000k",
    "1",
    "1e3",
    "1E3",
    "1e-3",
    "1E+3",
    "1.5Gi",
    ".5",
    "5.",
    "1.e3",
    "+1",
    "-1",
    "-1Gi",
    "1m",
    "1n",
    "1u",
    "1k",
    "1K",
    "1Ki",
    "1ki",
    "1Ei",
    "1E",
    "1e",
    "0.0001",
    "99999999999999999999Ei",
    "1e99999",
    "1.5.5",
    "1 Gi",
    "1Gi\n",
    "",
]
TIMES = [
    "latest",
    "LATEST",
    "2026-11-26T10:42:17Z",
    "2026-11-26T11:42:17+01:00",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "2028-02-29T00:00:00Z",
    "2100-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-01-32T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T00:60:00Z",
    "2026-01-01T00:00:60Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:59Z",
    "2026-01-01T00:00:00+24:00",
    "2026-01-01T00:00:00+23:60",
    "2026-01-01T00:00:00-00:00",
    "2026-01-01T00:00:00.5Z",
    "2026-01-01t00:00:00z",
    "2026-01-01T00:00:00Z\n",
]
GTIDS = [
    "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5",
    "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7,\n4E11FA47-71CA-11E1-9E33-C80AA9429562:1",
    "0-1-42",
    "0-1-42, 1-2-3",
    "0-1-42,\n1-2-3\n",
    "0-1-42\x0b",
    "0-1-42\u00a0",
    "x",
    "",
    " ",
    "------------------------------------:1",
    "0-1",
]
MYCNF = [
    "max_connections = 100\n",
    "[mysqld]\nmax_connections=5\n",
    "!foo",
    "! include /etc/x.cnf",
    "!include /etc/x.cnf",
    "  !includedir /etc",
    "=1",
    " = 1",
    "\t=",
    "a=1\rserver_id=2",
    "a=1\r\nserver_id=2",
    "a=1\x0bserver_id=2",
    "a=1\x1cserver_id=2",
    "a=1\x85server_id=2",
    "a=1\u2028server_id=2",
    "\x0bserver_id=1",
    "\x0cserver_id=1",
    "\rserver_id=1",
    "server_id\x0b=1",
    "\u00a0server_id=1",
    "\u3000server_id=1",
    "SERVER-ID=1",
    "loose_server_id=1",
    "maximum-loose-server-id=1",
    "skip-log-bin",
    "skip_log_bin = 1",
    "# server_id=1",
    "; server_id=1",
    "[server_id]",
    "[]",
    "[mysqld",
    "ssl_\u212aey=x",
    "\u017fserver_id=1",
    "rpl_semi_sync_master_enabled=1",
    "rpl-semi-sync=1",
    "server_id foo=1",
]
LABEL_KEYS = [
    "a",
    "A",
    "a" * 63,
    "a" * 64,
    "example.com/a",
    "Example.com/a",
    "/a",
    "a/",
    "a/b/c",
    "-a",
    "a_b.c-d",
    ("a" * 63 + ".") * 3 + "a" * 61 + "/x",  # prefix 253
    ("a" * 63 + ".") * 3 + "a" * 62 + "/x",  # prefix 254
    ("a" * 63 + ".") * 4 + "a" * 59 + "/x",  # prefix 315
    "app.kubernetes.io/name",
    "mysql.operator.dev/x",
    "a\n",
]
IMAGES = [
    "mysql:9.7",
    "mysql:8.0",
    "mysql:5.7\n",
    "x:9.7\n",
    "mysql:09.7",
    "mysql:9.07",
    "mariadb:11.4.5",
    "mariadb:10.6",
    "mysql:lts",
    "registry:5000/mysql",
    "mysql@sha256:" + "0" * 64,
    "mysql:19.7",
]
VERSIONS = ["8.4", "9.7", "9.7.1", "9.70", "08.4", "9.7\n", "8.0", "10.11", "11.4", "11.8", "11.08", "10.6"]
TARGETED: dict[str, list[Any]] = {
    "spec.backup.schedule": CRON,
    "spec.restore.pointInTime": TIMES,
    "spec.restore.gtid": GTIDS,
    "spec.config.myCnf": MYCNF,
    "spec.storage.size": QUANTITIES,
    "spec.replication.binlogRetention.maxSize": QUANTITIES,
    "spec.resources.limits": [{"cpu": q} for q in QUANTITIES] + [{"memory": 5}, {"memory": -5}],
    "spec.resources.requests": [{"cpu": q} for q in QUANTITIES] + [{"memory": 5}, {"memory": -5}],
    "spec.resources": [
        {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
        {"requests": {"cpu": "1000m"}, "limits": {"cpu": "1"}},
        {"requests": {"cpu": "1e3"}, "limits": {"cpu": "1k"}},
        {"requests": {"memory": "1Gi"}, "limits": {"memory": "1G"}},
        {"requests": {"memory": 2}, "limits": {"memory": "1"}},
        {"requests": {"memory": "0.5"}, "limits": {"memory": "500m"}},
    ],
    "spec.nodeSelector": [{k: "v"} for k in LABEL_KEYS] + [{"a": v} for v in ("", "a" * 63, "-a", "a\n")],
    "spec.podLabels": [{k: "v"} for k in LABEL_KEYS] + [{"a": v} for v in ("", "a" * 64, "a.", "a\n")],
    "spec.podAnnotations": [{k: "v"} for k in LABEL_KEYS] + [{"a": "x" * 4096}],
    "spec.image": IMAGES,
    "spec.version": VERSIONS,
    "spec.backup.retention.maxAge": ["30d", "0d", "1y", "30d\n", "01d", "9999999999999h"],
    "spec.backup.storage.s3.endpoint": ["http://a", "http://a\n", "https://a/b c", "ftp://x", "http://a b"],
    "spec.backup.storage.s3.bucket": ["abc", "a..b", "ab", "abc\n", "-ab", "ABC", "a" * 63, "a" * 64],
    "spec.tolerations": [
        [{"operator": "Exists"}],
        [{"key": "a", "operator": "Exists", "value": ""}],
        [{"key": "a", "operator": "Exists", "value": "b"}],
        [{"key": "", "operator": "Equal"}],
        [{"key": "a", "tolerationSeconds": 5, "effect": "NoExecute"}],
        [{"key": "a", "tolerationSeconds": 5}],
        [{}],
    ],
    "metadata.name": ["a", "a" * 40, "a" * 41, "a-", "1a", "binlogs", "a.b"],
}

ODD_STRINGS = [
    "",
    "a",
    "A",
    "a\n",
    "\na",
    " a",
    "a ",
    "a\tb",
    "\u00e9",
    "\u212a",
    "-",
    ".",
    "_",
    "%",
    "*",
    "0",
]


# ---------------------------------------------------------------- candidates from the schema


def schema_of(kind: str, crd_files: list[Path]) -> dict:
    for p in crd_files:
        crd = yaml.safe_load(p.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    raise KeyError(kind)


def draw(strategy: st.SearchStrategy, n: int) -> list[Any]:
    """n examples of a strategy, the same ones on every run (derandomized)."""
    out: list[Any] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(value):
        out.append(value)

    collect()
    return out


def pattern_strings(pattern: str, n: int = 5) -> list[str]:
    return draw(st.from_regex(pattern, fullmatch=True), n)


def scalar_candidates(schema: dict) -> list[Any]:
    """Values of a scalar property: its enum, its bounds and one past them, strings of its pattern
    and odd strings, at and past its length limits."""
    out: list[Any] = []
    if "enum" in schema:
        out += list(schema["enum"]) + [str(schema["enum"][0]).lower() + "x"]
    kind = schema.get("type")
    if kind == "integer":
        lo, hi = schema.get("minimum", -5), schema.get("maximum", 100)
        out += sorted({lo - 1, lo, lo + 1, (lo + hi) // 2, hi - 1, hi, hi + 1, 0, -1})
    elif kind == "boolean":
        out += [True, False]
    elif kind == "string" or schema.get("x-kubernetes-int-or-string"):
        limit = schema.get("maxLength", 64)
        out += ODD_STRINGS + ["a" * limit, "a" * (limit + 1)]
        if "pattern" in schema:
            out += pattern_strings(schema["pattern"])
        if schema.get("x-kubernetes-int-or-string"):
            out += [0, 1, -1, 5]
    return out


def field_candidates(schema: dict, path: str) -> list[tuple[str, Any]]:
    """(dotted path, value) for every property under `schema`: scalars their candidates, objects
    empty and each property in turn, maps and lists empty, one entry, and past their limits."""
    out: list[tuple[str, Any]] = [(path, v) for v in TARGETED.get(path, [])]
    kind = schema.get("type")
    if kind == "object" and schema.get("properties"):
        out.append((path, {}))
        for name, sub in schema["properties"].items():
            out += field_candidates(sub, f"{path}.{name}")
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        values = scalar_candidates(schema["additionalProperties"])
        out += [
            (path, {}),
            *((path, {"k": v}) for v in values),
            *((path, {k: "v"}) for k in ODD_STRINGS if k),
        ]
        limit = schema.get("maxProperties")
        if limit:
            out.append((path, {f"k{i}": "v" for i in range(limit + 1)}))
    elif kind == "object":
        out += [(path, {}), (path, {"unknown": {"x": 1}})]
    elif kind == "array":
        items = schema.get("items", {})
        item_values = (
            [v for _, v in field_candidates(items, "item")]
            if items.get("type") == "object"
            else scalar_candidates(items)
        )
        out += [(path, []), *((path, [v]) for v in item_values[:40])]
        if "maxItems" in schema:
            sample = item_values[0] if item_values else "a"
            out.append((path, [copy.deepcopy(sample) for _ in range(schema["maxItems"] + 1)]))
    else:
        out += [(path, v) for v in scalar_candidates(schema)]
    return out


def with_value(body: dict, path: str, value: Any) -> dict:
    """A copy of body with the dotted path set (its parents created)."""
    out = copy.deepcopy(body)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[last] = copy.deepcopy(value)
    return out


def spec_strategy(schema: dict, depth: int = 0) -> st.SearchStrategy:
    """A whole value drawn from a schema: required properties always, others sometimes; strings
    from the property's pattern, its enum or the targeted values of any field."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "object" and schema.get("properties") and depth < 6:
        props = {k: spec_strategy(v, depth + 1) for k, v in schema["properties"].items()}
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in required},
            optional={k: v for k, v in props.items() if k not in required},
        )
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return st.dictionaries(
            st.sampled_from(LABEL_KEYS + ["a", "b", "team"]),
            spec_strategy(schema["additionalProperties"], depth + 1),
            max_size=3,
        )
    if kind == "array" and depth < 6:
        return st.lists(spec_strategy(schema.get("items", {}), depth + 1), max_size=3)
    if kind == "integer":
        lo, hi = schema.get("minimum", -5), schema.get("maximum", 100)
        return st.integers(lo - 1, hi + 1)
    if kind == "boolean":
        return st.booleans()
    if kind == "string" or schema.get("x-kubernetes-int-or-string"):
        options = [st.sampled_from(ODD_STRINGS + QUANTITIES + CRON + TIMES + GTIDS + MYCNF)]
        if "pattern" in schema:
            options.insert(0, st.from_regex(schema["pattern"], fullmatch=True))
        return st.one_of(options)
    return st.just({})


# ---------------------------------------------------------------- the apiserver's half


def dry_run(objs, ns: str, body: dict) -> tuple[dict | None, str]:
    """The object as admission would store it (defaults applied), or None and why it was refused."""
    try:
        stored = objs.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURALS[body["kind"]], body, dry_run="All"
        )
    except client.ApiException as e:
        if e.status in (400, 422):
            return None, json.loads(e.body).get("message", "")[:200]
        raise
    return stored, ""


def candidates(crd_files: list[Path]) -> list[tuple[str, dict]]:
    """(what was changed, body) of every candidate object."""
    out: list[tuple[str, dict]] = []
    for kind, bases in BASES.items():
        schema = schema_of(kind, crd_files)
        fields = field_candidates(schema["properties"]["spec"], "spec")
        fields += [("metadata.name", v) for v in TARGETED["metadata.name"]]
        for n, (base, prefixes) in enumerate(bases):
            root = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": kind,
                "metadata": {"name": f"a{n}"},
                "spec": base,
            }
            out += [
                (f"{kind} base {n}, {path} = {value!r}"[:300], with_value(root, path, value))
                for path, value in fields
                if not prefixes or path.startswith(prefixes)
            ]
        wholes = draw(spec_strategy(schema["properties"]["spec"]), 100)
        out += [
            (
                f"{kind} spec {json.dumps(spec)}"[:600],
                {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": "w"}, "spec": spec},
            )
            for spec in wholes
        ]
    return out


def disagreement(stored: dict) -> tuple[str, str] | None:
    """(field, message) when the parser refuses an admitted object, None when it accepts it."""
    try:
        PARSERS[stored["kind"]](stored)
    except Exception as e:  # noqa: BLE001 - any refusal or crash is a disagreement
        return getattr(e, "field", type(e).__name__), str(e)
    return None


def test_the_parser_accepts_every_object_admission_admits(control_plane, crds, namespace):  # noqa: F811
    from tests.support.crds import CRD_FILES

    objs = client.CustomObjectsApi(control_plane.api_client())
    started = time.monotonic()
    found = candidates(CRD_FILES)
    drawn = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda c: dry_run(objs, namespace, c[1]), found))
    submitted = time.monotonic()
    admitted = [(label, stored) for (label, _), (stored, _) in zip(found, results) if stored is not None]
    failures, inexpressible = [], []
    for label, stored in admitted:
        refused = disagreement(stored)
        if refused is not None:
            field, message = refused
            (inexpressible if field in INEXPRESSIBLE else failures).append(f"{label}\n    -> {message}")
    print(
        f"\n{len(found)} candidates: {len(admitted)} admitted, {len(found) - len(admitted)} refused by "
        f"admission; {len(failures) + len(inexpressible)} admitted and refused by the parser, "
        f"{len(inexpressible)} of them on a check admission cannot make (drawn in {drawn - started:.1f} s, "
        f"submitted in {submitted - drawn:.1f} s, parsed in {time.monotonic() - submitted:.1f} s):",
        file=sys.stderr,
    )
    for field, reason in INEXPRESSIBLE.items():
        print(f"  {field}: {reason}", file=sys.stderr)
    if not INEXPRESSIBLE:
        print("  none: every check of the parser is in the CRDs", file=sys.stderr)
    for what, why in BEYOND_ADMISSION.items():
        print(f"  beyond admission: {what}: {why}", file=sys.stderr)
    for line in inexpressible[:20]:
        print(f"  met: {line}", file=sys.stderr)
    assert not failures, f"{len(failures)} admitted objects the parser refuses:\n" + "\n".join(failures)
    # enough of both kinds, so that the comparison means something
    assert len(admitted) > 1000 and len(found) - len(admitted) > 500, (len(found), len(admitted))


def test_the_crd_rules_match_the_parsers_regular_expressions():
    """The CEL rules that admit a schedule, a point in time and a GTID set match the parser's own
    regular expressions, character for character (RE2 and Python read them alike: no \\s, no $
    before a final newline: the parser uses fullmatch)."""
    crd = yaml.safe_load((REPO / "crds" / "mysqlclusters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    def rules(schema: dict) -> list[str]:
        return [r["rule"] for r in schema["x-kubernetes-validations"]]

    schedule = rules(spec["backup"]["properties"]["schedule"])
    assert schedule[0] == f"self.matches('{CRON_PATTERN}')"
    assert all(r.startswith(f"!self.matches('{CRON_PATTERN}') || ") for r in schedule[1:])
    assert (
        rules(spec["restore"]["properties"]["pointInTime"])[0] == f"self.matches('{POINT_IN_TIME_PATTERN}')"
    )
    assert rules(spec["restore"]["properties"]["gtid"])[0] == f"self.matches('{GTID_PATTERN}')"
