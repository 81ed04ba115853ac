"""Throughput under a real rate limit: a fan-out against a server that allows 3 a second.

A loopback OpenAI-compatible server (``tests/loopback``, a real HTTP/1.1 server in a
thread of this process) enforces 180 requests a minute as "3 in any second": a fourth
request inside any one-second window is answered 429 with ``retry-after`` /
``retry-after-ms`` (when the oldest leaves the window); every answer carries
``x-ratelimit-limit|remaining|reset-requests``. The workload: 50 subtasks, each two model
calls (a tool call, then the answer after the tool's result) and then one synthesis
call: 101 requests, all 50 subtasks started at once. Side by side, one after another:

- ``fanout + limits``: a job whose model block says ``limits: {requests_per_minute: 180}``;
- ``fanout, headers only``: the same job without ``limits`` (the limiter learns the rate
  from the headers, after one probe call);
- ``pydantic-ai``: ``Agent.run`` × 50 with ``asyncio.gather``, then a synthesis agent;
- ``openai-agents``: ``Runner.run`` × 50, the same;
- ``bare gather``: ``asyncio.gather`` over the ``openai`` SDK by hand.

The peers use the ``openai`` SDK with its default retries (2, honouring retry-after).
Each row reports wall time ÷ the limit's floor (the first 3 requests at 0 s, 3 more at
every second after: ``ceil(N / 3) − 1`` seconds for N requests), the 429s the server
served, and the requests that failed for good (a subtask or the synthesis lost).

Run alone: ``.venv/bin/python -m benchmarks.rate_limits [--subtasks 50] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import openai
import yaml

from benchmarks.stats import BenchResult, Figure, Stats, Target
from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from coordinator.replay import run_scenario
from shared.clock import AnyioClock
from subagents.models.limiter import forget_shared_limiters
from subagents.result import LEAD
from tests.loopback import OpenAIServer, RecordedRequest, Reply
from tests.loopback.openai_server import completion, error, tool_call

KEY = "rate_limits"
API_KEY = "sk-bench-ratelimit-0123456789abcdef"
KEY_ENV = "FANOUT_BENCH_RATE_LIMIT_KEY"
MODEL = "gpt-limited"
PER_WINDOW = 3
TARGET_LIMITS = 1.1
TARGET_LIMITS_429 = 2
TARGET_HEADERS = 1.3
SYSTEM = "You research one part of a question with the lookup tool."
LOOKUP: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
ROWS = ("fanout + limits", "fanout, headers only", "pydantic-ai", "openai-agents", "bare gather")


class LimitedServer(OpenAIServer):
    """``per_window`` requests in any ``window_s``; beyond: 429 with retry-after.

    A conversation's next turn follows from the request: no tools → the synthesis's
    text; a tool result last → the subtask's answer; else → a ``lookup`` call.
    """

    def __init__(self, *, window_s: float, per_window: int = PER_WINDOW) -> None:
        super().__init__(api_key=API_KEY)
        self.window_s = window_s
        self.per_window = per_window
        self._lock = threading.Lock()
        self._accepted: deque[float] = deque()
        self.refused = 0
        self.served = 0

    def reset_counts(self) -> None:
        """Forget the window and the counts (between rows)."""
        with self._lock:
            self._accepted.clear()
            self.refused = self.served = 0

    def default_reply(self, request: RecordedRequest) -> Reply:
        """The limit first, then the conversation's next turn."""
        now = time.monotonic()
        with self._lock:
            window = self._accepted
            while window and window[0] <= now - self.window_s:
                window.popleft()
            per_minute = round(self.per_window * 60 / self.window_s)
            if len(window) >= self.per_window:
                self.refused += 1
                wait = window[0] + self.window_s - now
                headers = {
                    "retry-after": str(math.ceil(wait)),
                    "retry-after-ms": str(math.ceil(wait * 1000)),
                    **self._limits(per_minute, 0, window[-1] + self.window_s - now),
                }
                return error(
                    429,
                    f"Rate limit reached for {MODEL}: Limit {per_minute}, Used {per_minute}.",
                    type="requests",
                    code="rate_limit_exceeded",
                    headers=headers,
                )
            window.append(now)
            self.served += 1
            headers = self._limits(
                per_minute, self.per_window - len(window), window[-1] + self.window_s - now
            )
        body = json.loads(request.body)
        messages = body["messages"]
        if not body.get("tools"):
            return completion("The answer, from every subtask's finding.", headers=headers)
        if messages and messages[-1]["role"] == "tool":
            return completion("Found it (lookup).", headers=headers)
        user = next((m["content"] for m in messages if m["role"] == "user"), "")
        return completion(tool_calls=[tool_call("lookup", {"query": user})], headers=headers)

    @staticmethod
    def _limits(per_minute: int, remaining: int, reset_s: float) -> dict[str, str]:
        return {
            "x-ratelimit-limit-requests": str(per_minute),
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{max(0, math.ceil(reset_s * 1000))}ms",
        }


