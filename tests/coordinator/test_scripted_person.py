"""The scripted person (coordinator.scripted_person): a people: block played in virtual time."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from coordinator.people import Desk
from coordinator.report import Decision
from coordinator.scripted_person import PersonStep, ScriptedPerson
from shared.clock import AnyioClock
from shared.escalation import Escalation
from subagents.spec import SubtaskSpec

pytestmark = pytest.mark.anyio


def _steps(*raw: dict[str, Any]) -> list[PersonStep]:
    return [PersonStep.model_validate(r) for r in raw]


def _escalation(subtask: str) -> Escalation:
    return Escalation(subtask_id=subtask, category="permission", trigger="permission_denied",
                      message="denied", attempted_query="q", tool="db",
                      alternatives=["try web_search, also on this subtask's allowlist"])


async def test_a_decision_before_the_escalation_waits_for_it() -> None:
    """A decision due at 5 s for a subtask that escalates at 20 s is made at 20 s."""
    desk = Desk(AnyioClock())
    person = ScriptedPerson(desk, _steps({"after_s": 5, "decide": {"subtask": "a",
                                                                    "do": "use_tool"}}))
    got: list[Decision] = []

    async def subtask() -> None:
        await anyio.sleep(20)
        got.append(await desk.wait(desk.offer(_escalation("a"), ["db", "web_search"]),
                                   timeout_s=900))

    async with anyio.create_task_group() as tg:
        tg.start_soon(person.run)
        tg.start_soon(subtask)
    assert [(d.do, d.tool, d.by, d.at_s) for d in got] == [("use_tool", "web_search", "scenario",
                                                             20)]
    assert person.left == 0 and person.problems == []


async def test_a_decision_waits_until_its_time() -> None:
    """An escalation at 1 s is decided at the step's 30 s, not before."""
    desk = Desk(AnyioClock())
    person = ScriptedPerson(desk, _steps(
        {"after_s": 30, "decide": {"subtask": "a", "do": "answer", "text": "42", "by": "ana"}}))
    got: list[Decision] = []

    async def subtask() -> None:
        await anyio.sleep(1)
        got.append(await desk.wait(desk.offer(_escalation("a"), []), timeout_s=900))

    async with anyio.create_task_group() as tg:
        tg.start_soon(person.run)
        tg.start_soon(subtask)
    assert [(d.do, d.text, d.by, d.at_s) for d in got] == [("answer", "42", "ana", 30)]


async def test_steps_are_delivered_in_time_order_and_requests_wait_for_the_subtask() -> None:
    """A request waits for its subtask to run; the plan review comes at its time."""
    desk = Desk(AnyioClock())
    person = ScriptedPerson(desk, _steps(
        {"after_s": 12, "request": {"subtask": "news", "stop": True}},
        {"after_s": 5, "review_plan": "approve"},
        {"after_s": 2, "request": {"subtask": "news", "hint": "try 2025"}},
    ))
    reviews: list[Any] = []

    async def flow() -> None:
        reviews.append(await desk.review_plan([SubtaskSpec(id="news", query="n")]))
        await anyio.sleep(10)
        desk.started("news")

    async with anyio.create_task_group() as tg:
        tg.start_soon(person.run)
        tg.start_soon(flow)
    assert (reviews[0].verdict, reviews[0].at_s) == ("approve", 5)
    assert [(r.hint, r.stop, r.at_s) for r in desk.requests] == [("try 2025", False, 15),
                                                                 (None, True, 15)]


async def test_a_choice_the_escalation_does_not_offer_is_said_not_raised() -> None:
    """A scripted do the escalation lacks is a problem of the script; the wait times out."""
    desk = Desk(AnyioClock())
    person = ScriptedPerson(desk, _steps({"after_s": 1, "decide": {"subtask": "a",
                                                                    "do": "requery"}}))
    got: list[Decision] = []

    async def subtask() -> None:
        got.append(await desk.wait(desk.offer(_escalation("a"), []), timeout_s=60))

    async with anyio.create_task_group() as tg:
        tg.start_soon(person.run)
        tg.start_soon(subtask)
    assert person.problems and person.problems[0].startswith("people[0]: do: expected")
    assert [(d.do, d.by) for d in got] == [("accept", "timeout")]


async def test_a_script_for_what_never_happens_is_cancelled_with_the_job() -> None:
    """A decision for a subtask that never escalates leaves the step undelivered."""
    desk = Desk(AnyioClock())
    person = ScriptedPerson(desk, _steps({"after_s": 1, "decide": {"subtask": "a",
                                                                    "do": "accept"}}))
    with anyio.move_on_after(3600):
        await person.run()
    assert person.left == 1
