"""Tools: schemas built from type hints or given explicitly, and argument checks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from subagents import CallContext, Tool


def search(query: str, limit: Annotated[int, Field(ge=1, le=20)] = 5) -> list[str]:
    """Search the web."""
    return [query] * limit


async def fetch(url: str, ctx: CallContext, retries: int | None = None) -> str:
    """Fetch a page."""
    return url


def test_from_function_builds_schema_from_sync_hints() -> None:
    """A sync function's hints, defaults and Annotated constraints become its schema."""
    tool = Tool.from_function(search)
    assert tool.name == "search"
    assert tool.description == "Search the web."
    assert tool.is_async is False
    assert tool.wants_context is False
    assert tool.schema["type"] == "object"
    assert tool.schema["required"] == ["query"]
    assert tool.schema["additionalProperties"] is False
    assert tool.schema["properties"]["query"]["type"] == "string"
    limit = tool.schema["properties"]["limit"]
    assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == (
        "integer", 1, 20, 5,
    )


def test_from_function_builds_schema_from_async_hints() -> None:
    """An async function is detected, and its ctx parameter is not part of the schema."""
    tool = Tool.from_function(fetch, name="fetch_page", description="Get one page")
    assert (tool.name, tool.description) == ("fetch_page", "Get one page")
    assert tool.is_async is True
    assert tool.wants_context is True
    assert set(tool.schema["properties"]) == {"url", "retries"}
    assert tool.schema["required"] == ["url"]


@pytest.mark.parametrize(
    ("args", "field", "expected_part"),
    [
        pytest.param({"query": "x", "limit": 50}, "limit", "20", id="annotated-maximum"),
        pytest.param({"limit": 3}, "query", "required", id="missing"),
        pytest.param({"query": "x", "lang": "en"}, "lang", "no such argument", id="unknown"),
        pytest.param({"query": "x", "limit": "many"}, "limit", "integer", id="wrong-type"),
    ],
)
def test_from_function_checks_args(args: dict[str, Any], field: str, expected_part: str) -> None:
    """check_args names the field and the expectation for hint-built tools."""
    violation = Tool.from_function(search).check_args(args)
    assert violation is not None
    assert violation.field == field
    assert expected_part in violation.expected


def test_from_function_prepares_args_with_defaults() -> None:
    """prepare_args fills defaults and coerces the way the hints say."""
    tool = Tool.from_function(search)
    assert tool.check_args({"query": "x"}) is None
    assert tool.prepare_args({"query": "x"}) == {"query": "x", "limit": 5}


def test_literal_hint_becomes_an_enum() -> None:
    """A Literal hint restricts the argument to its values."""

    def sort(order: Literal["asc", "desc"]) -> str:
        return order

    tool = Tool.from_function(sort)
    assert tool.schema["properties"]["order"]["enum"] == ["asc", "desc"]
    assert tool.check_args({"order": "asc"}) is None
    violation = tool.check_args({"order": "random"})
    assert violation is not None and violation.field == "order"


def test_variadic_parameters_are_refused() -> None:
    """A function taking **kwargs cannot be described by a schema."""

    def loose(**kwargs: Any) -> None:
        return None

    with pytest.raises(TypeError, match="cannot be described"):
        Tool.from_function(loose)


@pytest.mark.parametrize(
    ("side_effects", "idempotent", "expected"),
    [
        pytest.param(False, None, True, id="read-only-is-idempotent"),
        pytest.param(True, None, False, id="side-effects-not-idempotent-by-default"),
        pytest.param(True, True, True, id="declared-idempotent"),
    ],
)
def test_idempotent_defaults(side_effects: bool, idempotent: bool | None, expected: bool) -> None:
    """idempotent defaults to True, or to False when the tool has side effects."""
    tool = Tool.from_function(search, side_effects=side_effects, idempotent=idempotent)
    assert tool.side_effects is side_effects
    assert tool.idempotent is expected
    schema_tool = Tool.from_schema(
        "s", search, {"query": {"type": "string"}}, side_effects=side_effects,
        idempotent=idempotent,
    )
    assert schema_tool.idempotent is expected


def test_from_schema_accepts_scenario_params() -> None:
    """A scenario params dict becomes a closed schema that check_args enforces."""

    async def patents(since: str) -> list[str]:
        return []

    tool = Tool.from_schema(
        "patent_db", patents,
        {"since": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}$"}},
    )
    assert tool.is_async is True
    assert tool.wants_context is False
    assert tool.schema["required"] == ["since"]
    assert tool.check_args({"since": "2024-12-01"}) is None
    violation = tool.check_args({"since": "2024-13-01"})
    assert violation is not None
    assert violation.field == "since"
    assert "pattern" in violation.expected or "matching" in violation.expected


def test_from_schema_accepts_json_schema_and_detects_ctx() -> None:
    """A JSON Schema is used as given, and a ctx parameter asks for the call context."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def body(q: str, ctx: CallContext) -> str:
        return q

    tool = Tool.from_schema("t", body, schema)
    assert tool.schema == schema
    assert tool.wants_context is True
    assert tool.prepare_args({"q": "x"}) == {"q": "x"}


class AsyncBody:
    """A tool body that is an object with an async ``__call__``."""

    async def __call__(self, q: str) -> str:
        return q


def test_an_object_with_async_call_is_an_async_body() -> None:
    """A callable object whose __call__ is async is awaited, not run in a worker thread."""
    assert Tool.from_schema("t", AsyncBody(), {"q": {"type": "string"}}).is_async is True
    assert Tool.from_schema("t", search, {"q": {"type": "string"}}).is_async is False


def _noop(q: str) -> str:
    return q


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        pytest.param(Tool.from_function(search), {"query": "x"}, id="hints-defaults"),
        pytest.param(Tool.from_function(search), {"query": "x", "limit": "7"}, id="hints-coerced"),
        pytest.param(Tool.from_function(search), {"limit": 3}, id="hints-missing"),
        pytest.param(Tool.from_function(search), {"query": "x", "limit": 99}, id="hints-bound"),
        pytest.param(Tool.from_function(search), {"query": "x", "x": 1}, id="hints-extra"),
        pytest.param(Tool.from_schema("t", _noop, {"q": {"type": "string"}}), {"q": "a"},
                     id="schema-ok"),
        pytest.param(Tool.from_schema("t", _noop, {"q": {"type": "string"}}), {"q": 1},
                     id="schema-bad"),
    ],
)
def test_accept_is_check_then_prepare(tool: Tool, args: dict[str, Any]) -> None:
    """accept gives check_args' violation, or else prepare_args' arguments, in one pass."""
    violation = tool.check_args(args)
    expected = violation if violation is not None else tool.prepare_args(args)
    assert tool.accept(args) == expected
