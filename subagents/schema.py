"""A small JSON-Schema validator for tool arguments, naming the field and the expectation.

It covers what tool parameter schemas use in practice (scenario ``params`` and MCP
``inputSchema``): ``type`` (or a list of types), ``enum``, ``const``, ``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``,
``pattern`` (a regular-expression *search*, as in JSON Schema), ``items``,
``minItems``, ``maxItems``, ``properties``, ``required``, ``additionalProperties``,
``anyOf``/``oneOf`` and local ``$ref`` into ``$defs``. Unknown keywords are ignored, as
JSON Schema says.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

# tiktoken's dependency (no stubs): searches with a timeout, see _matches.
import regex  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


class SchemaViolation(BaseModel):
    """The first argument that breaks the schema: where, what was expected, what came."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    expected: str
    got: str

    @property
    def message(self) -> str:
        """One sentence for people."""
        return f"invalid argument {self.field!r}: expected {self.expected}, got {self.got}"


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    try:
        return regex.compile(pattern)
    except regex.error:
        return re.compile(pattern)  # what `re` takes and `regex` does not: matched by re


_MATCH_TIMEOUT_S = 1.0


def _matches(pattern: str, value: str) -> bool:
    """A regular-expression search bounded in time.

    ``regex``, not ``re``: the same syntax, but a pattern that backtracks catastrophically
    (``^(a+)+$`` on ``aaa…!``, from a job file or a server's inputSchema) gives up after
    a second instead of hanging the event loop, and with ``re`` holding the GIL, the
    whole process. A search that gives up is no match.
    """
    compiled = _regex(pattern)
    if isinstance(compiled, re.Pattern):
        return compiled.search(value) is not None
    try:
        return compiled.search(value, timeout=_MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        return False


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "array":
        return isinstance(value, list | tuple)
    if name == "object":
        return isinstance(value, Mapping)
    if name == "null":
        return value is None
    return True


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(value: Any, schema: Mapping[str, Any], path: str = "") -> SchemaViolation | None:
    """The first violation of ``schema`` by ``value``, or None when it conforms."""
    return _validate(value, schema, path, schema)


def _validate(
    value: Any, schema: Mapping[str, Any], path: str, root: Mapping[str, Any]
) -> SchemaViolation | None:
    where = path or "<arguments>"
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            if any(_validate(value, opt, path, root) is None for opt in options):
                break
            expected = " or ".join(describe(opt) for opt in options)
            return SchemaViolation(field=where, expected=expected, got=_show(value))
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, n) for n in names):
            expected = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
            return SchemaViolation(field=where, expected=expected, got=_show(value))
    if "const" in schema and value != schema["const"]:
        return SchemaViolation(field=where, expected=f"{schema['const']!r}", got=_show(value))
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        options = ", ".join(repr(e) for e in enum)
        return SchemaViolation(field=where, expected=f"one of {options}", got=_show(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        bad = _number_bound(value, schema)
        if bad:
            return SchemaViolation(field=where, expected=bad, got=_show(value))
    if isinstance(value, str):
        bad = _string_bound(value, schema)
        if bad:
            return SchemaViolation(field=where, expected=bad, got=_show(value))
    if isinstance(value, list | tuple):
        return _validate_array(value, schema, path, root)
    if isinstance(value, Mapping):
        return _validate_object(value, schema, path, root)
    return None


def _number_bound(value: float, schema: Mapping[str, Any]) -> str | None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if lo is not None and value < lo:
        return f"a value ≥ {lo}"
    if hi is not None and value > hi:
        return f"a value ≤ {hi}"
    if xlo is not None and value <= xlo:
        return f"a value > {xlo}"
    if xhi is not None and value >= xhi:
        return f"a value < {xhi}"
    return None


def _string_bound(value: str, schema: Mapping[str, Any]) -> str | None:
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if lo is not None and len(value) < lo:
        return f"a string of at least {lo} characters"
    if hi is not None and len(value) > hi:
        return f"a string of at most {hi} characters"
    pattern = schema.get("pattern")
    if pattern is not None and not _matches(pattern, value):
        return f"a string matching {pattern}"
    return None


def _validate_array(
    value: list[Any] | tuple[Any, ...], schema: Mapping[str, Any], path: str, root: Any
) -> SchemaViolation | None:
    where = path or "<arguments>"
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if lo is not None and len(value) < lo:
        return SchemaViolation(field=where, expected=f"at least {lo} items", got=_show(value))
    if hi is not None and len(value) > hi:
        return SchemaViolation(field=where, expected=f"at most {hi} items", got=_show(value))
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            bad = _validate(item, items, f"{path}[{i}]", root)
            if bad:
                return bad
    return None


def _validate_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: str, root: Any
) -> SchemaViolation | None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            field = f"{path}.{name}" if path else name
            return SchemaViolation(
                field=field, expected=f"a required argument ({describe(props.get(name, {}))})",
                got="nothing",
            )
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        field = f"{path}.{name}" if path else str(name)
        if name in props:
            bad = _validate(item, props[name], field, root)
            if bad:
                return bad
        elif extra is False:
            allowed = ", ".join(sorted(props)) or "none"
            return SchemaViolation(
                field=field, expected=f"no such argument (allowed: {allowed})", got=_show(item)
            )
        elif isinstance(extra, Mapping):
            bad = _validate(item, extra, field, root)
            if bad:
                return bad
    return None


def describe(schema: Mapping[str, Any]) -> str:
    """A short phrase for what ``schema`` accepts, for error messages and listings."""
    if "enum" in schema:
        return "one of " + ", ".join(repr(e) for e in schema["enum"])
    types = schema.get("type")
    if types is None:
        return "any value"
    names = [types] if isinstance(types, str) else list(types)
    text = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"≥ {schema['minimum']}")
    if "maximum" in schema:
        bounds.append(f"≤ {schema['maximum']}")
    if bounds:
        text += " " + " and ".join(bounds)
    return text


def params_to_schema(params: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON Schema of a scenario's ``params`` block (required unless ``required: false``)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in params.items():
        properties[name] = {k: v for k, v in spec.items() if k != "required"}
        if spec.get("required", True):
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
