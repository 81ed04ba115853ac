"""The ``fanout`` command line: run, replay, tools, schema, resume, runs, report, gaps, trace.

Output for people goes through rich; ``--json`` prints one JSON document for programs
(``trace --json`` prints JSON Lines). Exit codes: 0 success, 1 a replay did not meet its
``expect``, 2 bad input or an unusable store (nothing ran), 3 a resume was refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.prompt import Prompt

from coordinator.job import JobSpec
from coordinator.live import LiveBoard
from coordinator.loader import load_scenario, load_scenario_text, scenario_json_schema
from coordinator.render import (
    gaps_view,
    header,
    print_input_error,
    replay_view,
    report_view,
    runs_table,
    trace_entries,
    trace_table,
)
from coordinator.replay import replay_all, scenario_files
from coordinator.report import CoverageReport
from coordinator.runner import elapsed_so_far, interrupted_report, restored_runs, run_recorded
from coordinator.scenario import Scenario
from coordinator.store import (
    ResumeRefused,
    RunRecorder,
    RunRow,
    RunStore,
    StoreError,
    store_path,
)
from shared.clock import AnyioClock
from shared.errors import InputFileError, InputFileErrors
from shared.escalation import Escalation
from shared.ids import SeededTraceIds
from shared.tokens import TokenCounter
from subagents.mcp_spec import McpServerError
from subagents.simulated import SimulatedTools

if TYPE_CHECKING:
    from subagents.mcp_tools import McpToolSource

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 1, 2, 3


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def _load_all(paths: Sequence[str], err: Console) -> list[Scenario] | None:
    """Load every file first: one bad file means nothing runs."""
    files = scenario_files(paths)
    if not files:
        err.print(f"[bold red]error:[/] no scenario files in {' '.join(paths)}")
        return None
    scenarios: list[Scenario] = []
    problems: list[InputFileError] = []
    for file in files:
        try:
            scenarios.append(load_scenario(file))
        except InputFileErrors as exc:
            problems.extend(exc.errors)
        except InputFileError as exc:
            problems.append(exc)
    if problems:
        print_input_error(err, InputFileErrors(problems))
        return None
    return scenarios


def cmd_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Replay scenario files in virtual time and check their ``expect`` blocks."""
    scenarios = _load_all(args.paths, err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    live_jobs = [s for s in scenarios if s.mcp_servers]
    for job in live_jobs:
        err.print(
            f"[bold red]error:[/] {escape(job.source)}: calls MCP servers "
            f"({', '.join(job.mcp_servers)}); replay runs simulated tools in virtual time, "
            f"so run it for real with `fanout run {escape(job.source)}`"
        )
    if live_jobs:
        return EXIT_BAD_INPUT
    summary = replay_all(scenarios)
    if args.json:
        sys.stdout.write(_dump(summary.model_dump(mode="json")) + "\n")
    else:
        out.print(replay_view(summary))
    return EXIT_OK if summary.failed == 0 else EXIT_MISMATCH


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


def _store(args: argparse.Namespace) -> RunStore:
    return RunStore(store_path(args.store))


def _live(
    job: JobSpec, args: argparse.Namespace, out: Console, speed: float
) -> tuple[LiveBoard, Live | None, AskHandler | None]:
    board = LiveBoard(job, speed=speed)
    live = None if args.json else Live(board, console=out, refresh_per_second=8)
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


def _job_servers(scenario: Scenario) -> AbstractAsyncContextManager[McpToolSource | None]:
    """The job's MCP servers, started (None without any); the SDK loads only if needed."""
    if not scenario.mcp_servers:
        return nullcontext(None)
    from coordinator.mcp_jobs import job_servers

    return job_servers(scenario)


def _print_report(report: CoverageReport, args: argparse.Namespace, out: Console) -> None:
    if args.json:
        sys.stdout.write(_dump(report.to_wire()) + "\n")
    else:
        out.print()
        out.print(report_view(report))


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a job file in real time (simulated latencies scaled by --speed), recorded."""
    if args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    scenarios = _load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    if scenario.mcp_servers and args.speed != 1 and not args.json:
        err.print(
            f"[yellow]note:[/] --speed {args.speed:g} also scales the tool timeouts of the "
            "job's MCP servers, which answer in real time"
        )
    store = _store(args)
    recorders: list[RunRecorder] = []
    board, live, handler = _live(scenario.job, args, out, args.speed)

    def record() -> RunRecorder:
        recorder = store.create_run(
            job=scenario.scenario,
            query=scenario.job.query,
            file=str(args.job),
            spec_text=Path(args.job).read_text(encoding="utf-8"),
            seed=str(scenario.seed),
            speed=args.speed,
        )
        recorders.append(recorder)
        if not args.json:
            err.print(f"run [bold]{recorder.run_id}[/] recorded in {store.path}")
        if live is not None:
            live.start()
        return recorder

    async def main() -> CoverageReport:
        clock = AnyioClock(speed=args.speed)
        # MCP servers start before the run is recorded: a server that cannot start is an
        # error before any subagent runs, and leaves no half-made run in the store.
        async with _job_servers(scenario) as mcp:
            return await run_recorded(
                scenario, record(), clock=clock, mcp=mcp, observer=board, handler=handler
            )

    report = _execute(main, live, handler, recorders, start_live=False)
    _print_report(report, args, out)
    return EXIT_OK


def cmd_tools(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Start a job's MCP servers and list the tools each offers, with their schemas."""
    scenarios = _load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    from coordinator.mcp_jobs import list_job_tools, tools_view

    listings = anyio.run(list_job_tools, scenario, backend="asyncio")
    if args.json:
        document = {
            "job": scenario.scenario,
            "file": str(args.job),
            "servers": [listing.model_dump(mode="json") for listing in listings],
        }
        sys.stdout.write(_dump(document) + "\n")
    elif not listings:
        simulated = ", ".join(scenario.tools) or "none"
        out.print(f"{escape(str(args.job))} declares no mcp_servers (simulated tools: {simulated})")
    else:
        out.print(tools_view(listings))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Finish an interrupted run: committed subtasks are kept, in-flight ones continue."""
    store = _store(args)
    row = store.get(args.run_id)
    recorder = store.claim_for_resume(row.id)
    scenario = load_scenario_text(row.spec_text, row.file)
    clock = AnyioClock(speed=row.speed)
    tools = SimulatedTools(scenario.tools, clock)
    trace_ids = SeededTraceIds(f"{scenario.seed}/{row.id}")
    runs = restored_runs(scenario, store.checkpoints(row.id), tools, trace_ids)
    offset = elapsed_so_far(store, row.id)
    kept = sum(r.finished for r in runs.values())
    if not args.json:
        err.print(
            f"resuming run [bold]{row.id}[/] at {offset:.1f}s: {kept} of {len(runs)} "
            "subtasks already finished"
        )
    board, live, handler = _live(scenario.job, args, out, row.speed)

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
        )

    report = _execute(main, live, handler, [recorder])
    _print_report(report, args, out)
    return EXIT_OK


def _report_of(store: RunStore, run_id: str | None) -> tuple[RunRow, CoverageReport]:
    row = store.get(run_id)
    if row.report is not None:
        return row, CoverageReport.model_validate(row.report)
    scenario = load_scenario_text(row.spec_text, row.file)
    hint = (
        f"the run was interrupted before this subtask finished; `fanout resume {row.id}` "
        "continues it"
        if row.status == "interrupted"
        else "still running: this subtask has not finished yet"
    )
    return row, interrupted_report(scenario, store, row.id, resume_hint=hint)


def cmd_runs(args: argparse.Namespace, out: Console, err: Console) -> int:
    """List the stored runs, newest first."""
    store = _store(args)
    rows = store.runs() if store.path.exists() else []
    if args.json:
        sys.stdout.write(_dump([r.summary() for r in rows]) + "\n")
    else:
        out.print(runs_table(rows))
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Show a stored run's report as a table, JSON, Markdown or HTML."""
    store = _store(args)
    row, report = _report_of(store, args.run_id)
    wire = report.to_wire()
    if args.format == "json":
        text = _dump(wire) + "\n"
    elif args.format == "md":
        from coordinator.markdown_report import render_markdown

        text = render_markdown(wire, row.summary())
    elif args.format == "html":
        from coordinator.html_report import render_html

        text = render_html(wire, store.events(row.id), row.summary())
    else:
        if row.status != "finished":
            out.print(f"[bold yellow]run {row.id} is {row.status}[/]: this is what it has so far")
        out.print(report_view(report))
        return EXIT_OK
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        err.print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_gaps(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The coverage-gap report of a stored run."""
    store = _store(args)
    _row, report = _report_of(store, args.run_id)
    if args.json:
        sys.stdout.write(_dump([g.model_dump(mode="json", by_alias=True) for g in report.gaps]))
        sys.stdout.write("\n")
        return EXIT_OK
    out.print(header(report))
    out.print(gaps_view(report.gaps) if report.gaps else "[green]No coverage gaps.[/]")
    return EXIT_OK


def cmd_trace(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Every tool envelope of a run, in order, with trace id, subtask, attempt and time."""
    store = _store(args)
    row = store.get(args.run_id)
    entries = trace_entries(store.events(row.id))
    if args.json:
        for entry in entries:
            sys.stdout.write(json.dumps(entry, ensure_ascii=False) + "\n")
    else:
        out.print(trace_table(row.id, entries))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Print the JSON Schema of the scenario format."""
    sys.stdout.write(_dump(scenario_json_schema()) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="fanout",
        description="Fan-out research jobs that stay useful when things fail.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run a job file in real time with a live display")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--speed", type=float, default=1.0, help="run simulated time X times faster")
    p.add_argument("--ask", action="store_true", help="pick an alternative for each escalation")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("replay", help="replay scenarios in virtual time and check expect")
    p.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("tools", help="list the tools of a job's MCP servers, with schemas")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("resume", help="finish an interrupted run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--ask", action="store_true", help="pick an alternative for each escalation")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("runs", help="list stored runs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("report", help="a stored run's report")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--format", choices=("table", "json", "md", "html"), default="table")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("gaps", help="the coverage-gap report of a stored run")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_gaps)

    p = sub.add_parser("trace", help="every tool envelope of a run (JSONL with --json)")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trace)

    for name in ("run", "resume", "runs", "report", "gaps", "trace"):
        sub.choices[name].add_argument(
            "--store",
            metavar="PATH",
            help="the run store (default $FANOUT_STORE or .fanout/runs.sqlite)",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fanout`` console script."""
    args = build_parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True, soft_wrap=True)  # error lines stay whole for grep and CI logs
    try:
        code: int = args.func(args, out, err)
    except InputFileError as exc:
        print_input_error(err, exc)
        return EXIT_BAD_INPUT
    except McpServerError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except ResumeRefused as exc:
        err.print(f"[bold red]refused:[/] {exc}")
        return EXIT_REFUSED
    except StoreError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
