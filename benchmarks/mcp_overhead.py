"""Round-trip overhead of an MCP call through fanout versus a bare ``ClientSession.call_tool``.

One mcp-server-time process serves three kinds of call, interleaved (the order rotates
every round, so drift and warm-up hit all three alike):

- ``bare``: ``ClientSession.call_tool`` on the server's session, nothing else;
- ``mcp layer``: :meth:`subagents.mcp_server.McpServer.call` (capacity limiter, liveness
  check, error mapping) plus the result conversion, i.e. the tool body;
- ``fanout``: :func:`subagents.execute_tool_safely` on the MCP tool, as a subagent calls
  it (schema check, per-attempt timeout, retry wrapper, envelope).

Run: ``.venv/bin/python -m benchmarks.mcp_overhead [--calls 200] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import anyio

from subagents.executor import execute_tool_safely
from subagents.mcp.spec import McpServerSpec
from subagents.mcp.tools import open_mcp_tools
from subagents.retry import RetryPolicy
from subagents.tool import CallContext

SERVER = McpServerSpec(command=["python", "-m", "mcp_server_time", "--local-timezone", "UTC"])
ARGS = {"timezone": "UTC"}


def _summary(samples_ns: list[int]) -> dict[str, float]:
    us = sorted(s / 1000 for s in samples_ns)
    return {
        "median_us": round(statistics.median(us), 1),
        "p10_us": round(us[len(us) // 10], 1),
        "p90_us": round(us[(len(us) * 9) // 10], 1),
        "mean_us": round(statistics.fmean(us), 1),
    }


async def measure(calls: int, warmup: int) -> dict[str, dict[str, float]]:
    """Time ``calls`` calls of each kind (after ``warmup`` each); summaries in µs."""
    async with open_mcp_tools({"time": SERVER}) as source:
        server = source.servers["time"]
        session = server.session
        assert session is not None
        tool = source.tools["time.get_current_time"]
        ctx = CallContext(tool.name, 1, "tr_bench", "idem_bench", "bench")
        policy = RetryPolicy()

        async def bare() -> None:
            result = await session.call_tool("get_current_time", dict(ARGS))
            assert not result.is_error

        async def layer() -> None:
            await tool.body(ctx, **ARGS)

        async def fanout() -> None:
            result = await execute_tool_safely(tool, ARGS, timeout=30, retry=policy)
            assert result.ok

        kinds: dict[str, Callable[[], Awaitable[None]]] = {
            "bare": bare,
            "mcp_layer": layer,
            "fanout": fanout,
        }
        samples: dict[str, list[int]] = {name: [] for name in kinds}
        names = list(kinds)
        for i in range(warmup + calls):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter_ns()
                await kinds[name]()
                if i >= warmup:
                    samples[name].append(time.perf_counter_ns() - started)
    return {name: _summary(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print it (a table, or one JSON document)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_overhead")
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each kind")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls of each kind")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    result = anyio.run(measure, args.calls, args.warmup, backend="asyncio")
    bare = result["bare"]["median_us"]
    overhead = {
        name: round(result[name]["median_us"] - bare, 1) for name in ("mcp_layer", "fanout")
    }
    if args.json:
        document = {"calls": args.calls, "server": SERVER.display(), "results": result,
                    "overhead_vs_bare_median_us": overhead}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return 0
    print(f"{args.calls} calls each to `{SERVER.display()}` get_current_time (µs)")
    print(f"{'kind':<10} {'median':>9} {'p10':>9} {'p90':>9} {'mean':>9} {'vs bare':>9}")
    for name, row in result.items():
        delta = row["median_us"] - bare
        print(
            f"{name:<10} {row['median_us']:>9.1f} {row['p10_us']:>9.1f} {row['p90_us']:>9.1f} "
            f"{row['mean_us']:>9.1f} {delta:>+9.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
