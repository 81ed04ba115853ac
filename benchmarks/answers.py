"""Benchmark: answers, not passages — fanout's retrieval-only answer on real documentation
beside the naive baseline, question by question.

Three documentation sets that Debian ships, of three shapes (``data/answers_*.json``
names each set's package and folder; one missing is skipped and said so):

- **git** (``git-doc``): man pages, as HTML pages with their AsciiDoc sources beside them;
- **debref** (``debian-reference-en``): a manual of a score of long chapter pages;
- **sqlite** (``sqlite3-doc``): an API reference (the C interface, the SQL language).

Each set has questions as a new user asks them, each answer checked by hand in the
documents and given as a pattern of the fact (``answer``) and the files that state it
(``paths``), and a few questions the documents do not answer (``answer: null``).

- **fanout**: the folder is indexed (in an interpreter of its own, for its time and peak
  RSS), then every question is asked as ``fanout ask QUESTION --docs DIR`` asks it
  (:func:`coordinator.api.ask` without a model: retrieval only). hit@k: a file of
  ``paths`` (or its twin) among the first k distinct documents ``docs.search`` returned;
  answer accuracy: the answer's text holds the fact; a *wrong answer that claims
  coverage*: a question whose answer does not hold the fact (or that has none) but whose
  report says covered (outcome ``complete``).
- **baseline**: the naive index (:mod:`benchmarks.docs_child`: SQLite FTS5, default bm25,
  an OR of the words, tag-stripped text, one row per file); its answer is FTS5's
  ``snippet()`` of its three best files, and it claims every question it finds anything
  for (it has no notion of a gap).

Both sides index the same files: where a folder holds PDFs (the baseline reads none),
both index a copy of it without them (:func:`common_folder`), and the figure says so.

With the semantic extra installed (``docs.semantic: auto``), fanout runs twice: lexical
(``off``) and hybrid, and the embeddings' cost per 1,000 passages is given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.stats import BenchResult, Figure, Stats, Target

KEY = "answers"
ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SETS = ("git", "debref", "sqlite")
ACCURACY_TARGET = 0.75
INDEX_RATIO_LIMIT = 3.0


def load_set(name: str) -> dict[str, Any]:
    """A question set (its ``folder`` may not be installed)."""
    data: dict[str, Any] = json.loads((DATA / f"answers_{name}.json").read_text())
    return data


def _child(which: str, folder: str, workdir: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.docs_child", which, folder, str(workdir)],
        capture_output=True, text=True, cwd=ROOT, check=True, timeout=3600,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def common_folder(folder: str, into: Path) -> tuple[str, list[str]]:
    """The folder both sides index: ``folder`` itself when the baseline reads every file
    fanout indexes; else a copy under ``into`` of only the files it reads (the same
    relative paths, hard links where the file system allows), and the paths left out.

    The baseline reads text, Markdown, reStructuredText and HTML; fanout reads PDFs too.
    Debian's reference manual ships a PDF of the whole manual beside its HTML chapters:
    timed with it, fanout's side is mostly a PDF parser reading a second copy of the
    same text, which the baseline never reads. Both sides index the same files.
    """
    from benchmarks.docs_child import NAIVE_SUFFIXES

    left_out: list[str] = []
    keep: list[str] = []
    for where, _dirs, names in os.walk(folder):
        for name in names:
            rel = os.path.relpath(os.path.join(where, name), folder)
            if name.lower().endswith(NAIVE_SUFFIXES):
                keep.append(rel)
            elif name.lower().endswith(".pdf"):
                left_out.append(rel)
    if not left_out:
        return folder, []
    root = into / Path(folder).name
    for rel in keep:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(os.path.join(folder, rel), target)
        except OSError:
            shutil.copy2(os.path.join(folder, rel), target)
    return str(root), sorted(left_out)


def _twin_stem(path: str) -> str:
    return re.sub(r"\.(html?|txt|rst|md)$", "", path)


def _hits(found: list[str], right: list[str], k: int) -> bool:
    stems = {_twin_stem(p) for p in right}
    seen: list[str] = []
    for path in found:
        stem = _twin_stem(path)
        if stem not in seen:
            seen.append(stem)
    return any(stem in stems for stem in seen[:k])


def _matches(pattern: str | None, text: str) -> bool:
    if pattern is None or not text:
        return False
    return re.search(pattern, " ".join(text.split()), re.IGNORECASE) is not None


def naive_answers(db_path: str, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The baseline's result per question: its files and its answer (snippets)."""
    db = sqlite3.connect(db_path)
    out = []
    try:
        for question in questions:
            words = re.findall(r"\w+", question["q"])
            match = " OR ".join(f'"{w}"' for w in words)
            rows = db.execute(
                "SELECT path, snippet(d, 1, '', '', ' … ', 48) FROM d WHERE d MATCH ? "
                "ORDER BY rank LIMIT 10", (match,)).fetchall()
            out.append({"paths": [str(r[0]) for r in rows],
                        "answer": "\n".join(str(r[1]) for r in rows[:3]),
                        "claims": bool(rows)})
    finally:
        db.close()
    return out


