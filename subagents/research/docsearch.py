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

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from subagents.research.documents.folder import twin_stem
from subagents.research.documents.passages import Sketches, same_text, sketches
from subagents.research.docwriter import piece_text
from subagents.research.relevance import (
    MATCH_THRESHOLD,
    STOPWORDS,
    Terms,
    answering_coverage,
    asks_for,
    best_window,
    compounds,
    content_words,
    segments,
)

__all__ = ["BUDGET", "PER_DOCUMENT", "SEMANTIC_THRESHOLD", "STOPWORDS", "WEIGHTS", "Found",
           "query_words", "read_window", "search"]

BUDGET = 2000  # passages an OR of the words may rank (bm25 costs a few µs a passage)
_AND_BUDGET = 3000  # passages holding two common words bm25 may rank
_SCAN = 20_000  # passages holding a word that bm25's weight of it may read
_SAMPLE = 96  # passages ranked here, in Python, when even that is too many …
_SLICES = 8  # … taken from this many stretches of the index
WEIGHTS = (4.0, 2.0, 1.0)  # bm25 weights of title, heading, body
_POOL = 200  # passages bm25 hands on to be scored again
# Which of several names of one text shows it: the rendered page first.
_PREFERRED = {"html": 0, "markdown": 1, "text": 2, "pdf": 3}


def query_words(query: str) -> list[str]:
    """The distinct words of ``query`` (at most 32), lower-cased, in order; English
    function words left out when the query has others ("how do I read a CSV file" is
    read as "read csv file")."""
    words = []
    for word in content_words(query):
        bare = word.lstrip("-").replace("-", " ").split()
        words += [w for w in bare if w not in words]  # FTS5 reads an option as its words
    # A compound is sought as one word too ("auto-increment": "autoincrement").
    words += [w for w in compounds(query) if w not in words]
    return words[:32]


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


def _candidates(
    conn: sqlite3.Connection, words: list[str], wanted: int, counts: dict[str, int]
) -> list[tuple[int, float]]:
    """(passage id, score: bm25, lower is better) of the best ``wanted`` passages for
    ``words``, best first; ``counts`` gets each word's passage count (up to the budget)."""
    counts.update({w: _frequency(conn, w) for w in words})
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


class Dense:
    """A query's semantic similarity to every embedded piece of a passage (numpy arrays,
    ordered by passage then start): piece ``i`` is characters ``starts[i]:ends[i]`` of
    passage ``ids[i]``'s text, ``sims[i]`` its cosine similarity to the query. A passage
    is as similar as its most similar piece. ``measure``, when given, embeds texts now
    and gives their similarities to the query."""

    __slots__ = ("_best", "_passages", "ends", "ids", "measure", "sims", "starts")

    def __init__(self, ids: Any, starts: Any, ends: Any, sims: Any,
                 measure: Callable[[list[str]], Any] | None = None) -> None:
        import numpy as np

        self.ids, self.starts, self.ends, self.sims = ids, starts, ends, sims
        # The query's similarity to texts embedded now (one per text), when the model
        # is at hand: the first result's sentences are weighed one by one.
        self.measure = measure
        # The passages (each one's first piece) and each one's best similarity.
        firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else \
            np.zeros(0, dtype=np.int64)
        self._passages: Any = ids[firsts]
        self._best: Any = np.maximum.reduceat(sims, firsts) if len(ids) else \
            np.zeros(0, dtype=np.float32)

    def top(self, k: int) -> list[int]:
        """The ``k`` passages most similar to the query, most similar first."""
        import numpy as np

        k = min(k, len(self._passages))
        if k <= 0:
            return []
        best = np.argpartition(-self._best, k - 1)[:k]
        return [int(self._passages[i]) for i in best[np.argsort(-self._best[best])]]

    def of(self, ids: list[int]) -> dict[int, float]:
        """The similarity of each of ``ids`` that has vectors (its best piece's)."""
        import numpy as np

        where = np.searchsorted(self._passages, ids)
        out = {}
        for pid, at in zip(ids, where, strict=True):
            if at < len(self._passages) and int(self._passages[at]) == pid:
                out[pid] = float(self._best[at])
        return out

    def pieces(self, pid: int, start: int, end: int) -> list[tuple[int, int, float]]:
        """``(start, end, similarity)`` of passage ``pid``'s pieces that overlap its
        characters ``start:end``, in order."""
        import numpy as np

        lo = int(np.searchsorted(self.ids, pid, side="left"))
        hi = int(np.searchsorted(self.ids, pid, side="right"))
        return [(int(self.starts[i]), int(self.ends[i]), float(self.sims[i]))
                for i in range(lo, hi) if self.starts[i] < end and start < self.ends[i]]


