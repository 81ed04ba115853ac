"""`fanout runs`, `report`, `gaps` and `trace`: reading what the run store holds."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_OK, dump, open_store
from coordinator.engine.resume import interrupted_report
from coordinator.jobfile.loader import load_scenario_text
from coordinator.report import CoverageReport
from coordinator.store.runs import (
    RunRow,
    RunStore,
)
from coordinator.views.followups import followup_lines
from coordinator.views.terminal import (
    gaps_view,
    header,
    report_view,
    runs_table,
    trace_entries,
    trace_table,
)


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
    store = open_store(args)
    rows = store.runs() if store.exists() else []
    if args.json:
        sys.stdout.write(dump([r.summary() for r in rows]) + "\n")
    else:
        out.print(runs_table(rows, width=out.width))
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Show a stored run's report as a table, JSON, Markdown or HTML."""
    store = open_store(args)
    row, report = _report_of(store, args.run_id)
    wire = report.to_wire()
    if args.format == "json":
        text = dump(wire) + "\n"
    elif args.format == "md":
        from coordinator.views.markdown import render_markdown

        text = render_markdown(wire, row.summary())
    elif args.format == "html":
        from coordinator.views.html import render_html

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
    store = open_store(args)
    _row, report = _report_of(store, args.run_id)
    if args.json:
        sys.stdout.write(dump([g.model_dump(mode="json", by_alias=True) for g in report.gaps]))
        sys.stdout.write("\n")
        return EXIT_OK
    out.print(header(report))
    followed = followup_lines(report.to_wire())
    out.print(gaps_view(report.gaps, followed) if report.gaps else "[green]No coverage gaps.[/]")
    return EXIT_OK


def cmd_trace(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Every tool envelope of a run, in order, with trace id, subtask, attempt and time."""
    store = open_store(args)
    row = store.get(args.run_id)
    entries = trace_entries(store.events(row.id))
    if args.json:
        for entry in entries:
            sys.stdout.write(json.dumps(entry, ensure_ascii=False) + "\n")
    else:
        out.print(trace_table(row.id, entries, width=out.width))
    return EXIT_OK


def cmd_record(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Write a finished stored run as a scenario that replays it offline."""
    from coordinator.engine.recording import refusal, write_recording

    store = open_store(args)
    row = store.get(args.run_id)
    reason = refusal(store, row.id)
    if reason is not None:
        err.print(f"[bold red]error:[/] run {row.id} cannot be recorded: {reason}")
        return EXIT_BAD_INPUT
    write_recording(store, row.id, args.output)
    err.print(f"wrote {args.output}: `fanout replay {args.output}` reproduces run {row.id}")
    return EXIT_OK
