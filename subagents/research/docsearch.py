"""Queries over the passage index: ``docs.search``'s ranking and ``docs.read``'s windows.

A search is words, never FTS5 syntax, and every word is optional: the passages are
ranked by bm25 with the title and the headings weighted above the text. Its cost is
bounded whatever the size of the documents:

- each word's frequency is counted only up to :data:`BUDGET` passages;
- the words are taken rarest first while their passages together stay within the
  budget (a word in most passages — "how", "the" — ranks little and costs most);
- when every word is that common, the passages holding the two rarest are ranked, by
  bm25 when they are few enough, else a sample of a hundred from all over the index on
  their titles and headings (``_common``);
- snippets are cut from the few passages shown, in Python, never by FTS5 over a row.

The best passage of each document is its result, scored by its bm25 raised a little by
the document's next best passages (a page about the query has several; a table of
contents mentions it once). Documents whose signatures say they are the same text under
two names (a reStructuredText source and its rendered page) are one result, shown by
the rendered page when it is among them (``also`` names the others). Weights were
chosen on the query set of ``benchmarks/data/python_docs_queries.json``.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from subagents.research.documents.passages import Sketches, same_text, sketches, snippet

__all__ = ["BUDGET", "STOPWORDS", "WEIGHTS", "query_words", "read_window", "search"]

BUDGET = 2000  # passages an OR of the words may rank (bm25 costs a few µs a passage)
_AND_BUDGET = 3000  # passages holding two common words bm25 may rank
_SCAN = 20_000  # passages holding a word that bm25's weight of it may read
_SAMPLE = 96  # passages ranked here, in Python, when even that is too many …
_SLICES = 8  # … taken from this many stretches of the index
WEIGHTS = (4.0, 2.0, 1.0)  # bm25 weights of title, heading, body
_POOL = 200  # passages ranked for one search (the best of each document kept)
_MORE = 3  # a document's next best passages that add to its score …
_SPREAD = 0.2  # … each at this fraction of its own
_LOOK = 3  # documents looked at per result wanted (the others cannot be shown)
_WORD = re.compile(r"\w+", re.UNICODE)
# A question's function words: in a passage index they are not rare enough to be
# ignored by bm25 (FAQ headings begin "How do I …?"), and they never name a topic.
_FUNCTION_WORDS = (
    "a about above after again against all am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers herself him himself his how i if in "
    "into is it its itself just me more most my myself no nor not now of off on once only "
    "or other our ours ourselves out over own same she should so some such than that the "
    "their theirs them themselves then there these they this those through to too under "
    "until up very was we were what when where which while who whom why will with would "
    "you your yours yourself yourselves get use using want need way make"
)
STOPWORDS = frozenset(_FUNCTION_WORDS.split())
_MAX_WORDS = 32
# Which of several names of one text shows it: the rendered page first.
_PREFERRED = {"html": 0, "markdown": 1, "text": 2, "pdf": 3}


def query_words(query: str) -> list[str]:
    """The distinct words of ``query`` (at most 32), lower-cased, in order; English
    function words left out when the query has others ("how do I read a CSV file" is
    read as "read csv file")."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:_MAX_WORDS]


def _phrase(word: str) -> str:
    return '"' + word.replace('"', "") + '"'


