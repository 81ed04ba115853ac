"""Search first (docs/design.md §7): model turns per subtask and coverage, before and after.

Two models stand in for the real ones, each a function of the transcript (as pydantic-ai's
``FunctionModel``), so the figures are about fanout, not about a model's luck:

- a **strong** model searches its subtask's query when no tool has answered yet, and
  answers from the results once one has (what Claude or GPT do with a search tool);
- a **weak** model answers in its own words, whatever it was given (what Gemma 3 270M
  did under ``--chat_format gemma``: it never called a tool).

The same job of N model-planned subtasks, each with one search tool, runs with
``job.search_first: off`` (before) and ``auto`` (after). Model turns are counted at the
client; coverage is the report's. Side by side in one run, in this process.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import anyio
import yaml

from benchmarks.stats import BenchResult, Figure, Stats, Target
from coordinator.fanout import run_research
from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from shared.clock import AnyioClock
from shared.ids import SeededTraceIds
from subagents.models.base import (
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from subagents.simulated.tools import SimulatedTools

KEY = "search_first"


class FunctionModel:
    """A model that is a function of the transcript; it counts its turns."""

    provider = "openai"
    name = "function"

    def __init__(self, *, strong: bool) -> None:
        self.strong = strong
        self.turns = 0

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """One turn: search when nothing has answered yet (strong), else answer."""
        self.turns += 1
        answered = any(isinstance(m, ToolResultMessage) for m in request.messages)
        if self.strong and not answered:
            query = next(m.text for m in request.messages if isinstance(m, UserMessage))
            call = ToolCall(f"call_{self.turns}", "kb_search", {"query": query})
            return ModelTurn(calls=(call,), stop_reason="tool_use")
        return ModelTurn(text="Sodium-ion cells keep their capacity in the cold.")

    async def aclose(self) -> None:
        """Nothing to release."""


def _job(subtasks: int, search_first: str) -> str:
    return yaml.safe_dump({
        "scenario": f"search-first-{search_first}",
        "model": {"provider": "scripted"},
        "job": {
            "query": "How do sodium-ion cells do in the cold?",
            "concurrency": 8,
            "search_first": search_first,
            "subtasks": [{"id": f"s{i}", "query": f"sodium-ion cells in the cold, part {i}",
                          "tools": ["kb_search"]} for i in range(subtasks)],
        },
        "tools": {"kb_search": {
            "description": "Search the knowledge base.", "search": True,
            "params": {"query": {"type": "string"}},
            "responses": [{"ok": {"results": [{"path": "cold.md", "title": "Cold",
                                               "snippet": "90 percent at -20 C"}]}}],
        }},
    })


async def _run(subtasks: int, search_first: str, *, strong: bool) -> tuple[float, float]:
    """Model turns per subtask and coverage of one run."""
    scenario = load_scenario_text(_job(subtasks, search_first), f"{KEY}.yaml")
    clock = AnyioClock()
    model = FunctionModel(strong=strong)
    planning = JobPlanning(scenario, clock=clock, client=model)
    report = await run_research(
        scenario, SimulatedTools(scenario.tools, clock), planning=planning, clock=clock,
        trace_ids=SeededTraceIds(0),
    )
    return model.turns / subtasks, report.coverage


def _figures(rows: Sequence[tuple[str, Any, Any]]) -> list[Figure]:
    return [Figure(label, unit, Stats.of([value]), target=target)
            for label, unit, (value, target) in rows]


def run(subtasks: int) -> BenchResult:
    """Model calls per subtask (strong model; the lead's one synthesis call is spread over
    the subtasks) and coverage (weak model), off vs auto."""
    results: dict[tuple[str, bool], tuple[float, float]] = {}
    for search_first in ("off", "auto"):
        for strong in (True, False):
            results[(search_first, strong)] = anyio.run(
                functools.partial(_run, subtasks, search_first, strong=strong)
            )
    strong_off, strong_on = results[("off", True)][0], results[("auto", True)][0]
    weak_off, weak_on = results[("off", False)][1], results[("auto", False)][1]
    saved = Target("one turn saved per subtask", strong_off - strong_on, 1.0,
                   higher_is_better=True)
    covered = Target("the weak model's subtasks covered", weak_on, 1.0, higher_is_better=True)
    result = BenchResult(
        KEY, "Search first",
        f"Search first: {subtasks} model-planned subtasks, search_first off vs auto",
        {"subtasks": subtasks},
    )
    result.figures = _figures([
        ("strong model, off: model calls per subtask", "turns", (strong_off, None)),
        ("strong model, auto: model calls per subtask", "turns", (strong_on, saved)),
        ("weak model, off: coverage", "share", (weak_off, None)),
        ("weak model, auto: coverage", "share", (weak_on, covered)),
    ])
    return result


if __name__ == "__main__":  # pragma: no cover - a manual run
    print(json.dumps({f.label: f.stats.median if f.stats else None
                      for f in run(20).figures}, indent=1))
