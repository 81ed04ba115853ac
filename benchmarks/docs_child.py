"""One indexing of a folder in an interpreter of its own: fanout's index, or the naive one.

``python -m benchmarks.docs_child fanout|naive FOLDER WORKDIR [MAX_BYTES]`` indexes
FOLDER and prints ``{"seconds", "cpu_s", "peak_rss_mib"}``; the time counts the indexer's
imports (``fanout index`` pays them too), the CPU time is the whole process's (user and
system: steadier than wall time on a shared machine), the peak is this process's
(``VmHWM``).

The naive baseline is the issue's ten lines: SQLite FTS5 with its default tokenizer and
bm25, one row per file, HTML with its scripts, styles and tags stripped by regular
expressions and its entities unescaped; a search is an OR of the query's words. It
imports nothing but the standard library, so its interpreter is as lean as it can be.
"""

from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["naive_index", "naive_search", "peak_rss_mib"]

NAIVE_SUFFIXES = (".html", ".htm", ".txt", ".md", ".markdown", ".rst", ".text")


def naive_index(folder: str, db_path: str) -> int:
    """Index ``folder`` the naive way into ``db_path``; how many files."""
    import html
    import re
    import sqlite3

    tags = re.compile(r"<[^>]+>")
    code = re.compile(r"(?is)<(script|style)[^>]*>.*?</\1\s*>")
    db = sqlite3.connect(db_path)
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS d USING fts5(path UNINDEXED, body)")
    count = 0
    for where, _dirs, names in os.walk(folder):
        for name in names:
            if not name.lower().endswith(NAIVE_SUFFIXES):
                continue
            path = os.path.join(where, name)
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            if name.lower().endswith((".html", ".htm")):
                text = html.unescape(tags.sub(" ", code.sub(" ", text)))
            db.execute("INSERT INTO d VALUES (?, ?)", (os.path.relpath(path, folder), text))
            count += 1
    db.commit()
    db.close()
    return count


def naive_search(db_path: str, query: str, limit: int) -> list[str]:
    """The paths of the best ``limit`` files: an OR of the words, FTS5's default bm25."""
    import re
    import sqlite3

    words = re.findall(r"\w+", query)
    if not words:
        return []
    db = sqlite3.connect(db_path)
    try:
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute("SELECT path FROM d WHERE d MATCH ? ORDER BY rank LIMIT ?",
                          (match, limit)).fetchall()
    finally:
        db.close()
    return [str(r[0]) for r in rows]


def peak_rss_mib() -> float:
    """This process's peak resident memory, in MiB (``VmHWM``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> None:
    """Index as told; print the figures as JSON."""
    which, folder, workdir = argv[:3]
    started = time.perf_counter()
    passages = 0
    if which == "naive":
        naive_index(folder, os.path.join(workdir, "naive.sqlite"))
    else:
        if which == "fanout":  # lexical only; "fanout-semantic": embeddings too, if installed
            os.environ["FANOUT_SEMANTIC"] = "off"
        from subagents.research.docindex import DocIndex

        max_bytes = int(argv[3]) if len(argv) > 3 else 20_000_000
        index = DocIndex.for_folder(folder, workdir, max_bytes=max_bytes)
        passages = index.refresh().passages
        index.close()
    seconds = time.perf_counter() - started
    cpu = os.times()
    sys.stdout.write(json.dumps({"seconds": seconds, "cpu_s": cpu.user + cpu.system,
                                 "peak_rss_mib": peak_rss_mib(),
                                 "passages": passages}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