def _count(conn: sqlite3.Connection, match: str, cap: int) -> int:
    """How many passages ``match`` finds, counted up to ``cap`` (reading no further)."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM passage_text WHERE passage_text MATCH ? LIMIT ?)",
        (match, cap),
    ).fetchone()
    return int(row[0])


def _frequency(conn: sqlite3.Connection, word: str) -> int:
    """How many passages hold ``word``, counted up to ``BUDGET + 1``."""
    return _count(conn, _phrase(word), BUDGET + 1)


def _candidates(conn: sqlite3.Connection, words: list[str], wanted: int) -> list[tuple[int, float]]:
    """(passage id, score: bm25, lower is better) of the best ``wanted`` passages for
    ``words``, best first."""
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
    if total <= BUDGET:
        return _bm25(conn, " OR ".join(_phrase(w) for w in chosen), wanted)
    return _common(conn, present, wanted)


def _bm25(conn: sqlite3.Connection, match: str, wanted: int) -> list[tuple[int, float]]:
    weights = ", ".join(f"{w:g}" for w in WEIGHTS)
    rows = conn.execute(
        f"SELECT rowid, bm25(passage_text, {weights}) AS score FROM passage_text "
        "WHERE passage_text MATCH ? ORDER BY score LIMIT ?",
        (match, wanted),
    ).fetchall()
    return [(int(i), float(score)) for i, score in rows]


def _common(conn: sqlite3.Connection, present: list[str], wanted: int) -> list[tuple[int, float]]:
    """Every word is in more passages than an OR may rank ("python function" in Python's
    documentation; any word of a 200 MB file): the passages holding the two rarest.

    bm25 ranks them when they are few enough and bm25's own weight of each word (which
    reads every passage holding it) stays cheap; otherwise a sample of the passages
    holding them, from all over the index, is ranked here on their titles and headings.
    """
    pair = present[:2]
    match = " AND ".join(_phrase(w) for w in pair)
    both = _count(conn, match, _AND_BUDGET + 1)
    if both == 0:  # the two never meet: the rarer alone
        pair, match = present[:1], _phrase(present[0])
    elif both <= _AND_BUDGET and all(
        _count(conn, _phrase(w), _SCAN + 1) <= _SCAN for w in pair
    ):
        return _bm25(conn, match, wanted)
    # A sample from across the index (rowids follow the files' order: the first ones alone
    # would all be one corner of the folder).
    low, high = conn.execute(  # two subqueries: each an index lookup, not a scan
        "SELECT (SELECT min(id) FROM passages), (SELECT max(id) + 1 FROM passages)"
    ).fetchone()
    step = max(1, (high - low) // _SLICES)
    rows = []
    for lo in range(low, high, step):
        # Titles and headings only: a passage's text is the bulk of its row, read from
        # disk for nothing here.
        rows += conn.execute(
            "SELECT rowid, title, heading FROM passage_text WHERE passage_text MATCH ? "
            "AND rowid >= ? AND rowid < ? LIMIT ?", (match, lo, lo + step, _SAMPLE // _SLICES),
        ).fetchall()
    scored = []
    for rank, (rowid, title, heading) in enumerate(rows):
        title, heading = title.lower(), heading.lower()
        hits = sum(4 * (w in title) + 2 * (w in heading) for w in pair)
        scored.append((int(rowid), -hits - 1 / (2 + rank)))
    return sorted(scored, key=lambda r: r[1])[:wanted]


def search(conn: sqlite3.Connection, query: str, limit: int) -> list[dict[str, Any]]:
    """The best ``limit`` results for ``query``: ``{path, title, heading, snippet, score,
    start}`` (and ``also``: other names of the same text), best first."""
    words = query_words(query)
    if not words:
        return []
    ranked = _candidates(conn, words, max(_POOL, limit * 10))
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
    files: dict[int, _File] = {}
    for passage, score in ranked:
        if passage not in meta:
            continue  # removed by a refresh since the ranking
        file, start, path, title, kind, sig = meta[passage]
        entry = files.get(file)
        if entry is None:
            files[file] = _File(path, title, kind, sketches(sig), passage, start, -score)
        elif len(entry.more) < _MORE:
            entry.more.append(-score)
    groups: list[list[_File]] = []
    # The best documents only (a twin ranks near its other name): each compared with
    # each group's first document, a twin being the same text as it.
    for entry in sorted(files.values(), key=lambda f: -f.score)[:limit * _LOOK]:
        group = next((g for g in groups if same_text(entry.sig, g[0].sig)), None)
        if group is not None:
            group.append(entry)
        elif len(groups) < limit:
            groups.append([entry])
    return _results(conn, groups, words)


class _File:
    """One document's best passage among the candidates, and its next best scores."""

    __slots__ = ("kind", "more", "passage", "path", "sig", "start", "title", "top")

    def __init__(self, path: str, title: str, kind: str, sig: Sketches, passage: int,
                 start: int, top: float) -> None:
        self.path, self.title, self.kind, self.sig = path, title, kind, sig
        self.passage, self.start, self.top = passage, start, top
        self.more: list[float] = []

    @property
    def score(self) -> float:
        """Its best passage's score, raised a little by its other good passages: a
        document about the query has several; a list of links mentions it once."""
        return self.top + _SPREAD * sum(self.more)


def _results(
    conn: sqlite3.Connection, groups: list[list[_File]], words: list[str]
) -> list[dict[str, Any]]:
    """Each group shown by its preferred name (the rendered page), with its best
    passage's snippet; groups ordered by their best document's score."""
    shown = []
    for group in groups:
        best = min(group, key=lambda f: (_PREFERRED.get(f.kind, 9), -f.score))
        shown.append((max(f.score for f in group), best,
                      sorted(f.path for f in group if f is not best)))
    shown.sort(key=lambda item: -item[0])
    marks = ",".join("?" * len(shown))
    texts = {
        int(rowid): (heading, body)
        for rowid, heading, body in conn.execute(
            f"SELECT rowid, heading, body FROM passage_text WHERE rowid IN ({marks})",
            [best.passage for _, best, _ in shown],
        )
    }
    results = []
    for score, best, also in shown:
        heading, body = texts.get(best.passage, ("", ""))
        result: dict[str, Any] = {
            "path": best.path, "title": best.title, "heading": heading,
            "snippet": snippet(body, words), "score": round(score, 4), "start": best.start,
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
