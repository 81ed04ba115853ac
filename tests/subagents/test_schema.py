"""The argument validator: the first violation, naming the field and the expectation."""

from __future__ import annotations

from typing import Any

import pytest

from subagents import params_to_schema, validate

WEB_SEARCH = params_to_schema(
    {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "required": False},
    }
)
PATENT_DB = params_to_schema(
    {"since": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}$"}}
)


def test_params_to_schema_builds_a_closed_object_schema() -> None:
    """Scenario params become an object schema; required unless required: false."""
    assert WEB_SEARCH == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"query": "batteries"}, id="required-only"),
        pytest.param({"query": "batteries", "limit": 20}, id="at-maximum"),
        pytest.param({"query": "batteries", "limit": 1}, id="at-minimum"),
        pytest.param({"query": "batteries", "limit": 5.0}, id="integral-float"),
    ],
)
def test_conforming_arguments_pass(args: dict[str, Any]) -> None:
    """Arguments within the schema give no violation."""
    assert validate(args, WEB_SEARCH) is None


@pytest.mark.parametrize(
    ("args", "schema", "field", "expected_part"),
    [
        pytest.param({"query": "x", "limit": 50}, WEB_SEARCH, "limit", "20", id="above-maximum"),
        pytest.param({"query": "x", "limit": 0}, WEB_SEARCH, "limit", "1", id="below-minimum"),
        pytest.param({"limit": 5}, WEB_SEARCH, "query", "required", id="missing-required"),
        pytest.param({"query": "x", "lang": "en"}, WEB_SEARCH, "lang", "no such argument",
                     id="unknown-argument"),
        pytest.param({"query": 3}, WEB_SEARCH, "query", "a string", id="wrong-type"),
        pytest.param({"query": "x", "limit": True}, WEB_SEARCH, "limit", "an integer",
                     id="bool-is-not-integer"),
        pytest.param({"query": "x", "limit": 2.5}, WEB_SEARCH, "limit", "an integer",
                     id="fractional-is-not-integer"),
        pytest.param({"since": "2024-13-01"}, PATENT_DB, "since", "matching",
                     id="pattern-mismatch"),
    ],
)
def test_violations_name_field_and_expectation(
    args: dict[str, Any], schema: dict[str, Any], field: str, expected_part: str
) -> None:
    """A violation names the offending argument and what it should have been."""
    violation = validate(args, schema)
    assert violation is not None
    assert violation.field == field
    assert expected_part in violation.expected
    assert field in violation.message


def test_pattern_is_a_search_not_a_full_match() -> None:
    """pattern matches anywhere in the string, as in JSON Schema."""
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "bat"}}}
    assert validate({"q": "solid-state battery"}, schema) is None
    assert validate({"q": "cells"}, schema) is not None


def test_unknown_arguments_pass_when_the_schema_allows_them() -> None:
    """Without additionalProperties: false, extra arguments are accepted."""
    assert validate({"extra": 1}, {"type": "object", "properties": {}}) is None


@pytest.mark.parametrize(
    ("value", "schema", "field"),
    [
        pytest.param({"tags": ["a", 3]},
                     {"type": "object",
                      "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
                     "tags[1]", id="array-item"),
        pytest.param({"range": {"from": "x"}},
                     {"type": "object",
                      "properties": {"range": {"type": "object", "required": ["to"]}}},
                     "range.to", id="nested-required"),
        pytest.param({"mode": "loud"},
                     {"type": "object",
                      "properties": {"mode": {"enum": ["fast", "slow"]}}},
                     "mode", id="enum"),
        pytest.param({"n": "x"},
                     {"type": "object",
                      "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
                     "n", id="any-of"),
        pytest.param({"n": 0},
                     {"type": "object", "$defs": {"Pos": {"type": "integer", "minimum": 1}},
                      "properties": {"n": {"$ref": "#/$defs/Pos"}}},
                     "n", id="local-ref"),
        pytest.param({"s": "ab"},
                     {"type": "object",
                      "properties": {"s": {"type": "string", "minLength": 3}}},
                     "s", id="min-length"),
        pytest.param({"xs": []},
                     {"type": "object",
                      "properties": {"xs": {"type": "array", "minItems": 1}}},
                     "xs", id="min-items"),
    ],
)
def test_nested_violations_have_paths(
    value: dict[str, Any], schema: dict[str, Any], field: str
) -> None:
    """Violations inside arrays, objects, enums, unions and refs carry their path."""
    violation = validate(value, schema)
    assert violation is not None
    assert violation.field == field
