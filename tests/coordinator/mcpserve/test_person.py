"""The MCP client as the run's person (coordinator.mcpserve.person): escalations asked
with elicitation/create through the official client's elicitation callback, in process
and over streamable HTTP, and the decide tool with get_report for a client that cannot
elicit. Until the flow calls the desk, each test drives the run's desk directly (offer,
then wait in a task), as the flow will."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult, Implementation

from coordinator.decision import DecisionError
from coordinator.mcpserve import DoorConfig
from coordinator.mcpserve.door import Door, Ticket
from coordinator.mcpserve.person import elicitation_schema, request_of
from coordinator.mcpserve.server import App, build_server
from coordinator.mcpserve.transport import MCP_PATH, http_app
from coordinator.people import Desk
from coordinator.report import Decision
from coordinator.store import RunStore
from shared.clock import AnyioClock
from shared.escalation import Escalation
from tests.coordinator.mcpserve.conftest import text_of

pytestmark = pytest.mark.anyio

CLIENT = Implementation(name="desk-test-client", version="1.0")
# One subtask whose tool takes an hour: the run goes on while the test drives its desk.
STUCK_JOB = """\
scenario: mcp-person
seed: 1
job:
  query: "battery patents"
  defaults: {tool_timeout_s: 7200}
  subtasks:
    - {id: patents, query: "battery patents", tools: [patent_db, web_search],
       plan: [{call: patent_db, args: {}}]}
tools:
  patent_db: {latency_s: 3600, responses: [{ok: {results: ["an hour later"]}}]}
  web_search: {latency_s: 0.01, responses: [{ok: {results: ["found"]}}]}
