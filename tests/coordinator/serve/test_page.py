"""The web page in real headless chromium (Playwright driving Debian's chromium)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.serve.conftest import HOSTILE, ROOT, TOKEN, Server, start_server

# A real fanout serve and chromium, as subprocesses.
pytestmark = pytest.mark.process

SCRIPT_QUERY = "<script>window.__pwned = 1</script>"


def test_submit_watch_live_and_read_the_report(server: Server, page: Any) -> None:
    """Sign in, submit a job through the form, see rows change live, the gaps, the report."""
    page.goto(server.url + "/")
    page.wait_for_selector("#login-form", state="visible")
    page.fill("#token", TOKEN)
    page.click("#login-form button")
    page.wait_for_selector("#job-form", state="visible")

    page.fill("#job-text", HOSTILE.read_text())
    page.fill("#speed", "4")
    page.click("#submit-btn")
    page.wait_for_selector("#run", state="visible")
    markup = page.locator('#subagents tr[data-subtask="markup"]')
    flaky = page.locator('#subagents tr[data-subtask="flaky"]')
    # Rows change state as the events arrive: running, then done, while others wait.
    page.wait_for_selector('#subagents tr[data-subtask="markup"][data-state="running"]')
    assert flaky.get_attribute("data-state") == "queued"
    page.wait_for_selector('#subagents tr[data-subtask="markup"][data-state="done"]')
    page.wait_for_selector('#subagents tr[data-subtask="flaky"][data-state="retrying"]')
    page.wait_for_selector('#subagents tr[data-subtask="flaky"][data-state="done"]')
    assert flaky.locator(".c-attempts").text_content() == "2"
    page.wait_for_selector('#gaps tr[data-subtask="denied"]', timeout=20_000)
    page.wait_for_selector("#report-box", state="visible", timeout=20_000)

    # What was markup is text: the script never ran and no element came from data.
    assert markup.locator(".c-query").text_content() == SCRIPT_QUERY
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#run-query").text_content() == "Escaping <b>everything</b> the page shows"
    assert page.locator("#run-query b").count() == 0
    denied_gap = page.locator('#gaps tr[data-subtask="denied"]')
    assert "<img src=x" in (denied_gap.text_content() or "")
    assert page.locator("#gaps img").count() == 0
    assert "permission_denied" in (denied_gap.text_content() or "")
    assert page.locator('#subagents tr[data-subtask="denied"] .c-trigger').text_content() == (
        "permission_denied")
    assert page.locator("#coverage").text_content() == "66.7%"
    report = page.frame_locator("#report")
    assert "permission_denied" in (report.locator("#gaps").text_content() or "")
    assert report.locator("script").count() == 0
    # The runs list shows the run, finished.
    run_id = page.locator("#run-id").text_content()
    page.click("#refresh")
    page.wait_for_selector(f'#runs-table tr[data-run="{run_id}"] .st-finished')


def test_the_cancel_button_ends_a_run_with_its_report(server: Server, page: Any) -> None:
    """Cancel on a running job: the rows end escalated (cancelled) and the report shows."""
    page.goto(server.url + "/")
    page.fill("#token", TOKEN)
    page.click("#login-form button")
    page.wait_for_selector("#job-form", state="visible")
    page.fill("#job-text", HOSTILE.read_text())
    page.fill("#speed", "0.5")
    page.click("#submit-btn")
    page.wait_for_selector('#subagents tr[data-subtask="markup"][data-state="running"]')
    page.click("#cancel-btn")
    page.wait_for_selector("#report-box", state="visible", timeout=20_000)
    for sid in ("markup", "flaky", "denied"):
        row = page.locator(f'#subagents tr[data-subtask="{sid}"]')
        assert row.get_attribute("data-state") == "escalated"
        assert row.locator(".c-trigger").text_content() == "cancelled"
    assert page.locator("#gaps tbody tr").count() == 3


def test_a_wrong_token_stays_on_the_sign_in_form(server: Server, page: Any) -> None:
    """A refused token shows why and no data; nothing is kept."""
    page.goto(server.url + "/")
    page.fill("#token", "not-the-token")
    page.click("#login-form button")
    page.wait_for_selector("#login-error:has-text('refused')")
    assert page.locator("#app").is_hidden()
    assert page.locator("#runs-table tbody tr").count() == 0


LEAD_JOB = ROOT / "scenarios" / "lead_decomposes.yaml"
AT_WORK = ("queued", "running", "retrying", "thinking", "throttled", "waiting")


def test_once_a_run_ends_nothing_on_the_page_still_looks_at_work(
    tmp_path: Path, page: Any
) -> None:
    """After an ask and a decomposed job end, no row (the lead's neither) says queued or
    running and the result lines say finished; the Ask box's errors name its own fields
    and the served folders, and a blank folder asks the server's."""
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "cold.md").write_text("# Cold\n\nSodium-ion cells keep 90 percent at -20 C.\n")
    srv = start_server(tmp_path, "--docs", str(papers))  # no model: retrieval only
    try:
        page.goto(srv.url + "/")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.wait_for_selector("#ask-form", state="visible")

        # A folder the server does not serve: the box's own words, no CLI flag, and the
        # folders it does serve as a client names them (never the server's own path).
        page.fill("#ask-question", "How do sodium-ion cells do in the cold?")
        page.fill("#ask-docs", "nowhere")
        page.click("#ask-btn")
        page.wait_for_selector("#ask-errors li")
        errors = page.locator("#ask-errors").text_content() or ""
        assert "documents" in errors and "--" not in errors, errors
        assert "('.')" in errors and str(papers) not in errors, errors

        # Blank: the server's folder.
        page.fill("#ask-docs", "")
        page.click("#ask-btn")
        page.wait_for_selector("#ask-result:has-text('finished')", timeout=30_000)
        page.wait_for_selector("#report-box", state="visible", timeout=30_000)
        _nothing_at_work(page)

        page.fill("#job-text", LEAD_JOB.read_text())
        page.fill("#speed", "100")
        page.click("#submit-btn")
        page.wait_for_selector("#submit-result:has-text('finished')", timeout=30_000)
        page.wait_for_selector("#report-box", state="visible", timeout=30_000)
        page.wait_for_selector('#subagents tr[data-subtask="lead"]')
        assert page.locator('#subagents tr[data-subtask="lead"]').get_attribute(
            "data-state") == "done"
        _nothing_at_work(page)
    finally:
        assert srv.stop() == 0, srv.log.read_text()


def _nothing_at_work(page: Any) -> None:
    states = page.eval_on_selector_all("#subagents tbody tr",
                                       "rows => rows.map(r => r.dataset.state)")
    assert states and not set(states) & set(AT_WORK), states
