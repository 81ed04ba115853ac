"""The endpoint limiter in virtual time: pacing, concurrency, 429 pauses, headers, tokens."""

from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import pytest

from shared.clock import AnyioClock
from subagents.models.base import (
    ModelCallFailed,
    ModelRequest,
    ModelTurn,
    Usage,
    UserMessage,
)
from subagents.models.call import call_model
from subagents.models.limiter import EndpointLimiter, attach_limiter, estimate_tokens
from subagents.models.ratelimit_headers import DimensionReport, RateReport
from subagents.models.spec import ModelLimits, ModelSpec
from subagents.retry import RetryPolicy

pytestmark = pytest.mark.anyio


async def _starts(limiter: EndpointLimiter, n: int, *, hold_s: float = 0.0) -> list[float]:
    """When each of ``n`` callers (asking in order) was let through."""
    clock = limiter.clock
    starts: list[float | None] = [None] * n

    async def one(i: int) -> None:
        async with limiter.permit() as permit:
            starts[i] = clock.now()
            await clock.sleep(hold_s)
            permit.answered(None, None)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
            await anyio.lowlevel.checkpoint()  # callers arrive in order
    return [s for s in starts if s is not None]


async def test_requests_are_spaced_evenly_at_the_rate() -> None:
    """At 120 requests a minute, five callers start 0.5 s apart: never a burst."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(requests_per_minute=120), clock=clock)
    t0 = clock.now()
    starts = await _starts(limiter, 5)
    assert [round(s - t0, 6) for s in starts] == [0.0, 0.5, 1.0, 1.5, 2.0]


async def test_concurrency_holds_callers_until_a_slot_frees() -> None:
    """With two slots and 3 s calls, the third and fourth callers start when one ends."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(concurrency=2), clock=clock)
    t0 = clock.now()
    starts = await _starts(limiter, 4, hold_s=3)
    assert [round(s - t0, 6) for s in starts] == [0.0, 0.0, 3.0, 3.0]
    assert limiter.stats.waits == 2


async def test_a_429_pauses_the_whole_endpoint_for_its_retry_after() -> None:
    """One caller's 429 with retry-after 4 s holds every other caller's next call."""
    clock = AnyioClock()
    limiter = EndpointLimiter(None, clock=clock)
    t0 = clock.now()
    async with limiter.permit() as permit:
        permit.refused(status=429, report=RateReport({}, retry_after_s=4))
    started: list[float] = []
    async with limiter.permit() as other:
        started.append(clock.now() - t0)
        other.answered(None, None)
    assert started == [pytest.approx(4.0)]
    assert limiter.stats.refusals == 1


async def test_headers_tighten_but_never_loosen_the_limits() -> None:
    """A stated limit below the configured one is adopted; a higher one is ignored."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(requests_per_minute=100), clock=clock)
    async with limiter.permit() as permit:
        permit.answered(None, RateReport({"requests": DimensionReport(limit=60)}))
    assert limiter.rate("requests") == 60
    async with limiter.permit() as permit:
        permit.answered(None, RateReport({"requests": DimensionReport(limit=1000)}))
    assert limiter.rate("requests") == 60


async def test_nothing_remaining_holds_the_dimension_until_its_reset() -> None:
    """``remaining: 0`` with a 7 s reset and no stated limit: the next call goes 7 s later."""
    clock = AnyioClock()
    limiter = EndpointLimiter(None, clock=clock)
    t0 = clock.now()
    said = RateReport({"tokens": DimensionReport(remaining=0, reset_s=7)})
    async with limiter.permit() as permit:
        permit.answered(None, said)
    async with limiter.permit() as permit:
        assert clock.now() - t0 == pytest.approx(7.0)
        permit.answered(None, None)


async def test_nothing_remaining_of_a_known_limit_holds_one_interval() -> None:
    """The reset is when the bucket is full again; at 60 a minute one request is back in 1 s."""
    clock = AnyioClock()
    limiter = EndpointLimiter(None, clock=clock)
    t0 = clock.now()
    said = RateReport({"requests": DimensionReport(limit=60, remaining=0, reset_s=30)})
    async with limiter.permit() as permit:
        permit.answered(None, said)
    async with limiter.permit() as permit:
        assert clock.now() - t0 == pytest.approx(1.0)
        permit.answered(None, None)


async def test_a_live_endpoint_is_probed_with_one_call_before_a_fan_out() -> None:
    """Until it first answers, a probing limiter lets one call through at a time."""
    clock = AnyioClock()
    limiter = EndpointLimiter(None, clock=clock, probe=True)
    t0 = clock.now()
    starts = await _starts(limiter, 3, hold_s=2)
    assert [round(s - t0, 6) for s in starts] == [0.0, 2.0, 2.0]


async def test_output_tokens_are_charged_when_the_answer_arrives() -> None:
    """600 output tokens at 6,000 a minute hold the next call 6 s from the first's start."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(output_tokens_per_minute=6000), clock=clock)
    t0 = clock.now()
    async with limiter.permit() as permit:
        await clock.sleep(1)
        permit.answered(Usage(input_tokens=10, output_tokens=600), None)
    async with limiter.permit() as permit:
        assert clock.now() - t0 == pytest.approx(6.0)
        permit.answered(None, None)


