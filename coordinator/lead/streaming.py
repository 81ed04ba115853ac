"""The lead's answer as it is written: ``answer.delta`` events, then the checked ``answer``.

docs/design.md §8, "Streaming": while the lead model writes the answer, its text goes out as
``answer.delta`` events (``{"text": ...}``, in order) to every observer (the run store's
trace, and so the service's event stream; the CLI's live view; ``ask_events``). When the
synthesis is done, one ``answer`` event carries the answer the report holds, after the
answer checks (docs/design.md §7): the model's text when it passed, else the extractive answer
with the reason the model's was rejected. Every view replaces what it streamed with it.

Decisions where the contract is silent:

- Pieces are coalesced: an event goes out once 32 characters have gathered, or 0.1 s
  after the first of them (on the job's clock), and at the end. A token per event would
  be a store row per token; 0.1 s is below what a reader notices.
- A call retried after its stream broke writes again from the start: its first event
  says ``restart: true`` and a view drops what it had shown.
- Recordings keep the final text only (the model turn's envelope); ``answer.delta``
  events are the trace's, never a recording's.
"""

from __future__ import annotations

from shared.clock import Clock
from subagents.result import LEAD, ProgressEvent, ProgressObserver

COALESCE_CHARS = 32
"""An ``answer.delta`` goes out once this many characters have gathered..."""
COALESCE_S = 0.1
"""...or this long after the first of them (the job's clock), whichever comes first."""


class AnswerStream:
    """Turns a streamed synthesis into ``answer.delta`` events, and ends with ``answer``."""

    def __init__(self, observer: ProgressObserver, clock: Clock) -> None:
        self._observer = observer
        self._clock = clock
        self._buffer: list[str] = []
        self._size = 0
        self._since = 0.0
        self._sent = False
        self._restart = False
        self.text = ""
        """What has been written since the last restart (sent or still gathering)."""

    def delta(self, text: str) -> None:
        """The next piece of the answer."""
        if not text:
            return
        now = self._clock.now()
        if not self._buffer:
            self._since = now
        self._buffer.append(text)
        self._size += len(text)
        self.text += text
        if self._size >= COALESCE_CHARS or now - self._since >= COALESCE_S:
            self.flush()

    def restart(self) -> None:
        """The answer is written again from the start: what was written is void."""
        self._buffer.clear()
        self._size = 0
        self.text = ""
        if self._sent:
            self._restart = True

    def flush(self) -> None:
        """Send what has gathered, if anything."""
        if not self._buffer:
            return
        piece = "".join(self._buffer)
        self._buffer.clear()
        self._size = 0
        restart = True if self._restart else None
        self._restart = False
        self._sent = True
        self._observer(
            ProgressEvent(LEAD, "answer.delta", self._clock.now(), text=piece, restart=restart)
        )

    def final(self, text: str | None, kind: str | None, reason: str | None) -> None:
        """The checked answer (``kind`` model or extractive; ``reason`` why the model's
        was rejected, or why there is none), after the last piece."""
        self.flush()
        self._observer(
            ProgressEvent(
                LEAD, "answer", self._clock.now(), text=text, answer_kind=kind, reason=reason
            )
        )
