"""The Python caller as the run's person (coordinator.api.person): on_escalation and
on_plan answering a desk driven directly, as the flow will drive it."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from coordinator.api.person import PythonPerson, as_request, attach
from coordinator.decision import DecisionError
from coordinator.people import Desk
from coordinator.plan_review import PlanEdit, PlanEditError, PlanReview
from coordinator.report import Decision
from shared.clock import AnyioClock
from shared.escalation import Escalation
from subagents.spec import SubtaskSpec

pytestmark = pytest.mark.anyio

ALLOWLIST = ["patent_db", "web_search"]


def _escalation(subtask: str = "patents") -> Escalation:
    return Escalation(
        subtask_id=subtask, category="permission", trigger="permission_denied",
        message="role analyst lacks patents:read", attempted_query="battery patents",
        tool="patent_db",
        alternatives=["request patents:read for role analyst (needed by patent_db)",
                      "try web_search, also on this subtask's allowlist"],
    )


async def _decided(person: PythonPerson, esc: Escalation | None = None) -> Decision:
    """Attend a fresh desk with ``person``, make ``esc`` wait on it, and return the
    decision the wait ends with (a timeout of an hour: the person answers before)."""
    desk = Desk(AnyioClock())
    offered = desk.offer(esc or _escalation(), ALLOWLIST)
    async with anyio.create_task_group() as tg:
        scope = attach(person, desk, tg)
        decision = await desk.wait(offered, timeout_s=3600)
        scope.cancel()
    return decision


@pytest.mark.parametrize(("reply", "do"), [
    pytest.param({"do": "retry"}, "retry", id="mapping-by-kind"),
    pytest.param({"option": "o2"}, "use_tool", id="mapping-by-option"),
    pytest.param("o2", "use_tool", id="option-id"),
    pytest.param("try web_search, also on this subtask's allowlist", "use_tool",
                 id="alternative-text"),
    pytest.param("request patents:read for role analyst (needed by patent_db)", "retry",
                 id="alternative-inside-retry"),
    pytest.param("something the escalation never offered", "accept", id="other-text"),
    pytest.param(None, "accept", id="none"),
    pytest.param(Decision(subtask_id="patents", choice="stop", do="stop"), "stop",
                 id="decision"),
])
async def test_on_escalation_replies_become_decisions_on_the_desk(reply: Any, do: str) -> None:
    """Each kind of reply decides the waiting escalation, by the OS user by default."""
    seen: list[Escalation] = []

    def choose(escalation: Escalation) -> Any:
        seen.append(escalation)
        return reply

    decision = await _decided(PythonPerson(choose, by="ana"))
    assert decision.do == do
    assert decision.by == "ana"
    assert [e.id for e in seen] == ["patents:1"]
    assert seen[0].options is not None and seen[0].options[0].do == "retry"


async def test_an_async_callback_answers_with_text_for_answer() -> None:
    """An async on_escalation returning an answer with text and source: a person finding."""

    async def choose(escalation: Escalation) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        return {"do": "answer", "text": "412 patents in 2025", "source": "https://ex.org/p"}

    decision = await _decided(PythonPerson(choose, by="ana"))
    assert (decision.do, decision.text, decision.source) == (
        "answer", "412 patents in 2025", "https://ex.org/p")


async def test_a_refused_reply_fails_the_person_and_cancels_not_waits() -> None:
    """answer without text is refused naming the field: the person records the error and
    calls on_failure (the run is cancelled); the escalation still waits, undecided."""
    failed = anyio.Event()
    person = PythonPerson(lambda e: {"do": "answer"}, by="ana", on_failure=failed.set)
    desk = Desk(AnyioClock())
    offered = desk.offer(_escalation(), ALLOWLIST)
    async with anyio.create_task_group() as tg:
        scope = attach(person, desk, tg)
        tg.start_soon(partial(desk.wait, offered, timeout_s=3600))
        await failed.wait()
        assert desk.waiting() == [offered]
        desk.decide({"escalation": "patents:1", "do": "accept"}, by="another door")
        scope.cancel()
    [error] = person.failures
    assert isinstance(error, DecisionError) and error.field == "text"


async def test_a_callback_that_raises_is_recorded_as_a_failure() -> None:
    """A bug in on_escalation is kept for the caller and reported through on_failure."""

    def broken(escalation: Escalation) -> str:
        raise RuntimeError("bug in the caller")

    failed = anyio.Event()
    person = PythonPerson(broken, on_failure=failed.set)
    desk = Desk(AnyioClock())
    offered = desk.offer(_escalation(), ALLOWLIST)
    async with anyio.create_task_group() as tg:
        scope = attach(person, desk, tg)
        tg.start_soon(partial(desk.wait, offered, timeout_s=3600))
        await failed.wait()
        desk.decide({"escalation": "patents:1", "do": "accept"}, by="test")
        scope.cancel()
    assert [str(e) for e in person.failures] == ["bug in the caller"]


async def test_an_escalation_already_waiting_is_answered_when_the_person_attends() -> None:
    """A person attached after the escalation began to wait still decides it."""
    desk = Desk(AnyioClock())
    offered = desk.offer(_escalation(), ALLOWLIST)
    out: list[Decision] = []
    decided = anyio.Event()

    async def waiter() -> None:
        out.append(await desk.wait(offered, timeout_s=3600))
        decided.set()

    async with anyio.create_task_group() as tg:
        change = desk.change()
        tg.start_soon(waiter)
        await change.wait()
        scope = attach(PythonPerson(lambda e: "o1", by="ana"), desk, tg)
        # Wait for the waiter itself: the desk's change fires before the waiter resumes
        # and appends, so looping on change() could sleep past the last change forever.
        await decided.wait()
        scope.cancel()
    assert out[0].do == "retry"


def _plan() -> list[SubtaskSpec]:
    return [SubtaskSpec(id="news", query="battery news", tools=["web_search"]),
            SubtaskSpec(id="patents", query="battery patents", tools=["patent_db"])]


async def _reviewed(person: PythonPerson) -> PlanReview:
    desk = Desk(AnyioClock())
    async with anyio.create_task_group() as tg:
        scope = attach(person, desk, tg)
        review = await desk.review_plan(_plan(), tools=ALLOWLIST, timeout_s=3600)
        scope.cancel()
    return review


@pytest.mark.parametrize(("reply", "verdict"), [
    pytest.param(None, "approve", id="none"),
    pytest.param("approve", "approve", id="approve"),
    pytest.param("reject", "reject", id="reject"),
])
async def test_on_plan_approves_or_rejects(reply: Any, verdict: str) -> None:
    """on_plan's word is the review's verdict, by the person."""
    seen: list[list[SubtaskSpec]] = []

    def review(subtasks: list[SubtaskSpec]) -> Any:
        seen.append(subtasks)
        return reply

    result = await _reviewed(PythonPerson(on_plan=review, by="ana"))
    assert (result.verdict, result.by) == (verdict, "ana")
    assert [s.id for s in seen[0]] == ["news", "patents"]


@pytest.mark.parametrize("edit", [
    pytest.param({"edit": {"remove": ["news"], "change": {"patents": {"weight": 2.0}}}},
                 id="mapping"),
    pytest.param(PlanEdit(remove=["news"], change={"patents": {"weight": 2.0}}),
                 id="plan-edit"),
])
async def test_on_plan_edits_the_plan(edit: Any) -> None:
    """An edit (mapping or PlanEdit, sync or async callback) is the plan the run goes on with."""

    async def review(subtasks: list[SubtaskSpec]) -> Any:
        return edit

    result = await _reviewed(PythonPerson(on_plan=review, by="ana"))
    assert result.verdict == "edit"
    assert result.subtasks is not None
    assert [(s.id, s.weight) for s in result.subtasks] == [("patents", 2.0)]


async def test_a_bad_edit_fails_naming_the_field() -> None:
    """An edit naming a subtask the plan lacks is refused with its field; on_failure hears."""
    failed = anyio.Event()
    person = PythonPerson(on_plan=lambda s: {"edit": {"remove": ["nope"]}},
                          on_failure=failed.set)
    desk = Desk(AnyioClock())
    async with anyio.create_task_group() as tg:
        scope = attach(person, desk, tg)
        tg.start_soon(desk.review_plan, _plan())
        await failed.wait()
        desk.review("approve", by="test")
        scope.cancel()
    [error] = person.failures
    assert isinstance(error, PlanEditError) and error.field == "edit.remove[0]"


async def test_the_handler_path_keeps_an_alternative_and_skips_a_decided_one() -> None:
    """The engine's older handler path: an alternative's text is the choice as given, a
    mapping becomes its option's text, and an escalation decided on the desk is not
    asked again (its decision's choice is the answer)."""
    calls: list[str] = []

    def choose(escalation: Escalation) -> Any:
        calls.append(escalation.subtask_id)
        return {"do": "stop"} if escalation.subtask_id == "b" else "ask the data owner"

    person = PythonPerson(choose, by="ana")
    assert await person.handle(_escalation("a")) == "ask the data owner"
    assert (await person.handle(_escalation("b"))).startswith("stop the run")  # type: ignore[union-attr]
    decided = await _decided(person, _escalation("c"))
    assert decided.do == "accept"  # the text names no option: the gap stays
    assert await person.handle(_escalation("c")) == decided.choice
    assert calls == ["a", "b", "c"]


def test_a_reply_of_another_type_is_refused_naming_on_escalation() -> None:
    """A number is no decision: the error names on_escalation."""
    desk_escalation = _escalation().model_copy(update={"id": "patents:1"})
    with pytest.raises(DecisionError) as refused:
        as_request(desk_escalation, 3)  # type: ignore[arg-type]
    assert refused.value.field == "on_escalation"


def _locked(path: str) -> str:
    """Read a locked document."""
    from shared.errors import ToolPermissionDenied

    raise ToolPermissionDenied("role analyst lacks docs:read", scope="docs:read")


def _open(path: str) -> str:
    """Read an open copy of the document."""
    return "the open copy"


async def test_ask_carries_out_the_decision_on_escalation_returns() -> None:
    """ask(): a {"do": "retry"} from on_escalation is a decision of the report, by the
    person, with what it changed."""
    from coordinator import ask

    report = await ask(
        "read the locked file",
        tools=[_locked, _open],
        model={"provider": "scripted",
               "turns": {"doc": [{"calls": [{"tool": "_locked", "args": {"path": "/a"}}]},
                                 {"text": "done"}]}},
        subtasks=[{"id": "doc", "query": "read it", "tools": ["_locked", "_open"]}],
        on_escalation=lambda e: {"do": "accept"},
    )
    [decision] = report.decisions
    assert decision.do == "accept" and decision.escalation == "doc:1"


async def test_ask_on_plan_reviews_the_lead_plan() -> None:
    """ask(): on_plan sees the lead's plan and its edit is what runs."""
    from coordinator import ask

    seen: list[list[SubtaskSpec]] = []

    def review(subtasks: list[SubtaskSpec]) -> Any:
        seen.append(subtasks)
        return {"edit": {"remove": ["b"]}}

    report = await ask(
        "two things",
        tools=[_open],
        model={"provider": "scripted", "turns": {
            "lead": [{"subtasks": [{"id": "a", "query": "a", "tools": ["_open"]},
                                   {"id": "b", "query": "b", "tools": ["_open"]}]},
                     {"text": "answer"}],
            "a": [{"calls": [{"tool": "_open", "args": {"path": "x"}}]}, {"text": "a"}],
            "b": [{"calls": [{"tool": "_open", "args": {"path": "x"}}]}, {"text": "b"}]}},
        on_plan=review,
    )
    assert [s.id for s in seen[0]] == ["a", "b"]
    assert [s.id for s in report.subtasks if s.id != "lead"] == ["a"]  # b removed


async def test_a_retry_that_can_make_no_call_is_not_offered_again() -> None:
    """model_budget.yaml with a person who always says retry: a subtask whose job budget
    is spent escalates again at once after the retry, without a call; it is counted, not
    offered again (the run ends rather than looping on decisions)."""
    from coordinator import run_file
    from tests.coordinator.cli.test_misuse import ROOT

    asked: list[str] = []

    def always_retry(escalation: Escalation) -> str:
        asked.append(escalation.id or "")
        if len(asked) > 20:  # the loop this guards against: end it, and fail below
            return "accept"
        return "retry" if any(o.do == "retry" for o in escalation.options or []) else "accept"

    report = await run_file(ROOT / "scenarios" / "model_budget.yaml", speed=1000,
                            on_escalation=always_retry, store=None)
    assert len(asked) <= 6, asked
    assert len(asked) == len(set(asked))  # every escalation asked once
    retried = [d for d in report.decisions if d.do == "retry"]
    assert retried and all(d.change is not None and d.change.status_after != "complete"
                           for d in retried)
