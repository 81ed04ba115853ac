"""The HTML report: one self-contained page (inline CSS and SVG, no scripts) for people.

A pure function of the stored report, trace and run metadata, so any stored run can be
rendered again. Every string from them goes through :func:`html.escape`
(:mod:`coordinator.views.html_text`, which also renders a finding's data as text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordinator.views.answer_marks import (
    NOT_CHECKED,
    extractive_note,
    marked_lines,
    nothing_missing,
)
from coordinator.views.decisions import decision_line, split_findings
from coordinator.views.followups import followup_lines
from coordinator.views.html_text import (
    cut,
    esc,
    finding_html,
    link,
    linked,
    person_html,
    pill,
)
from coordinator.views.not_covered import filled_lines, missing_lines
from coordinator.views.style import CSS, OUTCOME_BADGE, STATUS_COLOURS
from coordinator.views.timeline import legend_html, seconds, timeline_svg
from coordinator.views.words import gap_line, trigger_words

_MAX_REJECTED = 4000  # characters of a rejected answer shown (all of it is in the JSON)
_STATUS_ORDER = ("complete", "empty", "partial", "gap")


def _breakable(value: object) -> str:
    """Escaped text that may wrap after an underscore (long ids in narrow columns)."""
    return esc(value).replace("_", "_<wbr>")


def _pct(share: float) -> str:
    text = f"{share * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _when(value: object) -> str:
    """An ISO timestamp, shorter: a space for the T, UTC spelled out."""
    text = str(value).replace("T", " ", 1)
    return text[:-6] + " UTC" if text.endswith("+00:00") else text


def _badge(text: str, colour: str, extra: str = "") -> str:
    return f'<span class="badge {extra}" style="background:{colour}">{esc(text)}</span>'


def _status_badge(status: str) -> str:
    return _badge(status, STATUS_COLOURS.get(status, "#868e96"))


def _header(report: Mapping[str, Any], run: Mapping[str, Any] | None) -> str:
    outcome = str(report.get("outcome", ""))
    meta = [_badge(outcome, OUTCOME_BADGE.get(outcome, "#868e96"), "big"),
            f"<span><b>{_pct(float(report.get('coverage', 0.0)))}</b> covered</span>",
            f"<span>elapsed <b>{seconds(report.get('elapsed_s') or 0.0)}</b></span>",
            f"<span><b>{len(report.get('subtasks', []))}</b> subtasks</span>"]
    if run:
        if run.get("id"):
            meta.append(f'<span>run <b class="mono">{esc(run["id"])}</b></span>')
        if run.get("status"):
            meta.append(f"<span>status <b>{esc(run['status'])}</b></span>")
        for key in ("started", "finished"):
            if run.get(key):
                meta.append(f"<span>{key} <b>{esc(_when(run[key]))}</b></span>")
        if run.get("file") or run.get("job"):
            meta.append(f'<span>job <b class="mono">{esc(run.get("file") or run.get("job"))}'
                        "</b></span>")
        if int(run.get("sessions") or 1) > 1:
            meta.append(f"<span><b>{esc(run['sessions'])}</b> sessions</span>")
    return ('<header><div class="eyebrow">fanout · coverage report</div>'
            f'<h1>{esc(report.get("query", ""))}</h1>'
            f'<div class="meta">{"".join(meta)}</div></header>')


def _banner(run: Mapping[str, Any] | None) -> str:
    status = (run or {}).get("status")
    if status == "interrupted":
        rid = esc((run or {}).get("id") or "RUN_ID")
        return ('<div class="banner interrupted" role="alert">⚠ This run was interrupted — '
                f"<code>fanout resume {rid}</code> continues it. The report below shows what "
                "was recorded before it stopped.</div>")
    if status == "running":
        return ('<div class="banner running">● This run is still running; the report shows '
                "its progress so far.</div>")
    return ""


def _coverage(report: Mapping[str, Any]) -> str:
    """The coverage card: the share, the weights it counts (as the report counts them:
    complete and empty subtasks, and gaps a follow-up filled), a bar of the subtasks."""
    subtasks = list(report.get("subtasks", []))
    filled = {str(g.get("subtask_id")): g.get("filled_by") or []
              for g in report.get("gaps", []) if g.get("filled_by")}
    total = sum(float(s.get("weight", 1.0)) for s in subtasks) or float(len(subtasks) or 1)
    covered = sum(float(s.get("weight", 1.0)) for s in subtasks
                  if s.get("status") in ("complete", "empty") or str(s.get("id")) in filled)
    order = {status: i for i, status in enumerate(_STATUS_ORDER)}
    segs = []
    for s in sorted(subtasks, key=lambda s: order.get(str(s.get("status")), 9)):
        status = str(s.get("status", ""))
        weight = float(s.get("weight", 1.0))
        by = filled.get(str(s.get("id")))
        tip = (f"{s.get('id')}: {status}{', filled by ' + ', '.join(by) if by else ''}, "
               f"weight {weight:g} ({_pct(weight / total)})")
        segs.append(f'<div class="seg {esc(status)}{" filled" if by else ""}" '
                    f'style="flex:{weight:g} 1 0;background:'
                    f'{STATUS_COLOURS.get(status, "#868e96")}" title="{esc(tip)}">'
                    f'{esc(s.get("id"))}</div>')
    counts = {st: sum(s.get("status") == st for s in subtasks) for st in _STATUS_ORDER}
    legend = "".join(f'<span class="key"><i style="background:{STATUS_COLOURS[st]}"></i>'
                     f"{st} ({counts[st]})</span>" for st in _STATUS_ORDER)
    if filled:
        legend += ('<span class="key"><i class="filled-key"></i>'
                   f"gap filled by a follow-up ({len(filled)})</span>")
    what = "complete and empty subtasks"
    if filled:
        what += ", and " + ", ".join(esc(sid) for sid in filled) + (
            ", whose gap a follow-up filled" if len(filled) == 1
            else ", whose gaps follow-ups filled")
    return ('<section class="card" id="coverage"><h2>Coverage</h2><div class="cov-head">'
            f'<span class="cov-pct">{_pct(float(report.get("coverage", 0.0)))}</span>'
            f'<span class="cov-sub">covered: {covered:g} of {total:g} weight ({what})'
            "</span></div>"
            f'<div class="covbar" role="img" aria-label="coverage by subtask">{"".join(segs)}'
            f'</div><div class="legend">{legend}</div></section>')


def _timeline(report: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str:
    note = ("" if events else '<p class="note">No trace recorded for this run: each bar spans '
            "a subtask's start and end, coloured by its status (see Coverage).</p>")
    return ('<section class="card" id="timeline"><h2>Timeline per subagent</h2>'
            f"{timeline_svg(report, events)}{legend_html(traced=bool(events))}{note}"
            '<p class="note">Hover a block for the tool, attempt, error and trace id.</p>'
            "</section>")


def _gaps(report: Mapping[str, Any]) -> str:
    gaps = list(report.get("gaps", []))
    if not gaps:
        return ('<section class="card" id="gaps"><h2>Coverage gaps <span class="count">0'
                '</span></h2><p>No coverage gaps: every subtask was answered.</p></section>')
    rows = []
    followups = followup_lines(report)
    for g in gaps:
        followed = followups.get(str(g.get("subtask_id")))
        note = f'<br><span class="note">{esc(followed)}</span>' if followed else ""
        alternatives = "".join(f"<li>{esc(a)}</li>" for a in g.get("alternatives", []))
        category = g.get("errorCategory")
        # The wire's trigger for those who match on it, and what it means in words.
        trigger = (f'<code>{esc(g.get("trigger"))}</code><br><span class="note">'
                   f'{esc(trigger_words(g.get("trigger")))}</span>')
        if g.get("original_trigger"):
            was = esc(g["original_trigger"])
            trigger += f'<br><span class="note">was <code>{was}</code></span>'
        rows.append(
            f'<tr><td><b>{_breakable(g.get("subtask_id"))}</b></td>'
            f"<td>{pill(category, category) if category else pill('none')}</td>"
            f"<td>{trigger}</td><td>{pill(g.get('route'), g.get('route'))}</td>"
            f'<td class="mono">{esc(cut(str(g.get("attempted_query", ""))))}</td>'
            f'<td class="num">{len(g.get("partial_results", []))}</td>'
            f"<td>{f'<ul>{alternatives}</ul>' if alternatives else '–'}</td>"
            f"<td>{esc(g.get('message', ''))}{note}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("subtask", "category", "trigger", "route",
                                              "attempted query", "partial", "alternatives",
                                              "message"))
    cols = "".join(f'<col style="width:{w}%">' for w in (13, 9, 13, 8, 19, 6, 18, 14))
    return (f'<section class="card" id="gaps"><h2>Coverage gaps <span class="count">'
            f'{len(gaps)}</span></h2><table class="gaps"><colgroup>{cols}</colgroup>'
            f"<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _escalations(report: Mapping[str, Any]) -> str:
    escalations = list(report.get("escalations", []))
    decisions: dict[Any, str] = {}
    for d in report.get("decisions", []):
        sid = d.get("subtask_id")
        decisions[sid] = (decisions[sid] + "; " if sid in decisions else "") + decision_line(d)
    if not escalations:
        body = "<p>No escalations: nothing was handed to a person.</p>"
        if decisions:
            # Decided escalations a person answered are no longer listed: their decisions are.
            body = "".join(f"<p><b>decision:</b> {esc(line)}</p>" for line in decisions.values())
    else:
        items = []
        for e in escalations:
            tool = f" · tool <code>{esc(e['tool'])}</code>" if e.get("tool") else ""
            traces = ", ".join(f"<code>{esc(t)}</code>" for t in e.get("trace_ids", []))
            decision = decisions.get(e.get("subtask_id"))
            items.append(
                f'<div class="esc"><h3>{esc(e.get("subtask_id"))} '
                f"{pill(e.get('errorCategory') or 'none', e.get('errorCategory') or '')} "
                f"<code>{esc(e.get('trigger'))}</code></h3>"
                f"<p>{esc(e.get('message', ''))}</p>"
                f'<p class="note">{esc(e.get("error_type") or "no error type")} · '
                f"{esc(e.get('attempts', 0))} attempt(s){tool}"
                f"{' · traces ' + traces if traces else ''}</p>"
                + (f"<p><b>decision:</b> {esc(decision)}</p>" if decision else "")
                + "</div>")
        body = "".join(items)
    return (f'<section class="card" id="escalations"><h2>Escalations <span class="count">'
            f"{len(escalations)}</span></h2>{body}</section>")


def _answer(report: Mapping[str, Any]) -> str:
    """What each subtask found: its findings as readable text, its gap in plain words."""
    answer = report.get("answer") or {}
    gaps = {str(g.get("subtask_id")): g for g in report.get("gaps", [])}
    cards = []
    for s in answer.get("sections", []):
        status = str(s.get("status", ""))
        covered = (_badge("covered", "#2f9e44") if s.get("covered")
                   else _badge("not covered", "#c92a2a"))
        tool_findings, given = split_findings(s.get("findings", []))
        findings = "".join(finding_html(f) for f in tool_findings)
        if given:
            # A person's answer is evidence of its own kind: apart from what tools found.
            findings += ('<div class="given"><p class="note">Given by a person:</p>'
                         + "".join(person_html(f) for f in given) + "</div>")
        if not findings:
            findings = '<p class="note">No findings.</p>'
        said = gap_line(gaps[s["subtask_id"]]) if s.get("subtask_id") in gaps else s.get("gap")
        gap = f'<div class="gapline">gap: {esc(said)}</div>' if s.get("gap") else ""
        cards.append(
            f'<article class="section" style="border-top-color:'
            f'{STATUS_COLOURS.get(status, "#868e96")}"><div class="head">'
            f'<h3>{esc(s.get("subtask_id"))}</h3>{_status_badge(status)}{covered}'
            f'<span class="badge soft">weight {float(s.get("weight", 1.0)):g}</span></div>'
            f'<div class="q">{esc(s.get("query", ""))}</div>{findings}{gap}</article>')
    missing = "".join(f"<li>{esc(m)}</li>" for m in missing_lines(report))
    missing_html = (f'<h3 style="margin-top:18px">Missing</h3><ul class="missing">{missing}</ul>'
                    if missing else f'<p class="note">{esc(_nothing(answer))}</p>')
    return ('<section class="card" id="answer"><h2>What each subtask found</h2>'
            f'<p class="summary">{esc(answer.get("summary", ""))}</p>'
            f'<div class="sections">{"".join(cards)}</div>{missing_html}</section>')


def _source(source: Mapping[str, Any]) -> str:
    """One numbered source: a link only for an http(s) URL (never ``javascript:``), all
    of it escaped — titles and URLs come from the web."""
    url, path = source.get("url"), source.get("path")
    title = esc(source.get("title") or url or path or source.get("tool", ""))
    anchor = link(url, str(source.get("title") or url))
    if anchor is not None:
        shown = f'{anchor} <span class="where">{esc(url)}</span>'
    elif url or path:
        shown = f'{title} <code>{esc(url or path)}</code>'
    else:
        shown = title  # a tool's result: its name is the title
    return (f'<li value="{int(source.get("n", 0))}">{shown} '
            f'{pill(source.get("subtask", ""))}</li>')


def _marked(line: list[tuple[str, list[str]]]) -> str:
    """One line of the answer: a sentence that failed a check highlighted, with its marks."""
    parts = []
    for sentence, marks in line:
        if not marks:
            parts.append(esc(sentence))
            continue
        shown = "; ".join(marks)
        parts.append(f'<span class="unverified" title="{esc(shown)}">{esc(sentence)}</span>'
                     + "".join(f' <span class="check-mark">{esc(m)}</span>' for m in marks))
    return " ".join(parts)


def _synthesis(report: Mapping[str, Any]) -> str:
    """The lead agent's answer, first: escaped text (a model's output is untrusted input)."""
    answer = report.get("answer") or {}
    if "text" not in answer and "synthesis_error" not in answer and "kind" not in answer:
        return ""
    body = ""
    note = extractive_note(answer)
    if note is not None:
        body += f'<p class="extractive-note">{esc(note)}</p>'
    marked = marked_lines(answer)
    if marked is not None:
        body += "".join(f'<p class="synthesis">{_marked(line)}</p>' for line in marked)
    elif answer.get("text"):
        paragraphs = [p for p in str(answer["text"]).split("\n") if p.strip()]
        if note is not None:  # an extractive answer's passages, one a line: a list
            items = "".join(f"<li>{linked(p)}</li>" for p in paragraphs)
            body += f'<ul class="synthesis passages">{items}</ul>'
        else:
            body += "".join(f'<p class="synthesis">{linked(p)}</p>' for p in paragraphs)
    if answer.get("text"):
        sources = answer.get("sources") or []
        if sources:
            items = "".join(_source(s) for s in sources)
            body += f'<h3>Sources</h3><ol class="sources">{items}</ol>'
        else:
            body += '<p class="sources">Sources: none cited</p>'
    error = answer.get("synthesis_error")
    if error:
        body += (f'<p class="synthesis-error">The lead agent\'s synthesis failed: '
                 f'{esc(error.get("message", ""))}</p>')
    if answer.get("rejected"):
        body += ('<details class="rejected"><summary>The model\'s rejected answer</summary>'
                 f'<pre>{esc(cut(str(answer["rejected"]), _MAX_REJECTED))}</pre></details>')
    missing = "".join(f"<li>{esc(m)}</li>" for m in missing_lines(report))
    body += ("<h3>Not covered</h3>"
             + (f'<ul class="missing">{missing}</ul>' if missing
                else f"<p>{esc(nothing_missing(answer).capitalize())}.</p>"))
    filled = "".join(f"<li>{esc(m)}</li>" for m in filled_lines(report))
    if filled:
        body += f'<h3>Covered by a follow-up</h3><ul class="missing">{filled}</ul>'
    return f'<section class="card" id="synthesis"><h2>Answer</h2>{body}</section>'


def render_html(
    report: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any] | None = None,
) -> str:
    """The whole report as one self-contained HTML document.

    Args:
        report: the coverage report's wire dict (``CoverageReport.to_wire()``).
        events: the run's trace events (may be empty: the timeline then uses the
            subtasks' start and end times).
        run: the stored run's metadata (id, status, started, ...), if any.
    """
    title = f"fanout · {report.get('query', '')}"
    body = "".join([
        _header(report, run),
        _banner(run),
        _synthesis(report),
        _coverage(report),
        _timeline(report, events),
        _gaps(report),
        _escalations(report),
        _answer(report),
    ])
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}<footer>generated by fanout · every time is seconds since the "
            "job started</footer></main></body></html>\n")


def _nothing(answer: Mapping[str, Any]) -> str:
    """The sections' closing line when nothing is missing."""
    if answer.get("verified") is False:
        return f"Nothing is missing from the search; the passages were {NOT_CHECKED}."
    return "Nothing is missing."
