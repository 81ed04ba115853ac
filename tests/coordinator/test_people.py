"""The desk (coordinator.people): what waits for a person, in virtual time and on asyncio."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from coordinator.decision import DecisionError
from coordinator.people import (
    DECISION_MADE,
    DECISION_NEEDED,
    REQUEST_MADE,
    Desk,
    NotWaiting,
    Refused,
)
from coordinator.plan_review import PlanEditError
from coordinator.report import Decision
from shared.clock import AnyioClock
from shared.escalation import Escalation
from subagents.spec import SubtaskSpec

pytestmark = pytest.mark.anyio


def _escalation(subtask: str = "patents") -> Escalation:
    return Escalation(
        subtask_id=subtask, category="permission", trigger="permission_denied",
        message="role analyst lacks patents:read", attempted_query="battery patents",
        tool="patent_db",
        alternatives=["request patents:read for role analyst (needed by patent_db)",
                      "try web_search, also on this subtask's allowlist"],
    )


async def _waits_then(desk: Desk, esc: Escalation, act: Any, **wait: Any) -> Decision:
    """Wait on ``esc`` in a task and run ``act`` once it waits; the wait's decision."""
    out: list[Decision] = []

    async def waiter() -> None:
        out.append(await desk.wait(esc, **wait))

    async with anyio.create_task_group() as tg:
        change = desk.change()
        tg.start_soon(waiter)
        await change.wait()
        act()
    return out[0]


async def test_a_decision_reaches_the_waiting_subtask() -> None:
    """wait returns what decide chose; pending lists the escalation while it waits."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), ["patent_db", "web_search"])
    seen: list[dict[str, Any]] = []

    def act() -> None:
        seen.append(desk.pending())
        desk.decide({"escalation": esc.id, "do": "use_tool"}, by="ana")

    decision = await _waits_then(desk, esc, act, timeout_s=900)
    assert (decision.do, decision.tool, decision.by) == ("use_tool", "web_search", "ana")
    [item] = seen[0]["escalations"]
    assert set(item) == {"id", "subtask_id", "errorCategory", "trigger", "message",
                         "attempted_query", "options", "since_s"}
    assert (item["id"], item["errorCategory"], item["since_s"]) == ("patents:1", "permission", 0)
    assert seen[0]["plan"] is None
    assert desk.pending() == {"escalations": [], "plan": None}
    assert desk.decisions == [decision]


async def test_a_wait_times_out_in_virtual_time_decided_by_timeout() -> None:
    """Nobody decides: after wait_s of virtual time the on_timeout kind is chosen."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), [])
    decision = await desk.wait(esc, timeout_s=900, on_timeout="stop")
    assert (decision.do, decision.by, decision.at_s, decision.at) == ("stop", "timeout", 900,
                                                                     None)


async def test_a_decision_for_what_no_longer_waits_is_refused() -> None:
    """Deciding an escalation twice, or one that never waited, raises NotWaiting."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), [])
    await _waits_then(desk, esc, lambda: desk.decide({"escalation": esc.id, "do": "accept"},
                                                     by="ana"), timeout_s=None)
    with pytest.raises(NotWaiting, match="patents:1"):
        desk.decide({"escalation": esc.id, "do": "accept"}, by="bo")
    with pytest.raises(NotWaiting):
        desk.decide({"escalation": "news:1", "do": "accept"}, by="bo")


async def test_a_malformed_decision_leaves_the_escalation_waiting() -> None:
    """A request naming no offered option is refused with its field; the wait goes on."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), [])
    errors: list[str] = []

    def act() -> None:
        with pytest.raises(DecisionError) as info:
            desk.decide({"escalation": esc.id, "do": "requery"}, by="ana")
        errors.append(info.value.field)
        assert [e.id for e in desk.waiting()] == ["patents:1"]
        desk.decide({"escalation": esc.id, "option": "o1"}, by="ana")

    decision = await _waits_then(desk, esc, act, timeout_s=None)
    assert errors == ["do"] and decision.do == "retry"


async def test_listeners_hear_what_is_needed_and_what_was_made() -> None:
    """decision.needed carries the pending escalation, decision.made the decision."""
    desk = Desk(AnyioClock(), wall=lambda: datetime(2026, 12, 4, 10, tzinfo=UTC))
    heard: list[tuple[str, dict[str, Any]]] = []
    stop = desk.listen(lambda event, data: heard.append((event, data)))
    esc = desk.offer(_escalation(), [])
    await _waits_then(desk, esc, lambda: desk.decide(
        {"escalation": esc.id, "do": "answer", "text": "412"}, by="ana"), timeout_s=None)
    assert [e for e, _ in heard] == [DECISION_NEEDED, DECISION_MADE]
    assert heard[0][1]["escalation"]["id"] == "patents:1"
    assert heard[1][1]["decision"]["at"] == "2026-12-04T10:00:00+00:00"
    stop()
    desk.started("news")
    desk.request("news", by="ana", hint="look at 2025")
    assert len(heard) == 2


