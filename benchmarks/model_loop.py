"""The model loop: a two-turn tool-using run through fanout, the bare SDK and two frameworks.

One run is the same conversation everywhere: the model asks for ``get_weather`` once,
the tool answers, the model answers in text. All four loops talk to the SAME loopback
OpenAI-compatible server (``tests/loopback``, a real HTTP/1.1 server on 127.0.0.1 in a
thread of this process), each through its own ``AsyncOpenAI`` client built once, with
the SDK's retries off:

- ``bare``: the ``openai`` SDK by hand: create → run the tool → create again;
- ``fanout``: a model-driven subagent, ``run_subagent`` with a ``ModelPlanner`` over
  ``OpenAIClient``, doing all its work: allowlist, schema check, context gate and token
  counting, envelopes, the trace observer (each event as the JSON the store keeps);
- ``pydantic-ai``: ``Agent.run`` on ``OpenAIChatModel`` with an
  ``OpenAICompatibleProvider`` pointed at the loopback;
- ``openai-agents``: ``Runner.run`` on ``OpenAIChatCompletionsModel`` with a custom
  client, tracing disabled.

The kinds are interleaved (the order rotates every round) in one event loop, so warm-up
and drift hit all alike; then ``concurrent`` runs at once, fanout against bare.

Run alone: ``.venv/bin/python -m benchmarks.model_loop [--runs 300] [--concurrent 200]
[--batches 9] [--quick] [--json]``; in the ``make bench`` table: :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import openai

from benchmarks.stats import BenchResult, Figure, Stats, Target, ratios
from coordinator.store.events import event_data
from shared.clock import AnyioClock, JobClock
from shared.ids import SeededTraceIds
from subagents.loop import run_subagent
from subagents.models.openai import OpenAIClient
from subagents.models.spec import ModelSpec
from subagents.planners.model import ModelPlanner
from subagents.result import ProgressEvent
from subagents.retry import RetryPolicy
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec
from subagents.tool import Tool
from tests.loopback import OpenAIServer, RecordedRequest, Reply
from tests.loopback.openai_server import completion, tool_call

KEY = "model_loop"
TARGET_VS_BARE = 1.5
REFERENCE = {"bare": 4.6, "pydantic-ai": 13.2, "openai-agents": 11.4}
"""The issue's figures (ms per run, 2026-12-01) for the three others."""

API_KEY = "sk-bench-0123456789abcdef0123"
MODEL = "gpt-4.1"
QUESTION = "What is the weather in Paris?"
ANSWER = "It is 18 °C and sunny in Paris."
SYSTEM = "You answer questions about the weather with the get_weather tool."
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
KINDS = ("bare", "fanout", "pydantic-ai", "openai-agents")
WARMUP = 10
FULL = (300, 200, 9)
"""Runs of each kind, concurrent runs per batch, batches of each kind."""
QUICK = (6, 10, 2)
"""A smoke run's sizes (``--quick``): the figures mean nothing."""


async def get_weather(city: str) -> dict[str, Any]:
    """The tool: instant, the same answer for everyone."""
    return {"city": city, "temperature_c": 18, "sky": "sunny"}


class WeatherServer(OpenAIServer):
    """Turn 1: a ``get_weather`` call; once a tool result is in the request: the answer."""

    def default_reply(self, request: RecordedRequest) -> Reply:
        """The next turn of the two-turn conversation."""
        messages = json.loads(request.body)["messages"]
        if messages and messages[-1]["role"] == "tool":
            return completion(ANSWER, model=MODEL)
        return completion(tool_calls=[tool_call("get_weather", {"city": "Paris"})], model=MODEL)


def sdk_client(base_url: str) -> openai.AsyncOpenAI:
    """An AsyncOpenAI client at the loopback, retries off."""
    return openai.AsyncOpenAI(api_key=API_KEY, base_url=base_url, max_retries=0)


@dataclass
class Loop:
    """One kind of run: ``run()`` does one two-turn conversation; ``aclose`` frees its client.

    Each kind builds its client once and keeps it (as a job keeps its model client). A
    client must be closed, not dropped: an ``AsyncOpenAI`` garbage-collected while
    another is busy was seen to leave the other's requests hanging.
    """

    run: Callable[[], Awaitable[str]]
    client: openai.AsyncOpenAI | OpenAIClient

    async def aclose(self) -> None:
        """Close the client's connections."""
        if isinstance(self.client, OpenAIClient):
            await self.client.aclose()
        else:
            await self.client.close()


