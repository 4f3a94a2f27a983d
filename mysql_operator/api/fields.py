"""Reading one field of a custom object (an object, a number in a range, a flag, a string, one of
some choices, a duration, a map of strings), with SpecError naming the field's path and the fix;
the unknown fields, and the older spellings a newer field supersedes, met while a MySQLCluster is
parsed.

The API's conventions (docs/reference/index.md): a choice is spelled in UpperCamelCase; a duration
is a string of a whole number and its unit (`10s`, `90d`); a Secret the user provides is an object
`{name, key}` in a field named after what it holds (`...Secret`). The spellings of earlier
versions (`mysql`, `delaySeconds: 10`, `passwordSecretKeyRef`) are read as before."""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any, Mapping


from .types import (
    DNS_SUBDOMAIN_RE,
    SpecError,
)


# ---------------------------------------------------------------- reading helpers


# while a MySQLCluster is parsed: the unknown fields met, ignored (elsewhere they are refused)
IGNORED_FIELDS: ContextVar[list[str] | None] = ContextVar("ignored_fields", default=None)
# while a MySQLCluster is parsed: (older field, newer field) both set; the newer one is read (an
# object made before the newer field existed has the older one's default stored in it)
SUPERSEDED_FIELDS: ContextVar[list[tuple[str, str]] | None] = ContextVar("superseded_fields", default=None)


def read_object(value: Any, path: str, allowed: set[str]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object, not {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        ignored = IGNORED_FIELDS.get()
        if ignored is None:
            raise SpecError(f"{path}.{unknown[0]}", "unknown field: remove it (see `kubectl explain`)")
        ignored.extend(f"{path}.{k}" for k in unknown)
        return {k: v for k, v in value.items() if k in allowed}
    return value


def read_int(d: dict, key: str, path: str, default: int | None, lo: int, hi: int) -> int | None:
    v = d.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"{path}.{key}", f"must be an integer, not {v!r}")
    if not lo <= v <= hi:
        raise SpecError(f"{path}.{key}", f"must be between {lo} and {hi}, not {v}")
    return v


def read_bool(d: dict, key: str, path: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise SpecError(f"{path}.{key}", f"must be true or false, not {v!r}")
    return v


def read_str(
    d: dict,
    key: str,
    path: str,
    default: str | None = None,
    *,
    required: bool = False,
    max_len: int = 253,
    pattern: re.Pattern | None = None,
    hint: str = "",
) -> str | None:
    v = d.get(key, default)
    if v is None:
        if required:
            raise SpecError(f"{path}.{key}", "is required")
        return None
    if not isinstance(v, str):
        raise SpecError(f"{path}.{key}", f"must be a string, not {v!r}")
    if len(v) > max_len:
        raise SpecError(f"{path}.{key}", f"must be at most {max_len} characters, not {len(v)}")
    if pattern is not None and not pattern.fullmatch(v):  # as the CRD's (RE2) patterns: no "\n" before $
        raise SpecError(f"{path}.{key}", f"{v!r} is not valid{': ' + hint if hint else ''}")
    return v


def read_enum(d: dict, key: str, path: str, default: str, choices: tuple[str, ...]) -> str:
    v = d.get(key, default)
    if v not in choices:
        raise SpecError(f"{path}.{key}", f"must be one of {', '.join(choices)}, not {v!r}")
    return v


def read_spelled(d: dict, key: str, path: str, default: str, spellings: Mapping[str, str]) -> str:
    """One of some choices, spelled as the API spells it (the keys of `spellings`, UpperCamelCase)
    or as an earlier version did (its values, which are also what is returned)."""
    v = d.get(key, default)
    if v in spellings:
        return spellings[v]
    if v in spellings.values():
        return v
    raise SpecError(f"{path}.{key}", f"must be one of {', '.join(spellings)}, not {v!r}")


# a duration: a whole number and its unit, seconds to weeks
DURATION_RE = re.compile(r"^(0|[1-9][0-9]{0,8})(s|m|h|d|w)$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration_seconds(text: str) -> int:
    """`text` (DURATION_RE) in seconds."""
    m = DURATION_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration")
    return int(m.group(1)) * UNIT_SECONDS[m.group(2)]


def format_duration(seconds: int) -> str:
    """`seconds` in the largest unit that divides it: 600 -> 10m, 7776000 -> 90d."""
    for unit in ("w", "d", "h", "m"):
        if seconds and seconds % UNIT_SECONDS[unit] == 0:
            return f"{seconds // UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


def read_duration(
    d: dict,
    key: str,
    path: str,
    default: int,
    lo: int,
    hi: int,
    *,
    older: str | None = None,
    older_unit: int = 1,
) -> int:
    """A duration in seconds, from `key` (a string: DURATION_RE), else from `older`, the field an
    earlier version named it by (an integer count of `older_unit` seconds), else `default`. Both
    set: `key` is read, and the older one is named in SUPERSEDED_FIELDS (or refused outside a
    MySQLCluster)."""
    if key in d:
        if older is not None and d.get(older) is not None:
            superseded = SUPERSEDED_FIELDS.get()
            if superseded is None:
                raise SpecError(
                    f"{path}.{older}", f"set either {key} or {older} (its older spelling), not both"
                )
            superseded.append((f"{path}.{older}", f"{path}.{key}"))
        v = d[key]
        if not isinstance(v, str) or not DURATION_RE.fullmatch(v):
            raise SpecError(
                f"{path}.{key}",
                f"{v!r} is not a duration: use a whole number and s, m, h, d or w, e.g. {format_duration(default)}",
            )
        seconds = duration_seconds(v)
        if not lo <= seconds <= hi:
            raise SpecError(
                f"{path}.{key}",
                f"must be between {format_duration(lo)} and {format_duration(hi)}, not {v}",
            )
        return seconds
    if older is not None and d.get(older) is not None:
        count = read_int(d, older, path, None, -(-lo // older_unit), hi // older_unit)
        return (count or 0) * older_unit
    return default


def read_str_map(d: dict, key: str, path: str, max_len: int = 4096) -> dict[str, str]:
    v = d.get(key) or {}
    if not isinstance(v, dict):
        raise SpecError(f"{path}.{key}", "must be a map of strings")
    for k, val in v.items():
        if not isinstance(val, str) or len(val) > max_len:
            raise SpecError(f"{path}.{key}.{k}", f"must be a string of at most {max_len} characters")
    return dict(sorted(v.items()))


def read_metadata(body: Any, kind: str) -> tuple[dict, str, str]:
    if not isinstance(body, dict):
        raise SpecError("<root>", f"a {kind} must be an object")
    meta = body.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("metadata.name", "is required")
    return meta, name, meta.get("namespace") or "default"


def read_config_map_name(d: dict, key: str, path: str) -> str | None:
    """`path`.`key`: {name} of a ConfigMap in the object's namespace (None when absent)."""
    if d.get(key) is None:
        return None
    ref = read_object(d[key], f"{path}.{key}", {"name"})
    return read_str(
        ref, "name", f"{path}.{key}", required=True, pattern=DNS_SUBDOMAIN_RE, hint="a ConfigMap name"
    )
