"""`fanout replay` and `fanout schema`: scenario files in virtual time, and their format."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, dump, load_all
from coordinator.jobfile.loader import scenario_json_schema
from coordinator.replay import replay_all
from coordinator.views.terminal import (
    replay_view,
)


def cmd_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Replay scenario files in virtual time and check their ``expect`` blocks."""
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
    summary = replay_all(scenarios)
    if args.json:
        sys.stdout.write(dump(summary.model_dump(mode="json")) + "\n")
    else:
        out.print(replay_view(summary))
    return EXIT_OK if summary.failed == 0 else EXIT_MISMATCH


def cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Print the JSON Schema of the scenario format."""
    sys.stdout.write(dump(scenario_json_schema()) + "\n")
    return EXIT_OK
