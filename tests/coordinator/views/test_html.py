"""The HTML report: structure, escaping, the timeline, and the page in a real browser."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coordinator.views.html import render_html
from coordinator.views.timeline import attempt_outcome
from tests.chromium import chromium
from tests.coordinator.report_inputs import HOSTILE_ESCAPED, hostile, traced

RUN = {"id": "20261129-demo", "job": "research-demo", "file": "scenarios/research_demo.yaml",
       "started": "2026-11-29T09:00:00Z", "finished": "2026-11-29T09:01:14Z",
       "status": "finished", "outcome": "partial", "coverage": 0.75, "elapsed_s": 74.0,
       "sessions": 1}


def _demo() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return traced("research_demo")


def _rows(page: str) -> dict[str, str]:
    """Each timeline row's SVG markup, by subtask id."""
    return dict(re.findall(r'<g class="row" data-subtask="([^"]*)">(.*?)</g>(?=<g class="row"|\n)',
                           page, flags=re.S))


def test_page_is_self_contained() -> None:
    """The page carries its own CSS and SVG and loads nothing: no scripts, links or URLs."""
    report, events = _demo()
    page = render_html(report, events, RUN)
    assert page.startswith("<!DOCTYPE html>")
    assert "<style>" in page and "<svg" in page
    for forbidden in ("<script", "<link", "<img", "<iframe", "@import", "src=", "http://",
                      "https://"):
        assert forbidden not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_header_coverage_gaps_escalations_and_answer() -> None:
    """Every part of the report is on the page: header, coverage, gaps, escalations, answer."""
    report, events = _demo()
    page = render_html(report, events, RUN)
    assert "State of solid-state battery commercialisation" in page
    assert ">partial</span>" in page and "20261129-demo" in page and "74s" in page
    assert 'class="cov-pct">75%<' in page
    bar = page.split('class="covbar"', 1)[1].split('<div class="legend"', 1)[0]
    for s in report["subtasks"]:
        assert f'class="seg {s["status"]}"' in bar and f'>{s["id"]}</div>' in bar
    gaps = page.split('id="gaps"', 1)[1].split("</section>", 1)[0].replace("<wbr>", "")
    for g in report["gaps"]:
        assert g["subtask_id"] in gaps and g["trigger"] in gaps and g["route"] in gaps
        for alternative in g["alternatives"]:
            assert f"<li>{alternative.replace(chr(39), '&#x27;')}</li>" in gaps
    assert 'id="escalations"><h2>Escalations <span class="count">1</span>' in page
    answer = page.split('id="answer"', 1)[1]
    assert report["answer"]["summary"] in answer
    for section in report["answer"]["sections"]:
        assert f"<h3>{section['subtask_id']}</h3>" in answer
    assert "<li>Honda opens all-solid-state pilot line</li>" in answer
    assert '<span class="k">cagr_pct:</span> 71' in answer
    assert "empty: no matches" in answer and "partial data" in answer
    assert "Missing" in answer


def _region(page: str, where: str) -> str:
    if where == "header":
        return page.split("<header>", 1)[1].split("</header>", 1)[0]
    if where == "timeline":
        return page.split("<svg", 1)[1].split("</svg>", 1)[0]
    return page.split(f'id="{where}"', 1)[1].split("</section>", 1)[0]


def test_no_markup_gets_through() -> None:
    """Markup, quotes and ampersands from the report and the trace never reach the page raw."""
    report, events = _demo()
    hostile(report, events)
    page = render_html(report, events, RUN)
    assert "<script" not in page and "alert(1)</script>" not in page
    assert '"quotes"' not in page


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("header", id="header-query"),
        pytest.param("timeline", id="svg-text-and-tooltips"),
        pytest.param("gaps", id="gaps-table"),
        pytest.param("answer", id="answer-findings"),
    ],
)
def test_content_arrives_as_text(where: str) -> None:
    """Each part of the page shows the hostile text escaped, as text a person can read."""
    report, events = _demo()
    hostile(report, events)
    assert HOSTILE_ESCAPED in _region(render_html(report, events, RUN), where)


def test_ids_are_escaped_in_attributes() -> None:
    """A subtask id with quotes and brackets cannot break out of an SVG attribute."""
    report, _ = _demo()
    report["subtasks"][0]["id"] = 'a"b<c>&d'
    page = render_html(report, [], None)
    assert 'data-subtask="a&quot;b&lt;c&gt;&amp;d"' in page
    assert 'a"b' not in page


