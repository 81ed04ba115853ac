"""The ``fanout`` command line: run, replay, tools, schema, resume, runs, report, gaps, trace.

Output for people goes through rich; ``--json`` prints one JSON document for programs
(``trace --json`` prints JSON Lines). Exit codes: 0 success, 1 a replay did not meet its
``expect``, 2 bad input or an unusable store (nothing ran), 3 a resume was refused.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape

from coordinator.cli.ask import add_ask_parser
from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_REFUSED, add_private_fetch_option
from coordinator.cli.index import add_index_parser
from coordinator.cli.mcp import add_mcp_parser
from coordinator.cli.read import cmd_gaps, cmd_record, cmd_report, cmd_runs, cmd_trace
from coordinator.cli.replay import cmd_replay, cmd_schema
from coordinator.cli.run import cmd_resume, cmd_run, cmd_tools
from coordinator.cli.serve import add_serve_parser
from coordinator.cli.temporal import add_run_options, add_temporal_commands
from coordinator.store.runs import (
    ResumeRefused,
    StoreError,
)
from coordinator.views.terminal import (
    print_input_error,
)
from shared.errors import InputFileError
from subagents.mcp.spec import McpServerError
from subagents.models.factory import MissingModelKey
from subagents.telemetry import Telemetry, TelemetryUnavailable, configure_from_env

# The commands that run jobs (or serve them): they export traces when OTEL_* asks.
TRACED_COMMANDS = frozenset({"run", "ask", "resume", "replay", "serve", "worker", "mcp"})


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviations: ``--doc`` is not taken for ``--docs``, nor any
    prefix for an option that happens to start with it (a future option would change what
    it means). A misspelled option or command is told the nearest one: "did you mean
    --docs?"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        # The options it takes, kept as they are added (argparse lists them only in
        # private attributes).
        self.options: list[str] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's ``add_argument``, the option's names kept for "did you mean"."""
        action = super().add_argument(*args, **kwargs)
        self.options += [o for o in action.option_strings if o.startswith("--")]
        return action

    def error(self, message: str) -> NoReturn:
        """Exit 2 with the usage and ``message``, and the nearest option or command."""
        super().error(message + did_you_mean(self.options, message))


def did_you_mean(options: Sequence[str], message: str) -> str:
    """" (did you mean --docs?)" for an argparse error about an unknown option close to
    one of ``options``, or an invalid choice close to one of its choices; else ""."""
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        guesses = []
        for word in unknown.group(1).split():
            if word.startswith("-"):
                close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1)
                guesses += close
        return f" (did you mean {' '.join(dict.fromkeys(guesses))}?)" if guesses else ""
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        choices = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), choices, n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""
    return ""


class _CommandParser(_Parser):
    """A subcommand's parser: an option it does not know is its error, shown with its own
    usage (argparse hands unknown options up to ``fanout``, whose usage names none)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def version_text() -> str:
    """``fanout X.Y.Z`` as installed (``fanout --version``)."""
    try:
        return f"fanout {version('fanout')}"
    except PackageNotFoundError:
        return "fanout (not installed: run from a source tree)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="fanout",
        description="Fan-out research jobs that stay useful when things fail.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_CommandParser)

    p = sub.add_parser("run", help="run a job file in real time with a live display")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--speed", type=float, default=1.0, help="run simulated time X times faster")
    p.add_argument("--ask", action="store_true", help="pick an alternative for each escalation")
    p.add_argument("--record", metavar="OUT.yaml", help="also write the run as a scenario")
    add_private_fetch_option(p)
    add_run_options(p)
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
    p.add_argument("--speed", type=float, default=None,
                   help="run simulated time X times faster (default: the run's own speed)")
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

    add_ask_parser(sub)
    add_index_parser(sub)
    p = sub.add_parser("record", help="write a finished stored run as a replayable scenario")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--output", "-o", metavar="OUT.yaml", required=True)
    p.set_defaults(func=cmd_record)
    add_serve_parser(sub)
    add_mcp_parser(sub)
    add_temporal_commands(sub)
    for name in ("run", "resume", "runs", "report", "gaps", "trace", "record", "worker"):
        sub.choices[name].add_argument(
            "--store",
            metavar="PATH|URL",
            help="the run store: a SQLite file or a postgresql://user@host:port/db URL "
            "(default $FANOUT_STORE or .fanout/runs.sqlite)",
        )
    return parser


# 128 + SIGPIPE: what `cat`, `yes` and other Unix tools end with when the reader of their
# output goes away (`fanout trace --json | head -3`). Not 0, because the output was cut
# short; a pipeline without `pipefail` still succeeds, one with it sees what `cat` gives.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fanout`` console script."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader closed the pipe: stop quietly. Point stdout at /dev/null so that the
        # interpreter's final flush of what is still buffered cannot raise again
        # (the approach of the Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a real file (a test's capture)
            pass
        finally:
            os.close(devnull)
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    # Read from sys.argv: this is the process (the console script), which ends with it.
    args.whole_process = argv is None
    out = Console()
    err = Console(stderr=True, soft_wrap=True)  # error lines stay whole for grep and CI logs
    telemetry: Telemetry | None = None
    try:
        if args.whole_process and args.command in TRACED_COMMANDS:
            # Only as the process itself may fanout set the global tracer provider: called
            # from Python, main() leaves that to the application (DESIGN §13).
            try:
                telemetry = configure_from_env()
            except TelemetryUnavailable as exc:
                err.print(f"[yellow]warning:[/] {escape(str(exc))}")
        code: int = args.func(args, out, err)
    except InputFileError as exc:
        print_input_error(err, exc)
        return EXIT_BAD_INPUT
    except MissingModelKey as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
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
    finally:
        if telemetry is not None and not telemetry.shutdown():
            err.print("[yellow]warning:[/] the trace exporter did not take the last spans "
                      f"within {telemetry.flush_timeout_s:g}s; they were dropped")
    return code


if __name__ == "__main__":
    sys.exit(main())
