"""The recordings checked into scenarios/recorded/ (real runs: MCP, a real local model)
replay offline and meet their expect, the same report twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay

RECORDED = sorted((Path(__file__).resolve().parents[2] / "scenarios" / "recorded").glob("*.yaml"))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in RECORDED])
def test_a_recorded_run_replays_to_its_report(path: Path) -> None:
    """Each recording passes its expect, and two replays give the same report."""
    first = replay(load_scenario(path))
    assert first.passed, first.mismatches
    assert replay(load_scenario(path)).report == first.report


def test_a_real_local_model_run_is_recorded() -> None:
    """At least one recording comes from the live tests' real model (Gemma 3 270M)."""
    assert any(p.name.startswith("gemma_") for p in RECORDED)
