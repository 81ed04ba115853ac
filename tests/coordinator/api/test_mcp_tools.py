"""MCP servers as tools from Python: a real server (mcp-server-time) over stdio."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import ask
from subagents.mcp import McpServerStartError


@pytest.fixture
def anyio_backend() -> str:
    """Real subprocesses and real timeouts: the asyncio backend, no virtual time."""
    return "asyncio"


# Real MCP servers, as subprocesses.
pytestmark = [pytest.mark.anyio, pytest.mark.process]

TIME = {"mcp": {"command": ["python", "-m", "mcp_server_time", "--local-timezone", "UTC"]}}


async def test_a_model_planned_subtask_calls_a_real_mcp_server() -> None:
    """An MCP server spec in tools= is started, its tools are SERVER.TOOL, calls are real."""
    call = {"tool": "mcp_server_time.get_current_time", "args": {"timezone": "Europe/Paris"}}
    report = await ask(
        "What time is it in Paris?",
        tools=[TIME],
        model={
            "provider": "scripted",
            "turns": {"paris": [{"calls": [call]}, {"text": "It is some time in Paris."}]},
        },
        subtasks=[
            {"id": "paris", "query": "time in Paris", "tools": ["mcp_server_time.get_current_time"]}
        ],
    )
    assert report.outcome == "complete", report.gaps
    assert report.subtasks[0].findings >= 1


async def test_a_named_server_and_a_python_tool_side_by_side() -> None:
    """A server named in its spec serves NAME.TOOL next to a Python function."""

    def utc_offset(zone: str) -> dict[str, Any]:
        """The UTC offset of a zone, from a local table."""
        return {"zone": zone, "offset": {"Europe/Paris": "+01:00"}.get(zone, "+00:00")}

    report = await ask(
        "Paris time and offset",
        tools=[{**TIME, "name": "clock"}, utc_offset],
        model="scripted",
        subtasks=[
            {
                "id": "now",
                "query": "now",
                "tools": ["clock.get_current_time"],
                "plan": [{"call": "clock.get_current_time", "args": {"timezone": "Asia/Tokyo"}}],
            },
            {
                "id": "offset",
                "query": "offset",
                "tools": ["utc_offset"],
                "plan": [{"call": "utc_offset", "args": {"zone": "Europe/Paris"}}],
            },
        ],
    )
    assert report.outcome == "complete", report.gaps


async def test_a_server_that_cannot_start_fails_before_anything_runs() -> None:
    """A server command that does not start raises McpServerStartError naming it."""
    broken = {"mcp": {"command": ["python", "-m", "no_such_mcp_server_module"]}, "name": "nope"}
    with pytest.raises(McpServerStartError, match="nope"):
        await ask(
            "q",
            tools=[broken],
            model="scripted",
            subtasks=[{"id": "a", "query": "a", "plan": [{"finish": "nothing"}]}],
        )
