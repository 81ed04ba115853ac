"""The benchmarks still run: every one at a tiny size. Not a timed test: no figure is judged."""

from __future__ import annotations

import json

from benchmarks import results
from benchmarks.registry import REGISTRY, Entry, keys, run_all
from benchmarks.stats import Figure, Stats


def test_every_benchmark_runs_at_a_tiny_size() -> None:
    """Each benchmark produces its figures and the results document is valid JSON."""
    done = run_all(quick=True)
    assert [r.key for r in done] == keys()
    for result in done:
        assert result.figures, result.key
        for figure in result.figures:
            # Only an optional baseline or benchmark that is not installed may lack one.
            assert figure.stats is not None or "not installed" in figure.note, figure.label
    doc = results.document(done, command="smoke", seconds=0.0)
    assert set(doc) >= {"machine", "versions", "benchmarks"}
    assert doc["versions"]["fanout"] is not None
    json.dumps(doc)
    assert "fan-out overhead" in results.markdown(done)


def test_figures_meet_their_baselines_by_key_and_label() -> None:
    """A figure gets the median of the same benchmark's same label as its baseline."""
    done = run_all(quick=True, only=["context_gate"])
    label = done[0].figures[0].label
    before = {"benchmarks": {"context_gate": {"figures": [{"label": label, "median": 2.0}]}}}
    results.with_baselines(done, before)
    first = done[0].figures[0]
    assert first.baseline == 2.0
    assert first.vs_baseline == first.stats.median / 2.0  # type: ignore[union-attr]
    assert all(f.baseline is None for f in done[0].figures[1:])
    assert "÷ baseline" in results.markdown(done)


def test_a_benchmark_without_its_extra_is_a_row_saying_so() -> None:
    """An entry whose package is missing is skipped with a note, not a failure."""
    entry = Entry("absent", "benchmarks.absent", needs=("no_such_package_here",))
    (figure,) = entry.run(quick=True).figures
    assert figure.stats is None and "no_such_package_here" in figure.note


def test_every_registered_module_names_its_key() -> None:
    """Each entry's module exists and its KEY is the entry's key (checked when it runs)."""
    assert len(set(keys())) == len(REGISTRY)
    assert Figure("x", "s", Stats.of([1.0])).vs_baseline is None