def test_timeline_draws_attempts_waits_rounds_and_marks() -> None:
    """Attempts are coloured by outcome, waits hatched, the retry round and escalations marked."""
    report, events = _demo()
    rows = _rows(render_html(report, events, RUN))
    assert set(rows) == {s["id"] for s in report["subtasks"]}
    outcomes = {sid: re.findall(r'data-outcome="(\w+)"', row) for sid, row in rows.items()}
    ends = [e for e in events if e["kind"] == "attempt"]
    assert sum(len(o) for o in outcomes.values()) == len(ends)
    assert outcomes["news"] == ["transient", "transient", "ok"]
    assert outcomes["patents"] == ["ok", "permission"]
    assert outcomes["supply_chain"] == ["partial", "ok"]
    assert outcomes["recalls"] == ["empty"]
    assert "validation" in outcomes["regulation"]  # the refused call, drawn as a tick
    waits = {e["subtask_id"] for e in events if e["kind"] == "wait"}
    assert {sid for sid, row in rows.items() if 'class="wait"' in row} == waits
    assert 'class="span round2"' in rows["pilot_lines"] and "round 2" in rows["pilot_lines"]
    assert "round2" not in rows["market"]
    mark = rows["patents"].split('class="mark"', 1)[1]
    assert "permission_denied" in mark and "role analyst lacks patents:read" in mark
    assert ">incomplete_data</text>" in rows["supply_chain"]
    assert "retried in the next round" in rows["pilot_lines"]
    assert 'class="mark"' not in rows["market"]
    assert ">70s</text>" in render_html(report, events, RUN)


def test_timeline_without_trace_uses_subtask_times() -> None:
    """With no events each subtask still gets a row spanning its start and end."""
    report, _ = _demo()
    page = render_html(report, [], RUN)
    rows = _rows(page)
    assert set(rows) == {s["id"] for s in report["subtasks"]}
    for s in report["subtasks"]:
        assert f'class="span round1 bg-{s["status"]}"' in rows[s["id"]]
    assert "No trace recorded" in page
    assert "permission_denied" in rows["patents"]


def test_interrupted_run_shows_resume_banner_and_cut_attempts() -> None:
    """An interrupted run says how to continue it; an attempt with no result is drawn as cut."""
    report, events = _demo()
    cut = next(i for i, e in enumerate(events) if e["kind"] == "start" and e["at"] >= 20)
    run = {**RUN, "id": "20261129-crash", "status": "interrupted"}
    page = render_html(report, events[: cut + 1], run)
    assert "interrupted — <code>fanout resume 20261129-crash</code> continues it" in page
    assert 'data-outcome="cut"' in page
    finished = render_html(report, events, RUN)
    assert "fanout resume" not in finished and 'data-outcome="cut"' not in finished


def test_resumed_run_marks_the_second_session() -> None:
    """Events from a second session draw a line where the run was resumed."""
    report, events = _demo()
    for e in events[len(events) // 2:]:
        e["session"] = 2
    page = render_html(report, events, {**RUN, "sessions": 2})
    assert 'class="resume"' in page and "2</b> sessions" in page


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        pytest.param({"ok": True, "empty": False, "complete": True}, "ok", id="ok"),
        pytest.param({"ok": True, "empty": True, "complete": True}, "empty", id="empty"),
        pytest.param({"ok": True, "empty": False, "complete": False}, "partial", id="partial"),
        pytest.param({"ok": False, "errorCategory": "business"}, "business", id="business"),
        pytest.param({"ok": False, "errorCategory": None}, "internal", id="unknown"),
    ],
)
def test_attempt_outcome(result: dict[str, Any], outcome: str) -> None:
    """An envelope's outcome is ok, empty, partial or its error category."""
    assert attempt_outcome(result) == outcome


def test_long_finding_data_is_cut() -> None:
    """Long values and long lists in findings are shortened, not dumped whole."""
    report, events = _demo()
    finding = report["answer"]["sections"][0]["findings"][0]
    finding["data"] = {"blob": "x" * 5000, "rows": list(range(40)), "deep": {"a": {"b": [1]}}}
    page = render_html(report, events, RUN)
    assert "x" * 5000 not in page and "x" * 200 + "" in page and "x…" in page
    assert "… 28 more" in page
    assert "<li>39</li>" not in page