async def test_ids_count_per_subtask() -> None:
    """Each subtask's escalations are numbered from 1; a resumed run counts on."""
    desk = Desk(AnyioClock())
    ids = [desk.offer(_escalation(s), []).id for s in ("a", "b", "a")]
    assert ids == ["a:1", "b:1", "a:2"]
    desk.restore_numbers({"c": 4})
    assert desk.offer(_escalation("c"), []).id == "c:5"


async def test_a_cancelled_wait_no_longer_waits() -> None:
    """A wait cancelled with nobody to decide it (a process stopping where it stands)
    leaves nothing pending and decides nothing."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), [])
    with anyio.move_on_after(5):
        await desk.wait(esc, timeout_s=900)
    assert desk.pending()["escalations"] == [] and desk.decisions == []


async def test_a_wait_the_deadline_cuts_is_accepted_by_the_deadline() -> None:
    """A wait cancelled when ``cut_by`` names the deadline is decided accept, by:
    deadline, and heard as decision.made; the cancellation still goes on."""
    desk = Desk(AnyioClock())
    heard: list[str] = []
    desk.listen(lambda event, data: heard.append(event))
    esc = desk.offer(_escalation(), [])
    with anyio.move_on_after(5) as scope:
        await desk.wait(esc, timeout_s=900, on_timeout="stop", cut_by=lambda: "deadline")
    assert scope.cancelled_caught
    [decision] = desk.decisions
    assert (decision.escalation, decision.do, decision.by) == (esc.id, "accept", "deadline")
    assert heard == [DECISION_NEEDED, DECISION_MADE]
    assert desk.pending()["escalations"] == []


async def test_an_opened_escalation_waits_before_its_wait_begins() -> None:
    """An escalation opened is pending and heard at once; a decision made before its
    wait begins is what the wait returns, and the wait's timeout counts from the open."""
    desk = Desk(AnyioClock())
    heard: list[str] = []
    desk.listen(lambda event, data: heard.append(event))
    esc = desk.offer(_escalation(), [])
    desk.open(esc)
    assert [e["id"] for e in desk.pending()["escalations"]] == [esc.id]
    assert heard == [DECISION_NEEDED]
    made = desk.decide({"escalation": esc.id, "do": "accept"}, by="ana")
    assert await desk.wait(esc, timeout_s=1) == made
    assert heard == [DECISION_NEEDED, DECISION_MADE]
    again = desk.offer(_escalation(), [])
    desk.open(again)
    with pytest.raises(ValueError, match="already waits"):
        desk.open(again)


async def test_an_escalation_must_be_offered_before_it_waits() -> None:
    """Waiting on an escalation without id and options is a programming error."""
    with pytest.raises(ValueError, match=r"Desk\.offer"):
        await Desk(AnyioClock()).wait(_escalation(), timeout_s=1)


# --- requests ------------------------------------------------------------------------


async def test_a_stop_request_sets_the_subtasks_stop_event() -> None:
    """A stop is kept for the subtask and wakes whoever waits on stopping()."""
    desk = Desk(AnyioClock())
    heard: list[str] = []
    desk.listen(lambda event, data: heard.append(event))
    with pytest.raises(NotWaiting, match="not running"):
        desk.request("news", by="ana", stop=True)
    desk.started("news")
    request = desk.request("news", by="ana", stop=True)
    assert desk.stopping("news").is_set()
    assert desk.stop_requested("news") == request
    assert heard == [REQUEST_MADE]
    desk.finished("news")
    assert not desk.running("news")


async def test_hints_are_read_once() -> None:
    """take_hints hands each hint over once, in order."""
    desk = Desk(AnyioClock())
    desk.started("news")
    desk.request("news", by="ana", hint="try 2025")
    desk.request("news", by="ana", hint="and 2026")
    assert desk.take_hints("news") == ["try 2025", "and 2026"]
    assert desk.take_hints("news") == []
    assert desk.stop_requested("news") is None


async def test_a_hint_to_a_subtask_without_a_model_is_refused() -> None:
    """A subtask that follows a scripted plan has no turn to read a hint at: a hint is
    refused (a NotWaiting, so 409 at the service) and not recorded; a stop still goes."""
    desk = Desk(AnyioClock())
    desk.started("news", hints=False)
    with pytest.raises(Refused, match="scripted plan") as info:
        desk.request("news", by="ana", hint="try 2025")
    assert isinstance(info.value, NotWaiting)
    assert desk.requests == [] and desk.take_hints("news") == []
    assert desk.request("news", by="ana", stop=True).stop
    desk.finished("news")
    desk.started("news")  # a later round that asks a model reads hints again
    assert desk.request("news", by="ana", hint="try 2025").hint == "try 2025"