@dataclass(frozen=True, slots=True)
class Found:
    """What one search found: its results, and whether its best passage answers the
    query at all (``match``: the judgement, the score it rests on, the terms no result
    holds)."""

    results: list[dict[str, Any]]
    match: dict[str, Any]


def search(
    conn: sqlite3.Connection, query: str, limit: int, dense: Dense | None = None,
) -> Found:
    """The best ``limit`` passages for ``query``: ``{path, title, heading, snippet, score,
    start, match}`` (and ``also``: other names of the same text), best first.

    Passages, not documents: a long manual may place several (at most
    :data:`PER_DOCUMENT`) when they are the best. Candidates come from bm25; each is
    scored again on the query's weighted terms — the whole passage with its title and
    headings, and the best window of it (terms close together) — and, when ``dense``
    gives their semantic similarities, the rankings are fused by reciprocal rank.
    """
    words = query_words(query)
    if not words:
        return Found([], _judgement(Terms.of(query), [], None))
    counts: dict[str, int] = {}
    ranked = _candidates(conn, words, max(_POOL, limit * 10), counts)
    total = _total(conn)
    terms = Terms.of(query, counts, total)
    asks = asks_for(query)
    if dense is not None:
        # The passages nearest in meaning join bm25's, though they share no word.
        known = {pid for pid, _ in ranked}
        worst = ranked[-1][1] if ranked else 0.0
        ranked += [(pid, worst) for pid in dense.top(_DENSE_POOL) if pid not in known]
    if not ranked:
        return Found([], _judgement(terms, [], None))
    marks = ",".join("?" * len(ranked))
    ids = [i for i, _ in ranked]
    meta = {
        int(row[0]): row[1:]
        for row in conn.execute(
            "SELECT p.id, p.file, p.start, f.path, f.title, f.kind, f.signature, t.heading, "
            "t.body FROM passages p JOIN files f ON f.id = p.file "
            f"JOIN passage_text t ON t.rowid = p.id WHERE p.id IN ({marks})", ids)
    }
    cands: list[_Passage] = []
    for rank, (pid, _score) in enumerate(ranked):
        if pid not in meta:
            continue  # removed by a refresh since the ranking
        file, start, path, title, kind, sig, heading, body = meta[pid]
        cands.append(_Passage(pid, file, start, path, title, kind, sig, heading, body, rank,
                              terms))
    # The best window is looked for in the likeliest candidates only (by their share of
    # the query, then bm25's rank): it reads every sentence, the rest only count words.
    for c in sorted(cands, key=lambda c: (-c.cover, c.rank))[:_CLOSER]:
        c.look_closer(terms, asks, query=query)
    similarity = dense.of([c.id for c in cands]) if dense is not None else {}
    _fuse(cands, similarity)
    chosen = _choose(cands, limit)
    if similarity and chosen:
        _with_nearest(cands, chosen, similarity, limit)
    if dense is not None:
        for c in chosen:
            c.pieces = dense.pieces(c.id, *c.window)
        if chosen and dense.measure is not None:
            _by_segment(chosen[0], dense.measure, terms)
    _with_sources(conn, chosen)
    results = [c.result() for c in chosen]
    return Found(results, _judgement(terms, chosen, similarity or None, asks))


PER_DOCUMENT = 3  # passages of one document among the results, at most
_DENSE_POOL = 40  # passages nearest in meaning added to bm25's candidates
_CLOSER = 40  # candidates whose best window is looked for
_LOOK = 6  # candidates looked at per result wanted (the rest cannot be shown)
_MORE = 3  # a document's next best passages that raise each of its passages …
_SPREAD = 0.1  # … each at this fraction of its own
_RRF = 30  # reciprocal rank fusion's constant (smaller: the top ranks weigh more)
_FUSION = (1.0, 1.0, 1.0)  # weights of bm25's order, the terms' order, the semantic order
SEMANTIC_THRESHOLD = 0.45
"""The cosine similarity of query and best passage under which a search with embeddings
does not count as answering (all-MiniLM-L6-v2; chosen on the benchmark's question sets)."""


