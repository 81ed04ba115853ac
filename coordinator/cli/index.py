"""`fanout index DIR`: build or refresh the document index of a folder (docs/design.md §10).

The index lives beside the run store (``--store``'s folder, ``docs/``); only files added
or changed since the last refresh are read again, and files gone from the folder leave
it. ``fanout ask --docs DIR`` and jobs with ``research_tools.docs`` do the same before
they run, so this command is for building a large index ahead of time, or checking it:
it lists every file the index leaves out, and why (over ``--max-bytes``, binary,
unreadable). A second ``fanout index`` of the same folder waits for the first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_OK, dump
from coordinator.store.runs import store_path
from coordinator.store.targets import open_backend


def cmd_index(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Refresh the index of ``args.folder``: changed files only."""
    # Imported here: every other command starts without the index's extractors.
    from subagents.research.docindex import DocIndex
    from subagents.research.documents import shown

    folder = Path(args.folder).expanduser()
    if not folder.is_dir():
        err.print(f"[bold red]error:[/] {escape(shown(str(folder)))}: expected a folder of "
                  "documents")
        return EXIT_BAD_INPUT
    if args.max_bytes < 1024:
        err.print("[bold red]error:[/] --max-bytes: expected at least 1024")
        return EXIT_BAD_INPUT
    index = DocIndex.for_folder(folder, open_backend(store_path(args.store)).home(),
                                max_bytes=args.max_bytes)
    try:
        stats = refresh_shown(index, err, show=not args.json)
    finally:
        index.close()
    if args.json:
        sys.stdout.write(dump(stats.to_json()) + "\n")
        return EXIT_OK
    # Under 100 columns the rules between columns go: every heading stays whole in 80.
    narrow = out.width < 100
    table = Table(title=f"index of {escape(stats.folder)}", title_justify="left",
                  box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
                  show_edge=not narrow, pad_edge=not narrow)
    for column in ("added", "updated", "removed", "unchanged", "skipped", "documents",
                   "passages", "size"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_row(
        str(stats.added), str(stats.updated), str(stats.removed), str(stats.unchanged),
        str(len(stats.skipped)), str(stats.documents), str(stats.passages),
        f"{stats.size_bytes / 1e6:.1f} MB",
    )
    out.print(table)
    for path, reason in stats.skipped:
        out.print(f"[yellow]not indexed:[/] {escape(path)}: {escape(reason)}")
    out.print(f"[dim]search: {escape(stats.search)}[/]")
    out.print(f"[dim]{escape(stats.index)} ({stats.elapsed_s:.2f}s)[/]")
    return EXIT_OK


def refresh_shown(index: Any, console: Console, *, show: bool) -> Any:
    """``index.refresh()`` with its progress shown: a bar per stage (files, embeddings) on
    a terminal, nothing when ``show`` is false or the output is piped."""
    if not (show and console.is_terminal):
        return index.refresh()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as bars:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(f"indexing: {stage}", total=total)
            bars.update(tasks[stage], completed=done, total=total)

        return index.refresh(progress=progress)


def index_before_ask(folder: str, store: str | None, console: Console, *, show: bool) -> None:
    """Index ``folder`` for ``fanout ask --docs`` ahead of the run when it is new or stale,
    saying so (and how far it has got, on a terminal); the run then opens a fresh index."""
    from subagents.research.docindex import DocIndex

    path = Path(folder).expanduser()
    if not path.is_dir():
        return  # the run names the bad folder, as a job file's would be named
    index = DocIndex.for_folder(path, open_backend(store_path(store)).home())
    try:
        if not index.is_stale():
            return
        if show:
            console.print(f"indexing {escape(str(folder))} (changed files only; "
                          f"search: {escape(index.search_kind())})")
        stats = refresh_shown(index, console, show=show)
        if show:
            console.print(f"indexed: {stats.documents} documents, {stats.passages} passages "
                          f"in {stats.elapsed_s:.1f}s")
    finally:
        index.close()
