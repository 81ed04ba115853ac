"""ask() with Python tools, a scripted model, on_event, on_escalation and a run store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coordinator import CoverageReport, ask
from coordinator.store.runs import RunStore
from shared.errors import (
    BusinessRuleViolation,
    InputFileErrors,
    InvalidToolInput,
    ToolPermissionDenied,
    TransientToolError,
)
from shared.escalation import Escalation
from subagents.result import ProgressEvent

pytestmark = pytest.mark.anyio


async def flaky(query: str) -> dict[str, Any]:
    """Search a service that is down."""
    raise TransientToolError("search backend overloaded")


def strict(date: str) -> dict[str, Any]:
    """Look up filings since a date."""
    raise InvalidToolInput("date", "YYYY-MM-DD")


async def quota(amount: int) -> dict[str, Any]:
    """Spend from a quota."""
    raise BusinessRuleViolation("daily_quota", limit=10, requested=amount)


def locked(path: str) -> str:
    """Read a locked document."""
    raise ToolPermissionDenied("role analyst lacks docs:read", scope="docs:read")


async def buggy(x: int) -> int:
    """A tool with a bug in it."""
    return x // 0


async def search(query: str, limit: int = 5) -> dict[str, Any]:
    """Search the web; returns result titles."""
    return {"results": [f"{query} #{i}" for i in range(min(limit, 2))]}


def one_call(tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"calls": [{"tool": tool, "args": args}]}, {"text": f"found with {tool}"}]


FAILING: dict[str, tuple[Callable[..., Any], dict[str, Any], str]] = {
    "transient": (flaky, {"query": "x"}, "retries_exhausted"),
    "validation": (strict, {"date": "2024-13-01"}, "no_progress"),
    "business": (quota, {"amount": 50}, "threshold_breach"),
    "permission": (locked, {"path": "/secret"}, "permission_denied"),
    "internal": (buggy, {"x": 1}, "internal_error"),
}


async def test_each_error_category_of_a_python_tool_becomes_its_gap() -> None:
    """A Python tool failing in each category is a gap of that category, never a crash."""
    turns = {cat: one_call(fn.__name__, args) for cat, (fn, args, _) in FAILING.items()}
    report = await ask(
        "Which tools fail how?",
        tools=[fn for fn, _, _ in FAILING.values()],
        model={"provider": "scripted", "turns": turns},
        subtasks=[
            {"id": cat, "query": f"use {fn.__name__}", "tools": [fn.__name__]}
            for cat, (fn, _, _) in FAILING.items()
        ],
    )
    gaps = {g.subtask_id: g for g in report.gaps}
    assert set(gaps) == set(FAILING)
    for category, gap in gaps.items():
        assert gap.category == category, gap
        assert gap.trigger == FAILING[category][2], gap


async def test_scripted_model_decomposes_calls_python_tools_and_synthesizes() -> None:
    """The lead plans from the question, subtasks call a Python tool, the lead answers."""
    events: list[ProgressEvent] = []
    report = await ask(
        "State of solid-state batteries",
        tools=[search],
        model={
            "provider": "scripted",
            "turns": {
                "lead": [
                    {"subtasks": [{"id": "market", "query": "market size", "tools": ["search"]}]},
                    {"text": "The market is growing [market]."},
                ],
                "market": one_call("search", {"query": "solid-state market"}),
            },
        },
        on_event=events.append,
    )
    assert isinstance(report, CoverageReport)
    assert report.outcome == "complete"
    # [market] is shown as the number of the market subtask's source.
    assert report.answer.text == "The market is growing [1]."
    assert [s.id for s in report.subtasks] == ["market"]
    calls = [e for e in events if e.subtask_id == "market" and e.kind == "call"]
    assert calls and calls[0].tool == "search"
    assert any(e.subtask_id == "lead" for e in events)


async def test_async_on_event_hears_every_event_in_order() -> None:
    """An async on_event is awaited for each event, in the order they happened."""
    seen: list[tuple[str, str, float]] = []

    async def hear(event: ProgressEvent) -> None:
        seen.append((event.subtask_id, event.kind, event.at))

    await ask(
        "q",
        tools=[search],
        model={"provider": "scripted", "turns": {"a": one_call("search", {"query": "a"})}},
        subtasks=[{"id": "a", "query": "a", "tools": ["search"]}],
        on_event=hear,
    )
    kinds = [k for sid, k, _ in seen if sid == "a"]
    assert kinds[0] == "state" and "call" in kinds
    assert [at for _, _, at in seen] == sorted(at for _, _, at in seen)


async def test_on_escalation_choice_is_recorded_in_decisions(tmp_path: Path) -> None:
    """An alternative returned by on_escalation is a decision of the report and the store: the
    escalation waited for it, and an alternative no option carries out is decided accept,
    by the person, the gap kept."""
    received: list[Escalation] = []

    async def choose(escalation: Escalation) -> str:
        received.append(escalation)
        return "ask the data owner for access"

    store = tmp_path / "runs.sqlite"
    report = await ask(
        "read the locked file",
        tools=[locked],
        model={"provider": "scripted", "turns": {"doc": one_call("locked", {"path": "/a"})}},
        subtasks=[{"id": "doc", "query": "read it", "tools": ["locked"]}],
        on_escalation=choose,
        store=store,
    )
    assert [e.subtask_id for e in received] == ["doc"]
    [decision] = report.decisions
    assert (decision.subtask_id, decision.escalation, decision.do) == ("doc", "doc:1", "accept")
    assert decision.by and decision.change is not None
    [row] = RunStore(store).runs()
    assert row.status == "finished"
    assert row.report is not None
    assert [d["escalation"] for d in row.report["decisions"]] == ["doc:1"]
    assert any(e["kind"] == "call" for e in RunStore(store).events(row.id))


async def test_scripted_plans_as_in_files_need_no_model_turns() -> None:
    """Subtasks with a scripted plan run as in a job file, calling the Python tool."""
    report = await ask(
        "q",
        tools=[search],
        model="scripted",
        subtasks=[
            {
                "id": "a",
                "query": "a",
                "tools": ["search"],
                "plan": [{"call": "search", "args": {"query": "x"}}],
            }
        ],
    )
    assert report.outcome == "complete", report.gaps


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"model": {"provider": "scripted", "turns": 3}}, "model.turns", id="turns"),
        pytest.param({"model": "nosuch:model"}, "model.provider", id="provider"),
        pytest.param({"model": "openai:"}, "model.name", id="provider-without-name"),
        pytest.param(
            {"model": "openai:gemma", "base_url": "127.0.0.1:8080/v1"}, "base_url",
            id="base-url-without-scheme",
        ),
        pytest.param(
            {"model": {"provider": "openai", "api_key": "sk-abcdefghijklmnopqrstuvwxyz"}},
            "model.api_key",
            id="inline-key",
        ),
        pytest.param(
            {"model": "scripted", "subtasks": [{"id": "a", "query": "a", "tools": ["serch"]}]},
            "job.subtasks[0].tools[0]",
            id="unknown-tool",
        ),
    ],
)
async def test_a_bad_job_names_its_field(options: dict[str, Any], field: str) -> None:
    """A model block or subtask that a file could not hold is refused, naming the field."""
    with pytest.raises(InputFileErrors) as info:
        await ask("q", tools=[search], **options)
    assert any(e.field == field and e.file == "ask()" for e in info.value.errors), (
        info.value.describe()
    )
    assert "sk-abcdefghij" not in info.value.describe()


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        pytest.param([42], "tools[0]: expected a function", id="number"),
        pytest.param(search, "expected a list of tools", id="not-a-list"),
        pytest.param(["web"], "'web' needs a search backend", id="web-without-backend"),
        pytest.param(["web:bing"], "'web:bing'", id="web-unknown-backend"),
        pytest.param(["nonsense"], "tools: expected", id="string"),
        pytest.param([search, search], "a second tool named 'search'", id="duplicate"),
        pytest.param([{"mcp": {"command": ["x"]}, "extra": 1}], "tools[0]", id="mcp-shape"),
    ],
)
async def test_a_bad_tool_is_a_clear_value_error(
    tools: Any, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unusable tools= entry raises a ValueError saying which and why."""
    monkeypatch.delenv("FANOUT_SEARCH", raising=False)
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        await ask("q", tools=tools, model="scripted")