class _Passage:
    """One candidate passage and its scores."""

    __slots__ = ("also", "body", "cover", "file", "heading", "id", "kind", "lexical",
                 "path", "pieces", "rank", "score", "semantic", "sig", "start", "title",
                 "window")

    def __init__(self, pid: int, file: int, start: int, path: str, title: str, kind: str,
                 sig: bytes, heading: str, body: str, rank: int, terms: Terms) -> None:
        self.id, self.file, self.start, self.path = pid, file, start, path
        self.title, self.kind, self.sig = title, kind, sig
        self.heading, self.body, self.rank = heading, body, rank
        self.cover = terms.coverage(f"{title}\n{heading}\n{body}")
        self.window = (0, len(body))
        self.lexical = self.cover
        self.semantic: float | None = None  # the passage's: its most similar piece's
        self.pieces: list[tuple[int, int, float]] = []  # the window's, with embeddings
        self.score = 0.0
        self.also: list[str] = []

    def look_closer(self, terms: Terms, asks: str | None = None, query: str = "") -> None:
        """Find the passage's best window; its share of the query counts half of its
        lexical score (done for the likeliest candidates only: it reads every sentence).
        ``query``: what a sentence must not contradict to count."""
        title, heading, body = self.title, self.heading, self.body
        w_start, w_end = best_window(body, terms, heading=f"{title} {heading}", asks=asks,
                                     query=query)
        self.window = (w_start, w_end)
        inside = terms.coverage(f"{title}\n{heading}\n{body[w_start:w_end]}")
        # What the passage holds of the query, and how much of it sits in one window.
        self.lexical = 0.5 * self.cover + 0.5 * inside

    def shown_words(self) -> str:
        """What the snippet says, whitespace and case aside: the same words under two
        names (or twice) are shown once."""
        start, end = self.window
        return " ".join(self.body[start:end].split()).lower()

    def shown_similarity(self) -> float:
        """How similar what the snippet shows is to the query: its best piece's
        similarity (the passage's, without pieces)."""
        if self.pieces:
            return max(sim for _, _, sim in self.pieces)
        return self.semantic or 0.0

    def result(self) -> dict[str, Any]:
        start, end = self.window
        out: dict[str, Any] = {
            "path": self.path, "title": self.title, "heading": self.heading,
            "snippet": self.body[start:end].strip("\n"), "score": round(self.score, 4),
            "start": self.start + start, "match": round(self.cover, 3),
        }
        if self.pieces:
            # What the snippet shows, judged as it is: its pieces' similarities, where
            # each sits in the snippet (an answer's sentences are weighed by them).
            shown = self.body[start:end]
            lead = len(shown) - len(shown.lstrip("\n"))
            size = len(out["snippet"])
            out["similarity"] = round(self.shown_similarity(), 3)
            spans = [(max(0, s - start - lead), min(size, e - start - lead), sim)
                     for s, e, sim in self.pieces]
            out["pieces"] = [[a, b, round(sim, 3)] for a, b, sim in spans if a < b]
        elif self.semantic is not None:
            out["similarity"] = round(self.semantic, 3)
        if self.also:
            out["also"] = self.also
        return out


def _with_nearest(cands: list[_Passage], chosen: list[_Passage],
                  similarity: dict[int, float], limit: int) -> None:
    """The passage nearest in meaning is shown, whatever the words' ranks: when the
    fusion leaves it out, it takes the last place (or a place left empty).

    The fusion's two lexical orders bury a passage only meaning finds: git-init's
    "--initial-branch … the initial branch in the newly created repository" for "choose
    the name of the first branch when I create a new repository" is 1st by meaning,
    200th by bm25 and 24th fused. The last place, not a higher one: MiniLM's nearest is
    often not the answer, and a higher place pushes out passages that are (measured on
    the answers benchmark: the 2nd or 3rd place lost one or two answers on git and
    sqlite; the last place lost none). When its words were not looked at closer
    (meaning alone found it), it is shown whole: its words do not say which part
    answers; its pieces do."""
    nearest = max(cands, key=lambda c: (similarity.get(c.id, -2.0), -c.rank))
    if nearest in chosen or any(_twins(c.path, nearest.path) for c in chosen):
        return
    words = nearest.shown_words()
    if any(c.shown_words() == words for c in chosen):
        return  # the same words are shown under another name
    if len(chosen) == limit:
        chosen[-1] = nearest
    else:
        chosen.append(nearest)