def _browser() -> str:
    """The chromium binary (tests/chromium.py: a failure where it could be installed)."""
    return chromium()


def _run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=60, check=True,
        )
    except subprocess.TimeoutExpired:
        # A script dialog (alert) from unescaped content blocks headless chromium.
        pytest.fail("chromium did not finish within 60s: did a script run on the page?")


@pytest.mark.process
def test_page_in_a_real_browser(tmp_path: Path) -> None:
    """Headless chromium shows the query, each subtask, the gap triggers, coverage, no script."""
    chromium = _browser()
    report, events = _demo()
    hostile(report, events)
    page = tmp_path / "report.html"
    page.write_text(render_html(report, events, RUN), encoding="utf-8")
    dom = _run_chromium(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert "<body" in dom
    assert "battery &lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<script" not in dom.lower()
    for s in report["subtasks"]:
        assert f'data-subtask="{s["id"]}"' in dom
    for g in report["gaps"]:
        assert f">{g['trigger']}</text>" in dom and f"<code>{g['trigger']}</code>" in dom
    assert 'class="cov-pct">75%<' in dom
    assert "<svg" in dom and 'class="attempt"' in dom

    shot = tmp_path / "shot.png"
    _run_chromium(chromium, tmp_path / "profile", f"--screenshot={shot}",
                  "--window-size=1280,1600", "--hide-scrollbars", page.as_uri())
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 1600)


def _label(page: str, sid: str) -> str:
    """The detail line under a timeline row's name (status · attempts)."""
    match = re.search(rf'<text class="sid" [^>]*>{re.escape(sid)}<title>.*?</title></text>'
                      rf'<circle [^>]*class="st-(\w+)"/><text class="detail" [^>]*>([^<]*)</text>',
                      page, flags=re.S)
    assert match, sid
    return f"{match.group(1)}: {match.group(2)}"


@pytest.mark.parametrize(("name", "label"), [
    pytest.param("followup_fills_gap", "done: done · 3 attempt(s)", id="covered-lead"),
    pytest.param("lead_plan_never_valid", "gap: gap · ", id="lead-with-a-gap"),
])
def test_the_leads_timeline_row_is_a_gap_only_when_the_report_has_one(
    name: str, label: str
) -> None:
    """The lead is no subtask: its row was a red "gap · 0 attempt(s)" even on a run covered
    100%; it is a gap only with a gap of its own, and counts its model calls."""
    report, events = traced(name)
    shown = _label(render_html(report, events, RUN), "lead")
    assert shown.startswith(label), shown


def test_sources_and_urls_in_findings_are_links_only_for_http_and_escaped() -> None:
    """A page a finding was read from, a URL in its data and a numbered source are links
    (escaped, opening outside the report); javascript: and data: URLs stay text."""
    report, events = _demo()
    evil = 'https://example.org/a?q="><script>alert(1)</script>'
    section = report["answer"]["sections"][0]
    section["findings"][0].update(
        url="https://example.org/page", title="A <b>page</b>",
        data={"results": [{"url": evil}, {"url": "javascript:alert(1)"},
                          {"url": "data:text/html,x"}]})
    report["answer"].update(text="It says so [1].", sources=[
        {"n": 1, "url": "https://example.org/page", "title": "A page", "subtask": "market",
         "tool": "web.fetch"},
        {"n": 2, "url": "javascript:alert(2)", "title": "bad", "subtask": "market",
         "tool": "web.fetch"}])
    page = render_html(report, events, RUN)
    hrefs = re.findall(r'<a href="([^"]*)"', page)
    assert "https://example.org/page" in hrefs
    assert 'https://example.org/a?q=&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;' in hrefs
    assert all(h.startswith("https://") for h in hrefs), hrefs
    assert ">A &lt;b&gt;page&lt;/b&gt;</a>" in page and "<script>alert" not in page
    assert "javascript:alert(1)" in page and "javascript:alert(2)" in page  # shown as text
    assert all('target="_blank" rel="noopener noreferrer nofollow"' in a
               for a in re.findall(r"<a [^>]*>", page))