def bare_loop(base_url: str) -> Loop:
    """The floor: the SDK by hand, one tool call then the answer."""
    client = sdk_client(base_url)
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather by city.",
                         "parameters": PARAMS},
        }
    ]

    async def run() -> str:
        messages: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        first = await client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        message = first.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or ():
            assert call.type == "function"
            result = await get_weather(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
        second = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=tools
        )
        return second.choices[0].message.content or ""

    return Loop(run, client)


def fanout_loop(base_url: str) -> Loop:
    """A model-driven subagent doing all its work, the trace observer included.

    Call it inside the event loop the runs use (the job clock reads that loop's time).
    """
    client = OpenAIClient(name=MODEL, api_key=API_KEY, base_url=base_url, timeout_s=30)
    spec = SubtaskSpec(id="weather", query=QUESTION, tools=["get_weather"], planner="model")
    model = ModelSpec(provider="openai", name=MODEL, base_url=base_url,
                      retry=RetryPolicy(max_attempts=3, jitter="none"))
    tools = {
        "get_weather": Tool.from_schema(
            name="get_weather", body=get_weather, schema=PARAMS, description="Weather by city."
        )
    }
    # The clock run_job gives its subagents: job time, read through the running loop.
    clock = JobClock(AnyioClock())

    async def run() -> str:
        trace: list[dict[str, Any]] = []

        def observe(event: ProgressEvent) -> None:
            trace.append(event_data(event))

        subagent = SubagentRun.for_subtask(spec, planner=ModelPlanner(client, model, spec.id))
        result = await run_subagent(
            subagent, tools, clock=clock, trace_ids=SeededTraceIds(0), observer=observe
        )
        assert result.escalation is None, result.escalation
        text: str = result.findings[-1].data["text"]
        return text

    return Loop(run, client)


def pydantic_ai_loop(base_url: str) -> Loop | None:
    """pydantic-ai's ``Agent.run`` (None when pydantic-ai is not installed)."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider
    except ImportError:
        return None
    client = sdk_client(base_url)
    provider = OpenAICompatibleProvider("loopback", openai_client=client)
    agent = Agent(OpenAIChatModel(MODEL, provider=provider), instructions=SYSTEM)
    agent.tool_plain(get_weather)

    async def run() -> str:
        result = await agent.run(QUESTION)
        return str(result.output)

    return Loop(run, client)


def agents_loop(base_url: str) -> Loop | None:
    """The OpenAI Agents SDK's ``Runner.run`` (None when it is not installed)."""
    try:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
    except ImportError:
        return None
    set_tracing_disabled(True)
    client = sdk_client(base_url)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = Agent(name="weather", instructions=SYSTEM, model=model,
                  tools=[function_tool(get_weather)])

    async def run() -> str:
        result = await Runner.run(agent, QUESTION)
        return str(result.final_output)

    return Loop(run, client)