@dataclass
class Row:
    """One row's outcome."""

    wall_s: float
    refused: int
    failed: int
    lost: int


def _job(base_url: str, subtasks: int, limits: dict[str, Any] | None) -> str:
    model: dict[str, Any] = {
        "provider": "openai",
        "name": MODEL,
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "timeout_s": 30,
    }
    if limits is not None:
        model["limits"] = limits
    return yaml.safe_dump(
        {
            "scenario": "rate-limits",
            "model": model,
            "job": {
                "query": "fifty questions, one endpoint",
                "concurrency": subtasks,
                "subtasks": [
                    {"id": f"s{i:02d}", "query": f"question {i}", "tools": ["lookup"]}
                    for i in range(subtasks)
                ],
            },
            "tools": {
                "lookup": {
                    "description": "Look a question up.",
                    "params": {"query": {"type": "string"}},
                    "responses": [{"ok": {"results": ["found"]}}],
                }
            },
        }
    )


async def fanout_row(server: LimitedServer, subtasks: int, limits: bool) -> Row:
    """A real job (``run_scenario`` on the asyncio clock): 50 model-planned subtasks + synthesis."""
    per_minute = server.per_window * 60 / server.window_s
    scenario = load_scenario_text(
        _job(server.base_url, subtasks, {"requests_per_minute": per_minute} if limits else None),
        "rate_limits.yaml",
    )
    forget_shared_limiters()  # each row starts from its own file's limits
    clock = AnyioClock()
    planning = JobPlanning(scenario, clock=clock, environ={KEY_ENV: API_KEY})
    started = time.perf_counter()
    report = await run_scenario(scenario, clock=clock, planning=planning)
    wall = time.perf_counter() - started
    # Only the subtasks' own rows and gaps count: the lead's row (a gap of ``lead``, e.g.
    # ``answer_rejected`` when the loopback's synthesis cites nothing) is not a subtask
    # lost to the rate limit; a synthesis that failed for good is counted on its own.
    failed = sum(g.trigger == "retries_exhausted" for g in report.gaps if g.subtask_id != LEAD)
    synthesis_failed = report.answer.synthesis_error is not None
    lost = sum(s.status != "complete" for s in report.subtasks if s.id != LEAD)
    lost += synthesis_failed
    return Row(wall, server.refused, failed + synthesis_failed, lost)


def _sdk(base_url: str) -> openai.AsyncOpenAI:
    """The SDK as its users get it: default retries (2, honouring retry-after)."""
    return openai.AsyncOpenAI(api_key=API_KEY, base_url=base_url)


async def _gather(
    subtask: Callable[[int], Awaitable[object]],
    synthesis: Callable[[], Awaitable[object]],
    subtasks: int,
) -> tuple[int, int]:
    """All subtasks at once, then the synthesis; (failed for good, lost)."""
    done = await asyncio.gather(*(subtask(i) for i in range(subtasks)), return_exceptions=True)
    failed = sum(isinstance(d, BaseException) for d in done)
    try:
        await synthesis()
    except openai.APIError:
        failed += 1
    return failed, failed


async def bare_row(server: LimitedServer, subtasks: int) -> Row:
    """``asyncio.gather`` over the SDK by hand."""
    client = _sdk(server.base_url)
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Look up.", "parameters": LOOKUP},
        }
    ]

    async def subtask(i: int) -> str:
        messages: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"question {i}"},
        ]
        first = await client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        message = first.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or ():
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": '{"results": ["found"]}'}
            )
        second = await client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        return second.choices[0].message.content or ""

    async def synthesis() -> object:
        return await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "write the answer"}]
        )

    try:
        started = time.perf_counter()
        failed, lost = await _gather(subtask, synthesis, subtasks)
        return Row(time.perf_counter() - started, server.refused, failed, lost)
    finally:
        await client.close()


async def lookup(query: str) -> dict[str, Any]:
    """The peers' tool: instant."""
    return {"results": ["found"]}


