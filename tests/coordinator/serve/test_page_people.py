"""The page's side of a person deciding (docs/design.md §17), in real headless chromium:
escalation cards with their options and a text box for an answer, an editable plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from subagents.spec import SubtaskSpec
from tests.coordinator.serve.conftest import TOKEN
from tests.coordinator.serve.local import DECIDER, Local, denied, held_job, local_service

# Chromium, as a subprocess.
pytestmark = pytest.mark.process

ALLOW = ["slow", "patents"]
MARKUP = "<img src=x onerror=alert(1)> denied"


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """The service in this process, for the module's pages."""
    with local_service(tmp_path_factory.mktemp("page-people")) as local:
        yield local


def _open(page: Any, svc: Local, run_id: str) -> None:
    """Sign in, then open the run's live view."""
    page.goto(svc.url + "/")
    page.fill("#token", TOKEN)
    page.click("#login-form button")
    page.wait_for_selector("#job-form", state="visible")
    page.evaluate("id => { location.hash = 'run=' + encodeURIComponent(id); }", run_id)
    page.wait_for_selector('#subagents tr[data-subtask="first"]')


def test_escalation_cards_take_a_choice_and_an_answer(
    svc: Local, page: Any
) -> None:
    """An escalation waiting before the page opened and one arriving live each show as a
    card with its options; a button decides it, the answer box answers, a missing answer
    is said in the card; decided cards go; what came from data reads as text."""
    run_id = svc.submit(held_job(escalations={"wait_s": 600}))
    try:
        esc = denied().model_copy(update={"message": MARKUP})
        first, first_decision = svc.escalate(run_id, esc, ALLOW)
        _open(page, svc, run_id)
        card = page.locator(f'.esc-card[data-escalation="{first.id}"]')
        card.wait_for()
        assert [b.get_attribute("data-do") for b in card.locator("button.option").all()] == [
            "retry", "use_tool", "requery", "answer", "accept", "stop"]
        assert MARKUP in (card.locator(".msg").text_content() or "")
        assert page.locator("#escalations img").count() == 0
        assert page.locator("#pending-count").text_content() == "1"
        card.locator('button[data-do="use_tool"]').click()
        decision = first_decision.result(timeout=20)
        assert (decision.do, decision.tool, decision.by) == ("use_tool", "slow", DECIDER)
        card.wait_for(state="detached")
        page.wait_for_selector("#people", state="hidden")

        # Live: the card comes from decision.needed on the stream.
        second, second_decision = svc.escalate(run_id, denied("second"), ALLOW)
        card = page.locator(f'.esc-card[data-escalation="{second.id}"]')
        card.wait_for()
        card.locator('button[data-do="answer"]').click()  # no text yet: 422, said here
        card.locator(".errors li").wait_for()
        assert "text" in (card.locator(".errors").text_content() or "")
        assert not second_decision.done()
        card.locator("textarea.answer-text").fill("Three filings in 2025.")
        card.locator("input.answer-source").fill("https://example.org/filings")
        card.locator('button[data-do="answer"]').click()
        decision = second_decision.result(timeout=20)
        assert (decision.do, decision.text, decision.source) == (
            "answer", "Three filings in 2025.", "https://example.org/filings")
        card.wait_for(state="detached")
    finally:
        svc.cancel(run_id)


def test_a_waiting_plan_is_edited_and_approved_or_rejected(
    svc: Local, page: Any
) -> None:
    """A plan that waits shows as an editable list: a changed query and a removed subtask
    go as an edit on Approve; the next plan is rejected with Reject."""
    run_id = svc.submit(held_job(review_plan=True))
    try:
        _open(page, svc, run_id)
        desk = svc.desk(run_id)
        specs = [SubtaskSpec.model_validate(s) for s in held_job()["job"]["subtasks"]]

        async def review() -> Any:
            return await desk.review_plan(specs, tools=["slow"], planner="scripted")

        reviewed = svc.start(review)
        page.wait_for_selector("#plan-review", state="visible")
        assert page.locator("#plan-table tr.plan-row").count() == 4
        page.fill('#plan-table tr[data-subtask="first"] input.plan-query', "the first, sharper")
        page.check('#plan-table tr[data-subtask="fourth"] input.plan-remove')
        page.click("#plan-approve")
        done = reviewed.result(timeout=20)
        assert done.verdict == "edit" and done.by == DECIDER
        assert [s.id for s in done.subtasks] == ["first", "second", "third"]
        assert done.subtasks[0].query == "the first, sharper"
        page.wait_for_selector("#plan-review", state="hidden")

        reviewed = svc.start(review)
        page.wait_for_selector("#plan-review", state="visible")
        page.click("#plan-reject")
        assert reviewed.result(timeout=20).verdict == "reject"
        page.wait_for_selector("#plan-review", state="hidden")
    finally:
        svc.cancel(run_id)


def test_a_bad_plan_edit_is_said_under_the_plan(svc: Local, page: Any) -> None:
    """A weight the plan cannot take is refused with its field under the plan, which
    still waits."""
    run_id = svc.submit(held_job(review_plan=True))
    try:
        _open(page, svc, run_id)
        desk = svc.desk(run_id)
        specs = [SubtaskSpec.model_validate(s) for s in held_job()["job"]["subtasks"]]

        async def review() -> Any:
            return await desk.review_plan(specs, tools=["slow"], planner="scripted")

        reviewed = svc.start(review)
        page.wait_for_selector("#plan-review", state="visible")
        page.fill('#plan-table tr[data-subtask="second"] input.plan-weight', "-3")
        page.click("#plan-approve")
        page.wait_for_selector("#plan-errors li")
        assert "edit.change.second.weight" in (page.locator("#plan-errors").text_content()
                                               or "")
        assert not reviewed.done()
        assert page.locator("#plan-review").is_visible()
    finally:
        svc.cancel(run_id)



def test_a_pending_snapshot_older_than_the_stream_does_not_hide_the_plan(
    svc: Local, page: Any
) -> None:
    """The snapshot of what waits, asked when the stream opens, can come back after a
    decision.needed that arrived live: it is older, so the page asks again instead of
    hiding the plan the stream showed (the race that once failed CI)."""
    held: list[tuple[Any, Any]] = []

    def hold_first(route: Any) -> None:
        if held:
            route.continue_()
            return
        held.append((route, route.fetch()))  # the server's answer: nothing waits yet

    page.route("**/pending", hold_first)
    run_id = svc.submit(held_job(review_plan=True))
    try:
        _open(page, svc, run_id)
        while not held:
            page.wait_for_timeout(20)
        assert held[0][1].json()["plan"] is None
        desk = svc.desk(run_id)
        specs = [SubtaskSpec.model_validate(s) for s in held_job()["job"]["subtasks"]]

        async def review() -> Any:
            return await desk.review_plan(specs, tools=["slow"], planner="scripted")

        reviewed = svc.start(review)
        page.wait_for_selector("#plan-review", state="visible")  # from the stream
        route, stale = held[0]

        def asked_again(response: Any) -> bool:
            return bool(response.url.endswith("/pending") and response.request != route.request)

        with page.expect_response(asked_again) as again:
            route.fulfill(response=stale)
        assert again.value.json()["plan"] is not None
        page.wait_for_function("() => !document.getElementById('plan-review').hidden")
        assert page.locator("#plan-table tr.plan-row").count() == 4
        page.click("#plan-reject")
        assert reviewed.result(timeout=20).verdict == "reject"
    finally:
        page.unroute("**/pending")
        svc.cancel(run_id)
