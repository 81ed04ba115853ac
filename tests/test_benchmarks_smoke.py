"""The benchmarks still run: every one at a tiny size. Not a timed test: no figure is judged."""

from __future__ import annotations

import json

from benchmarks import results
from benchmarks.__main__ import BENCHMARKS, QUICK, run_all


def test_every_benchmark_runs_at_a_tiny_size() -> None:
    """Each benchmark produces its figures and the results document is valid JSON."""
    done = run_all(QUICK)
    assert [r.key for r in done] == list(BENCHMARKS)
    for result in done:
        assert result.figures, result.key
        for figure in result.figures:
            # Only an optional baseline that is not installed may lack a measurement.
            assert figure.stats is not None or figure.note == "not installed", figure.label
    doc = results.document(done, command="smoke", seconds=0.0)
    assert set(doc) >= {"machine", "versions", "benchmarks"}
    assert doc["versions"]["fanout"] is not None
    json.dumps(doc)
    assert "fan-out overhead" in results.markdown(done)
