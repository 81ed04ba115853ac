"""The benchmarks ``make bench`` runs, in table order: one :class:`Entry` each.

Adding one takes a module and a line. The module (``benchmarks/NAME.py``) defines
``KEY`` and ``run(**params) -> BenchResult`` (its figures, built from
:mod:`benchmarks.stats`); the line is an :class:`Entry` in :data:`REGISTRY` with the
keyword arguments of each of the three runs (:data:`MODES`): ``full`` (``make
bench-full``: the sizes its issue asks for), ``bench`` (``make bench``: smaller, so the
whole run with its baseline tree fits ten minutes on 2 cores, still repeated enough for
a min–max) and ``quick`` (``--quick``, and the test that every benchmark still runs). A
benchmark that needs an optional package (an extra) lists it in ``needs``. In a smoke
run a missing package is a row saying so; in a bench or full run (``make bench``
installs every extra) it is a failure of that row — a competitor that is not there must
not make its comparison quietly vanish from the table. Baselines need nothing from the
module: the harness runs the same benchmark of the baseline tree with the same
parameters and matches each figure by key and label (:mod:`benchmarks.baseline_tree`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.stats import BenchResult, Figure

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

Mode = Literal["quick", "bench", "full"]
MODES: dict[Mode, str] = {
    "quick": "--quick: tiny sizes, a smoke run (the figures mean nothing)",
    "bench": "make bench: reduced sizes, about ten minutes on 2 cores",
    "full": "make bench-full: the sizes the issues ask for",
}
"""The three sizes a benchmark runs at, and what each is for (``results.json`` says which)."""


@dataclass(frozen=True)
class Entry:
    """One benchmark: its key, its module, and its parameters in each :data:`MODES`."""

    key: str
    module: str
    full: Mapping[str, Any] = field(default_factory=dict)
    quick: Mapping[str, Any] = field(default_factory=dict)
    bench: Mapping[str, Any] = field(default_factory=dict)
    needs: tuple[str, ...] = ()

    def params(self, mode: Mode) -> Mapping[str, Any]:
        """The keyword arguments of ``run`` in ``mode``."""
        return {"quick": self.quick, "bench": self.bench, "full": self.full}[mode]

    def missing(self) -> list[str]:
        """The packages in ``needs`` that are not installed."""
        return [name for name in self.needs if importlib.util.find_spec(name) is None]

    def run(self, mode: Mode = "bench") -> BenchResult:
        """Import the module and run it at the size of ``mode``.

        Raises:
            ValueError: the module's ``KEY`` is not this entry's key.
        """
        missing = self.missing()
        if missing:
            skipped = BenchResult(self.key, self.key, f"{self.key} (skipped)", {})
            skipped.figures.append(
                Figure("not run", "", None, note=f"{MISSING}: {', '.join(missing)}")
            )
            return skipped
        module = importlib.import_module(self.module)
        if getattr(module, "KEY", None) != self.key:
            raise ValueError(f"{self.module}.KEY is not {self.key!r}")
        result: BenchResult = module.run(**self.params(mode))
        return result


# The ``bench`` sizes: the whole ``make bench``, the baseline tree's run of each benchmark
# included, in about ten minutes on 2 cores; every measured figure at least twice (three
# times where it is cheap). A size a target is stated at (100,000 subtasks' peak RSS, 200
# SSE clients, 50 POSTs at once, the three documentation sets) is kept; what shrinks is
# the repetitions and sizes whose figures are per subagent, per call or a ratio.
REGISTRY: tuple[Entry, ...] = (
    Entry(
        "fanout_overhead", "benchmarks.overhead",
        full={"sizes": (1_000, 10_000), "repeat": 9}, quick={"sizes": (20, 50), "repeat": 2},
        # LangGraph's 10,000 branches alone take ~10 s a repetition on a loaded machine.
        bench={"sizes": (1_000, 5_000), "repeat": 3},
    ),
    Entry(
        "scale", "benchmarks.scale",
        full={"subtasks": 100_000, "concurrency": 1_000, "repeat": 3},
        quick={"subtasks": 300, "concurrency": 30, "repeat": 1},
        # The peak-RSS target is stated at 100,000: kept, one repetition fewer.
        bench={"subtasks": 100_000, "concurrency": 1_000, "repeat": 2},
    ),
    Entry(
        "replay_speed", "benchmarks.replay_speed",
        full={"root": SCENARIOS, "repeat": 7}, quick={"root": SCENARIOS, "repeat": 1},
        bench={"root": SCENARIOS, "repeat": 5},
    ),
    Entry(
        "context_gate", "benchmarks.context_gate",
        full={"late": 1_000, "repeat": 7}, quick={"late": 30, "repeat": 2},
        bench={"late": 1_000, "repeat": 5},
    ),
    Entry(
        "failure_path", "benchmarks.failure_path",
        full={"n": 1_000, "repeat": 7}, quick={"n": 20, "repeat": 2},
        bench={"n": 1_000, "repeat": 3},
    ),
    Entry(
        "replay_cli", "benchmarks.replay_cli",
        full={"sizes": (10, 5_000), "memory_n": 20_000, "repeat": 5},
        quick={"sizes": (10, 60), "memory_n": 100, "repeat": 1},
        # The marginal per subagent from 2,000 (start-up still cancels out); the peak of a
        # 20,000-subtask replay was most of this benchmark's time.
        bench={"sizes": (10, 2_000), "memory_n": 10_000, "repeat": 3, "memory_repeat": 2},
    ),
    Entry(
        "replay_full", "benchmarks.replay_full",
        full={"sizes": (10, 5_000), "memory_n": 20_000, "repeat": 5},
        # The same code as replay_cli's smoke run: three short processes are enough.
        quick={"sizes": (10, 20), "memory_n": 20, "repeat": 1, "memory_repeat": 1,
               "warm": False},
        bench={"sizes": (10, 2_000), "memory_n": 10_000, "repeat": 3, "memory_repeat": 2},
    ),
    Entry(
        "model_loop", "benchmarks.model_loop",
        full={"runs": 300, "concurrent": 200, "batches": 9},
        quick={"runs": 6, "concurrent": 10, "batches": 2},
        bench={"runs": 40, "concurrent": 100, "batches": 2},
    ),
    Entry(
        "serve_load", "benchmarks.serve_load",
        full={"runs": 50, "clients": 200}, quick={"runs": 2, "clients": 4, "speed": 50.0},
        # The p99 target is stated for this load, and one load takes ~15 s: kept whole.
        bench={"runs": 50, "clients": 200},
        needs=("httpx",),
    ),
    Entry(
        "temporal_fanout", "benchmarks.temporal_fanout",
        full={"n": 1_000, "repeat": 3, "counts": (1, 2, 4)},
        quick={"n": 20, "repeat": 1, "counts": (1,)},
        # One worker: each further count starts its own worker processes.
        bench={"n": 200, "repeat": 2, "counts": (1,)},
        needs=("temporalio",),
    ),
    Entry(
        # The Temporal half needs the dev server and four workers: the smoke run skips it.
        "store_scale", "benchmarks.store_scale",
        full={"posts": 50, "rounds": 5, "subtasks": 1_000},
        quick={"posts": 5, "rounds": 1, "subtasks": 0},
        # The Temporal half (dev server, two recording workers) is left to bench-full: at
        # 100 subtasks it was one unrepeated run per backend and ~24 s of the run, and
        # temporal_fanout still measures Temporal. The 50 POSTs at once are kept whole.
        bench={"posts": 50, "rounds": 2, "subtasks": 0},
        needs=("psycopg", "temporalio"),
    ),
    Entry(
        "rate_limits", "benchmarks.rate_limits",
        full={"subtasks": 50, "window_s": 1.0}, quick={"subtasks": 2, "window_s": 0.1},
        # The window stays 1 s (at 0.25 s the limiter's own timing shows in the ratio); fewer
        # subtasks: 17 requests, a floor of 5 s (at 5 subtasks the fixed cost of the probe
        # and the synthesis alone takes the ratio past 1.1×).
        bench={"subtasks": 8, "window_s": 1.0},
    ),
    Entry("search_first", "benchmarks.search_first", full={"subtasks": 20},
          quick={"subtasks": 3}, bench={"subtasks": 20}),
    Entry("parallel_calls", "benchmarks.parallel_calls", full={"latency_s": 1.0, "repeat": 3},
          quick={"latency_s": 0.05, "repeat": 1}, bench={"latency_s": 0.2, "repeat": 3}),
    Entry("answer_stream", "benchmarks.answer_stream",
          full={"words": 200, "word_delay_s": 0.01, "repeat": 3},
          quick={"words": 20, "word_delay_s": 0.002, "repeat": 1},
          bench={"words": 100, "word_delay_s": 0.01, "repeat": 2}),
    Entry(
        # Issue 31: a generated corpus of every size and Debian's python3-doc (where it is
        # installed), each beside the naive FTS5 baseline; search latency up to 200 MB.
        "docs_scale", "benchmarks.docs_scale",
        full={"fillers": 150, "big_mib": 16, "sizes_mb": (1, 16, 200), "queries": 200,
              "repeat": 3},
        quick={"fillers": 6, "big_mib": 0, "sizes_mb": (0.1, 0.5), "queries": 10,
               "repeat": 1, "real": False},
        bench={"fillers": 20, "big_mib": 2, "sizes_mb": (1, 8), "queries": 100, "repeat": 2},
    ),
    Entry(
        # Issue 38: retrieval-only answers on three of Debian's documentation sets (git-doc,
        # debian-reference-en, sqlite3-doc; `make bench` installs them where it can),
        # question by question, beside the naive FTS5 baseline.
        "answers", "benchmarks.answers",
        full={"repeat": 1},
        quick={"sets": ("git",), "limit": 3, "repeat": 1, "semantic": False},
        # Every set and question, lexical only: the hybrid run's embeddings are the slow part.
        bench={"repeat": 1, "semantic": False},
    ),
    Entry(
        # Hybrid search's dense half: encoding ~200-word passages (Git's docs where
        # installed) at the default cut and the model's limit, and on two workers.
        "embedding_cost", "benchmarks.embedding_cost",
        full={"passages_n": 1_000, "configs": ((128, 1), (256, 1), (128, 2)), "repeat": 3},
        # 100 passages: the rate per 1,000 is still measured (its spread is wider), twice.
        bench={"passages_n": 100, "configs": ((128, 1),), "repeat": 2},
        quick={"passages_n": 8, "configs": ((128, 1),), "repeat": 1},
        needs=("numpy", "tokenizers", "safetensors", "threadpoolctl"),
    ),
    Entry(
        "research", "benchmarks.research",
        full={"docs": 10_000, "queries": 1_000, "page_bytes": 2**20, "repeat": 5},
        quick={"docs": 60, "queries": 20, "page_bytes": 32_768, "repeat": 1},
        bench={"docs": 5_000, "queries": 50, "page_bytes": 2**20, "repeat": 3},
    ),
    Entry(
        # The issue "a command that starts in a blink": each command a whole process.
        "startup", "benchmarks.startup",
        # The ask's folder is indexed first, and with the semantic extra that embeds every
        # passage: 24 fillers took ~100 s a tree, 4 take ~18 s. The ask itself is timed
        # the same (start-up dominates it); bench-full keeps 24.
        full={"repeat": 9}, quick={"repeat": 1, "docs_fillers": 4},
        bench={"repeat": 3, "docs_fillers": 4},
    ),
)
"""Every benchmark of ``make bench``, in the order of the table."""


def keys() -> list[str]:
    """The registered keys, in order."""
    return [entry.key for entry in REGISTRY]


FAILED = "failed: "
"""How the note of a benchmark that raised begins (its one row says what it raised)."""
MISSING = "not installed"
"""What a figure's note says when its contender's package is absent."""


def _missing_fails(result: BenchResult) -> BenchResult:
    """In a bench or full run, a figure that could not be taken for want of a package fails."""
    result.figures = [
        Figure(f.label, f.unit, None,
               note=f"{FAILED}{f.note} (make bench installs the bench extra)")
        if f.stats is None and MISSING in f.note and not f.note.startswith(FAILED)
        else f
        for f in result.figures
    ]
    return result


def run_all(
    mode: Mode = "bench", *, only: Sequence[str] = (), keep_going: bool = False
) -> list[BenchResult]:
    """Run the chosen benchmarks (all by default) at the size of ``mode``, in registry order.

    With ``keep_going``, a benchmark that raises becomes one row saying so (and the
    others still run); otherwise the exception propagates.
    """
    done = []
    for entry in REGISTRY:
        if only and entry.key not in only:
            continue
        try:
            result = entry.run(mode)
            done.append(result if mode == "quick" else _missing_fails(result))
        except Exception as exc:
            if not keep_going:
                raise
            done.append(failed_result(
                entry.key, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
    return done


def failed_result(key: str, why: str) -> BenchResult:
    """The one row of benchmark ``key`` that did not run: ``why`` (see :func:`failures`)."""
    failed = BenchResult(key, key, f"{key} (failed)", {})
    failed.figures.append(Figure("not measured", "", None, note=f"{FAILED}{why}"))
    return failed


def failures(results: Sequence[BenchResult]) -> list[str]:
    """The keys of the benchmarks that raised (see ``keep_going``)."""
    return [r.key for r in results if any(f.note.startswith(FAILED) for f in r.figures)]
