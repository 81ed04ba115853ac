"""MCP tools on real servers: mcp-server-time and a fault-injecting server, as subprocesses."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from shared.envelope import ToolResult
from subagents.executor import ExecEvent, execute_tool_safely
from subagents.mcp.classify import McpToolError
from subagents.mcp.spec import McpServerSpec, McpServerStartError
from subagents.mcp.tools import McpToolSource, open_mcp_tools
from subagents.retry import RetryPolicy

# Real MCP servers, as subprocesses.
pytestmark = pytest.mark.process

FAULT_SERVER = Path(__file__).with_name("fault_server.py")
TIME_SERVER = McpServerSpec(command=["python", "-m", "mcp_server_time", "--local-timezone", "UTC"])
# No backoff: these tests wait for real servers, not for the retry policy.
RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0, jitter="none")


def fault_spec(**settings: object) -> McpServerSpec:
    """The fault server, started with the interpreter running the tests."""
    return McpServerSpec.model_validate(
        {"command": [sys.executable, str(FAULT_SERVER)], **settings}
    )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """MCP servers are real subprocesses: these tests run on asyncio, in real time."""
    return "asyncio"


@pytest.fixture(scope="module")
async def time_tools() -> AsyncIterator[McpToolSource]:
    """mcp-server-time, started once for the module."""
    async with open_mcp_tools({"time": TIME_SERVER}) as source:
        yield source


@pytest.fixture(scope="module")
async def fault_tools() -> AsyncIterator[McpToolSource]:
    """The fault server, started once for the tests that do not crash it."""
    async with open_mcp_tools({"fault": fault_spec()}) as source:
        yield source


async def call(
    source: McpToolSource,
    name: str,
    args: dict[str, object],
    *,
    per_attempt_s: float = 10,
    retry: RetryPolicy = RETRY,
    events: list[ExecEvent] | None = None,
) -> ToolResult:
    """One logical call through the executor, as a subagent makes it."""
    return await execute_tool_safely(
        source.tools[name],
        args,
        timeout=per_attempt_s,
        retry=retry,
        observer=events.append if events is not None else None,
    )


def attempts_of(events: list[ExecEvent]) -> list[ToolResult]:
    """The envelope of every attempt, in order."""
    return [e.result for e in events if e.kind == "attempt" and e.result is not None]


# --- mcp-server-time -----------------------------------------------------------------


@pytest.mark.anyio
async def test_time_server_tools_take_their_input_schema(time_tools: McpToolSource) -> None:
    """Each server tool is SERVER.TOOL with the server's inputSchema and read-only flags."""
    tool = time_tools.tools["time.get_current_time"]
    assert set(time_tools.tools) >= {"time.get_current_time", "time.convert_time"}
    assert tool.schema["required"] == ["timezone"]
    assert tool.side_effects is False and tool.idempotent is True


@pytest.mark.anyio
async def test_valid_call_on_time_server_is_ok(time_tools: McpToolSource) -> None:
    """A valid call answers ok with the server's structured content as data."""
    result = await call(time_tools, "time.get_current_time", {"timezone": "Europe/Oslo"})
    assert result.ok and not result.empty
    assert result.data["timezone"] == "Europe/Oslo"
    assert result.attempts == 1


@pytest.mark.anyio
async def test_invalid_timezone_is_validation_naming_the_input(time_tools: McpToolSource) -> None:
    """The server's "Invalid timezone" is a validation error naming the field and the value."""
    result = await call(time_tools, "time.get_current_time", {"timezone": "Mars/Olympus"})
    assert result.category == "validation" and not result.retryable
    assert result.field == "timezone"
    assert result.message is not None and "Mars/Olympus" in result.message
    assert result.expected is not None and "IANA" in result.expected
    assert result.attempts == 1  # validation is never retried unchanged


@pytest.mark.anyio
async def test_missing_argument_is_refused_before_the_call(time_tools: McpToolSource) -> None:
    """A missing required argument is refused by the schema: the server gets no call."""
    server = time_tools.servers["time"]
    sent_before = server.calls_sent
    result = await call(time_tools, "time.get_current_time", {})
    assert result.category == "validation" and result.error_type == "invalid_argument"
    assert result.field == "timezone"
    assert result.attempts == 1 and result.elapsed_s == 0
    assert server.calls_sent == sent_before


