"""The lead's answer streams: answer.delta events in order, then the checked answer event."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from rich.console import Console

from coordinator import run_file, run_file_events
from coordinator.engine.recording import recording
from coordinator.jobfile.loader import load_scenario
from coordinator.lead.streaming import COALESCE_CHARS, AnswerStream
from coordinator.serve.events import frame
from coordinator.store.runs import RunStore
from coordinator.views.live import LiveBoard
from shared.clock import AnyioClock
from subagents.models.base import ModelCallFailed, ModelRequest, ModelTurn, TextSink, UserMessage
from subagents.models.call import call_model
from subagents.models.spec import ModelSpec
from subagents.result import ProgressEvent
from subagents.retry import RetryPolicy

pytestmark = pytest.mark.anyio

LIBRARY = Path(__file__).resolve().parents[3] / "scenarios"


def _answer_events(events: list[ProgressEvent]) -> tuple[list[ProgressEvent], ProgressEvent]:
    deltas = [e for e in events if e.kind == "answer.delta"]
    [final] = [e for e in events if e.kind == "answer"]
    assert events.index(final) > max(events.index(d) for d in deltas)
    return deltas, final


async def test_the_answer_streams_then_the_checked_answer_follows(tmp_path: Path) -> None:
    """An answer that passes its checks: the deltas add up to it, and the answer event
    carries it as the model's."""
    events: list[ProgressEvent] = []
    report = await run_file(LIBRARY / "research_lead.yaml", on_event=events.append,
                            store=tmp_path / "runs.sqlite")
    deltas, final = _answer_events(events)
    assert len(deltas) >= 2 and all(d.subtask_id == "lead" for d in deltas)
    # The deltas are the model's words as written ([market]); the answer event carries the
    # answer as checked and shown, its citations numbered ([1, 2]).
    streamed = "".join(d.text or "" for d in deltas)
    shown = final.text or ""
    assert "[market]" in streamed and report.answer.text == shown
    assert "[market]" not in shown and "[1, 2]" in shown
    assert (final.answer_kind, final.reason) == ("model", None)


async def test_a_rejected_answer_is_replaced_in_the_answer_event_with_the_reason(
    tmp_path: Path,
) -> None:
    """The streamed text was the model's; the answer event carries the extractive answer
    that replaced it, and why."""
    events: list[ProgressEvent] = []
    report = await run_file(LIBRARY / "lead_echoes_prompt.yaml", on_event=events.append,
                            store=tmp_path / "runs.sqlite")
    deltas, final = _answer_events(events)
    assert "".join(d.text or "" for d in deltas) == report.answer.rejected
    assert final.text == report.answer.text and final.answer_kind == "extractive"
    assert final.reason is not None and "instructions" in final.reason


async def test_the_event_stream_has_the_deltas_and_the_recording_the_models_text(
    tmp_path: Path,
) -> None:
    """The store keeps answer.delta events (the service's SSE frames them by kind); a
    recording of the run keeps the model's text once, as it wrote it, and no deltas."""
    store = tmp_path / "runs.sqlite"
    report = await run_file(LIBRARY / "research_lead.yaml", store=store)
    [row] = RunStore(store).runs()
    stored = RunStore(store).events(row.id)
    kinds = [e["kind"] for e in stored]
    assert "answer.delta" in kinds and kinds.count("answer") == 1
    delta = next(e for e in stored if e["kind"] == "answer.delta")
    assert frame(delta).startswith(f"id: {delta['seq']}\nevent: answer.delta\ndata: ".encode())
    written = recording(RunStore(store), row.id)
    # The model's words as written ([market]), what a replay checks and renumbers again
    # into the answer shown ([1, 2]).
    recorded = written["model"]["turns"]["lead"][-1]["text"]
    assert "".join(e["text"] for e in stored if e["kind"] == "answer.delta") == recorded
    assert "[market]" in recorded and "[1, 2]" in (report.answer.text or "")
    assert "answer.delta" not in str(written)


async def test_an_iterator_of_events_hears_the_answer_as_it_is_written() -> None:
    """run_file_events (ask_events' twin) yields the deltas and the answer event."""
    async with run_file_events(LIBRARY / "research_lead.yaml") as run:
        kinds = [e.kind async for e in run]
    assert "answer.delta" in kinds and kinds[-1] in ("answer", "state")
    assert kinds.count("answer") == 1


class _Clock:
    """A clock that stands still unless moved."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


def test_pieces_are_gathered_until_enough_or_long_enough() -> None:
    """Small pieces go out together: at 32 characters, or 0.1 s after the first."""
    events: list[ProgressEvent] = []
    clock = _Clock()
    stream = AnswerStream(events.append, clock)  # type: ignore[arg-type]  # now() is enough
    for _ in range(COALESCE_CHARS // 4 - 1):
        stream.delta("abcd")
    assert events == []
    stream.delta("abcd")
    assert [len(e.text or "") for e in events] == [COALESCE_CHARS]
    stream.delta("x")
    clock.t = 0.2
    stream.delta("y")
    assert [e.text for e in events[1:]] == ["xy"]
    stream.final("the answer", "model", None)
    assert events[-1].kind == "answer" and events[-1].text == "the answer"


class _Breaks:
    """A streaming client whose first stream breaks off after a few words."""

    provider = "function"
    name = "breaks"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelTurn:
        raise AssertionError("a streaming caller streams")

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        self.calls += 1
        on_text("Sodium-ion cells keep most of their capacity ")
        if self.calls == 1:
            raise ModelCallFailed("the stream broke", kind="connection_reset",
                                  category="transient")
        on_text("at -20 °C [1].")
        return ModelTurn(text="Sodium-ion cells keep most of their capacity at -20 °C [1].")

    async def aclose(self) -> None:
        """Nothing to close."""


async def test_a_stream_retried_after_it_broke_says_it_starts_again() -> None:
    """The retry's first delta says restart: a view drops the broken attempt's text."""
    events: list[ProgressEvent] = []
    clock = AnyioClock()
    spec = ModelSpec(provider="scripted", retry=RetryPolicy(max_attempts=2, jitter="none"))
    request = ModelRequest(system="", messages=[UserMessage("q")], subtask_id="lead")
    stream = AnswerStream(events.append, clock)
    result, turn = await call_model(_Breaks(), request, spec=spec, clock=clock,
                                    rng=random.Random(0), trace_id="t", stream=stream)
    stream.flush()
    assert result.ok and turn is not None
    assert [e.restart for e in events] == [None, True, None]
    board = LiveBoard(load_scenario(LIBRARY / "research_lead.yaml").job)
    for event in events:
        board(event)
    assert board.answer == turn.text


def test_the_live_view_shows_the_answer_then_its_replacement() -> None:
    """The live board shows the text as written, then the checked answer and the reason."""
    board = LiveBoard(load_scenario(LIBRARY / "research_lead.yaml").job)
    board(ProgressEvent("lead", "answer.delta", 1.0, text="You are the lead "))
    board(ProgressEvent("lead", "answer.delta", 1.0, text="of a research job."))
    assert board.answer == "You are the lead of a research job."
    assert "being written" in _shown(board)
    board(ProgressEvent("lead", "answer", 2.0, text="CATL says [1].", answer_kind="extractive",
                        reason="it repeats fanout's own instructions"))
    shown = _shown(board)
    assert "CATL says [1]." in shown and "rejected" in shown and "You are" not in shown


def _shown(board: LiveBoard) -> str:
    """What the board draws (the answer under its table), as plain text."""
    console = Console(record=True, width=200, color_system=None, file=io.StringIO())
    console.print(board)
    return console.export_text()