async def measure(
    server: OpenAIServer, runs: int, concurrent: int, batches: int, warmup: int = WARMUP
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per run of each kind, interleaved; seconds per batch of ``concurrent``."""
    base = server.base_url
    kinds: dict[str, Loop] = {"bare": bare_loop(base), "fanout": fanout_loop(base)}
    for name, make in (("pydantic-ai", pydantic_ai_loop), ("openai-agents", agents_loop)):
        loop = make(base)
        if loop is not None:
            kinds[name] = loop
    try:
        samples = await _runs(kinds, runs, warmup, server)
        return samples, await _batches(kinds, concurrent, batches, server)
    finally:
        for loop in kinds.values():
            await loop.aclose()


async def _runs(
    kinds: dict[str, Loop], runs: int, warmup: int, server: OpenAIServer
) -> dict[str, list[float]]:
    """One run of each kind per round, the order rotating; seconds per run."""
    names = list(kinds)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warmup + runs):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            answer = await kinds[name].run()
            elapsed = time.perf_counter() - started
            assert answer == ANSWER, (name, answer)
            if i >= warmup:
                samples[name].append(elapsed)
        server.clear()  # the recorded requests are not needed: do not pile them up
    return samples


async def _batches(
    kinds: dict[str, Loop], concurrent: int, batches: int, server: OpenAIServer
) -> dict[str, list[float]]:
    """``concurrent`` runs at once in one task group, fanout and bare alternating."""
    out: dict[str, list[float]] = {"bare": [], "fanout": []}
    answers: list[str] = []

    async def one(loop: Loop) -> None:
        answers.append(await loop.run())

    for i in range(batches + 1):
        for name in ("bare", "fanout") if i % 2 else ("fanout", "bare"):
            answers.clear()
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(concurrent):
                    tg.start_soon(one, kinds[name])
            elapsed = time.perf_counter() - started
            server.clear()
            assert answers == [ANSWER] * concurrent, name
            if i:  # the first batch of each opens the connections
                out[name].append(elapsed)
    return out


def run(runs: int = FULL[0], concurrent: int = FULL[1], batches: int = FULL[2]) -> BenchResult:
    """The benchmark as a table section (what ``python -m benchmarks`` shows).

    Ratios are per round (each kind ran once in it) and per pair of batches, so drift
    cancels out; their median is the figure judged.
    """
    samples, batch = collect(runs, concurrent, batches)
    result = BenchResult(
        KEY,
        "model loop",
        "a two-turn tool-using run (one tool call, then the answer) against one loopback "
        "OpenAI-compatible server",
        {"runs": runs, "concurrent": concurrent, "batches": batches, "warmup": WARMUP},
    )
    figures = result.figures
    ratio: dict[str, float] = {}
    for name in KINDS:
        values = samples.get(name)
        if not values:
            figures.append(Figure(f"{name} per run", "ms", None, note="not installed"))
            continue
        ref = REFERENCE.get(name)
        figures.append(Figure(f"{name} per run", "ms", Stats.of(values).scaled(1000),
                              note=f"issue: {ref:g} ms" if ref is not None else ""))
        if name == "bare":
            continue
        per_round = ratios(values, samples["bare"])
        ratio[name] = per_round.median
        target = None
        if name == "fanout":
            target = Target(f"≤ {TARGET_VS_BARE:g}× bare", per_round.median, TARGET_VS_BARE)
        figures.append(Figure(f"{name} / bare", "×", per_round, target=target,
                              note=_issue_ratio(name)))
    others = [ratio[n] for n in ("pydantic-ai", "openai-agents") if n in ratio]
    if others and "fanout" in ratio:
        figures.append(Figure(
            "fanout ahead of the frameworks", "×", Stats.of([min(others) / ratio["fanout"]]),
            target=Target("> 1 (the best framework / fanout)", min(others) / ratio["fanout"],
                          1.0, higher_is_better=True, strict=True),
        ))
    for name in ("bare", "fanout"):
        figures.append(Figure(f"{concurrent} at once, {name}", "ms per batch",
                              Stats.of(batch[name]).scaled(1000)))
    figures.append(Figure(f"{concurrent} at once, fanout / bare", "×",
                          ratios(batch["fanout"], batch["bare"])))
    return result


def _issue_ratio(name: str) -> str:
    ref = REFERENCE.get(name)
    return f"issue: {ref / REFERENCE['bare']:.1f}×" if ref is not None else ""


def collect(
    runs: int, concurrent: int, batches: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Start the loopback server and measure, on asyncio."""
    with WeatherServer(api_key=API_KEY) as server:
        return anyio.run(measure, server, runs, concurrent, batches, backend="asyncio")


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (or one JSON document)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model_loop")
    parser.add_argument("--runs", type=int, default=FULL[0], help="timed runs of each kind")
    parser.add_argument("--concurrent", type=int, default=FULL[1], help="runs per batch")
    parser.add_argument("--batches", type=int, default=FULL[2], help="batches of each kind")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else (args.runs, args.concurrent, args.batches)
    result = run(*sizes)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
        return 0
    from benchmarks import results

    results.show([result])
    return 0


if __name__ == "__main__":
    sys.exit(main())