@pytest.mark.anyio
async def test_unknown_tool_protocol_error_is_validation(time_tools: McpToolSource) -> None:
    """The server's JSON-RPC "Unknown tool" error (-32602) is a validation failure."""
    server = time_tools.servers["time"]
    with pytest.raises(McpToolError) as caught:
        await server.call("no_such_tool", {}, qualified="time.no_such_tool", schema={})
    assert caught.value.error.category == "validation"
    assert "no_such_tool" in caught.value.error.message


# --- the fault server: failures honoured and retried --------------------------------


@pytest.mark.anyio
async def test_slow_tool_times_out_and_is_retried(fault_tools: McpToolSource) -> None:
    """A call over the tool timeout is a transient timeout; the retry then succeeds."""
    events: list[ExecEvent] = []
    result = await call(
        fault_tools, "fault.slow_once", {"key": "retry", "seconds": 30}, per_attempt_s=0.5,
        events=events,
    )
    first = attempts_of(events)[0]
    assert first.category == "transient" and first.error_type == "timeout"
    assert result.ok and result.data == {"result": "fast"}
    assert result.attempts == 2


@pytest.mark.anyio
async def test_structured_permission_error_is_honoured(fault_tools: McpToolSource) -> None:
    """structuredContent with errorCategory permission is a permission error, not retried."""
    result = await call(
        fault_tools,
        "fault.structured_error",
        {"category": "permission", "message": "role analyst lacks patents:read"},
    )
    assert result.category == "permission" and result.retryable is False
    assert result.next_safe_action == "stop_and_report"
    assert result.message == "fault.structured_error: role analyst lacks patents:read"
    assert result.attempts == 1


@pytest.mark.anyio
async def test_structured_is_retryable_false_is_honoured(fault_tools: McpToolSource) -> None:
    """isRetryable false in structuredContent stops the retry even for a transient error."""
    result = await call(
        fault_tools,
        "fault.structured_error",
        {"category": "transient", "message": "upstream overloaded", "retryable": False},
    )
    assert result.category == "transient" and result.retryable is False
    assert result.attempts == 1


@pytest.mark.anyio
async def test_rate_limit_text_is_transient_and_retried(fault_tools: McpToolSource) -> None:
    """An is_error text "rate limit exceeded" is transient (rate_limited) and retried."""
    events: list[ExecEvent] = []
    result = await call(
        fault_tools,
        "fault.flaky",
        {"key": "rate", "message": "Rate limit exceeded", "failures": 1},
        events=events,
    )
    first = attempts_of(events)[0]
    assert first.category == "transient" and first.error_type == "rate_limited"
    assert result.ok and result.attempts == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("message", "category"),
    [
        pytest.param("Service temporarily unavailable (503)", "transient", id="503"),
        pytest.param("Invalid date: 2024-13-01 must be YYYY-MM-DD", "validation", id="invalid"),
        pytest.param("403 Forbidden: role analyst lacks repo:read", "permission", id="forbidden"),
        pytest.param("KeyError: 'rows'", "internal", id="bug"),
    ],
)
async def test_error_text_is_classified(
    fault_tools: McpToolSource, message: str, category: str
) -> None:
    """An is_error result with only text is categorised by what the text says."""
    result = await call(
        fault_tools, "fault.fail_text", {"message": message}, retry=RetryPolicy.no_retry()
    )
    assert result.category == category
    assert result.message == f"fault.fail_text: {message}"


@pytest.mark.anyio
async def test_timeout_on_a_non_idempotent_writer_is_unknown_state(
    fault_tools: McpToolSource,
) -> None:
    """A tool annotated as writing and not idempotent is not retried after a timeout."""
    assert fault_tools.tools["fault.slow_write"].side_effects
    result = await call(fault_tools, "fault.slow_write", {"seconds": 30}, per_attempt_s=0.3)
    assert result.changed_state == "unknown" and result.retryable is False
    assert result.attempts == 1


@pytest.mark.anyio
async def test_result_without_content_is_empty_not_an_error(fault_tools: McpToolSource) -> None:
    """A successful result with no content is a valid empty result."""
    result = await call(fault_tools, "fault.nothing", {})
    assert result.ok and result.empty


@pytest.mark.anyio
async def test_cancelled_call_propagates_and_server_stays_usable(
    fault_tools: McpToolSource,
) -> None:
    """Cancelling a call mid-flight is not turned into a result; the server serves on."""
    with anyio.move_on_after(0.3) as scope:
        await call(fault_tools, "fault.sleep", {"seconds": 30})
        pytest.fail("a cancelled call must not return")
    assert scope.cancelled_caught
    result = await call(fault_tools, "fault.echo", {"text": "still here"})
    assert result.ok and result.data == {"result": "still here"}
    assert fault_tools.servers["fault"].restarts == 0


