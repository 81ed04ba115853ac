"""One limiter per model endpoint: a fan-out waits its turn instead of meeting 429s
(docs/design.md §13).

Every model call (each attempt) of every subagent and of the lead asks the endpoint's
:class:`EndpointLimiter` for a :class:`Permit` before it is sent; waiting for one is not
an attempt (it happens before the attempt starts, outside its timeout) and callers show
it ("waiting for the rate limit").

How it decides, per dimension (requests, input tokens, output tokens, all tokens):

- **Pacing, not bursts.** A limit of R per minute spaces starts so that each costs
  ``cost × 60 / R`` seconds of that dimension's time: requests go out 60/rpm apart, a
  prompt of n tokens holds the input dimension for n × 60/itpm. A provider that allows
  "3 in any second" is never sent a fourth; the price is no burst at the start.
- **Input tokens are estimated** before the call (characters / 4, see
  :func:`estimate_tokens`) and corrected from the answer's ``usage``; **output tokens**
  are unknown until the answer, so they are charged when it arrives (from the call's
  start), and delay the calls after it.
- **What the provider reports tightens, never loosens**: a ``limit`` header lower than
  the configured rate replaces it; ``remaining: 0`` holds the dimension until its
  ``reset``; a 429 pauses the **whole endpoint** for its ``retry-after`` (1 s, or one
  request interval if longer, when it gives none), so one subagent's 429 slows them all.
- **Concurrency**: at most ``concurrency`` calls in flight, FIFO. A live endpoint with no
  configured limits sends one probe call first: until it has answered once (and told
  its limits in its headers), one call at a time, so the first burst is not a storm.

Order is FIFO by request: one line (:mod:`subagents.models.line`), whose head goes when
a slot is free and every dimension lets it start; callers that ask at the same instant of
virtual time join it in the order of their keys (the subtask's id), not in the order the
event loop happened to run them. Everything sleeps through the injected clock, so in
virtual time (the scripted model with ``limits``) every wait is exact and scenarios pin it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from shared.clock import AnyioClock, Clock
from subagents.models.base import ModelRequest, ToolResultMessage, Usage, UserMessage
from subagents.models.line import Caller, CallerLine
from subagents.models.ratelimit_headers import Dimension, RateReport
from subagents.models.spec import ModelLimits, ModelSpec

__all__ = [
    "EndpointLimiter",
    "LimiterStats",
    "Permit",
    "attach_limiter",
    "estimate_tokens",
    "forget_shared_limiters",
    "limiter_for",
    "limiter_of",
    "shared_limiter",
]

_CONFIGURED: Mapping[Dimension, str] = {
    "requests": "requests_per_minute",
    "input_tokens": "input_tokens_per_minute",
    "output_tokens": "output_tokens_per_minute",
}
_INPUT_DIMS: tuple[Dimension, ...] = ("input_tokens", "tokens")
_NO_RETRY_AFTER_PAUSE_S = 1.0


def estimate_tokens(request: ModelRequest) -> int:
    """A cheap upper-leaning guess of a request's input tokens: characters / 4.

    Counting with a tokenizer for every call of a large fan-out costs more than the
    guess is worth: the answer's ``usage`` corrects it anyway.
    """
    chars = len(request.system)
    for message in request.messages:
        if isinstance(message, UserMessage | ToolResultMessage):
            chars += len(message.text if isinstance(message, UserMessage) else message.content)
        else:
            turn = message.turn
            chars += len(turn.text) + sum(
                len(c.name) + len(str(c.arguments or c.raw_arguments or "")) for c in turn.calls
            )
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(str(tool.input_schema))
    return max(1, math.ceil(chars / 4))


@dataclass
class LimiterStats:
    """What the limiter did: for benchmarks, tests and the report's curious reader."""

    permits: int = 0
    waits: int = 0
    waited_s: float = 0.0
    refusals: int = 0


@dataclass
class _Dim:
    per_minute: float | None = None  # the tightest known rate
    free_at: float = -math.inf  # when the next call may start, for this dimension
    held_until: float = -math.inf  # remaining: 0 until its reset

    def interval(self, cost: float) -> float:
        return 0.0 if self.per_minute is None else cost * 60.0 / self.per_minute


@dataclass
class Permit:
    """One attempt's place: its start, its estimate; told how the attempt ended."""

    limiter: EndpointLimiter
    started: float
    input_estimate: int
    settled: bool = field(default=False)

    def answered(self, usage: Usage | None, report: RateReport | None) -> None:
        """The call answered: correct the estimate, charge the output, read the headers."""
        if self.settled:
            return
        self.settled = True
        self.limiter._answered(self, usage, report)

    def refused(self, *, status: int | None, report: RateReport | None) -> None:
        """The call failed; a 429 (``status``) pauses the endpoint."""
        if self.settled:
            return
        self.settled = True
        self.limiter._refused(status, report)


