"""`fanout run`, `fanout resume` and `fanout tools`: jobs in real time, recorded in the store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.prompt import Prompt

from coordinator.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    dump,
    load_all,
    open_store,
    outcome_exit,
    print_report,
)
from coordinator.job import JobSpec
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from coordinator.report import CoverageReport
from coordinator.store.runner import (
    elapsed_so_far,
    planned_scenario,
    recorded_followups,
    recorded_lead_gap,
    restored_runs,
    run_recorded,
)
from coordinator.store.runs import (
    RunRecorder,
)
from coordinator.views.live import BoardLive, LiveBoard
from shared.clock import AnyioClock
from shared.escalation import Escalation
from shared.ids import SeededTraceIds
from shared.tokens import TokenCounter
from subagents.simulated.tools import SimulatedTools

if TYPE_CHECKING:
    from subagents.mcp.tools import McpToolSource
    from subagents.models.endpoints.preflight import EndpointProblem
    from subagents.research.tools import ResearchTools


class AskHandler:
    """An interactive escalation handler: a person picks an alternative, or skips."""

    def __init__(self, console: Console, live: Live | None) -> None:
        self.console = console
        self.live = live

    async def handle(self, escalation: Escalation) -> str | None:
        """Show the escalation and ask which alternative to take."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        c = self.console
        c.rule(f"[bold red]escalation: {escalation.subtask_id}")
        c.print(
            f"[bold]{escalation.trigger}[/] ({escalation.category or 'no category'}): "
            f"{escalation.message}"
        )
        c.print(f"tried: {escalation.attempted_query}")
        options = list(escalation.alternatives)
        for i, alt in enumerate(options, 1):
            c.print(f"  [cyan]{i}[/] {alt}")
        c.print("  [cyan]0[/] skip")
        choices = [str(i) for i in range(len(options) + 1)]
        answer = await anyio.to_thread.run_sync(
            lambda: Prompt.ask("choose", choices=choices, default="0", console=c)
        )
        return None if answer == "0" else options[int(answer) - 1]


def _live(
    job: JobSpec, args: argparse.Namespace, out: Console, speed: float
) -> tuple[LiveBoard, Live | None, AskHandler | None]:
    board = LiveBoard(job, speed=speed)
    live = None if args.json else BoardLive(board, console=out, refresh_per_second=8)
    handler = AskHandler(out, live) if getattr(args, "ask", False) else None
    return board, live, handler


def _execute(
    main: Callable[[], Awaitable[CoverageReport]],
    live: Live | None,
    handler: AskHandler | None,
    recorders: Sequence[RunRecorder],
    *,
    start_live: bool = True,
) -> CoverageReport:
    TokenCounter()  # load the encoding now, not on the job's clock
    if live is not None and start_live:
        live.start()
    try:
        return anyio.run(main, backend="asyncio")
    finally:
        if (handler is None or handler.live is not None) and live is not None:
            live.stop()
        for recorder in recorders:
            recorder.close()


def _resume_hint(err: Console, recorders: Sequence[RunRecorder]) -> None:
    """On Ctrl-C: the run is kept in the store; say how to finish it."""
    for recorder in recorders:
        err.print(
            f"[yellow]interrupted:[/] run [bold]{recorder.run_id}[/] is kept; "
            f"`fanout resume {recorder.run_id}` finishes it"
        )


def refuse_directory(path: str, command: str, err: Console) -> bool:
    """Say so (and return True) when ``path`` is a folder where one job file is expected.

    ``fanout replay`` takes folders; ``run`` and ``tools`` run one job, so a folder is
    refused with its job files named rather than quietly running its first file.
    """
    folder = Path(path)
    if not folder.is_dir():
        return False
    from coordinator.replay import scenario_files

    names = [str(f) for f in scenario_files([path])]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    err.print(
        f"[bold red]error:[/] {escape(path)} is a directory: `fanout {command}` takes one job "
        "file" + (f", e.g. {escape(shown)}" if names else " (this one holds no .yaml files)")
    )
    return True