def fanout_answers(folder: str, store: Path, questions: list[dict[str, Any]],
                   semantic: str) -> list[dict[str, Any]]:
    """fanout's result per question, asked as ``fanout ask --docs`` asks it."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.answers_child", folder, str(store), semantic],
        input=json.dumps([q["q"] for q in questions]), capture_output=True, text=True,
        cwd=ROOT, check=True, timeout=3600,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def _score(questions: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [(q, r) for q, r in zip(questions, results, strict=True) if q["answer"]]
    n = max(1, len(answerable))
    hit1 = sum(_hits(r["paths"], q["paths"], 1) for q, r in answerable) / n
    hit5 = sum(_hits(r["paths"], q["paths"], 5) for q, r in answerable) / n
    right = [_matches(q["answer"], r["answer"]) for q, r in answerable]
    accuracy = sum(right) / n
    wrong = [(q, r) for q, r in zip(questions, results, strict=True)
             if not _matches(q["answer"], r["answer"])]
    claiming = sum(1 for _, r in wrong if r["claims"])
    missed = [q["q"] for (q, _), ok in zip(answerable, right, strict=True) if not ok]
    return {"hit1": hit1, "hit5": hit5, "accuracy": accuracy, "wrong": len(wrong),
            "wrong_claiming": claiming, "missed": missed}


def run(sets: tuple[str, ...] = SETS, repeat: int = 1, limit: int | None = None,
        semantic: bool = True) -> BenchResult:
    """Every installed set: fanout (lexical, and hybrid where the extra is installed)
    beside the baseline."""
    try:
        from subagents.research.embedding import (  # type: ignore[import-not-found,unused-ignore]
            semantic_unavailable_reason,
        )
    except ImportError:  # a tree without the semantic part (the baseline tree)
        reason: str | None = "no semantic part"
    else:
        reason = semantic_unavailable_reason()
    modes = ["off"] + (["auto"] if semantic and reason is None else [])
    result = BenchResult(KEY, "Answers, not passages",
                         "retrieval-only answers on real documentation, beside naive FTS5",
                         {"sets": list(sets), "repeat": repeat, "limit": limit,
                          "semantic": modes})
    for name in sets:
        data = load_set(name)
        if not Path(data["folder"]).is_dir():
            result.figures.append(Figure(f"{name}: not installed", "", None,
                                         note=f"not installed: {data['source']}"))
            continue
        questions = data["questions"][:limit] if limit else data["questions"]
        common = tempfile.TemporaryDirectory()
        folder, left_out = common_folder(data["folder"], Path(common.name))
        same = (f"; both sides without {', '.join(left_out)} (the baseline reads no PDF)"
                if left_out else "")
        n_answerable = sum(1 for q in questions if q["answer"])
        naive_times, naive_rss = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                figures = _child("naive", folder, Path(tmp))
                naive_times.append(figures["seconds"])
                naive_rss.append(figures["peak_rss_mib"])
                base = _score(questions, naive_answers(str(Path(tmp) / "naive.sqlite"),
                                                       questions))
        label = f"{name} ({len(questions)} questions, {n_answerable} answerable)"
        result.figures += [
            Figure(f"{label}: baseline hit@1", "share", Stats.of([base["hit1"]])),
            Figure(f"{label}: baseline hit@5", "share", Stats.of([base["hit5"]])),
            Figure(f"{label}: baseline answer accuracy", "share", Stats.of([base["accuracy"]])),
            Figure(f"{label}: baseline wrong answers claiming coverage", "count",
                   Stats.of([base["wrong_claiming"]])),
        ]
        for mode in modes:
            times, rss, passages, scores = [], [], 0.0, None
            for _ in range(repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    env_mode = "fanout" if mode == "off" else "fanout-semantic"
                    figures = _child(env_mode, folder, Path(tmp))
                    times.append(figures["seconds"])
                    rss.append(figures["peak_rss_mib"])
                    passages = figures.get("passages", 0.0)
                    scores = _score(questions, fanout_answers(folder, Path(tmp), questions,
                                                              mode))
            assert scores is not None
            tag = "lexical" if mode == "off" else "hybrid"
            ratio = [t / b for t, b in zip(times, naive_times, strict=True)]
            result.figures += [
                Figure(f"{label}: fanout {tag} hit@1", "share", Stats.of([scores["hit1"]])),
                Figure(f"{label}: fanout {tag} hit@5", "share", Stats.of([scores["hit5"]]),
                       Target("≥ baseline", scores["hit5"], base["hit5"],
                              higher_is_better=True)),
                Figure(f"{label}: fanout {tag} answer accuracy", "share",
                       Stats.of([scores["accuracy"]]),
                       Target(f"≥ {ACCURACY_TARGET:.0%}", scores["accuracy"], ACCURACY_TARGET,
                              higher_is_better=True),
                       note="missed: " + " | ".join(scores["missed"])),
                Figure(f"{label}: fanout {tag} wrong answers claiming coverage", "count",
                       Stats.of([scores["wrong_claiming"]]),
                       Target("0", scores["wrong_claiming"], 0),
                       note=f"{scores['wrong']} wrong or unanswered in all"),
                Figure(f"{label}: fanout {tag} index time ÷ baseline", "×", Stats.of(ratio),
                       Target(f"≤ {INDEX_RATIO_LIMIT:g}×", Stats.of(ratio).median,
                              INDEX_RATIO_LIMIT) if mode == "off" else None,
                       note=f"{Stats.of(times).median:.2f} s vs "
                            f"{Stats.of(naive_times).median:.2f} s; {passages:.0f} passages"
                            f"{same}"),
                Figure(f"{label}: fanout {tag} peak RSS ÷ baseline", "×",
                       Stats.of([r / b for r, b in zip(rss, naive_rss, strict=True)]),
                       note=f"{Stats.of(rss).median:.0f} MiB"),
            ]
            if mode != "off" and passages:
                per_k = [t * 1000 / passages for t in times]
                result.figures.append(Figure(
                    f"{label}: fanout hybrid index time per 1,000 passages", "s",
                    Stats.of(per_k)))
        common.cleanup()
    return result


def main() -> None:
    """Print the figures of a run on every installed set (``python -m benchmarks.answers``)."""
    limit = int(os.environ.get("ANSWERS_LIMIT", "0")) or None
    res = run(limit=limit)
    for fig in res.figures:
        med = "-" if fig.stats is None else f"{fig.stats.median:.3g}"
        verdict = "" if fig.target is None else ("  ok" if fig.target.met else "  MISSED")
        print(f"{fig.label:<80} {med:>8} {fig.unit}{verdict}  {fig.note[:300]}")


if __name__ == "__main__":
    main()
