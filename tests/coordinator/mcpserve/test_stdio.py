"""`fanout mcp` over stdio through the official MCP client: the tools and their schemas,
ask (retrieval only and with a scripted model), run_job, reading runs back, progress,
cancellation, and bad arguments answered as tool errors naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from tests.coordinator.mcpserve.conftest import (
    HALF_DONE_JOB,
    QUICK_JOB,
    SCRIPTED_TOOLS,
    make_papers,
    over_stdio,
    text_of,
)

# Each test starts `fanout mcp` (stdio or HTTP) as a process of its own (tests/tiers.py).
pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def _report(session: ClientSession, run_id: str) -> dict[str, Any]:
    result = await session.call_tool("get_report", {"run_id": run_id, "format": "json"})
    assert not result.is_error, text_of(result)
    report: dict[str, Any] = json.loads(text_of(result))
    return report


async def _finished(session: ClientSession, run_id: str) -> dict[str, Any]:
    """The run's report once it has finished (polled: the run ends on its own time; the
    test's fail_after bounds the wait)."""
    for _ in range(10_000):
        report = await _report(session, run_id)
        if report["status"] == "finished":
            return report
        await anyio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish")


async def test_the_tools_and_resources_are_listed_with_their_schemas(tmp_path: Path) -> None:
    """Six tools with input schemas (ask's options named), ask, run_job and cancel_run
    with an output schema of answer, sources, gaps and coverage; two report resource
    templates."""
    with anyio.fail_after(60):
        async with over_stdio(tmp_path) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            templates = (await session.list_resource_templates()).resource_templates
    assert set(tools) == {"ask", "run_job", "get_report", "list_runs", "cancel_run", "decide",
                          "review_plan"}
    ask = tools["ask"].input_schema
    assert ask["required"] == ["question"]
    assert {"question", "docs", "web", "max_subtasks", "budget", "wait_s"} <= set(
        ask["properties"])
    assert tools["cancel_run"].input_schema["required"] == ["run_id"]
    for name in ("ask", "run_job", "cancel_run"):
        output = tools[name].output_schema
        assert output is not None
        assert {"answer", "sources", "gaps", "coverage", "run_id"} <= set(output["properties"])
    assert tools["get_report"].input_schema["properties"]["format"]["enum"] == ["md", "json"]
    assert {t.uri_template for t in templates} == {
        "fanout://runs/{run_id}/report.md", "fanout://runs/{run_id}/report.json"}


async def test_ask_keyless_gives_a_cited_retrieval_only_answer_read_back_every_way(
    tmp_path: Path,
) -> None:
    """No model, no key: ask on the served folder answers with its passages cited [n], as
    text and structured content; list_runs, get_report and both resources read it back."""
    papers = make_papers(tmp_path)
    with anyio.fail_after(90):
        async with over_stdio(tmp_path, "--docs", str(papers)) as session:
            result = await session.call_tool("ask", {"question": "How efficient are tandem "
                                                     "cells?"})
            assert not result.is_error, text_of(result)
            data = result.structured_content
            assert data is not None
            run_id = data["run_id"]
            runs = await session.call_tool("list_runs", {})
            md = await session.call_tool("get_report", {"run_id": run_id})
            as_json = await session.read_resource(f"fanout://runs/{run_id}/report.json")
            as_md = await session.read_resource(f"fanout://runs/{run_id}/report.md")
    assert data["status"] == "finished" and data["outcome"] == "complete"
    assert data["answer_kind"] == "extractive" and data["coverage"] == 1.0
    paths = {s["path"] for s in data["sources"]}
    assert "perovskite.md" in paths and paths <= {"perovskite.md", "sodium.md"}
    text = text_of(result)
    assert "Sources:" in text and "[1] " in text and f"fanout://runs/{run_id}/report.md" in text
    assert [r["id"] for r in (runs.structured_content or {})["runs"]] == [run_id]
    assert "# How efficient are tandem cells?" in text_of(md)
    stored = json.loads(as_json.contents[0].text)  # type: ignore[union-attr]
    assert stored["run_id"] == run_id and stored["status"] == "finished"
    assert stored["answer"]["sources"][0]["path"] in paths
    assert as_md.contents[0].mime_type == "text/markdown"
    assert run_id in as_md.contents[0].text  # type: ignore[union-attr]