def test_the_coverage_card_counts_what_the_header_counts() -> None:
    """The demo's 90% sits beside "covered: 9 of 10 weight", the patents gap its follow-up
    filled counted and named (it read "weighted share answered: 7 of 10 weight")."""
    report, events = traced("research_lead")
    page = render_html(report, events, RUN)
    card = page.split('id="coverage"', 1)[1].split("</section>", 1)[0]
    assert 'class="cov-pct">90%<' in card and "<b>90%</b> covered" in page
    assert "covered: 9 of 10 weight" in card and "patents, whose gap a follow-up filled" in card
    assert 'class="seg partial filled"' in card and "filled by patents_web" in card


def test_findings_read_as_text_and_gaps_in_plain_words() -> None:
    """Search results are a title, where, and a snippet (they were raw JSON); what is not
    covered says "partial data", not "no category/incomplete_data"."""
    report, events = traced("research_lead")
    section = report["answer"]["sections"][0]
    section["findings"][0].update(tool="docs.search", data={"results": [
        {"path": "notes/cold.md", "title": "Cold cells", "heading": "Winter",
         "snippet": "Cells keep 90% at -20 °C.", "score": 3.5}]})
    page = render_html(report, events, RUN)
    found = page.split('id="answer"', 1)[1]
    assert "What each subtask found" in found
    assert "<b>Cold cells</b> <code>notes/cold.md</code> · Winter" in found
    assert '<div class="snippet">Cells keep 90% at -20 °C.</div>' in found
    assert "&quot;snippet&quot;" not in found and '{"' not in found
    synthesis = page.split('id="synthesis"', 1)[1].split("</section>", 1)[0]
    assert "supply_chain: partial data — trade_data returned partial data" in synthesis
    assert "incomplete_data" not in synthesis and "no category" not in synthesis
    covered = synthesis.split("<h3>Covered by a follow-up</h3>", 1)[1]
    assert "patents: access denied — filled by patents_web (web_search)" in covered
    gaps = page.split('id="gaps"', 1)[1].split("</section>", 1)[0]
    assert "<code>incomplete_data</code>" in gaps  # the gap table keeps the wire's word


def _linked_report() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    report, events = _demo()
    report["answer"].update(
        text="Cells keep 90% [1], see https://example.org/cold?a=1&b=<2>. Notes agree [2].",
        sources=[{"n": 1, "url": "https://example.org/cold", "title": "Cold <cells>",
                  "subtask": "market", "tool": "web.fetch"},
                 {"n": 2, "path": "notes/x.md", "title": "Notes", "subtask": "market",
                  "tool": "docs.read"}])
    return report, events


def test_http_sources_and_urls_in_the_answer_are_links_paths_are_not() -> None:
    """A web source and a URL in the answer's text are escaped links opening outside the
    report (rel noopener noreferrer); a document's path stays text."""
    report, events = _linked_report()
    page = render_html(report, events, RUN)
    synthesis = page.split('id="synthesis"', 1)[1].split("</section>", 1)[0]
    anchors = re.findall(r"<a [^>]*>[^<]*</a>", synthesis)
    assert re.findall(r'<a href="([^"]*)"', synthesis) == [
        "https://example.org/cold?a=1&amp;b=", "https://example.org/cold"]
    assert all('rel="noopener noreferrer nofollow"' in a for a in anchors)
    assert ">Cold &lt;cells&gt;</a>" in synthesis
    assert "Notes <code>notes/x.md</code>" in synthesis


@pytest.mark.process
def test_sources_are_links_in_a_real_browser(tmp_path: Path) -> None:
    """In chromium the web source and the answer's URL are <a> elements with rel
    noopener noreferrer; the path is not a link; nothing the report holds runs."""
    report, events = _linked_report()
    page = tmp_path / "report.html"
    page.write_text(render_html(report, events, RUN), encoding="utf-8")
    dom = _run_chromium(_browser(), tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    synthesis = dom.split('id="synthesis"', 1)[1].split("</section>", 1)[0]
    hrefs = re.findall(r'<a href="([^"]*)"[^>]*rel="noopener noreferrer nofollow"', synthesis)
    assert hrefs == ["https://example.org/cold?a=1&amp;b=", "https://example.org/cold"]
    assert "notes/x.md" in synthesis and 'href="notes' not in synthesis
    assert "Cold &lt;cells&gt;" in synthesis and "<cells>" not in synthesis
