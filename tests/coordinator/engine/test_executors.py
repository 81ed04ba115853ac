"""The executor a door asks for, and what a job must be to run on Temporal (docs/design.md §15)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator import ask
from coordinator.engine import RunRequest, TemporalTarget
from coordinator.engine.executor import not_on_temporal
from coordinator.jobfile.loader import load_scenario_text

ROOT = Path(__file__).resolve().parents[3]
MODEL = {"provider": "scripted", "turns": {"lead": [{"text": "nothing to plan"}]}}
JOB = """\
scenario: docs-job
job:
  query: q
  subtasks: [{id: a, query: a, tools: [docs.search], plan: [{finish: done}]}]
research_tools:
  docs: {path: .}
"""


def lookup(query: str) -> str:
    """Look a query up."""
    return query


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(None, TemporalTarget(), id="defaults"),
        pytest.param({"address": "h:1", "task_queue": "q"},
                     TemporalTarget("h:1", "default", "q"), id="some"),
    ],
)
def test_a_temporal_target_takes_the_python_callers_options(
    options: dict[str, str] | None, expected: TemporalTarget
) -> None:
    """temporal={...} names the address, namespace and task queue; the rest default."""
    assert TemporalTarget.of(options) == expected


@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({"adress": "h:1"}, "got 'adress'", id="misspelled"),
        pytest.param({"address": ""}, "temporal.address", id="empty"),
    ],
)
def test_a_bad_temporal_option_is_a_value_error_naming_it(
    options: dict[str, Any], words: str
) -> None:
    """An unknown key or an empty value is refused, naming it."""
    with pytest.raises(ValueError, match=words):
        TemporalTarget.of(options)


def test_python_tools_cannot_go_to_temporal_workers_research_tools_can() -> None:
    """Python functions live in the caller's process; research tools run on the workers
    (each opens the documents folder at the path it resolved to here)."""
    scenario = load_scenario_text(JOB, "job.yaml")
    assert scenario.research_tools is not None
    assert not_on_temporal(RunRequest(scenario, JOB, "job.yaml")) is None
    plain = scenario.model_copy(update={"research_tools": None})
    assert not_on_temporal(RunRequest(plain, JOB, "job.yaml")) is None
    with_python = RunRequest(plain, JOB, "job.yaml", python_tools={"lookup": object()})  # type: ignore[dict-item]
    assert "Python tools (lookup)" in (not_on_temporal(with_python) or "")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("options", "words"),
    [
        pytest.param({"executor": "remote"}, "executor: expected 'local' or 'temporal'",
                     id="unknown-executor"),
        pytest.param({"temporal": {"address": "h:1"}}, "without executor='temporal'",
                     id="temporal-without-executor"),
        pytest.param({"executor": "temporal", "tools": [lookup]}, "Python tools",
                     id="python-tools-on-temporal"),
    ],
)
async def test_ask_refuses_an_executor_it_cannot_use_before_anything_runs(
    options: dict[str, Any], words: str, tmp_path: Path
) -> None:
    """A wrong executor, Temporal options alone, or Python tools on Temporal: ValueError,
    nothing recorded, no server contacted."""
    options = {"tools": [lookup], **options}
    with pytest.raises(ValueError, match=words):
        await ask("q", model=MODEL, store=tmp_path / "runs.sqlite", **options)
    assert not (tmp_path / "runs.sqlite").exists()


@pytest.mark.process
def test_fanout_ask_on_an_unreachable_temporal_is_exit_2_naming_it(tmp_path: Path) -> None:
    """`fanout ask --docs DIR --executor temporal` with no Temporal at --address: exit 2,
    naming the address, before any run is registered."""
    (tmp_path / "notes.md").write_text("# Notes\n\nSomething.\n")
    done = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "ask", "q?", "--docs", str(tmp_path),
         "--executor", "temporal", "--address", "127.0.0.1:1", "--store",
         str(tmp_path / "runs.sqlite")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "127.0.0.1:1" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs.sqlite").exists()