class EndpointLimiter:
    """The limits of one model endpoint, shared by every caller in the process."""

    def __init__(
        self,
        limits: ModelLimits | None,
        *,
        clock: Clock,
        probe: bool = False,
        margin: float = 0.0,
    ) -> None:
        """``probe``: one call at a time until the endpoint first answers (live endpoints
        with no configured limits). ``margin``: widen every interval by this share, so a
        live call that reaches the server a few milliseconds late still fits its window."""
        self.clock = clock
        self.margin = margin
        self.stats = LimiterStats()
        self._last_start = -math.inf  # when the last call was let through
        self.limits = limits or ModelLimits()
        self._dims: dict[Dimension, _Dim] = {
            "requests": _Dim(),
            "tokens": _Dim(),
            "input_tokens": _Dim(),
            "output_tokens": _Dim(),
        }
        self.tighten(self.limits)
        self._probing = probe and self.limits == ModelLimits()
        self._paused_until = -math.inf
        self._in_flight = 0
        self._line = CallerLine()  # callers waiting for their turn
        self._room: anyio.Event | None = None  # set when a call ends (the head waits on it)

    @property
    def active(self) -> bool:
        """Whether the limiter can ever make a call wait."""
        return (
            self._probing
            or self.limits.concurrency is not None
            or any(d.per_minute is not None for d in self._dims.values())
            or self._paused_until > -math.inf
            or any(d.held_until > -math.inf for d in self._dims.values())
        )

    def tighten(self, limits: ModelLimits) -> None:
        """Adopt ``limits`` where they are tighter than what is known (a second job file)."""
        for dim, name in _CONFIGURED.items():
            value = getattr(limits, name)
            if value is not None:
                self._tighten(dim, value)
        if limits.concurrency is not None and (
            self.limits.concurrency is None or limits.concurrency < self.limits.concurrency
        ):
            self.limits = self.limits.model_copy(update={"concurrency": limits.concurrency})

    def rate(self, dim: Dimension) -> float | None:
        """The per-minute rate the limiter paces ``dim`` at now (None: not limited)."""
        return self._dims[dim].per_minute

    @asynccontextmanager
    async def permit(
        self,
        estimate: Callable[[], int] | None = None,
        *,
        on_wait: Callable[[], None] | None = None,
        key: str = "",
    ) -> AsyncIterator[Permit]:
        """Wait for the endpoint's turn; hold a concurrency slot for the body.

        ``estimate`` gives the input tokens (called only when tokens are limited);
        ``on_wait`` is called once, before the first wait, if there is one. ``key`` (the
        caller's subtask id) orders callers that ask at the same instant of virtual time.
        """
        waited_at: float | None = None

        def waiting() -> None:
            nonlocal waited_at
            if waited_at is None:
                waited_at = self.clock.now()
                self.stats.waits += 1
                if on_wait is not None:
                    on_wait()

        cost_in = await self._turn(Caller(key, waiting), estimate)
        try:
            if waited_at is not None:
                self.stats.waited_s += self.clock.now() - waited_at
            self.stats.permits += 1
            permit = Permit(self, self.clock.now(), cost_in)
            try:
                yield permit
            finally:
                if not permit.settled:
                    # Cut (a timeout, a cancel) before any answer: nothing more was learned.
                    permit.settled = True
                    self._probing = False
        finally:
            self._release()

    # -- the line ----------------------------------------------------------------------

    def _capacity(self) -> int | None:
        if self._probing:
            return 1
        return self.limits.concurrency

    def _has_room(self) -> bool:
        capacity = self._capacity()
        return capacity is None or self._in_flight < capacity

    async def _turn(self, me: Caller, estimate: Callable[[], int] | None) -> int:
        """Wait, FIFO, until a slot is free and every dimension lets this call start now;
        then take the slot and book the call. Returns its input estimate.

        Only the head of the line waits for a slot or sleeps on the clock, and it looks
        again when it wakes: a 429 or a header that arrived meanwhile (a pause, a lower
        limit) holds it longer, and everyone behind it keeps their place.
        """
        try:
            await self._line.wait_turn(me)
            while True:
                if not self._has_room():
                    self._line.head_waits()
                    room = self._room = anyio.Event()
                    await room.wait()
                    continue
                now = self.clock.now()
                start = max(now, self._hold(), *(d.free_at for d in self._dims.values()))
                if start <= now:
                    break
                self._line.head_waits()
                await self.clock.sleep(start - now)
            cost_in = estimate() if estimate is not None and self._tokens_limited() else 0
            self._in_flight += 1
            self._book(cost_in)
            return cost_in
        finally:
            self._line.leave(me)

    def _release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        """A slot may be free: the head, if it waits for one, looks again."""
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    # -- pacing ------------------------------------------------------------------------

    def _tokens_limited(self) -> bool:
        return any(self._dims[d].per_minute is not None for d in _INPUT_DIMS)

    def _hold(self) -> float:
        return max(self._paused_until, *(d.held_until for d in self._dims.values()))

    def _book(self, cost_in: int) -> None:
        """Book a call starting now: each limited dimension is busy for its cost."""
        start = self._last_start = self.clock.now()
        stretch = 1.0 + self.margin
        costs: tuple[tuple[Dimension, int], ...] = (
            ("requests", 1),
            ("input_tokens", cost_in),
            ("tokens", cost_in),
        )
        for dim, cost in costs:
            d = self._dims[dim]
            if d.per_minute is not None:
                d.free_at = start + d.interval(cost) * stretch

    def _charge(self, dim: Dimension, since: float, cost: float) -> None:
        d = self._dims[dim]
        if d.per_minute is not None and cost:
            d.free_at = max(d.free_at, since) + d.interval(cost) * (1.0 + self.margin)

    def _answered(self, permit: Permit, usage: Usage | None, report: RateReport | None) -> None:
        if report is not None:
            self._read(report)
        if usage is not None:
            correction = usage.input_tokens - permit.input_estimate
            for dim in _INPUT_DIMS:
                d = self._dims[dim]
                if d.per_minute is not None:
                    if permit.input_estimate == 0:
                        self._charge(dim, permit.started, usage.input_tokens)
                    else:
                        d.free_at += d.interval(correction) * (1.0 + self.margin)
            self._charge("output_tokens", permit.started, usage.output_tokens)
            self._charge("tokens", permit.started, usage.output_tokens)
        if self._probing:
            self._probing = False
            self._wake()

    def _refused(self, status: int | None, report: RateReport | None) -> None:
        if report is not None:
            self._read(report)
        if status == 429:
            self.stats.refusals += 1
            now = self.clock.now()
            pause = report.retry_after_s if report is not None else None
            if pause is None:
                pause = max(_NO_RETRY_AFTER_PAUSE_S, self._dims["requests"].interval(1))
            # The whole endpoint waits: every caller's next call, not only this one's.
            self._paused_until = max(self._paused_until, now + pause)
        if self._probing and status is not None:
            self._probing = False
            self._wake()

    def _read(self, report: RateReport) -> None:
        now = self.clock.now()
        for dim, said in report.dimensions.items():
            if said.limit is not None and said.limit > 0:
                self._tighten(dim, said.limit)
            if said.remaining is not None and said.remaining <= 0 and said.reset_s is not None:
                # Both providers' reset is when the bucket is FULL again; one unit is back
                # after one interval of the limit. Waiting for the full reset would slow a
                # paced fan-out to a crawl, so with a known limit the hold is one interval.
                d = self._dims[dim]
                hold = said.reset_s
                if d.per_minute is not None:
                    hold = min(hold, d.interval(1))
                d.held_until = max(d.held_until, now + hold)

    def _tighten(self, dim: Dimension, per_minute: float) -> None:
        d = self._dims[dim]
        if d.per_minute is None or per_minute < d.per_minute:
            d.per_minute = per_minute
            if dim == "requests":
                # The last call was spaced by the old rate (or none): the next one keeps
                # the new rate's distance from it.
                d.free_at = max(d.free_at, self._last_start + d.interval(1) * (1 + self.margin))


