"""What every command shares: exit codes, JSON output, loading job files, the store."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# What a helper needs is imported inside it: every command imports this module, and each
# needs only some of them (`fanout replay` no store, `fanout runs` no scenario loader).
if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.jobfile.research import ResearchPolicy
    from coordinator.jobfile.scenario import Scenario
    from coordinator.report import CoverageReport
    from coordinator.store.runs import RunStore

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 1, 2, 3
EXIT_FAILED = 3
"""``fanout run``/``ask``/``resume``: the run's outcome is ``failed`` (docs/design.md §7, "Exit
codes"); ``complete`` and ``partial`` are 0, and ``--json`` prints the report either way."""


def outcome_exit(report: CoverageReport) -> int:
    """The exit code of a run that ended with ``report``: 3 when it failed, else 0."""
    return EXIT_FAILED if report.outcome == "failed" else EXIT_OK


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def load_all(paths: Sequence[str], err: Console) -> list[Scenario] | None:
    """Load every file first: one bad file means nothing runs."""
    from coordinator.jobfile.loader import load_scenario
    from coordinator.replay import scenario_files
    from coordinator.views.terminal import print_input_error
    from shared.errors import InputFileError, InputFileErrors

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
    from coordinator.store.runs import RunStore, store_path

    return RunStore(store_path(args.store))


def check_store(target: str) -> None:
    """Create or migrate the store now, so an unusable one is exit 2 before any work.

    Raises:
        StoreError: it cannot be opened, is not ours, or is unreachable.
    """
    from coordinator.store.runs import RunStore

    store = RunStore(target)
    try:
        store.backend.migrate()
    finally:
        store.close()


def print_report(report: CoverageReport, args: argparse.Namespace, out: Console) -> None:
    if args.json:
        sys.stdout.write(dump(report.to_wire()) + "\n")
    else:
        from coordinator.views.terminal import report_view

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
