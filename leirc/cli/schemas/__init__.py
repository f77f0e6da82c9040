"""The JSON schemas of the ``--json`` documents, one per command (``<command>.json``), and a
validator for the subset of JSON Schema they use.

Every document starts with the envelope (``envelope.json``): ``version`` (bumped on an
incompatible change), ``command``, ``ok``, ``error`` (null, or ``kind`` and ``message``) and
``diagnostics``; the command's own fields follow and are required when ``error`` is null.

The validator knows ``type`` (one name or a list), ``const``, ``enum``, ``properties``,
``required``, ``items``, ``additionalProperties`` (a schema), ``minimum``, ``anyOf``,
``allOf``, ``if``/``then`` and ``$ref`` to another file of this folder. An unknown keyword
is an error in the schema, never silently ignored, so a schema cannot promise more than is
checked.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: keywords that only document
_NOTES = {"$comment", "description", "title"}
_KNOWN = _NOTES | {"type", "const", "enum", "properties", "required", "items", "additionalProperties", "minimum",
                   "anyOf", "allOf", "if", "then", "$ref"}

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
}


def commands() -> list[str]:
    """The commands that have a schema."""
    return sorted(p.stem for p in HERE.glob("*.json") if p.stem not in ("envelope", "diagnostic"))


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    """The schema ``name`` (``verify`` or ``verify.json``)."""
    file = name if name.endswith(".json") else name + ".json"
    return json.loads((HERE / file).read_text(encoding="utf-8"))


def validate(doc, schema: str | dict) -> list[str]:
    """Every way ``doc`` breaks ``schema`` (a schema or the name of one), as ``$.path:
    message`` lines; empty when it conforms."""
    errors: list[str] = []
    _check(doc, load(schema) if isinstance(schema, str) else schema, "$", errors)
    return errors


def _check(v, s: dict, path: str, errors: list) -> None:
    unknown = set(s) - _KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {path} are not supported by this validator")
    if "$ref" in s:
        _check(v, load(s["$ref"]), path, errors)
    for sub in s.get("allOf", ()):
        _check(v, sub, path, errors)
    if "anyOf" in s:
        if not any(not validate(v, sub) for sub in s["anyOf"]):
            errors.append(f"{path}: matches none of the {len(s['anyOf'])} alternatives")
    if "if" in s and not validate(v, s["if"]) and "then" in s:
        _check(v, s["then"], path, errors)
    if "type" in s:
        names = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_TYPES[t](v) for t in names):
            errors.append(f"{path}: expected {' or '.join(names)}, got {type(v).__name__} {v!r:.60}")
            return
    if "const" in s and v != s["const"]:
        errors.append(f"{path}: expected {s['const']!r}, got {v!r:.60}")
    if "enum" in s and v not in s["enum"]:
        errors.append(f"{path}: {v!r:.60} is not one of {s['enum']}")
    if "minimum" in s and _TYPES["number"](v) and v < s["minimum"]:
        errors.append(f"{path}: {v} is below the minimum {s['minimum']}")
    if isinstance(v, dict):
        for key in s.get("required", ()):
            if key not in v:
                errors.append(f"{path}: missing required field '{key}'")
        props = s.get("properties", {})
        for key, val in v.items():
            if key in props:
                _check(val, props[key], f"{path}.{key}", errors)
            elif isinstance(s.get("additionalProperties"), dict):
                _check(val, s["additionalProperties"], f"{path}.{key}", errors)
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            _check(x, s["items"], f"{path}[{i}]", errors)