# -- one per endpoint ------------------------------------------------------------------

_SHARED: dict[tuple[str, str, str], EndpointLimiter] = {}
_ATTACHED: weakref.WeakKeyDictionary[object, EndpointLimiter] = weakref.WeakKeyDictionary()
LIVE_MARGIN = 0.02
"""Live intervals are 2 % wider than the limit's: a call reaching the server a few
milliseconds late must still fit the provider's window."""


def shared_limiter(spec: ModelSpec, *, base_url: str) -> EndpointLimiter:
    """The process's limiter of a live endpoint: (provider, base URL, model) → one limiter.

    Every job of the process (``fanout serve`` runs many) shares it, and it runs on the
    real clock whatever ``--speed`` says (real calls keep real time). A second job file
    that states tighter limits tightens it; looser ones do not loosen it.
    """
    key = (spec.provider, base_url.rstrip("/"), spec.model_name)
    limiter = _SHARED.get(key)
    if limiter is None:
        limiter = _SHARED[key] = EndpointLimiter(
            spec.limits, clock=AnyioClock(), probe=True, margin=LIVE_MARGIN
        )
    elif spec.limits is not None:
        limiter.tighten(spec.limits)
    return limiter


def forget_shared_limiters() -> None:
    """Drop every endpoint's limiter: the next job starts from its file's limits alone.

    For tests and benchmarks that run several independent jobs against one endpoint in a
    process; a running job keeps the limiter it has.
    """
    _SHARED.clear()


def attach_limiter(client: object, limiter: EndpointLimiter) -> None:
    """Make ``limiter`` the one every call through ``client`` asks first."""
    _ATTACHED[client] = limiter


def limiter_of(client: object) -> EndpointLimiter | None:
    """The limiter attached to ``client``, if any."""
    try:
        return _ATTACHED.get(client)
    except TypeError:  # a client that cannot be weakly referenced has none
        return None


def limiter_for(spec: ModelSpec, *, clock: Clock | None) -> EndpointLimiter | None:
    """A scripted model's own limiter (on its virtual clock), when the block has limits."""
    if spec.limits is None:
        return None
    return EndpointLimiter(spec.limits, clock=clock or AnyioClock())