def _by_segment(c: _Passage, measure: Callable[[list[str]], Any], terms: Terms) -> None:
    """The first result's snippet weighed segment by segment: each sentence, command or
    item it shows that holds a word of the question is embedded now (with the page's
    title and section, as its pieces were) and joins its pieces with its own similarity.

    A piece of 400 characters is as near as its best part, and a sentence is as near as
    its piece: the sentence that answers may sit in a piece the rest of which is about
    something else (sqlite's "SQLITE_TRANSIENT, may be passed to indicate that the
    object is to be copied" ends a piece of 0.61; the sentences after it begin one of
    0.74). Each segment costs a forward pass of the model (15–30 ms of CPU), so: the
    first result only (it is where an answer is most often quoted from; on the answers
    benchmark the first three answered nothing more); a segment that is a piece by
    itself has its similarity already; one holding none of the question's words keeps
    its piece's (weighing those too answered nothing more, at a fifth more cost)."""
    start, end = c.window
    known = {(s, e) for s, e, _ in c.pieces}
    segs = [seg for seg in segments(c.body) if seg.start < end and start < seg.end
            and (seg.start, seg.end) not in known
            and any(terms.present(c.body[seg.start:seg.end]))]
    if not segs:
        return
    sims = measure([piece_text(c.title, c.heading, c.body, seg.start, seg.end)
                    for seg in segs])
    c.pieces = c.pieces + [(seg.start, seg.end, float(sim))
                           for seg, sim in zip(segs, sims, strict=True)]


def _fuse(cands: list[_Passage], similarity: dict[int, float]) -> None:
    """Each candidate's score: reciprocal rank fusion of bm25's order, the weighted terms'
    order and, with embeddings, the semantic order."""
    orders = [sorted(cands, key=lambda c: c.rank),
              sorted(cands, key=lambda c: (-c.lexical, c.rank))]
    if similarity:
        for c in cands:
            c.semantic = similarity.get(c.id)
        orders.append(sorted(cands, key=lambda c: (-(c.semantic or -1.0), c.rank)))
    weights = _FUSION[:len(orders)]
    for c in cands:
        c.score = 0.0
    for weight, order in zip(weights, orders, strict=True):
        for position, c in enumerate(order):
            c.score += weight / (_RRF + position + 1)
    # The fused score ranks; the passage's own share of the query breaks near-ties.
    for c in cands:
        c.score += 0.002 * c.lexical
    # A document about the query has several good passages; a list of links mentions it
    # once: each passage is raised a little by its document's next best ones.
    by_file: dict[int, list[float]] = {}
    for c in cands:
        by_file.setdefault(c.file, []).append(c.score)
    for scores in by_file.values():
        scores.sort(reverse=True)
    for c in cands:
        others = by_file[c.file]
        rest = [x for x in others[:_MORE + 1] if x != c.score][:_MORE]
        c.score += _SPREAD * sum(rest)


