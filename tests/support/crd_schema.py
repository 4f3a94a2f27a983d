"""A CRD's schema walked: every property with its dotted path, and those without a description."""

from __future__ import annotations


def fields(schema: dict, prefix: str = "") -> list[tuple[str, dict]]:
    """(dotted path, schema) of every property under `schema`, walking into nested objects, array
    items ([] in the path) and map values ({} in the path); tests/unit/test_api_reference.py uses it."""
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        out += [(path, sub), *_below(sub, path)]
    return out


def _below(schema: dict, path: str) -> list[tuple[str, dict]]:
    out = fields(schema, path + ".")
    if isinstance(schema.get("items"), dict):
        out += _below(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _below(schema["additionalProperties"], path + "{}")
    return out


def undescribed(schema: dict) -> list[str]:
    """Dotted paths of the properties under `schema` without a non-empty description."""
    return [path for path, sub in fields(schema) if not str(sub.get("description") or "").strip()]


# The root metadata schema may hold nothing but `type: object` (and name/generateName
# restrictions): the API server refuses a CRD whose metadata has a description ("must not specify
# anything other than name and generateName"); kubectl explain describes ObjectMeta itself.
ROOT_EXEMPT = ("metadata",)


def missing(crd: dict) -> list[str]:
    """`<plural> <path>` of every property without a description, in every version of the CRD."""
    plural = crd["spec"]["names"]["plural"]
    return [
        f"{plural} {path}"
        for version in crd["spec"]["versions"]
        for path in undescribed(version["schema"]["openAPIV3Schema"])
        if path not in ROOT_EXEMPT
    ]