async def test_ask_with_a_model_has_sources_gaps_and_a_progress_notification_per_subtask(
    tmp_path: Path,
) -> None:
    """The operator's scripted model plans two subtasks: the answer cites [1], the refused
    subtask is a gap (text and data), and each subtask's end is a progress notification."""
    papers = make_papers(tmp_path)
    (tmp_path / "tools.yaml").write_text(SCRIPTED_TOOLS)
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    with anyio.fail_after(90):
        async with over_stdio(tmp_path, "--docs", str(papers), "--tools",
                              "tools.yaml") as session:
            result = await session.call_tool(
                "ask", {"question": "How efficient are tandem cells?", "max_subtasks": 3,
                        "budget": "200000:20000"},
                progress_callback=progress)
            stored = await _report(session, (result.structured_content or {})["run_id"])
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data is not None
    assert data["answer_kind"] == "model" and data["outcome"] == "partial"
    assert data["coverage"] == 0.5
    assert [(s["n"], s["path"]) for s in data["sources"]] == [(1, "perovskite.md")]
    assert [g["subtask_id"] for g in data["gaps"]] == ["prices"]
    text = text_of(result)
    assert "33.9 percent [1]" in text and "[1] Perovskite tandem cells — perovskite.md" in text
    assert "Not covered:" in text and "prices: model: the key was revoked" in text
    messages = [m or "" for _, _, m in heard]
    assert messages[0] == f"run {data['run_id']} started"
    assert len(messages) == 3 and messages[1].startswith("1/2 subtasks, coverage ")
    assert messages[2] == "2/2 subtasks, coverage 0.5"
    values = [p for p, _, _ in heard]
    assert values == sorted(set(values))  # progress only ever grows
    assert heard[-1][:2] == (2.0, 2.0)
    budget = stored["tokens"]["budget"]
    assert (budget["input_tokens"], budget["output_tokens"]) == (200000, 20000)


async def test_run_job_runs_a_job_and_wait_s_lets_the_client_come_back_for_it(
    tmp_path: Path,
) -> None:
    """run_job answers with the report; with wait_s 0 it answers at once with the run id,
    status running, and get_report later holds the finished report."""
    with anyio.fail_after(90):
        async with over_stdio(tmp_path) as session:
            ran = await session.call_tool("run_job", {"job": QUICK_JOB, "speed": 100})
            later = await session.call_tool("run_job", {"job": QUICK_JOB, "wait_s": 0})
            data = later.structured_content
            assert data is not None and data["status"] == "running", text_of(later)
            report = await _finished(session, data["run_id"])
    assert not ran.is_error, text_of(ran)
    assert (ran.structured_content or {})["outcome"] == "complete"
    assert f'get_report(run_id="{data["run_id"]}")' in text_of(later)
    assert report["outcome"] == "complete" and report["coverage"] == 1.0


async def test_a_cancelled_call_cancels_its_run_and_keeps_the_partial_report(
    tmp_path: Path,
) -> None:
    """notifications/cancelled once the quick subtask has ended: the run is cancelled, and
    its stored report keeps the quick one's findings and a cancelled gap for the other."""
    run_ids: list[str] = []
    with anyio.fail_after(90):
        async with over_stdio(tmp_path) as session:
            with anyio.CancelScope() as scope:

                async def progress(progress: float, total: float | None,
                                   message: str | None) -> None:
                    if message and message.startswith("run "):
                        run_ids.append(message.split()[1])
                    elif message and message.startswith("1/2 subtasks"):
                        scope.cancel()  # the client gives up: the SDK sends the cancel

                await session.call_tool("run_job", {"job": HALF_DONE_JOB},
                                        progress_callback=progress)
            assert scope.cancelled_caught and run_ids
            report = await _finished(session, run_ids[0])
    statuses = {s["id"]: s["status"] for s in report["subtasks"]}
    assert statuses["quick"] == "complete" and statuses["stuck"] != "complete"
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [("stuck", "cancelled")]


BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("ask", {"question": "q", "max_subtasks": 0}, "max_subtasks"),
    ("ask", {"question": ""}, "question"),
    ("ask", {}, "question: required"),
    ("ask", {"question": "q", "docs": "/etc"}, "docs: expected a folder the server serves"),
    ("ask", {"question": "q", "docs": "../.."}, "docs: expected a folder the server serves"),
    ("ask", {"question": "q", "web": True}, "web: expected false: the server has no search"),
    ("ask", {"question": "q", "budget": "lots"}, "budget: expected a positive number"),
    ("run_job", {"job": "scenario: [unclosed"}, "job:1"),
    ("run_job", {"job": "scenario: x\njob: {query: q, subtasks: []}\n"}, "job"),
    ("get_report", {"run_id": "nope"}, "run_id: expected a run id"),
    ("get_report", {"run_id": "20260101-000000-0000abcd"}, "run_id: expected the id of a run"),
    ("get_report", {"run_id": "20260101-000000-0000abcd", "format": "html"}, "format"),
    ("list_runs", {"limit": 0}, "limit"),
]
MCP_COMMAND_JOB = """\
scenario: starts-a-command
job:
  query: "q"
  subtasks:
    - {id: a, query: "q", tools: [web.fetch], plan: [{call: web.fetch, args: {url: "x"}}]}
mcp_servers:
  web: {command: ["sh", "-c", "touch PWNED"]}
"""


async def test_bad_arguments_are_tool_errors_naming_the_field(tmp_path: Path) -> None:
    """Each bad argument is an isError result whose text names the field; none is a
    traceback, and a job declaring an MCP command is refused without starting it."""
    papers = make_papers(tmp_path)
    with anyio.fail_after(90):
        async with over_stdio(tmp_path, "--docs", str(papers)) as session:
            answers = [(await session.call_tool(tool, args), field)
                       for tool, args, field in BAD_ARGUMENTS]
            command = await session.call_tool("run_job", {"job": MCP_COMMAND_JOB})
            runs = await session.call_tool("list_runs", {})
    for result, field in answers:
        assert result.is_error, (field, text_of(result))
        assert field in text_of(result) and "Traceback" not in text_of(result)
    assert command.is_error
    assert "mcp_servers: expected none: a request never starts an MCP command" in text_of(
        command)
    assert not (tmp_path / "PWNED").exists()
    assert (runs.structured_content or {})["runs"] == []  # nothing refused was recorded


async def test_a_model_whose_key_the_server_lacks_is_a_tool_error_naming_it(
    tmp_path: Path,
) -> None:
    """--model openai:NAME without OPENAI_API_KEY: each ask is a tool error naming the
    variable, and nothing is recorded."""
    papers = make_papers(tmp_path)
    with anyio.fail_after(60):
        async with over_stdio(tmp_path, "--docs", str(papers), "--model",
                              "openai:gpt-4o-mini") as session:
            result = await session.call_tool("ask", {"question": "q?"})
            runs = await session.call_tool("list_runs", {})
    assert result.is_error and "OPENAI_API_KEY" in text_of(result)
    assert "Traceback" not in text_of(result)
    assert (runs.structured_content or {})["runs"] == []


async def test_a_full_queue_refuses_and_a_client_that_leaves_keeps_its_partial_reports(
    tmp_path: Path,
) -> None:
    """--max-runs 1 --max-queued 1: a second run waits (wait_s 0 answers "queued"), a
    third is refused; when the client leaves, the run going is cancelled and its partial
    report recorded, and the queued one never started."""
    with anyio.fail_after(90):
        async with over_stdio(tmp_path, "--max-runs", "1", "--max-queued", "1") as session:
            first = await session.call_tool("run_job", {"job": HALF_DONE_JOB, "wait_s": 0})
            second = await session.call_tool("run_job", {"job": QUICK_JOB, "wait_s": 0})
            third = await session.call_tool("run_job", {"job": QUICK_JOB})
        data = first.structured_content
        assert data is not None and data["status"] == "running", text_of(first)
        assert (second.structured_content or {})["status"] == "queued", text_of(second)
        assert (second.structured_content or {})["run_id"] is None
        assert third.is_error and "try again later" in text_of(third)
        async with over_stdio(tmp_path) as session:
            report = await _finished(session, data["run_id"])
            runs = await session.call_tool("list_runs", {})
    # The quick subtask may or may not have ended before the cut: the stuck one had not.
    cut = {g["subtask_id"]: g["trigger"] for g in report["gaps"]}
    assert cut["stuck"] == "cancelled" and set(cut.values()) == {"cancelled"}
    assert [r["id"] for r in (runs.structured_content or {})["runs"]] == [data["run_id"]]
