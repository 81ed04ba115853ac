"""The jobs the benchmarks run: N subtasks, one instant tool call each."""

from __future__ import annotations

from typing import Any

from coordinator.job import JobSpec
from shared.errors import TransientToolError
from subagents.retry import RetryPolicy
from subagents.spec import CallStep, SubtaskSpec
from subagents.tool import CallContext, Tool

TOOL = "lookup"


async def lookup(i: int) -> dict[str, Any]:
    """The instant tool: answers at once, without yielding to the loop."""
    return {"item": i, "results": [f"result {i}"]}


async def flaky_lookup(i: int, ctx: CallContext) -> dict[str, Any]:
    """The same tool, failing transiently on its first two attempts of every call."""
    if ctx.attempt <= 2:
        raise TransientToolError(f"{TOOL} is unavailable (503)")
    return await lookup(i)


def instant_tools() -> dict[str, Tool]:
    """The tool mapping every subtask shares."""
    return {TOOL: Tool.from_function(lookup, name=TOOL)}


def flaky_tools() -> dict[str, Tool]:
    """The tool mapping of the failure-path benchmark."""
    return {TOOL: Tool.from_function(flaky_lookup, name=TOOL)}


def fanout_job(n: int, *, concurrency: int, retry: RetryPolicy | None = None) -> JobSpec:
    """A job of ``n`` subtasks, each calling the instant tool once."""
    settings: dict[str, Any] = {} if retry is None else {"retry": retry}
    return JobSpec(
        query="benchmark fan-out",
        concurrency=concurrency,
        subtasks=[
            SubtaskSpec(
                id=f"s{i}",
                query=f"item {i}",
                tools=[TOOL],
                plan=[CallStep(call=TOOL, args={"i": i})],
                **settings,
            )
            for i in range(n)
        ],
    )


def one_call_scenario(n: int, *, concurrency: int | None = None) -> str:
    """A scenario file of ``n`` subtasks, one instant call each, at the default concurrency
    (or at ``concurrency``: ``n`` is the full fan-out, every subagent live at once).

    The same shape as :func:`fanout_job` (one ``lookup`` with its subtask's number),
    written as a person would write it; ``expect`` makes the replay exit 0 only when
    every subtask is covered.
    """
    lines = [
        f"scenario: one-call-{n}",
        f"description: {n} subtasks, one instant call each",
        "job:",
        "  query: benchmark fan-out",
        *([f"  concurrency: {concurrency}"] if concurrency is not None else []),
        "  subtasks:",
    ]
    for i in range(n):
        lines += [
            f"    - id: s{i}",
            f"      query: item {i}",
            f"      tools: [{TOOL}]",
            "      plan:",
            f"        - call: {TOOL}",
            f"          args: {{i: {i}}}",
        ]
    lines += [
        "tools:",
        f"  {TOOL}:",
        "    params:",
        "      i: {type: integer}",
        "    responses:",
        "      - ok: {results: [a finding]}",
        "expect:",
        "  outcome: complete",
        "  coverage: 1",
    ]
    return "\n".join(lines) + "\n"