async def test_callers_asking_at_one_instant_go_in_key_order() -> None:
    """Callers that ask at the same virtual instant are lined up by key, whatever order
    the event loop ran them in."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(requests_per_minute=60), clock=clock)
    t0 = clock.now()
    starts: dict[str, float] = {}

    async def one(key: str) -> None:
        async with limiter.permit(key=key) as permit:
            starts[key] = round(clock.now() - t0, 6)
            permit.answered(None, None)

    async with anyio.create_task_group() as tg:
        for key in ("c", "a", "b"):
            tg.start_soon(one, key)
            await anyio.lowlevel.checkpoint()  # they ask in the order c, a, b
    assert starts == {"a": 0.0, "b": 1.0, "c": 2.0}
    assert limiter.stats.waits == 2


async def test_a_caller_behind_a_head_that_goes_at_once_has_not_waited() -> None:
    """Lined up behind callers that all go at once, nobody is told of a wait."""
    clock = AnyioClock()
    limiter = EndpointLimiter(ModelLimits(concurrency=3), clock=clock)
    told: list[str] = []

    async def one(key: str) -> None:
        async with limiter.permit(key=key, on_wait=lambda: told.append(key)) as permit:
            permit.answered(None, None)

    async with anyio.create_task_group() as tg:
        for key in ("a", "b", "c"):
            tg.start_soon(one, key)
    assert told == []
    assert limiter.stats.permits == 3


def test_the_input_estimate_grows_with_the_request() -> None:
    """The estimate is about a token per four characters of everything sent."""
    small = ModelRequest(system="s", messages=[UserMessage("x" * 40)])
    large = ModelRequest(system="s", messages=[UserMessage("x" * 4000)])
    assert estimate_tokens(small) < estimate_tokens(large) == 1001


class _Endpoint:
    """A model that answers 429 (retry-after 3 s) once, then answers; it logs start times."""

    provider = "scripted"
    name = "endpoint"

    def __init__(self, clock: AnyioClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, float]] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.calls.append((request.subtask_id, self.clock.now()))
        if len(self.calls) == 1:
            raise ModelCallFailed(
                "rate limited",
                kind="rate_limited",
                category="transient",
                status=429,
                retry_after_s=3,
                rate=RateReport({}, retry_after_s=3),
            )
        await self.clock.sleep(1)
        return ModelTurn(text="ok")

    async def aclose(self) -> None:
        """Nothing to close."""


async def test_one_subagents_429_slows_its_siblings_and_waiting_is_not_an_attempt() -> None:
    """A 429 for one caller holds the others too; the waits show, the attempts do not grow."""
    clock = AnyioClock()
    endpoint = _Endpoint(clock)
    attach_limiter(endpoint, EndpointLimiter(ModelLimits(concurrency=4), clock=clock))
    spec = ModelSpec(
        provider="scripted",
        retry=RetryPolicy(max_attempts=3, initial_backoff_s=0, jitter="none"),
    )
    waits: dict[str, list[bool]] = {}
    attempts: dict[str, int] = {}
    t0 = clock.now()

    async def caller(sid: str) -> None:
        request = ModelRequest(system="", messages=[UserMessage("q")], subtask_id=sid)
        result, _ = await call_model(
            endpoint,
            request,
            spec=spec,
            clock=clock,
            rng=random.Random(0),
            trace_id=f"tr_{sid}",
            on_limit_wait=waits.setdefault(sid, []).append,
        )
        attempts[sid] = result.attempts

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller, "a")
        await anyio.sleep(0.5)  # a has met the 429 by now
        tg.start_soon(caller, "b")
    starts = {sid: round(at - t0, 6) for sid, at in endpoint.calls}
    assert starts["b"] == 3.0  # held until a's retry-after was over
    assert waits["b"] == [True, False]
    assert attempts == {"a": 2, "b": 1}


TIE = """\
scenario: tie-at-the-limiter
description: three subagents search for 0.5 s, then ask one paced endpoint at once
seed: 1
model:
  provider: scripted
  latency_s: 1
  limits: {requests_per_minute: 30}
  turns:
    c: [{text: "c (kb_search)."}]
    a: [{text: "a (kb_search)."}]
    b: [{text: "b (kb_search)."}]
job:
  query: "ties"
  concurrency: 3
  subtasks:
    - {id: c, query: "qc", tools: [kb_search]}
    - {id: a, query: "qa", tools: [kb_search]}
    - {id: b, query: "qb", tools: [kb_search]}
tools:
  kb_search:
    search: true
    params:
      query: {type: string}
    latency_s: 0.5
    responses:
      - ok: {results: [{path: x.md, title: "x", snippet: "x"}]}
"""


def test_a_replay_hands_out_the_turns_of_one_instant_by_subtask_id() -> None:
    """Subagents whose searches end together reach the limiter at one virtual instant:
    their model calls go 2 s apart in subtask-id order, the same on every replay."""
    from coordinator.jobfile.loader import load_scenario_text
    from coordinator.replay import replay

    ended = [
        {row["id"]: row["ended_s"] for row in replay(load_scenario_text(TIE, "tie.yaml"))
         .report["subtasks"]}
        for _ in range(3)
    ]
    assert ended == [{"a": 1.5, "b": 3.5, "c": 5.5}] * 3
