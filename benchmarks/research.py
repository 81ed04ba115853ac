"""Benchmark: the built-in research tools (docs/design.md §10) — the document index and page
extraction.

Three figures the issue asks for: indexing 10,000 generated documents into SQLite FTS5
(time, and the index's size on disk; a refresh with nothing changed, which is what
every ``fanout ask --docs`` pays); ``docs.search`` latency at 10,000 documents, p50 and
p99 over queries of two or three words drawn from the corpus's own vocabulary (target
p50 < 20 ms); and ``web.fetch``'s extraction of a 1 MiB article page (trafilatura's main
text out of boilerplate), the CPU part of a fetch.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.stats import BenchResult, Figure, Stats, Target
from subagents.research.docindex import DocIndex
from subagents.research.fetch import _extract

KEY = "research"
TARGET_P50_MS = 20.0


def _vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(size)}
    return sorted(words)


def make_corpus(folder: Path, n: int, *, seed: int = 20) -> list[str]:
    """``n`` Markdown documents of 150–400 words (Zipf-like word frequencies); the vocabulary."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    for i in range(n):
        sub = folder / f"part{i % 50:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        words = rng.choices(vocab, weights, k=rng.randint(150, 400))
        title = " ".join(rng.choices(vocab, weights, k=4))
        paragraphs = [" ".join(words[j:j + 60]) + "." for j in range(0, len(words), 60)]
        (sub / f"doc{i:05d}.md").write_text(f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n")
    return vocab


def _page(size: int, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 3000)
    nav = "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(40))
    parts = [f"<html><head><title>Bench article</title></head><body><nav><ul>{nav}</ul></nav>"
             "<div class='cookie'>We use cookies.</div><main><article><h1>Bench article</h1>"]
    total = sum(len(p) for p in parts)
    while total < size:
        paragraph = "<p>" + " ".join(rng.choices(vocab, k=120)) + ".</p>"
        parts.append(paragraph)
        total += len(paragraph)
    parts.append("</article></main><footer>Copyright. Terms. Privacy.</footer></body></html>")
    return "".join(parts).encode()[: size + 200]


def run(docs: int, queries: int, page_bytes: int, repeat: int) -> BenchResult:
    """Index ``docs`` documents, search ``queries`` times, extract a ``page_bytes`` page."""
    result = BenchResult(
        KEY, "research tools", "Research tools (docs index, docs.search, web.fetch extraction)",
        {"docs": docs, "queries": queries, "page_bytes": page_bytes, "repeat": repeat},
    )
    with tempfile.TemporaryDirectory(prefix="fanout-bench-docs-") as tmp:
        folder = Path(tmp) / "corpus"
        vocab = make_corpus(folder, docs)
        # Lexical: these figures are the passage index's own (hybrid search would embed
        # every passage first, minutes at this size; embedding_cost measures that).
        index = DocIndex.for_folder(folder, Path(tmp) / "store", semantic="off")
        started = time.perf_counter()
        stats = index.refresh()
        build_s = time.perf_counter() - started
        assert stats.added == docs, stats
        again: list[float] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            unchanged = index.refresh()
            again.append(time.perf_counter() - t0)
            assert unchanged.unchanged == docs
        rng = random.Random(9)
        common = vocab[:400]  # the corpus's own frequent-to-middling words
        latencies: list[float] = []
        found = 0
        for _ in range(queries):
            query = " ".join(rng.sample(common, rng.randint(2, 3)))
            t0 = time.perf_counter()
            hits = index.search(query, 8)
            latencies.append(time.perf_counter() - t0)
            found += bool(hits)
        index.close()
    ms = sorted(x * 1000 for x in latencies)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    page = _page(page_bytes)
    _extract("html", _page(4096), "text/html", "http://bench.test/", False)  # imports, warm
    extract_s: list[float] = []
    text_chars = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        extracted = _extract("html", page, "text/html; charset=utf-8", "http://bench.test/", False)
        extract_s.append(time.perf_counter() - t0)
        text_chars = len(extracted.text)
    result.figures += [
        Figure(f"index {docs:,} documents", "s", Stats.of([build_s]),
               note=f"{stats.size_bytes / 1e6:.1f} MB on disk"),
        Figure(f"index size at {docs:,} documents", "MB", Stats.of([stats.size_bytes / 1e6])),
        Figure("refresh, nothing changed", "ms", Stats.of(again).scaled(1000)),
        Figure(f"docs.search p50 at {docs:,} docs", "ms", Stats.of([p50]),
               Target(f"< {TARGET_P50_MS:g} ms", p50, TARGET_P50_MS, strict=True),
               note=f"{found}/{queries} queries found documents"),
        Figure(f"docs.search p99 at {docs:,} docs", "ms", Stats.of([p99])),
        Figure(f"web.fetch extraction of a {page_bytes / 2**20:.2g} MiB page", "ms",
               Stats.of(extract_s).scaled(1000), note=f"{text_chars:,} characters of text"),
    ]
    return result
