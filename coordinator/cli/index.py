"""`fanout index DIR`: build or refresh the document index of a folder (DESIGN §10).

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
        stats = index.refresh()
    finally:
        index.close()
    if args.json:
        sys.stdout.write(dump(stats.to_json()) + "\n")
        return EXIT_OK
    table = Table(title=f"index of {escape(stats.folder)}", title_justify="left")
    for column in ("added", "updated", "removed", "unchanged", "skipped", "documents",
                   "passages", "size"):
        table.add_column(column, justify="right")
    table.add_row(
        str(stats.added), str(stats.updated), str(stats.removed), str(stats.unchanged),
        str(len(stats.skipped)), str(stats.documents), str(stats.passages),
        f"{stats.size_bytes / 1e6:.1f} MB",
    )
    out.print(table)
    for path, reason in stats.skipped:
        out.print(f"[yellow]not indexed:[/] {escape(path)}: {escape(reason)}")
    out.print(f"[dim]{escape(stats.index)} ({stats.elapsed_s:.2f}s)[/]")
    return EXIT_OK
