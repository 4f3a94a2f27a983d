"""Reading one field of a custom object (an object, a number in a range, a flag, a string, one of
some choices, a map of strings), with SpecError naming the field's path and the fix; the unknown
fields met while a MySQLCluster is parsed."""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any


from .types import (
    SpecError,
)


# ---------------------------------------------------------------- reading helpers


# while a MySQLCluster is parsed: the unknown fields met, ignored (elsewhere they are refused)
IGNORED_FIELDS: ContextVar[list[str] | None] = ContextVar("ignored_fields", default=None)


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
        raise SpecError(f"{path}.{key}", f"must be at most {max_len} characters")
    if pattern is not None and not pattern.fullmatch(v):  # as the CRD's (RE2) patterns: no "\n" before $
        raise SpecError(f"{path}.{key}", f"{v!r} is not valid{': ' + hint if hint else ''}")
    return v


def read_enum(d: dict, key: str, path: str, default: str, choices: tuple[str, ...]) -> str:
    v = d.get(key, default)
    if v not in choices:
        raise SpecError(f"{path}.{key}", f"must be one of {', '.join(choices)}, not {v!r}")
    return v


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