"""
WITH_ESCALATIONS = STUCK_JOB.replace('  query: "battery patents"\n',
                                     '  query: "battery patents"\n  escalations: {wait_s: 3600}\n',
                                     1)
ALLOWLIST = ["patent_db", "web_search"]
Callback = Any  # the SDK's ElicitationFnT: an async (context, params) -> ElicitResult


def _escalation() -> Escalation:
    return Escalation(
        subtask_id="patents", category="permission", trigger="permission_denied",
        message="role analyst lacks patents:read", attempted_query="battery patents",
        tool="patent_db",
        alternatives=["request patents:read for role analyst (needed by patent_db)",
                      "try web_search, also on this subtask's allowlist"],
    )


@asynccontextmanager
async def _served(tmp: Path) -> AsyncIterator[App]:
    """The door's app in this process: its store, its runs in the test's task group."""
    store = RunStore(str(tmp / "runs.sqlite"))
    try:
        async with anyio.create_task_group() as tg:
            door = Door(store, tg, max_runs=2, max_queued=2)
            yield App(DoorConfig(store=str(tmp / "runs.sqlite")), store, door)
            tg.cancel_scope.cancel()
    finally:
        store.close()


async def _live(app: App) -> Ticket:
    """The one run of the door, once it has its id and its desk (polled: the run opens on
    its own time; the test's fail_after bounds the wait)."""
    while True:
        for ticket in list(app.door.live.values()):
            if ticket.desk is not None:
                return ticket
        await anyio.sleep(0.01)


async def _decision_via(app: App, call: Callable[[], Awaitable[Any]]) -> tuple[Decision, Any]:
    """Start ``call`` (a run_job that waits), make an escalation wait on its run's desk,
    and return the decision the wait ends with; then cancel the run and return the call's
    result too."""
    out: dict[str, Any] = {}

    async def calling() -> None:
        out["result"] = await call()

    async with anyio.create_task_group() as tg:
        tg.start_soon(calling)
        ticket = await _live(app)
        assert ticket.desk is not None
        offered = ticket.desk.offer(_escalation(), ALLOWLIST)
        decision = await ticket.desk.wait(offered, timeout_s=3600)
        assert ticket.run_id is not None
        app.door.cancel(ticket.run_id)
    return decision, out["result"]


def _answering(*replies: ElicitResult, asked: list[ElicitRequestParams]) -> Callback:
    """An elicitation callback giving ``replies`` in turn, keeping what it was asked."""
    queue = list(replies)

    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return queue.pop(0)

    return callback


def _accept(decision: str, **more: str) -> ElicitResult:
    return ElicitResult(action="accept", content={"decision": decision, **more})


# --- the form, unit ----------------------------------------------------------------------

async def test_the_form_lists_the_options_as_an_enum_with_optional_text() -> None:
    """decision is required, its enum the options as "ID: text"; text and source optional."""
    esc = Desk(AnyioClock()).offer(_escalation(), ALLOWLIST)
    schema = elicitation_schema(esc)
    assert schema["required"] == ["decision"]
    enum = schema["properties"]["decision"]["enum"]
    assert [e.split(":")[0] for e in enum] == [o.id for o in esc.options or []]
    assert enum[1] == "o2: try web_search, also on this subtask's allowlist"
    assert set(schema["properties"]) == {"decision", "text", "source"}
    assert request_of(esc, {"decision": "o2", "text": " "}) == {"escalation": "patents:1",
                                                                "option": "o2"}
    with pytest.raises(DecisionError) as refused:
        request_of(esc, {"decision": "o9: nothing"})
    assert refused.value.field == "decision"


# --- elicitation, in process ----------------------------------------------------------------

async def _with_client(tmp: Path, callback: Callback | None,
                       body: Callable[[App, Client], Awaitable[Any]]) -> Any:
    async with _served(tmp) as app, Client(build_server(app), mode="legacy", client_info=CLIENT,
                      elicitation_callback=callback) as client:
        return await body(app, client)


async def test_an_accepted_elicitation_decides_by_the_clients_name(tmp_path: Path) -> None:
    """The escalation is asked as elicitation/create; the chosen option decides it, by
    the name the client gave in initialize."""
    asked: list[ElicitRequestParams] = []
    callback = _answering(_accept("o2: try web_search, also on this subtask's allowlist"),
                          asked=asked)

    async def body(app: App, client: Client) -> tuple[Decision, Any]:
        return await _decision_via(app, lambda: client.call_tool("run_job", {"job": STUCK_JOB}))

    with anyio.fail_after(60):
        decision, result = await _with_client(tmp_path, callback, body)
    assert (decision.do, decision.tool, decision.by) == ("use_tool", "web_search",
                                                         "desk-test-client")
    [params] = asked
    assert isinstance(params, ElicitRequestFormParams)
    assert "patents" in params.message and "role analyst lacks patents:read" in params.message
    assert params.requested_schema["properties"]["decision"]["enum"][0].startswith("o1: retry")
    assert not result.is_error  # the run ended (cancelled) and the call answered


async def test_answer_with_text_and_a_refusal_asked_again(tmp_path: Path) -> None:
    """answer without text is refused and asked again naming the field; with text it
    decides, the text and source kept."""
    asked: list[ElicitRequestParams] = []
    callback = _answering(
        _accept("o3"),
        _accept("o3: answer it yourself", text="412 families since 2020",
                source="https://example.org/patents"),
        asked=asked)

    async def body(app: App, client: Client) -> tuple[Decision, Any]:
        return await _decision_via(app, lambda: client.call_tool("run_job", {"job": STUCK_JOB}))

    with anyio.fail_after(60):
        decision, _ = await _with_client(tmp_path, callback, body)
    assert (decision.do, decision.text, decision.source) == (
        "answer", "412 families since 2020", "https://example.org/patents")
    assert len(asked) == 2
    assert "text: expected" in asked[1].message


async def test_decline_keeps_the_gap_decided(tmp_path: Path) -> None:
    """decline is an explicit no: the escalation is decided accept, by the client."""
    callback = _answering(ElicitResult(action="decline"), asked=[])

    async def body(app: App, client: Client) -> tuple[Decision, Any]:
        return await _decision_via(app, lambda: client.call_tool("run_job", {"job": STUCK_JOB}))

    with anyio.fail_after(60):
        decision, _ = await _with_client(tmp_path, callback, body)
    assert (decision.do, decision.by) == ("accept", "desk-test-client")


async def test_cancel_leaves_it_waiting_for_the_decide_tool(tmp_path: Path) -> None:
    """cancel decides nothing: the escalation waits on, get_report lists it, and decide
    takes it; deciding it again is a tool error naming the escalation."""
    dismissed = anyio.Event()

    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        dismissed.set()
        return ElicitResult(action="cancel")

    async def body(app: App, client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "run_job", {"job": STUCK_JOB})
            ticket = await _live(app)
            assert ticket.desk is not None and ticket.run_id is not None
            run_id = ticket.run_id
            offered = ticket.desk.offer(_escalation(), ALLOWLIST)
            tg.start_soon(partial(ticket.desk.wait, offered, timeout_s=3600))
            await dismissed.wait()
            assert [e.id for e in ticket.desk.waiting()] == ["patents:1"]
            report = await client.call_tool("get_report", {"run_id": run_id, "format": "json"})
            seen["pending"] = json.loads(text_of(report))["pending"]
            md = await client.call_tool("get_report", {"run_id": run_id})
            seen["md"] = text_of(md)
            decided = await client.call_tool("decide", {"run_id": run_id,
                                                        "escalation": "patents:1",
                                                        "do": "retry"})
            seen["decided"] = decided
            again = await client.call_tool("decide", {"run_id": run_id,
                                                      "escalation": "patents:1",
                                                      "do": "accept"})
            seen["again"] = again
            app.door.cancel(run_id)
        return seen

    with anyio.fail_after(60):
        seen = await _with_client(tmp_path, callback, body)
    [item] = seen["pending"]["escalations"]
    assert (item["id"], item["subtask_id"]) == ("patents:1", "patents")
    assert "## Waiting for a decision" in seen["md"] and "patents:1" in seen["md"]
    decided = seen["decided"]
    assert not decided.is_error, text_of(decided)
    assert decided.structured_content["do"] == "retry"
    assert decided.structured_content["by"] == "desk-test-client"
    assert seen["again"].is_error
    assert "escalation: escalation 'patents:1' does not wait" in text_of(seen["again"])


# --- a client that cannot elicit ------------------------------------------------------------

async def test_without_elicitation_only_a_job_with_escalations_gets_a_person(
    tmp_path: Path,
) -> None:
    """A client without elicitation: a plain job has no desk (decide says so, naming
    run_id); a job that sets escalations has one, and decide's errors name the field."""

    async def body(app: App, client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        first = await client.call_tool("run_job", {"job": STUCK_JOB, "wait_s": 0})
        plain = first.structured_content["run_id"]
        seen["plain"] = await client.call_tool("decide", {"run_id": plain,
                                                          "escalation": "patents:1",
                                                          "do": "accept"})
        app.door.cancel(plain)
        second = await client.call_tool("run_job", {"job": WITH_ESCALATIONS, "wait_s": 0})
        run_id = second.structured_content["run_id"]
        ticket = app.door.live[run_id]
        assert ticket.desk is not None  # made as the run took its slot, before its id
        async with anyio.create_task_group() as tg:
            offered = ticket.desk.offer(_escalation(), ALLOWLIST)
            tg.start_soon(partial(ticket.desk.wait, offered, timeout_s=3600))
            while not ticket.desk.waiting():
                await ticket.desk.change().wait()
            seen["bad_option"] = await client.call_tool(
                "decide", {"run_id": run_id, "escalation": "patents:1", "option": "o9"})
            seen["no_text"] = await client.call_tool(
                "decide", {"run_id": run_id, "escalation": "patents:1", "do": "answer"})
            seen["ok"] = await client.call_tool(
                "decide", {"run_id": run_id, "escalation": "patents:1", "do": "answer",
                           "text": "412 families"})
        app.door.cancel(run_id)
        return seen

    with anyio.fail_after(60):
        seen = await _with_client(tmp_path, None, body)
    assert seen["plain"].is_error
    assert "run_id: expected a run of this server that waits for decisions" in text_of(
        seen["plain"])
    assert "option: expected one of o1" in text_of(seen["bad_option"])
    assert "text: expected" in text_of(seen["no_text"])
    assert not seen["ok"].is_error, text_of(seen["ok"])
    assert seen["ok"].structured_content["text"] == "412 families"


# --- elicitation over streamable HTTP -------------------------------------------------------

async def test_elicitation_travels_over_streamable_http(tmp_path: Path) -> None:
    """The same question over streamable HTTP (the SDK's client, the server's HTTP app in
    this process): it rides the run_job call's stream and the answer decides."""
    import uvicorn

    asked: list[ElicitRequestParams] = []
    callback = _answering(_accept("o1"), asked=asked)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    async with _served(tmp_path) as app:
        server = uvicorn.Server(uvicorn.Config(
            http_app(build_server(app), "127.0.0.1", None), loop="asyncio",
            lifespan="on", log_level="warning"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            # uvicorn says it has started by a flag only: polled, bounded by fail_after.
            while not server.started:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            with anyio.fail_after(60):
                async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http, \
                        streamable_http_client(f"http://127.0.0.1:{port}{MCP_PATH}",
                                               http_client=http) as (read, write), \
                        ClientSession(read, write, elicitation_callback=callback,
                                      client_info=CLIENT) as session:
                    await session.initialize()
                    decision, result = await _decision_via(
                        app, lambda: session.call_tool("run_job", {"job": STUCK_JOB}))
            server.should_exit = True
    assert (decision.do, decision.by) == ("retry", "desk-test-client")
    assert len(asked) == 1
    assert not result.is_error


async def test_a_decision_elsewhere_withdraws_the_question(tmp_path: Path) -> None:
    """While the client has not answered, the escalation is decided by another way (the
    desk directly, as a timeout would): the elicitation is withdrawn and the run goes on."""
    asking = anyio.Event()
    never = anyio.Event()

    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asking.set()
        await never.wait()  # a person who does not answer
        return ElicitResult(action="cancel")

    async def body(app: App, client: Client) -> Decision:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "run_job", {"job": STUCK_JOB})
            ticket = await _live(app)
            assert ticket.desk is not None and ticket.run_id is not None
            offered = ticket.desk.offer(_escalation(), ALLOWLIST)
            out: list[Decision] = []
            waited = anyio.Event()

            async def waiter() -> None:
                assert ticket.desk is not None
                out.append(await ticket.desk.wait(offered, timeout_s=3600))
                waited.set()

            tg.start_soon(waiter)
            await asking.wait()
            ticket.desk.decide({"escalation": "patents:1", "do": "stop"}, by="operator")
            await waited.wait()
            app.door.cancel(ticket.run_id)
            never.set()
        return out[0]

    with anyio.fail_after(60):
        decision = await _with_client(tmp_path, callback, body)
    assert (decision.do, decision.by) == ("stop", "operator")


# --- end to end: a real run escalates (needs the flow to call the desk) ---------------------

ESCALATING_JOB = """\
scenario: mcp-person-e2e
seed: 1
job:
  query: "battery patents"
  escalations: {wait_s: 600}
  subtasks:
    - {id: patents, query: "battery patents", tools: [patent_db, web_search],
       plan: [{call: patent_db, args: {}}]}
tools:
  patent_db: {latency_s: 0.01, responses: [{error: permission}]}
  web_search: {latency_s: 0.01, responses: [{ok: {results: ["found"]}}]}
"""


@pytest.mark.process
async def test_a_real_escalation_is_elicited_over_stdio_and_decided(tmp_path: Path) -> None:
    """fanout mcp over stdio runs a job that escalates (permission): the client is asked,
    chooses use_tool, and the report's decisions keep it, by the client's name."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.coordinator.mcpserve.conftest import environ, mcp_command

    asked: list[ElicitRequestParams] = []
    callback = _answering(_accept("o2"), asked=asked)
    command = mcp_command(tmp_path)
    params = StdioServerParameters(command=command[0], args=command[1:],
                                   env=environ(tmp_path), cwd=str(tmp_path))
    with anyio.fail_after(120), \
            open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:  # noqa: ASYNC230
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
            read, write, elicitation_callback=callback, client_info=CLIENT
        ) as session:
            await session.initialize()
            result = await session.call_tool("run_job", {"job": ESCALATING_JOB})
            assert not result.is_error, text_of(result)
            run_id = result.structured_content["run_id"]
            report = json.loads(text_of(await session.call_tool(
                "get_report", {"run_id": run_id, "format": "json"})))
    assert len(asked) == 1
    [decision] = report["decisions"]
    assert (decision["do"], decision["by"]) == ("use_tool", "desk-test-client")