# --- crashes, restarts and the concurrency bound (a server each) --------------------


@pytest.mark.anyio
async def test_crash_mid_call_is_transient_and_server_restarts(tmp_path: Path) -> None:
    """A server that exits mid-call is connection_reset; the retry runs on a new process."""
    async with open_mcp_tools({"fault": fault_spec()}) as source:
        before = await call(source, "fault.pid", {})
        events: list[ExecEvent] = []
        marker = tmp_path / "crashed"
        result = await call(source, "fault.crash_once", {"marker": str(marker)}, events=events)
        first = attempts_of(events)[0]
        assert first.category == "transient" and first.error_type == "connection_reset"
        assert result.ok and result.attempts == 2
        assert result.data["result"] != before.data["result"]
        assert source.servers["fault"].restarts == 1


@pytest.mark.anyio
async def test_concurrent_callers_restart_a_crashed_server_once() -> None:
    """Calls that lose the same server together restart it once, not once each."""
    async with open_mcp_tools({"fault": fault_spec()}) as source:
        server = source.servers["fault"]
        lost: list[str] = []

        async def doomed(tool: str, args: dict[str, object]) -> None:
            try:
                await server.call(tool, dict(args), qualified=f"fault.{tool}", schema={})
            except McpToolError as exc:
                lost.append(exc.error.error_type)

        sleep_args: dict[str, object] = {"seconds": 30}
        die_args: dict[str, object] = {"delay": 0.3}
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(doomed, "sleep", sleep_args)
            tg.start_soon(doomed, "die", die_args)
        assert lost == ["connection_reset"] * 4
        pids: list[object] = []

        async def pid() -> None:
            pids.append((await call(source, "fault.pid", {})).data["result"])

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(pid)
        assert len(set(pids)) == 1
        assert server.restarts == 1


@pytest.mark.anyio
async def test_calls_in_flight_are_bounded_per_server() -> None:
    """max_concurrent_calls bounds the calls a server sees at once; the rest wait."""
    async with open_mcp_tools({"fault": fault_spec(max_concurrent_calls=2)}) as source:
        peaks: list[int] = []

        async def probe() -> None:
            result = await call(source, "fault.probe", {"seconds": 0.2})
            peaks.append(result.data["result"])

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(probe)
        assert max(peaks) == 2


# --- servers that cannot start -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param(
            McpServerSpec(command=["no-such-mcp-server-binary"]), "was not found", id="bad-command"
        ),
        pytest.param(
            McpServerSpec(command=[sys.executable, str(FAULT_SERVER)], cwd="/no/such/dir"),
            "working directory '/no/such/dir' does not exist",
            id="missing-cwd",
        ),
        pytest.param(
            McpServerSpec(command=[sys.executable, str(FAULT_SERVER), "--exit-at-start"]),
            "exited before it finished initialize (stderr: fault server: asked to exit at start)",
            id="exits-at-once",
        ),
        pytest.param(
            McpServerSpec(
                command=[sys.executable, "-c", "import sys; sys.stdin.read()"],
                startup_timeout_s=0.5,
            ),
            "did not finish initialize and tools/list within 0.5s",
            id="never-initializes",
        ),
    ],
)
async def test_server_that_cannot_start_is_a_clear_error(
    spec: McpServerSpec, problem: str
) -> None:
    """A server that cannot start raises McpServerStartError naming server and command."""
    started = time.monotonic()
    with pytest.raises(McpServerStartError) as caught:
        async with open_mcp_tools({"broken": spec}):
            pytest.fail("the job body must not run")
    assert caught.value.server == "broken"
    assert caught.value.command == spec.display()
    assert problem in str(caught.value)
    assert time.monotonic() - started < 10


@pytest.mark.anyio
async def test_one_failed_server_stops_the_others() -> None:
    """When one server cannot start, the job does not run and the started ones are stopped."""
    specs = {
        "fault": fault_spec(),
        "broken": McpServerSpec(command=["no-such-mcp-server-binary"]),
    }
    with pytest.raises(McpServerStartError) as caught:
        async with open_mcp_tools(specs):
            pytest.fail("the job body must not run")
    assert caught.value.server == "broken"
