"""The desk: what waits for a person in one run, and the scripted person of a scenario
(docs/design.md §17).

A :class:`Desk` is the run's registry of escalations that wait for a decision, a plan
that waits for review, and a person's requests to running subtasks. It knows no engine
and no door: it takes the run's :class:`~shared.clock.Clock` (so a wait times out in
virtual time under trio as in real time under asyncio) and anyio events; the flow calls
:meth:`Desk.wait` and :meth:`Desk.review_plan`, the doors call :meth:`Desk.pending`,
:meth:`Desk.decide`, :meth:`Desk.review` and :meth:`Desk.request`, and listeners hear
``decision.needed``, ``decision.made`` and ``request.made``. Every method runs in the
run's event loop (a door on another thread hands its call over to that loop first).

:class:`coordinator.scripted_person.ScriptedPerson` plays a scenario's ``people:`` block
against a desk at its virtual times.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from coordinator.decision import (
    TIMEOUT,
    DecisionError,
    DecisionRequest,
    decide,
    parse_request,
    pending_item,
)
from coordinator.plan_review import PlanReview, apply_plan_edit, parse_review
from coordinator.report import Decision
from shared.clock import Clock
from shared.escalation import Escalation
from shared.options import offer
from subagents.spec import SubtaskSettings, SubtaskSpec

__all__ = [
    "DECISION_CHANGED",
    "DECISION_MADE",
    "DECISION_NEEDED",
    "REQUEST_MADE",
    "Desk",
    "DeskError",
    "Listener",
    "NotWaiting",
    "PersonRequest",
    "Refused",
]

DECISION_NEEDED = "decision.needed"
DECISION_MADE = "decision.made"
REQUEST_MADE = "request.made"
DECISION_CHANGED = "decision.changed"
"""Not the desk's: the run store's record of a decision once the flow has measured what it
changed (its ``change``), so a resumed run lists it as it was (docs/design.md §17)."""

Listener = Callable[[str, dict[str, Any]], None]
"""Hears ``(event, data)``: what waits (``escalation`` or ``plan``), what was decided
(``decision`` or ``plan_review``), a request (``request``); data is JSON-ready."""


class DeskError(Exception):
    """A door's call the desk cannot carry out."""


class NotWaiting(DeskError):
    """A decision for an escalation (or a plan) that no longer waits, or a request to a
    subtask that is not running: the service answers 409, MCP a tool error."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        super().__init__(f"{what} {reason}")


class Refused(NotWaiting):
    """A request a running subtask cannot take: a hint to one that asks no model (a
    scripted plan has no turn to read it at). 409 on the service, as ``NotWaiting``."""


@dataclass(frozen=True, slots=True)
class PersonRequest:
    """A person's request to a running subtask: stop and hand up, or a hint."""

    subtask_id: str
    stop: bool
    hint: str | None
    by: str
    at: str | None
    at_s: float

    def to_wire(self) -> dict[str, Any]:
        """The request as JSON-ready data."""
        out: dict[str, Any] = {"subtask_id": self.subtask_id, "by": self.by, "at_s": self.at_s}
        out.update({"stop": True} if self.stop else {"hint": self.hint})
        if self.at is not None:
            out["at"] = self.at
        return out


@dataclass(slots=True)
class _Waiting:
    escalation: Escalation
    since_s: float
    done: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision | None = None


@dataclass(slots=True)
class _PlanWait:
    subtasks: list[SubtaskSpec]
    defaults: SubtaskSettings | None
    tools: frozenset[str] | None
    planner: Literal["scripted", "model"]
    since_s: float
    done: anyio.Event = field(default_factory=anyio.Event)
    review: PlanReview | None = None


def _plan_wire(subtasks: Sequence[SubtaskSpec]) -> dict[str, Any]:
    return {"subtasks": [s.model_dump(mode="json") for s in subtasks]}


