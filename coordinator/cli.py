"""The ``fanout`` command line: run, replay, schema.

Output for people goes through rich; ``--json`` prints one JSON document for programs.
Exit codes: 0 success, 1 a replay did not meet its ``expect``, 2 bad input (nothing ran).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live
from rich.prompt import Prompt

from coordinator.live import LiveBoard
from coordinator.loader import load_scenario, scenario_json_schema
from coordinator.render import print_input_error, replay_view, report_view
from coordinator.replay import replay_all, run_scenario, scenario_files
from coordinator.scenario import Scenario
from shared.clock import AnyioClock
from shared.errors import InputFileError, InputFileErrors
from shared.escalation import Escalation
from shared.tokens import TokenCounter

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


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
        c.print(f"[bold]{escalation.trigger}[/] ({escalation.category or 'no category'}): "
                f"{escalation.message}")
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


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a job file in real time (simulated latencies scaled by --speed)."""
    scenarios = _load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    if args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    TokenCounter()  # load the encoding now, not on the job's clock
    board = LiveBoard(scenario.job, speed=args.speed)
    show_live = not args.json
    live = Live(board, console=out, refresh_per_second=8, transient=False) if show_live else None
    handler = AskHandler(out, live) if args.ask else None

    async def main() -> Any:
        clock = AnyioClock(speed=args.speed)
        return await run_scenario(scenario, clock=clock, observer=board, handler=handler)

    if live is not None:
        live.start()
    try:
        report = anyio.run(main, backend="asyncio")
    finally:
        if handler is not None and handler.live is not None:
            handler.live.stop()
        elif handler is None and live is not None:
            live.stop()
    if args.json:
        sys.stdout.write(_dump(report.to_wire()) + "\n")
    else:
        out.print()
        out.print(report_view(report))
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

    p = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fanout`` console script."""
    args = build_parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    try:
        code: int = args.func(args, out, err)
    except InputFileError as exc:
        print_input_error(err, exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