async def test_docs_from_python_search_and_read_your_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools=["docs:DIR"]: the folder is indexed, docs.search finds the document, the
    subtask is covered by that evidence and the answer cites the document as a source."""
    monkeypatch.chdir(tmp_path)
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "toyota.md").write_text("# Toyota\n\nToyota targets 2027 for solid-state cars.\n")
    (papers / "other.md").write_text("# Other\n\nNothing about batteries here.\n")
    report = await ask(
        "When do solid-state batteries reach cars?",
        tools=[f"docs:{papers}"],
        model={
            "provider": "scripted",
            "turns": {
                "lead": [
                    {"subtasks": [{"id": "cars", "query": "solid-state cars",
                                   "tools": ["docs.search"]}]},
                    {"text": "Toyota targets 2027 [1]."},
                ],
                "cars": one_call("docs.search", {"query": "Toyota solid-state"}),
            },
        },
    )
    assert [(s.id, s.status) for s in report.subtasks] == [("cars", "complete")]
    found = report.answer.sections[0].findings[0].data
    assert found["results"][0]["path"] == "toyota.md"
    assert report.answer.sources and report.answer.sources[0].path == "toyota.md"


async def test_ask_without_a_model_answers_from_the_documents_alone(tmp_path: Path) -> None:
    """No model, a documents folder: retrieval only, as `fanout ask --docs` without
    --model (docs/design.md §7): the question searched, the best passages quoted, each cited."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cold.md").write_text(
        "# Sodium-ion in the cold\n\nSodium-ion cells keep 90% of their capacity at -20 °C.\n"
    )
    report = await ask("How do sodium-ion cells do in the cold?", tools=[f"docs:{docs}"],
                       store=tmp_path / "runs.sqlite")
    assert report.outcome == "complete" and report.coverage == 1.0
    assert report.answer.kind == "extractive" and report.answer.text
    assert [s.path for s in report.answer.sources or []] == ["cold.md"]
    assert "[1]" in report.answer.text
    assert len(RunStore(tmp_path / "runs.sqlite").runs()) == 1


@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({}, "no model and no search tool", id="nothing-to-search"),
        pytest.param({"base_url": "http://127.0.0.1:1/v1", "tools": ["docs:."]},
                     "a model for base_url", id="base-url-alone"),
    ],
)
async def test_ask_without_a_model_or_a_search_says_what_to_give(
    options: dict[str, Any], words: str
) -> None:
    """No model and nothing to search, or an endpoint without a model: refused naming
    ``model``, before anything runs."""
    with pytest.raises(InputFileErrors, match=words):
        await ask("q", **options)