def _choose(cands: list[_Passage], limit: int) -> list[_Passage]:
    """The best ``limit`` passages: at most :data:`PER_DOCUMENT` of one document, the
    same text under two names (a page and its source) shown once, by the rendered page."""
    groups: list[list[_Passage]] = []  # the documents seen, as groups of twins
    sketch: dict[int, Sketches] = {}
    group_of: dict[int, int] = {}
    # Only the best candidates can be shown: comparing every document with every other
    # for twins cost more than the rest of a search.
    cands = sorted(cands, key=lambda c: -c.score)[:limit * _LOOK]
    for c in cands:
        if c.file in group_of:
            continue
        sk = sketch[c.file] = sketches(c.sig)
        found = next((g for g, group in enumerate(groups)
                      if _twins(c.path, group[0].path)
                      or same_text(sk, sketch[group[0].file])), None)
        if found is None:
            groups.append([c])
            group_of[c.file] = len(groups) - 1
        else:
            groups[found].append(c)
            group_of[c.file] = found
    # Each group shows its preferred name's passages (the rendered page) when it has any.
    shown_file = {}
    for g, group in enumerate(groups):
        files = {c.file: c.kind for c in group}
        by_file = [c for c in cands if group_of[c.file] == g]
        best_kind = min(_PREFERRED.get(k, 9) for k in files.values())
        shown_file[g] = next(c.file for c in by_file if _PREFERRED.get(c.kind, 9) == best_kind)
    also: dict[int, list[str]] = {}
    for c in cands:
        g = group_of[c.file]
        if c.file != shown_file[g]:
            also.setdefault(g, [])
            if c.path not in also[g]:
                also[g].append(c.path)
    chosen: list[_Passage] = []
    per_group: dict[int, int] = {}
    seen_text: set[str] = set()
    # At most PER_DOCUMENT of a document while others can be shown; when the best
    # candidates are nearly all one long document (a manual's chapter of 150 passages),
    # its next best fill the places no other document takes: fewer results than asked
    # for, while passages that match wait, would hide what answers.
    for cap in (PER_DOCUMENT, limit):
        for c in cands:  # best first
            if len(chosen) == limit:
                break
            g = group_of[c.file]
            if c.file != shown_file[g] or per_group.get(g, 0) >= cap:
                continue
            key = c.shown_words()
            if key in seen_text:
                continue  # the same words found under another name (or already chosen)
            seen_text.add(key)
            per_group[g] = per_group.get(g, 0) + 1
            chosen.append(c)
    chosen.sort(key=lambda c: -c.score)
    for c in chosen:
        names = also.get(group_of[c.file])
        if names:
            c.also = sorted(names)
    return chosen


def _with_sources(conn: sqlite3.Connection, chosen: list[_Passage]) -> None:
    """Name, in ``also``, the sources indexed as the pages shown (a page's source is
    searched as its page: docs/design.md §10)."""
    files = sorted({c.file for c in chosen})
    if not files:
        return
    sources: dict[int, list[str]] = {}
    for page, path in conn.execute(
            f"SELECT twin, path FROM files WHERE twin IN ({','.join('?' * len(files))})",
            files):
        sources.setdefault(int(page), []).append(str(path))
    for c in chosen:
        if c.file in sources:
            c.also = sorted({*c.also, *sources[c.file]})


def _twins(a: str, b: str) -> bool:
    """Whether two paths name one text in two forms: the same name in the same folder
    but for the suffix (``user-manual.html`` and ``user-manual.txt``), as a documentation
    set ships its pages beside their sources."""
    sa = twin_stem(a)
    return sa is not None and sa == twin_stem(b) and a != b


def _judgement(terms: Terms, chosen: list[_Passage],
               similarity: dict[int, float] | None, asks: str | None = None) -> dict[str, Any]:
    """Whether the search answers its query: one segment of a top passage's snippet (a
    sentence, a command, an item) holds enough of the query's weighted terms, with its
    title and heading, and is the kind of answer the question asks for (a number for
    "how many", a command for "how do I"); with embeddings, the best passage must also
    be similar enough to the query (docs/design.md §10).

    A passage that holds the words here and there is about the topic, not an answer:
    measured on the answers benchmark, neither the passage's coverage nor its
    similarity kept wrong answers from claiming coverage."""
    best = 0.0
    for c in chosen[:3]:
        start, end = c.window
        best = max(best, answering_coverage(terms, c.body[start:end],
                                            f"{c.title}\n{c.heading}", asks))
    missing = terms.missing(f"{c.title}\n{c.heading}\n{c.body}" for c in chosen)
    judged: dict[str, Any] = {"matched": best >= MATCH_THRESHOLD, "by": "terms",
                              "score": round(best, 3), "threshold": MATCH_THRESHOLD,
                              "missing": missing}
    if asks is not None:
        judged["asks"] = asks
    if similarity is not None and chosen:
        # Judged on both: the similarity (``score``) and the terms of one segment.
        top = max(c.shown_similarity() for c in chosen[:3])
        judged.update(matched=top >= SEMANTIC_THRESHOLD and best >= MATCH_THRESHOLD,
                      by="semantic", score=round(top, 3), threshold=SEMANTIC_THRESHOLD,
                      terms=round(best, 3), terms_threshold=MATCH_THRESHOLD)
    return judged


def _total(conn: sqlite3.Connection) -> int:
    """How many passages the index holds (an estimate from the ids: no scan)."""
    low, high = conn.execute(
        "SELECT (SELECT min(id) FROM passages), (SELECT max(id) FROM passages)").fetchone()
    return 0 if low is None else int(high) - int(low) + 1


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