async def pydantic_ai_row(server: LimitedServer, subtasks: int) -> Row | None:
    """pydantic-ai's ``Agent.run`` × N, then a synthesis agent (None: not installed)."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider
    except ImportError:
        return None
    client = _sdk(server.base_url)
    model = OpenAIChatModel(
        MODEL, provider=OpenAICompatibleProvider("loopback", openai_client=client)
    )
    agent = Agent(model, instructions=SYSTEM)
    agent.tool_plain(lookup)
    writer = Agent(model, instructions="Write the answer.")
    try:
        started = time.perf_counter()
        failed, lost = await _gather(
            lambda i: agent.run(f"question {i}"), lambda: writer.run("write the answer"), subtasks
        )
        return Row(time.perf_counter() - started, server.refused, failed, lost)
    finally:
        await client.close()


async def agents_row(server: LimitedServer, subtasks: int) -> Row | None:
    """The OpenAI Agents SDK's ``Runner.run`` × N, then a synthesis agent."""
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
    client = _sdk(server.base_url)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = Agent(name="sub", instructions=SYSTEM, model=model, tools=[function_tool(lookup)])
    writer = Agent(name="lead", instructions="Write the answer.", model=model)
    try:
        started = time.perf_counter()
        failed, lost = await _gather(
            lambda i: Runner.run(agent, f"question {i}"),
            lambda: Runner.run(writer, "write the answer"),
            subtasks,
        )
        return Row(time.perf_counter() - started, server.refused, failed, lost)
    finally:
        await client.close()


def floor_s(requests: int, window_s: float, per_window: int = PER_WINDOW) -> float:
    """The least time ``requests`` can take: ``per_window`` at 0, then as many each window."""
    return (math.ceil(requests / per_window) - 1) * window_s


def measure(subtasks: int, window_s: float, pause_s: float) -> dict[str, Row | None]:
    """Every row, one after another, against one server (the window emptied between)."""
    rows: dict[str, Row | None] = {}
    makers: dict[str, Callable[[LimitedServer], Awaitable[Row | None]]] = {
        "fanout + limits": lambda s: fanout_row(s, subtasks, limits=True),
        "fanout, headers only": lambda s: fanout_row(s, subtasks, limits=False),
        "pydantic-ai": lambda s: pydantic_ai_row(s, subtasks),
        "openai-agents": lambda s: agents_row(s, subtasks),
        "bare gather": lambda s: bare_row(s, subtasks),
    }
    with LimitedServer(window_s=window_s) as server:
        # Warm-up, not measured: the tokenizer, the SDK's first parse, the first
        # connection (the peers import their frameworks before their clocks start, too).
        anyio.run(lambda: fanout_row(server, 1, limits=False), backend="asyncio")
        for name, make in makers.items():
            time.sleep(pause_s)  # the last row's window empties
            server.reset_counts()
            server.clear()

            rows[name] = anyio.run(make, server, backend="asyncio")
    return rows


def run(subtasks: int = 50, window_s: float = 1.0) -> BenchResult:
    """The benchmark as a table section (what ``python -m benchmarks`` shows)."""
    os.environ.setdefault(KEY_ENV, API_KEY)
    requests = subtasks * 2 + 1
    floor = floor_s(requests, window_s)
    rows = measure(subtasks, window_s, pause_s=window_s * 1.2)
    per_minute = round(PER_WINDOW * 60 / window_s)
    result = BenchResult(
        KEY,
        "rate limits",
        f"{subtasks} subtasks × 2 model calls + synthesis ({requests} requests) against a "
        f"loopback server allowing {PER_WINDOW} in any {window_s:g} s ({per_minute} rpm); "
        f"floor {floor:g} s",
        {"subtasks": subtasks, "window_s": window_s, "requests": requests, "floor_s": floor},
    )
    figures = result.figures
    for name in ROWS:
        row = rows.get(name)
        if row is None:
            figures.append(Figure(f"{name}: wall ÷ floor", "×", None, note="not installed"))
            continue
        ratio = row.wall_s / floor if floor else math.inf
        target = refused_target = None
        if name == "fanout + limits":
            target = Target(f"≤ {TARGET_LIMITS:g}× floor", ratio, TARGET_LIMITS)
            refused_target = Target(f"≤ {TARGET_LIMITS_429}", row.refused, TARGET_LIMITS_429)
        elif name == "fanout, headers only":
            target = Target(f"≤ {TARGET_HEADERS:g}× floor", ratio, TARGET_HEADERS)
        figures.append(Figure(f"{name}: wall ÷ floor", "×", Stats.of([ratio]), target=target,
                              note=f"{row.wall_s:.1f} s"))
        figures.append(Figure(f"{name}: 429s served", "", Stats.of([row.refused]),
                              target=refused_target))
        lost_target = None
        if name.startswith("fanout"):
            lost_target = Target("0 (no subtask lost)", row.lost, 0)
        figures.append(Figure(f"{name}: failed for good", "requests", Stats.of([row.failed]),
                              target=lost_target, note=f"{row.lost} subtask(s) lost"))
    return result


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (or one JSON document)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rate_limits")
    parser.add_argument("--subtasks", type=int, default=50)
    parser.add_argument("--window", type=float, default=1.0, help="seconds per 3 requests")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    result = run(2, 0.1) if args.quick else run(args.subtasks, args.window)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
        return 0
    from benchmarks import results

    results.show([result])
    return 0


if __name__ == "__main__":
    sys.exit(main())