class Desk:
    """What waits for a person in one run: escalations, the plan, requests.

    Args:
        clock: the run's clock; ``at_s`` counts from ``start`` on it (default: now).
        wall: the wall time, for a decision's ``at`` (ISO 8601, UTC) where the door
            knows it; None in a replay, so a replay's decisions carry only ``at_s``.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        wall: Callable[[], datetime] | None = None,
        start: float | None = None,
    ) -> None:
        self.clock = clock
        self._wall = wall
        self._start = clock.now() if start is None else start
        self._waiting: dict[str, _Waiting] = {}
        # Escalations opened (waiting, heard) whose wait has not begun yet, by id.
        self._opened: dict[str, _Waiting] = {}
        self._numbers: dict[str, int] = {}
        self._plan: _PlanWait | None = None
        self._running: set[str] = set()
        self._deaf: set[str] = set()  # running subtasks that ask no model: no hint reaches one
        self._stops: dict[str, PersonRequest] = {}
        self._stop_events: dict[str, anyio.Event] = {}
        self._hints: dict[str, list[PersonRequest]] = {}
        self._listeners: list[Listener] = []
        self._changed = anyio.Event()
        self.decisions: list[Decision] = []
        """Every decision made, in the order made (the report lists them)."""
        self.requests: list[PersonRequest] = []
        """Every request made, in order."""

    # --- time and events ---------------------------------------------------------------

    def now_s(self) -> float:
        """Seconds since the run's start on its clock."""
        return round(self.clock.now() - self._start, 9)

    def align(self, elapsed_s: float) -> None:
        """Make ``now_s`` the run's job time, ``elapsed_s`` now: the engine says where its
        job clock stands as the run starts (a resumed run goes on from where it stopped),
        so ``since_s`` and ``at_s`` are job time, as the store's events are."""
        self._start = self.clock.now() - elapsed_s

    def _at(self) -> str | None:
        if self._wall is None:
            return None
        return self._wall().astimezone(UTC).isoformat(timespec="seconds")

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every event from now on; returns what stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            listener(event, data)
        self._changed.set()
        self._changed = anyio.Event()

    @contextmanager
    def needs(self) -> Iterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        """What waits now, then everything that comes to wait (``decision.needed`` data:
        ``{"escalation": ...}`` or ``{"plan": ...}``), as one stream, for a person who
        attends the desk."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)

        def hear(event: str, data: dict[str, Any]) -> None:
            if event == DECISION_NEEDED:
                send.send_nowait(data)

        stop = self.listen(hear)
        try:
            pending = self.pending()
            for item in pending["escalations"]:
                send.send_nowait({"escalation": item})
            if pending["plan"] is not None:
                send.send_nowait({"plan": pending["plan"]})
            with receive:
                yield receive
        finally:
            stop()
            send.close()

    def change(self) -> anyio.Event:
        """An event set at the desk's next change (something waits, is decided, asked)."""
        return self._changed

    # --- escalations -------------------------------------------------------------------

    def offer(self, escalation: Escalation, allowlist: Sequence[str]) -> Escalation:
        """``escalation`` with its run-unique id (``SUBTASK_ID:N``) and its options."""
        n = self._numbers.get(escalation.subtask_id, 0) + 1
        self._numbers[escalation.subtask_id] = n
        return offer(escalation, allowlist, n)

    def restore_numbers(self, numbers: Mapping[str, int]) -> None:
        """Count each subtask's escalations on from ``numbers`` (a resumed run)."""
        for sid, n in numbers.items():
            self._numbers[sid] = max(self._numbers.get(sid, 0), n)

    def open(self, escalation: Escalation, *, since_s: float | None = None) -> None:
        """Make ``escalation`` (offered: with id and options) wait from now, before its
        :meth:`wait` begins: it is listed in :meth:`pending`, listeners hear its
        ``decision.needed``, and a person may decide it already. The local engine opens
        an escalation before its subtask's result is committed, so the run store holds
        the ``decision.needed`` no later than the escalated result (docs/design.md §17).

        Raises:
            ValueError: the escalation was not offered, or already waits.
        """
        if escalation.id is None or not escalation.options:
            raise ValueError(f"escalation of {escalation.subtask_id} has no id and options "
                             "(Desk.offer makes them)")
        if escalation.id in self._waiting or escalation.id in self._opened:
            raise ValueError(f"escalation {escalation.id} already waits")
        entry = _Waiting(escalation=escalation,
                         since_s=self.now_s() if since_s is None else since_s)
        self._waiting[escalation.id] = self._opened[escalation.id] = entry
        self._emit(DECISION_NEEDED, {"escalation": pending_item(entry.escalation, entry.since_s)})

    def withdraw(self, escalation_id: str) -> None:
        """Forget an opened escalation whose wait will not begin (the run stopped first):
        nothing is decided, a resumed run waits for it again."""
        self._opened.pop(escalation_id, None)
        self._waiting.pop(escalation_id, None)

    async def wait(
        self,
        escalation: Escalation,
        *,
        timeout_s: float | None,
        on_timeout: Literal["accept", "stop"] = "accept",
        since_s: float | None = None,
        cut_by: Callable[[], str | None] | None = None,
    ) -> Decision:
        """Wait for a person to decide ``escalation`` (offered: with id and options; or
        :meth:`open` ed, when its wait began then).

        After ``timeout_s`` on the run's clock, the first option of kind ``on_timeout``
        is chosen ``by: timeout``. A cancelled wait stops waiting and the cancellation
        goes on; ``cut_by`` says who decides it then: ``deadline`` (the job's deadline
        cut it: ``accept`` is chosen ``by: deadline``, so it no longer counts as waiting),
        or None (a process stopped where it stands: nothing is decided, a resumed run
        waits for it again). ``since_s``: when the wait began, for a resumed run's
        escalation that waited when the run stopped (default: now); ``timeout_s``
        counts from it.

        Raises:
            ValueError: the escalation was not offered, or already waits.
        """
        if escalation.id is None or not escalation.options:
            raise ValueError(f"escalation of {escalation.subtask_id} has no id and options "
                             "(Desk.offer makes them)")
        now = self.now_s()
        entry = self._opened.pop(escalation.id, None)
        if entry is None:
            if escalation.id in self._waiting:
                raise ValueError(f"escalation {escalation.id} already waits")
            entry = _Waiting(escalation=escalation, since_s=now if since_s is None else since_s)
            self._waiting[escalation.id] = entry
            self._emit(DECISION_NEEDED,
                       {"escalation": pending_item(entry.escalation, entry.since_s)})
        if timeout_s is not None:
            timeout_s = max(0.0, timeout_s - max(0.0, now - entry.since_s))
        try:
            with self.clock.move_on_after(timeout_s):
                await entry.done.wait()
            if entry.decision is None:
                request = DecisionRequest(escalation=escalation.id, do=on_timeout)
                self._record(entry, decide(escalation, request, by=TIMEOUT, at=self._at(),
                                           at_s=self.now_s()))
        except anyio.get_cancelled_exc_class():
            by = cut_by() if cut_by is not None else None
            if by is not None and entry.decision is None:
                # The deadline ended the wait: the gap is kept, and said to be so.
                request = DecisionRequest(escalation=escalation.id, do="accept")
                self._record(entry, decide(escalation, request, by=by, at=self._at(),
                                           at_s=self.now_s()))
            raise
        finally:
            self._waiting.pop(escalation.id, None)
        assert entry.decision is not None
        return entry.decision

    def _record(self, entry: _Waiting, decision: Decision) -> None:
        entry.decision = decision
        self._waiting.pop(decision.escalation or "", None)
        self.decisions.append(decision)
        entry.done.set()
        self._emit(DECISION_MADE, {"decision": decision.model_dump(mode="json")})

    def waiting(self, subtask_id: str | None = None) -> list[Escalation]:
        """The escalations waiting now (of ``subtask_id`` only, when given), oldest first."""
        return [w.escalation for w in self._waiting.values()
                if subtask_id is None or w.escalation.subtask_id == subtask_id]

    def pending(self) -> dict[str, Any]:
        """What waits now, as ``GET /runs/{id}/pending`` answers it: ``escalations`` (id,
        subtask_id, errorCategory, trigger, message, attempted_query, options, since_s:
        the run's seconds when it began to wait) and ``plan`` (null, or its subtasks)."""
        plan = self._plan
        return {
            "escalations": [pending_item(w.escalation, w.since_s)
                            for w in self._waiting.values()],
            "plan": None if plan is None or plan.review is not None else _plan_wire(plan.subtasks),
        }

    def decide(self, request: Mapping[str, Any] | DecisionRequest, by: str) -> Decision:
        """Decide a waiting escalation; the waiting subtask goes on with the decision.

        Raises:
            DecisionError: the request is malformed or chooses no option (names the field).
            NotWaiting: its escalation does not wait (decided, timed out, never was).
        """
        parsed = parse_request(request)
        entry = self._waiting.get(parsed.escalation)
        if entry is None or entry.decision is not None:
            raise NotWaiting(f"escalation {parsed.escalation!r}", "does not wait for a decision")
        decision = decide(entry.escalation, parsed, by=by, at=self._at(), at_s=self.now_s())
        self._record(entry, decision)
        return decision

    # --- the plan ----------------------------------------------------------------------

    async def review_plan(
        self,
        subtasks: Sequence[SubtaskSpec],
        *,
        defaults: SubtaskSettings | None = None,
        tools: Sequence[str] | None = None,
        planner: Literal["scripted", "model"] = "model",
        timeout_s: float | None = None,
    ) -> PlanReview:
        """Wait for a person to approve, edit or reject the lead's plan ``subtasks``.

        An edit is checked with ``defaults`` (a new subtask's settings), ``tools`` (the
        names a subtask may allow) and ``planner`` (who plans a new subtask). After
        ``timeout_s`` the plan is approved ``by: timeout``.
        """
        if self._plan is not None and self._plan.review is None:
            raise ValueError("a plan already waits for review")
        entry = _PlanWait(subtasks=list(subtasks), defaults=defaults,
                          tools=None if tools is None else frozenset(tools), planner=planner,
                          since_s=self.now_s())
        self._plan = entry
        try:
            self._emit(DECISION_NEEDED, {"plan": _plan_wire(entry.subtasks)})
            with self.clock.move_on_after(timeout_s):
                await entry.done.wait()
            if entry.review is None:
                self._reviewed(entry, PlanReview(verdict="approve", by=TIMEOUT, at=self._at(),
                                                 at_s=self.now_s()))
        finally:
            if entry.review is None:
                self._plan = None
        assert entry.review is not None
        return entry.review

    def review(self, verdict: Any, by: str) -> PlanReview:
        """Review the waiting plan: ``"approve"``, ``"reject"`` or ``{"edit": {...}}``.

        Raises:
            PlanEditError: the review is malformed, or the edit is no valid plan
                (``field`` names where: ``edit.add[0].query``).
            NotWaiting: no plan waits.
        """
        kind, edit = parse_review(verdict)
        entry = self._plan
        if entry is None or entry.review is not None:
            raise NotWaiting("the plan", "does not wait for review")
        subtasks = None
        if edit is not None:
            subtasks = apply_plan_edit(entry.subtasks, edit, defaults=entry.defaults,
                                       tools=entry.tools, planner=entry.planner)
        review = PlanReview(verdict=kind, subtasks=subtasks, by=by, at=self._at(),
                            at_s=self.now_s()).with_edit(edit)
        self._reviewed(entry, review)
        return review

    def plan_waits(self) -> bool:
        """Whether a plan waits for review now."""
        return self._plan is not None and self._plan.review is None

    def _reviewed(self, entry: _PlanWait, review: PlanReview) -> None:
        entry.review = review
        entry.done.set()
        self._emit(DECISION_MADE, {"plan_review": review.model_dump(mode="json")})

    # --- requests to running subtasks --------------------------------------------------

    def started(self, subtask_id: str, *, hints: bool = True) -> None:
        """The flow says ``subtask_id`` runs: a person may ask it to stop, or hint
        (``hints``: whether a model reads them; else a hint is refused)."""
        self._running.add(subtask_id)
        if hints:
            self._deaf.discard(subtask_id)
        else:
            self._deaf.add(subtask_id)
        self._emit_quietly()

    def finished(self, subtask_id: str) -> list[PersonRequest]:
        """The flow says ``subtask_id``'s round ended: requests to it are refused from now
        on. Returns the hints its model never read (the round ended before its next turn):
        they are dropped, not kept for a later round, so a person's words are never read
        out of the moment they were said in; the flow records them as unread."""
        self._running.discard(subtask_id)
        self._deaf.discard(subtask_id)
        return self._hints.pop(subtask_id, [])

    def running(self, subtask_id: str) -> bool:
        """Whether ``subtask_id`` runs now (as the flow said)."""
        return subtask_id in self._running

    def _emit_quietly(self) -> None:
        # A subtask starting is no event for listeners, but a scripted request may wait on it.
        self._changed.set()
        self._changed = anyio.Event()

    def request(
        self, subtask_id: str, *, by: str, stop: bool = False, hint: str | None = None
    ) -> PersonRequest:
        """Ask running ``subtask_id`` to stop and hand up what it has, or give it a hint.

        Raises:
            DecisionError: neither or both of stop and hint, or an empty hint.
            Refused: a hint to a subtask that asks no model: nothing would ever read it.
            NotWaiting: the subtask is not running.
        """
        if stop == (hint is not None):
            raise DecisionError("stop", "exactly one of stop: true, hint")
        if hint is not None and not hint.strip():
            raise DecisionError("hint", "a non-empty string", repr(hint))
        if subtask_id not in self._running:
            raise NotWaiting(f"subtask {subtask_id!r}", "is not running")
        if hint is not None and subtask_id in self._deaf:
            raise Refused(f"subtask {subtask_id!r}", "follows a scripted plan: it has no model "
                          "to read a hint (ask it to stop instead)")
        req = PersonRequest(subtask_id=subtask_id, stop=stop, hint=hint, by=by, at=self._at(),
                            at_s=self.now_s())
        self.requests.append(req)
        if stop:
            self._stops.setdefault(subtask_id, req)
            self.stopping(subtask_id).set()
        else:
            self._hints.setdefault(subtask_id, []).append(req)
        self._emit(REQUEST_MADE, {"request": req.to_wire()})
        return req

    def stopping(self, subtask_id: str) -> anyio.Event:
        """An event set when a person asks ``subtask_id`` to stop (the flow may wait on it
        beside the subagent, and cancel it to hand up with trigger ``human_request``)."""
        event = self._stop_events.get(subtask_id)
        if event is None:
            event = self._stop_events[subtask_id] = anyio.Event()
        return event

    def stop_requested(self, subtask_id: str) -> PersonRequest | None:
        """The first stop asked of ``subtask_id``, if any (not consumed)."""
        return self._stops.get(subtask_id)

    def take_hints(self, subtask_id: str) -> list[str]:
        """The hints given to ``subtask_id`` since the last call, oldest first (consumed:
        the model reads each once, at its next turn)."""
        return [req.hint or "" for req in self.take_hint_requests(subtask_id)]

    def take_hint_requests(self, subtask_id: str) -> list[PersonRequest]:
        """:meth:`take_hints` as the requests that gave them (who, when)."""
        return self._hints.pop(subtask_id, [])
