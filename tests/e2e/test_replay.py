"""Scripted-model scenarios replay byte for byte: two ``fanout replay --json`` runs agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def scripted_scenarios() -> list[Path]:
    """Every scenario of the library whose model is the scripted one (model_*, lead_*)."""
    return sorted(
        p for p in SCENARIOS.glob("*.yaml") if "provider: scripted" in p.read_text("utf-8")
    )


def test_scripted_model_scenarios_replay_byte_identically_twice() -> None:
    """Two replays in separate processes print the same bytes, and every scenario passes."""
    files = scripted_scenarios()
    assert len(files) >= 7
    command = [sys.executable, "-m", "coordinator.cli", "replay", "--json", *map(str, files)]
    # Two processes at once: independent interpreters, hash seeds and start times.
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
    first, second = (out for out, _ in outputs)
    assert first == second
    summary = json.loads(first)
    assert summary["failed"] == 0
    assert {s["file"] for s in summary["scenarios"]} == {str(p) for p in files}