def _job_servers(scenario: Scenario) -> AbstractAsyncContextManager[McpToolSource | None]:
    """The job's MCP servers, started (None without any); the SDK loads only if needed."""
    if not scenario.mcp_servers:
        return nullcontext(None)
    from coordinator.jobfile.mcp import job_servers

    return job_servers(scenario)


def _research_tools(
    scenario: Scenario, store_dir: Path, *, allow_private_fetch: bool = False
) -> AbstractAsyncContextManager[ResearchTools | None]:
    """The job's built-in research tools, open (None without any); its folder indexed.
    ``allow_private_fetch`` is ``--allow-private-fetch``: the user's, never the file's."""
    if scenario.research_tools is None:
        return nullcontext(None)
    from coordinator.jobfile.research import ResearchPolicy, job_research_tools

    policy = ResearchPolicy(allow_private_fetch=allow_private_fetch)
    return job_research_tools(scenario, store_dir, policy)


def check_model_endpoint(
    scenario: Scenario, args: argparse.Namespace, err: Console
) -> int | None:
    """The exit code of a run refused before it starts for its model endpoint, or None.

    An OpenAI-compatible endpoint that cannot be reached (after the model's retry policy)
    is one line naming its URL, exit 3, nothing run or recorded; a base URL that lacks its
    ``/v1`` is bad input (exit 2) naming the flag or field that gave it.
    """
    if scenario.model is None or scenario.model.provider != "openai":
        return None
    import os

    from subagents.models.endpoints.preflight import check_endpoint

    spec = scenario.model

    async def check() -> EndpointProblem | None:
        return await check_endpoint(spec, environ=os.environ, clock=AnyioClock())

    problem = anyio.run(check, backend="asyncio")
    if problem is None:
        return None
    if getattr(args, "base_url", None):
        where = "--base-url"
    elif spec.base_url:
        where = "model.base_url"
    else:
        where = "OPENAI_BASE_URL"
    err.print(f"[bold red]error:[/] {where}: {escape(problem.message)}")
    return EXIT_FAILED if problem.kind == "unreachable" else EXIT_BAD_INPUT


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a job file in real time (simulated latencies scaled by --speed), recorded."""
    if getattr(args, "executor", "local") == "temporal":
        from coordinator.cli.temporal import cmd_run_temporal

        return cmd_run_temporal(args, out, err)
    if args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    if refuse_directory(args.job, "run", err):
        return EXIT_BAD_INPUT
    scenarios = load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    # --speed scales simulated time only: MCP and model calls keep their real timeouts.
    spec_text = Path(args.job).read_text(encoding="utf-8")
    return run_live(scenario, file=str(args.job), spec_text=spec_text, args=args, out=out, err=err)


def run_live(
    scenario: Scenario,
    *,
    file: str,
    spec_text: str,
    args: argparse.Namespace,
    out: Console,
    err: Console,
) -> int:
    """Run ``scenario`` in real time with the live display, recorded in the store.

    Shared by ``fanout run`` and ``fanout ask``: ``--speed``, ``--json``, ``--ask`` and
    ``--record`` come from ``args``.
    """
    clock = AnyioClock(speed=args.speed)
    # The model client is made (its key read from the environment) before anything is
    # recorded: a missing key is exit 2 with nothing run and nothing stored.
    planning = JobPlanning(scenario, clock=clock)
    planning.open()
    refused = check_model_endpoint(scenario, args, err)
    if refused is not None:
        return refused
    store = open_store(args)
    recorders: list[RunRecorder] = []
    board, live, handler = _live(scenario.job, args, out, args.speed)

    def record() -> RunRecorder:
        recorder = store.create_run(
            job=scenario.scenario,
            query=scenario.job.query,
            file=file,
            spec_text=spec_text,
            seed=str(scenario.seed),
            speed=args.speed,
        )
        recorders.append(recorder)
        if not args.json:
            err.print(f"run [bold]{recorder.run_id}[/] recorded in {store.where}")
        if live is not None:
            live.start()
        return recorder

    async def main() -> CoverageReport:
        # MCP servers start (and research tools open, their folder indexed) before the run
        # is recorded: one that cannot is an error before any subagent runs, and leaves
        # no half-made run in the store.
        async with (
            _job_servers(scenario) as mcp,
            _research_tools(
                scenario, store.backend.home(),
                allow_private_fetch=getattr(args, "allow_private_fetch", False),
            ) as research,
        ):
            return await run_recorded(
                scenario,
                record(),
                clock=clock,
                mcp=mcp,
                research=research,
                observer=board,
                handler=handler,
                planning=planning,
                on_plan=board.plan,
            )

    try:
        report = _execute(main, live, handler, recorders, start_live=False)
    except KeyboardInterrupt:
        _resume_hint(err, recorders)
        raise
    if getattr(args, "record", None) and recorders:
        from coordinator.store.recording import refusal, write_recording

        reason = refusal(store, recorders[0].run_id)
        if reason is None:
            write_recording(store, recorders[0].run_id, args.record)
            err.print(f"wrote {args.record}: `fanout replay {args.record}` reproduces this run")
        else:
            # The run itself finished and its report is printed; only the recording is
            # not written (a warning, not a failed run).
            err.print(f"[bold yellow]not written:[/] {args.record}: {reason}")
    print_report(report, args, out)
    return outcome_exit(report)


def cmd_tools(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Start a job's MCP servers and list the tools each offers, with their schemas."""
    if refuse_directory(args.job, "tools", err):
        return EXIT_BAD_INPUT
    scenarios = load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    from coordinator.jobfile.mcp import list_job_tools, tools_view

    listings = anyio.run(list_job_tools, scenario, backend="asyncio")
    if args.json:
        document = {
            "job": scenario.scenario,
            "file": str(args.job),
            "servers": [listing.model_dump(mode="json") for listing in listings],
        }
        sys.stdout.write(dump(document) + "\n")
    elif not listings:
        simulated = ", ".join(scenario.tools) or "none"
        out.print(f"{escape(str(args.job))} declares no mcp_servers (simulated tools: {simulated})")
    else:
        out.print(tools_view(listings))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Finish an interrupted run: committed subtasks are kept, in-flight ones continue.

    Simulated time runs at ``--speed``, or at the speed the run was started at.
    """
    if args.speed is not None and args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    store = open_store(args)
    row = store.get(args.run_id)
    from coordinator.cli.temporal import refuse_resume_on_temporal

    refuse_resume_on_temporal(store, row.id)
    recorder = store.claim_for_resume(row.id)
    # A decomposed job resumes with the subtasks its lead planned, not a new plan.
    scenario = planned_scenario(load_scenario_text(row.spec_text, row.file), store, row.id)
    speed = row.speed if args.speed is None else args.speed
    clock = AnyioClock(speed=speed)
    tools = SimulatedTools(scenario.tools, clock)
    trace_ids = SeededTraceIds(f"{scenario.seed}/{row.id}")
    planning = JobPlanning(scenario, clock=clock)
    followups = recorded_followups(store, row.id)
    runs = restored_runs(
        scenario, store.checkpoints(row.id), tools, trace_ids, planning, followups
    )
    offset = elapsed_so_far(store, row.id)
    kept = sum(r.finished for r in runs.values())
    if not args.json:
        err.print(
            f"resuming run [bold]{row.id}[/] at {offset:.1f}s: {kept} of {len(runs)} "
            "subtasks already finished"
        )
    board, live, handler = _live(scenario.job, args, out, speed)

    async def main() -> CoverageReport:
        return await run_recorded(
            scenario,
            recorder,
            clock=clock,
            runs=runs,
            tools=tools,
            trace_ids=trace_ids,
            elapsed_offset=offset,
            observer=board,
            handler=handler,
            planning=planning,
            lead_gap=recorded_lead_gap(store, row.id),
            followups=followups,
        )

    try:
        report = _execute(main, live, handler, [recorder])
    except KeyboardInterrupt:
        _resume_hint(err, [recorder])
        raise
    print_report(report, args, out)
    return outcome_exit(report)