async def test_hints_a_round_never_read_are_handed_back_as_it_ends() -> None:
    """finished() returns the hints no turn took, oldest first, and forgets them: a later
    round does not read words said for an earlier one."""
    desk = Desk(AnyioClock())
    desk.started("news")
    desk.request("news", by="ana", hint="try 2025")
    desk.request("news", by="bo", hint="and 2026")
    assert [(r.hint, r.by) for r in desk.finished("news")] == [("try 2025", "ana"),
                                                               ("and 2026", "bo")]
    desk.started("news")
    assert desk.take_hint_requests("news") == [] and desk.finished("news") == []


@pytest.mark.parametrize(
    ("stop", "hint", "field"),
    [pytest.param(False, None, "stop", id="neither"), pytest.param(True, "x", "stop", id="both"),
     pytest.param(False, " ", "hint", id="blank-hint")],
)
async def test_a_request_needs_exactly_one_of_stop_and_hint(
    stop: bool, hint: str | None, field: str
) -> None:
    """A request that is neither or both is refused, naming the field."""
    desk = Desk(AnyioClock())
    desk.started("news")
    with pytest.raises(DecisionError) as info:
        desk.request("news", by="ana", stop=stop, hint=hint)
    assert info.value.field == field


# --- the plan ------------------------------------------------------------------------


def _plan() -> list[SubtaskSpec]:
    return [SubtaskSpec(id="market", query="market size", tools=["web"]),
            SubtaskSpec(id="news", query="battery news", tools=["web"])]


async def _review(desk: Desk, verdict: Any, **kw: Any) -> Any:
    out: list[Any] = []

    async def waiter() -> None:
        out.append(await desk.review_plan(_plan(), tools=["web", "docs"], **kw))

    async with anyio.create_task_group() as tg:
        change = desk.change()
        tg.start_soon(waiter)
        await change.wait()
        assert [s["id"] for s in desk.pending()["plan"]["subtasks"]] == ["market", "news"]
        if verdict is not None:
            desk.review(verdict, by="ana")
    return out[0]


async def test_an_edited_plan_is_the_plan_the_run_goes_on_with() -> None:
    """An edit removes, changes and adds subtasks, checked against the job's tools."""
    review = await _review(desk := Desk(AnyioClock()), {"edit": {
        "remove": ["news"], "change": {"market": {"weight": 2}},
        "add": [{"id": "cost", "query": "cell cost", "tools": ["docs"]}]}})
    assert review.verdict == "edit" and review.by == "ana"
    assert [(s.id, s.weight, s.planner) for s in review.subtasks] == [
        ("market", 2.0, "scripted"), ("cost", 1.0, "model")]
    assert desk.pending()["plan"] is None
    with pytest.raises(NotWaiting):
        desk.review("approve", by="bo")


async def test_a_plan_nobody_reviews_is_approved_by_timeout() -> None:
    """After timeout_s the plan is approved by: timeout."""
    review = await _review(Desk(AnyioClock()), None, timeout_s=60)
    assert (review.verdict, review.by, review.at_s) == ("approve", "timeout", 60)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        pytest.param({"remove": ["nope"]}, "edit.remove[0]", id="remove-unknown"),
        pytest.param({"change": {"market": {"weight": -1}}}, "edit.change.market.weight",
                     id="negative-weight"),
        pytest.param({"change": {"market": {"tools": ["mail"]}}}, "edit.change.market.tools[0]",
                     id="unknown-tool"),
        pytest.param({"add": [{"id": "news", "query": "x"}]}, "edit.add[0].id", id="dup-id"),
        pytest.param({"add": [{"id": "x"}]}, "edit.add[0].query", id="add-no-query"),
        pytest.param({"add": [{"id": "x", "query": "q", "plan": []}]}, "edit.add[0].plan",
                     id="add-unknown-key"),
        pytest.param({"remove": ["market", "news"]}, "edit", id="empty-plan"),
        pytest.param({"rmove": []}, "edit.rmove", id="unknown-edit-key"),
    ],
)
async def test_a_bad_edit_names_its_field_and_the_plan_still_waits(
    edit: dict[str, Any], field: str
) -> None:
    """An edit that is no valid plan is refused with the field; the plan waits on."""
    desk = Desk(AnyioClock())

    def act() -> None:
        with pytest.raises(PlanEditError) as info:
            desk.review({"edit": edit}, by="ana")
        assert info.value.field == field, str(info.value)
        assert desk.plan_waits()
        desk.review("reject", by="ana")

    out: list[Any] = []

    async def waiter() -> None:
        out.append(await desk.review_plan(_plan(), tools=["web", "docs"]))

    async with anyio.create_task_group() as tg:
        change = desk.change()
        tg.start_soon(waiter)
        await change.wait()
        act()
    assert out[0].verdict == "reject"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_desk_works_on_asyncio_too(anyio_backend: str) -> None:
    """On the live backend a decision wakes the waiting subtask the same way."""
    desk = Desk(AnyioClock())
    esc = desk.offer(_escalation(), ["web_search"])
    decision = await _waits_then(
        desk, esc, lambda: desk.decide({"escalation": esc.id, "option": "o2"}, by="ana"),
        timeout_s=60)
    assert decision.do == "use_tool"
