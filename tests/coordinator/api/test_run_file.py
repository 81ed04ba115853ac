"""run_file(): a job file from Python, recorded or not, with its events; bad input refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator import ask, run_file, run_file_events
from coordinator.jobfile.loader import load_scenario
from coordinator.store.runs import RunStore, StoreError
from shared.errors import InputFileErrors
from subagents.models.factory import MissingModelKey
from subagents.result import ProgressEvent

pytestmark = pytest.mark.anyio

LIBRARY = Path(__file__).resolve().parents[3] / "scenarios"
JOB = LIBRARY / "model_corrects_validation.yaml"


async def test_run_file_gives_the_report_a_replay_gives(tmp_path: Path) -> None:
    """A job file run from Python (virtual time here) meets its expect, and is recorded."""
    store = tmp_path / "runs.sqlite"
    events: list[ProgressEvent] = []
    report = await run_file(JOB, on_event=events.append, store=store)
    expect = load_scenario(JOB).expect
    assert expect is not None
    assert report.outcome == expect.outcome == "complete"
    assert report.elapsed_s == expect.elapsed_s
    [row] = RunStore(store).runs()
    assert row.status == "finished" and row.spec_text == JOB.read_text(encoding="utf-8")
    assert {e.kind for e in events} >= {"state", "call"}


async def test_run_file_events_yields_then_reports() -> None:
    """run_file_events streams the job's events; its report is there after the loop."""
    async with run_file_events(JOB) as run:
        subtasks = {event.subtask_id async for event in run}
    assert subtasks == {"patents"}
    assert run.report.coverage == 1


async def test_a_bad_file_is_refused_with_file_line_and_field(tmp_path: Path) -> None:
    """A job file that cannot run raises InputFileErrors naming its file and line."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenario: x\njob:\n  query: q\n  concurrency: zero\n", encoding="utf-8")
    with pytest.raises(InputFileErrors) as info:
        await run_file(bad)
    assert f"{bad}:4: job.concurrency" in info.value.describe()


async def test_speed_must_be_positive() -> None:
    """A speed of zero is a clear ValueError."""
    with pytest.raises(ValueError, match="speed"):
        await run_file(JOB, speed=0)


async def test_a_missing_key_fails_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the provider's key, ask() raises MissingModelKey and records nothing."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = tmp_path / "runs.sqlite"
    with pytest.raises(MissingModelKey, match="ANTHROPIC_API_KEY"):
        await ask("q", model="anthropic:claude-sonnet-4-6", store=store)
    assert not store.exists() or RunStore(store).runs() == []


async def test_a_store_url_fanout_cannot_open_is_a_clear_error() -> None:
    """A store URL of a database fanout cannot use is refused, naming it; nothing runs."""
    with pytest.raises(StoreError, match="mysql"):
        await run_file(JOB, store="mysql://localhost/fanout")


async def test_an_on_event_that_raises_fails_the_call_after_the_job() -> None:
    """A bug in on_event is raised by run_file itself, not swallowed, once the job ended."""

    def broken(event: ProgressEvent) -> None:
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        await run_file(JOB, on_event=broken)
