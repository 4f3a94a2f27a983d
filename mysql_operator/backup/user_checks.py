"""A user's own checks of a restored server (spec.restore.checksConfigMap, and a restore drill's
spec.backup.drill.checksConfigMap; issue 49): SQL queries with the result each must give, from a
ConfigMap the restore Job mounts (the operator never reads it: its text is the tenant's).

The ConfigMap's keys come in pairs: NAME.sql holds one query, NAME.expected the rows it must
return as text - one row per line, its columns separated by a tab, NULL for a null, as
`mysql --batch --skip-column-names` prints plain values; an empty NAME.expected: no row. Rows are
compared in order (a query whose order matters says ORDER BY).

Each query runs on the restored primary once everything is loaded and replayed, in a read-only
transaction that is rolled back, bounded to STATEMENT_SECONDS; only statements that read are run
(READS). A failed check fails the restore, naming the check and where its result differs, never
the values: a check's rows stay in the database (a status and its Events are read by more people
than the data)."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from mysql_operator.backup.restore_types import RestoreError, Target, instance_of
from mysql_operator.db.observation import InstanceError

STATEMENT_SECONDS = 300  # one check's query, stopped by the server past it
# bounds that keep the names of those passed within the restore Job's report (4,000 bytes)
MAX_CHECKS = 50
MAX_NAME = 40
MAX_QUERY_BYTES = 64 * 1024
# the first word of a statement that only reads
READS = frozenset({"SELECT", "WITH", "TABLE", "VALUES", "SHOW", "CHECKSUM", "EXPLAIN", "DESCRIBE", "DESC"})
_COMMENT = re.compile(r"\s*(?:--[ \t][^\n]*(?:\n|$)|#[^\n]*(?:\n|$)|/\*(?!!)(?:.|\n)*?\*/)")
_WORD = re.compile(r"\s*\(*\s*([A-Za-z]+)")


@dataclass(frozen=True)
class Check:
    name: str
    query: str
    expected: tuple[tuple[str, ...], ...]


def parse(files: Mapping[str, str], source: str) -> tuple[Check, ...]:
    """The checks of a ConfigMap's `files` (key -> text), by name; `source` names it in errors.
    Raises RestoreError naming the key and the fix."""
    queries: dict[str, str] = {}
    expected: dict[str, str] = {}
    for key, text in files.items():
        name, dot, kind = key.rpartition(".")
        if not dot or not name or kind not in ("sql", "expected") or len(name) > MAX_NAME:
            raise RestoreError(
                f"{source}: key {key!r} is neither NAME.sql (a query) nor NAME.expected (its rows), "
                f"NAME at most {MAX_NAME} characters: rename or remove it"
            )
        (queries if kind == "sql" else expected)[name] = text
    for name in sorted(set(queries) ^ set(expected)):
        lacking = f"{name}.expected" if name in queries else f"{name}.sql"
        raise RestoreError(f"{source}: {lacking} is missing: every check needs NAME.sql and NAME.expected")
    if not queries:
        raise RestoreError(f"{source}: no check in it (missing, or no key NAME.sql): add one or unset it")
    if len(queries) > MAX_CHECKS:
        raise RestoreError(f"{source}: {len(queries)} checks; at most {MAX_CHECKS}")
    return tuple(_check(name, queries[name], expected[name], source) for name in sorted(queries))


def _check(name: str, query: str, expected: str, source: str) -> Check:
    if len(query.encode()) > MAX_QUERY_BYTES:
        raise RestoreError(f"{source}: {name}.sql is longer than {MAX_QUERY_BYTES} bytes")
    query = query.strip().rstrip(";").rstrip()
    word = first_word(query)
    if word not in READS:
        raise RestoreError(
            f"{source}: {name}.sql starts with {repr(word) if word else 'no keyword'}: a check may only read "
            f"({', '.join(sorted(READS))})"
        )
    lines = expected.split("\n")
    if lines[-1] == "":  # the text's last line ends with a newline
        lines.pop()
    return Check(name, query, tuple(tuple(line.split("\t")) for line in lines))


def first_word(query: str) -> str:
    """The statement's first keyword, upper-cased, after comments and opening parentheses
    ('' when there is none). An executable comment (/*! ... */) is not skipped: it may write."""
    pos = 0
    while m := _COMMENT.match(query, pos):
        if m.end() == pos:
            break
        pos = m.end()
    word = _WORD.match(query, pos)
    return word.group(1).upper() if word else ""


def read_folder(folder: str, source: str) -> tuple[Check, ...]:
    """The checks of a ConfigMap mounted at `folder` (its keys as files; the kubelet's own
    entries, starting with '..', skipped). A folder that is missing or empty has no check."""
    files: dict[str, str] = {}
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith(".."))
    except FileNotFoundError:
        names = []
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                files[name] = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise RestoreError(f"{source}: key {name!r} cannot be read as UTF-8 text: {e}") from None
    return parse(files, source)


def text(value: Any) -> str:
    """A value as the command-line client prints it."""
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dt.timedelta):  # TIME
        seconds = int(value.total_seconds())
        sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
        micro = f".{value.microseconds:06d}" if value.microseconds and not sign else ""
        return f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{micro}"
    return str(value)


def difference(expected: tuple[tuple[str, ...], ...], got: list[tuple[str, ...]]) -> str | None:
    """Where `got` differs from `expected` (None: equal), without either's values."""
    for i, (want, have) in enumerate(zip(expected, got), start=1):
        if len(want) != len(have):
            return f"row {i} has {len(have)} columns, the expected row {len(want)}"
        for j, (a, b) in enumerate(zip(want, have), start=1):
            if a != b:
                return f"row {i} differs from the expected row in column {j}"
    if len(expected) != len(got):
        return f"it returned {len(got)} rows, {len(expected)} expected"
    return None


def run(target: Target, checks: tuple[Check, ...]) -> tuple[str, ...]:
    """Run `checks` on `target` (read-only, each in a transaction rolled back). Returns the names
    of those that passed; raises RestoreError naming each that failed and why."""
    failed: list[str] = []
    inst = instance_of(target, read_timeout=STATEMENT_SECONDS + 30)  # the server stops a statement first
    try:
        inst.execute(inst.dialect.limit_statement_time(STATEMENT_SECONDS))
        for c in checks:
            try:
                inst.execute("START TRANSACTION READ ONLY")
                try:
                    rows = inst.execute(c.query)
                finally:
                    inst.execute("ROLLBACK")
            except InstanceError as e:
                failed.append(f"{c.name}: {e}")
                continue
            diff = difference(c.expected, [tuple(text(v) for v in row) for row in rows])
            if diff is not None:
                failed.append(f"{c.name}: {diff}")
    except InstanceError as e:
        raise RestoreError(f"running the checks: {e}") from None
    finally:
        inst.close()
    if failed:
        raise RestoreError(f"{len(failed)} of {len(checks)} checks failed: " + "; ".join(failed))
    return tuple(c.name for c in checks)
