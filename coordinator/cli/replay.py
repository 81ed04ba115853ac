"""`fanout replay` and `fanout schema`: scenario files in virtual time, and their format."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, dump, load_all
from coordinator.cli.jsonout import write_json
from coordinator.jobfile.loader import scenario_json_schema
from coordinator.replay import ReplaySummary, ScenarioResult, replay_all
from coordinator.views.terminal import (
    replay_view,
)


@contextmanager
def _settled_heap(whole_process: bool) -> Iterator[None]:
    """Keep the collector off what is imported and loaded for as long as a replay runs.

    Those objects live until the replay ends: frozen, the collector stops walking them on
    every full pass (at 5,000 subtasks, passes over the ~260,000 objects of the imports
    alone were over a third of a replay's time). A caller running the CLI in-process gets
    its heap back at the end (unless it froze objects itself); the ``fanout`` process
    leaves them frozen, as unfreezing costs a full pass at exit (0.4 s).
    """
    ours = gc.get_freeze_count() == 0 and not whole_process
    gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()


@contextmanager
def _young_passes_for(concurrency: int) -> Iterator[None]:
    """Collect the youngest generation less often when many subagents live at once.

    Each young pass walks every object allocated since the last one; with thousands of
    subagents alive together nearly all of them survive, so the passes are pure cost: a
    quarter of the CPU of 5,000 subagents at once (2.9 s → 2.0 s with passes every
    10,000 allocations instead of 700). At the usual concurrency the default stays: there
    the later passes cost memory (20,000 subtasks at 8: 187 → 201 MiB) and save little.
    """
    threshold = gc.get_threshold()
    young = min(10_000, max(threshold[0], 2 * concurrency))
    gc.set_threshold(young, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


def cmd_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Replay scenario files in virtual time and check their ``expect`` blocks."""
    with _settled_heap(getattr(args, "whole_process", False)):
        return _replay(args, out, err)


def _replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    scenarios = load_all(args.paths, err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    live_jobs = [s for s in scenarios if s.mcp_servers]
    for job in live_jobs:
        err.print(
            f"[bold red]error:[/] {escape(job.source)}: calls MCP servers "
            f"({', '.join(job.mcp_servers)}); replay runs simulated tools in virtual time, "
            f"so run it for real with `fanout run {escape(job.source)}`"
        )
    # A live model cannot replay either: only provider scripted answers in virtual time.
    live_models = [s for s in scenarios if s.model is not None and s.model.provider != "scripted"]
    for job in live_models:
        assert job.model is not None
        err.print(
            f"[bold red]error:[/] {escape(job.source)}: model.provider is "
            f"{job.model.provider}; replay answers with provider scripted in virtual time, "
            f"so run it for real with `fanout run {escape(job.source)}` (add --record to "
            "make a replayable scenario of it)"
        )
    if live_jobs or live_models:
        return EXIT_BAD_INPUT
    gc.freeze()  # the scenarios too, now loaded
    with _young_passes_for(max((s.job.concurrency for s in scenarios), default=1)):
        summary = replay_all(scenarios)
    if args.json:
        write_json(_summary_json(summary), sys.stdout)
    else:
        out.print(replay_view(summary, width=out.width))
    return EXIT_OK if summary.failed == 0 else EXIT_MISMATCH


def _summary_json(summary: ReplaySummary) -> dict[str, Any]:
    """``summary.model_dump(mode="json")``, with each report's wire dict used as it is.

    The reports are JSON-ready already (``CoverageReport.to_wire``); dumping the summary
    would copy every one of them again just to print it.
    """
    head = summary.model_dump(mode="json", exclude={"scenarios"})
    head["scenarios"] = [_scenario_json(result) for result in summary.scenarios]
    return {name: head[name] for name in type(summary).model_fields if name in head}


def _scenario_json(result: ScenarioResult) -> dict[str, Any]:
    fields = result.model_dump(mode="json", exclude={"report"})
    fields["report"] = result.report
    # In the models' field order, as model_dump writes them.
    return {name: fields[name] for name in type(result).model_fields if name in fields}


def cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Print the JSON Schema of the scenario format."""
    sys.stdout.write(dump(scenario_json_schema()) + "\n")
    return EXIT_OK
