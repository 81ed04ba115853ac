"""Queries over the passage index: ``docs.search``'s ranking and ``docs.read``'s windows.

A search is words, never FTS5 syntax, and every word is optional: the passages are
ranked by bm25 with the title and the headings weighted above the text. Its cost is
bounded whatever the size of the documents:

- each word's frequency is counted only up to :data:`BUDGET` passages;
- the words are taken rarest first while their passages together stay within the
  budget (a word in most passages — "how", "the" — ranks little and costs most);
- when every word is that common, the first :data:`BUDGET` passages holding all of them
  are ranked instead of every one;
- snippets are cut from the few passages shown, in Python, never by FTS5 over a row.

The best passage of each document is its result; documents whose signatures say they
are the same text under two names (a reStructuredText source and its rendered page)
are one result, shown by the rendered page when it is among them (``also`` names the
others).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from subagents.research.documents.passages import similarity, snippet

__all__ = ["BUDGET", "WEIGHTS", "query_words", "read_window", "search"]

BUDGET = 8000  # passages one search ranks at most
WEIGHTS = (6.0, 3.0, 1.0)  # bm25 weights of title, heading, body
SAME_TEXT = 0.5  # signature similarity from which two documents are one result
_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_WORDS = 32
# Which of several names of one text shows it: the rendered page first.
_PREFERRED = {"html": 0, "markdown": 1, "text": 2, "pdf": 3}


def query_words(query: str) -> list[str]:
    """The distinct words of ``query`` (at most 32), lower-cased, in order."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:_MAX_WORDS]


def _phrase(word: str) -> str:
    return '"' + word.replace('"', "") + '"'


def _frequency(conn: sqlite3.Connection, word: str) -> int:
    """How many passages hold ``word``, counted up to ``BUDGET + 1``."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM passage_text WHERE passage_text MATCH ? LIMIT ?)",
        (_phrase(word), BUDGET + 1),
    ).fetchone()
    return int(row[0])


def _candidates(conn: sqlite3.Connection, words: list[str], wanted: int) -> list[tuple[int, float]]:
    """(passage id, bm25) of the best ``wanted`` passages for ``words``, best first."""
    counts = {w: _frequency(conn, w) for w in words}
    present = sorted((w for w in words if counts[w]), key=lambda w: counts[w])
    if not present:
        return []
    chosen: list[str] = []
    total = 0
    for word in present:
        if chosen and total + counts[word] > BUDGET:
            break
        chosen.append(word)
        total += counts[word]
    weights = ", ".join(f"{w:g}" for w in WEIGHTS)
    if total <= BUDGET:
        rows = conn.execute(
            f"SELECT rowid, bm25(passage_text, {weights}) AS score FROM passage_text "
            "WHERE passage_text MATCH ? ORDER BY score LIMIT ?",
            (" OR ".join(_phrase(w) for w in chosen), wanted),
        ).fetchall()
    else:
        # Every word is in more passages than a search ranks: those holding all of them,
        # as many as the budget, ranked among themselves.
        rows = conn.execute(
            f"SELECT rowid, bm25(passage_text, {weights}) FROM passage_text "
            "WHERE passage_text MATCH ? LIMIT ?",
            (" AND ".join(_phrase(w) for w in present), BUDGET),
        ).fetchall()
        rows = sorted(rows, key=lambda r: r[1])[:wanted]
    return [(int(i), float(s)) for i, s in rows]


def search(conn: sqlite3.Connection, query: str, limit: int) -> list[dict[str, Any]]:
    """The best ``limit`` results for ``query``: ``{path, title, heading, snippet, score,
    start}`` (and ``also``: other names of the same text), best first."""
    words = query_words(query)
    if not words:
        return []
    ranked = _candidates(conn, words, limit * 4 + 20)
    if not ranked:
        return []
    marks = ",".join("?" * len(ranked))
    meta = {
        int(row[0]): row[1:]
        for row in conn.execute(
            "SELECT p.id, p.file, p.start, f.path, f.title, f.kind, f.signature "
            f"FROM passages p JOIN files f ON f.id = p.file WHERE p.id IN ({marks})",
            [i for i, _ in ranked],
        )
    }
    groups: list[dict[str, Any]] = []
    seen: dict[int, dict[str, Any]] = {}
    for passage, score in ranked:
        if passage not in meta:
            continue  # removed by a refresh since the ranking
        file, start, path, title, kind, sig = meta[passage]
        group = seen.get(file)
        if group is None:
            group = next((g for g in groups if any(
                similarity(sig, other) >= SAME_TEXT for other in g["signatures"])), None)
            if group is None:
                if len(groups) == limit:
                    continue
                group = {"members": {}, "signatures": [], "score": score}
                groups.append(group)
            group["signatures"].append(sig)
            group["members"][file] = (passage, start, path, title, kind, score)
            seen[file] = group
    return _results(conn, groups, words)


def _results(
    conn: sqlite3.Connection, groups: list[dict[str, Any]], words: list[str]
) -> list[dict[str, Any]]:
    """Each group shown by its preferred name, with its best passage's snippet."""
    shown = []
    for group in groups:
        members = list(group["members"].values())
        best = min(members, key=lambda m: (_PREFERRED.get(m[4], 9), m[5]))
        shown.append((group, best, sorted(m[2] for m in members if m is not best)))
    marks = ",".join("?" * len(shown))
    texts = {
        int(rowid): (heading, body)
        for rowid, heading, body in conn.execute(
            f"SELECT rowid, heading, body FROM passage_text WHERE rowid IN ({marks})",
            [best[0] for _, best, _ in shown],
        )
    }
    results = []
    for group, (passage, start, path, title, _kind, _score), also in shown:
        heading, body = texts.get(passage, ("", ""))
        result: dict[str, Any] = {
            "path": path, "title": title, "heading": heading,
            "snippet": snippet(body, words), "score": round(-group["score"], 4),
            "start": start,
        }
        if also:
            result["also"] = also
        results.append(result)
    return results


def read_window(conn: sqlite3.Connection, file: int, start: int, end: int) -> str:
    """Characters ``start`` to ``end`` of a document's text, from its passages."""
    first = conn.execute(
        "SELECT max(start) FROM passages WHERE file = ? AND start <= ?", (file, start)
    ).fetchone()[0]
    if first is None:
        return ""
    rows = conn.execute(
        "SELECT p.start, t.body FROM passages p JOIN passage_text t ON t.rowid = p.id "
        "WHERE p.file = ? AND p.start >= ? AND p.start < ? ORDER BY p.start",
        (file, first, end),
    ).fetchall()
    text = "".join(body for _, body in rows)
    return text[start - int(first):end - int(first)]
