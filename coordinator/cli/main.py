"""The ``fanout`` command line: run, replay, tools, schema, resume, runs, report, gaps, trace.

Output for people goes through rich; ``--json`` prints one JSON document for programs
(``trace --json`` prints JSON Lines). Exit codes: 0 success, 1 a replay did not meet its
``expect``, 2 bad input or an unusable store (nothing ran), 3 a resume was refused.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_REFUSED
from coordinator.cli.parser import build_parser as build_parser  # re-exported

# The commands that run jobs (or serve them): they export traces when OTEL_* asks.
TRACED_COMMANDS = frozenset({"run", "ask", "resume", "replay", "serve", "worker", "mcp"})


# 128 + SIGPIPE: what `cat`, `yes` and other Unix tools end with when the reader of their
# output goes away (`fanout trace --json | head -3`). Not 0, because the output was cut
# short; a pipeline without `pipefail` still succeeds, one with it sees what `cat` gives.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fanout`` console script."""
    try:
        return _guarded(argv)
    finally:
        if argv is None:  # this is the process (the console script), which ends now
            end_quickly()


def end_quickly() -> None:
    """Spare the interpreter's exit its garbage collections.

    While it tears its modules down, Python collects more than once, and each pass walks
    every object still alive: with an ask's model and indexes loaded, about 0.1 s at the
    end of a 1 s command, measured as whole processes (a replay froze its heap already).
    One collection now still finalizes every unreachable cycle (a file, a connection);
    freezing what survives it spares the passes that would only walk live objects.
    Atexit handlers and every other finalizer run as before.
    """
    gc.collect()
    gc.freeze()


def _guarded(argv: Sequence[str] | None) -> int:
    """:func:`_main`, with a closed pipe on stdout ending the command quietly."""
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
    # Imported once the arguments are known: `fanout --version`, `--help` and a mistyped
    # option load none of it; each command loads what it needs itself.
    from rich.console import Console
    from rich.markup import escape

    from shared.errors import FanoutError, InputFileError
    from subagents.telemetry.setup import Telemetry, TelemetryUnavailable, configure_from_env

    # Read from sys.argv: this is the process (the console script), which ends with it.
    args.whole_process = argv is None
    out = Console()
    err = Console(stderr=True, soft_wrap=True)  # error lines stay whole for grep and CI logs
    telemetry: Telemetry | None = None
    try:
        if args.whole_process and args.command in TRACED_COMMANDS:
            # Only as the process itself may fanout set the global tracer provider: called
            # from Python, main() leaves that to the application (docs/design.md §13).
            try:
                telemetry = configure_from_env()
            except TelemetryUnavailable as exc:
                err.print(f"[yellow]warning:[/] {escape(str(exc))}")
        code: int = args.func(args, out, err)
    except InputFileError as exc:
        from coordinator.views.terminal import print_input_error

        print_input_error(err, exc)
        return EXIT_BAD_INPUT
    except FanoutError as exc:
        refused = _refusal(exc)
        if refused is None:
            raise
        label, code = refused
        err.print(f"[bold red]{label}:[/] {escape(str(exc))}")
        return code
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    finally:
        if telemetry is not None and not telemetry.shutdown():
            err.print("[yellow]warning:[/] the trace exporter did not take the last spans "
                      f"within {telemetry.flush_timeout_s:g}s; they were dropped")
    return code


def _refusal(exc: Exception) -> tuple[str, int] | None:
    """How a command that could not run says so (its label and exit code), or None: a bug.

    The classes are imported here, after one of fanout's errors was raised: the module of
    the one raised is loaded already, and a command that raises none loads none of them
    (the store, the model clients and the MCP specs are not every command's).
    """
    from coordinator.store.schema import ResumeRefused, StoreError
    from subagents.mcp.spec import McpServerError
    from subagents.models.factory import MissingModelKey

    if isinstance(exc, ResumeRefused):
        return "refused", EXIT_REFUSED
    if isinstance(exc, MissingModelKey | McpServerError | StoreError):
        return "error", EXIT_BAD_INPUT
    return None

if __name__ == "__main__":
    sys.exit(main())
