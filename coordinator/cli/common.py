"""What every command shares: exit codes, JSON output, loading job files, the store."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from coordinator.jobfile.loader import load_scenario
from coordinator.jobfile.scenario import Scenario
from coordinator.replay import scenario_files
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore, store_path
from coordinator.views.terminal import (
    print_input_error,
    report_view,
)
from shared.errors import InputFileError, InputFileErrors

if TYPE_CHECKING:
    from coordinator.jobfile.research import ResearchPolicy

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 1, 2, 3
EXIT_FAILED = 3
"""``fanout run``/``ask``/``resume``: the run's outcome is ``failed`` (DESIGN §7, "Exit
codes"); ``complete`` and ``partial`` are 0, and ``--json`` prints the report either way."""


def outcome_exit(report: CoverageReport) -> int:
    """The exit code of a run that ended with ``report``: 3 when it failed, else 0."""
    return EXIT_FAILED if report.outcome == "failed" else EXIT_OK


def add_private_fetch_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-private-fetch``: the user's own permission for ``web.fetch`` to read
    loopback and private addresses (a job or tools file cannot give it)."""
    parser.add_argument(
        "--allow-private-fetch", action="store_true",
        help="let web.fetch read loopback, private and link-local addresses (a server on "
        "this machine or network); a job or tools file cannot allow it",
    )


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def load_all(paths: Sequence[str], err: Console) -> list[Scenario] | None:
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


def open_store(args: argparse.Namespace) -> RunStore:
    """The run store the command names (--store, $FANOUT_STORE, or the default).

    Raises:
        StoreError: a store argument fanout cannot open (exit 2).
    """
    return RunStore(store_path(args.store))


def check_store(target: str) -> None:
    """Create or migrate the store now, so an unusable one is exit 2 before any work.

    Raises:
        StoreError: it cannot be opened, is not ours, or is unreachable.
    """
    store = RunStore(target)
    try:
        store.backend.migrate()
    finally:
        store.close()


def print_report(report: CoverageReport, args: argparse.Namespace, out: Console) -> None:
    if args.json:
        sys.stdout.write(dump(report.to_wire()) + "\n")
    else:
        out.print()
        out.print(report_view(report))


def research_policy(args: argparse.Namespace) -> ResearchPolicy | None:
    """The research policy of a job run from the command line (on either executor): any
    folder, and private addresses when the user asked (``--allow-private-fetch``; a file
    cannot)."""
    if not getattr(args, "allow_private_fetch", False):
        return None
    from coordinator.jobfile.research import ResearchPolicy

    return ResearchPolicy(allow_private_fetch=True)
