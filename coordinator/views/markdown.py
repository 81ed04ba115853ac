"""The Markdown report (GitHub-flavoured): a pure function of the stored report and run.

Text from the report is escaped so that it reads as text: Markdown and HTML punctuation
gets a backslash (CommonMark shows it literally), and table cells also lose line breaks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from coordinator.views.answer_marks import extractive_note, marked_lines, nothing_missing
from coordinator.views.decisions import decision_line, person_line, split_findings
from coordinator.views.followups import followup_lines
from coordinator.views.not_covered import filled_lines, missing_lines
from coordinator.views.words import gap_line, trigger_words

_MAX_TEXT = 280  # characters of one finding value before it is cut
_MAX_ITEMS = 12  # list items shown per finding before "… n more"
# Characters that start Markdown or inline HTML constructs; `_` is left alone because
# GFM ignores it inside words (subtask ids like supply_chain stay readable).
_SPECIAL = re.compile(r"([\\`*<>\[\]|#!~])")
_SAFE_URL = re.compile(r"https?://[^\s<>`\\]+")


def md_text(value: object) -> str:
    """``value`` as inline Markdown text: one line, special characters escaped."""
    text = " ".join(str(value).split())
    return _SPECIAL.sub(r"\\\1", text)


def md_cell(value: object) -> str:
    """``value`` for a table cell: escaped, ``|`` included, never empty."""
    return md_text(value) or " "


def _cut(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: object) -> str:
    return _cut(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def _code(value: object) -> str:
    """An inline code span that survives backticks in ``value`` (not for table cells)."""
    text = " ".join(str(value).split())
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _seconds(value: object) -> str:
    t = float(str(value))
    return f"{t:,.0f}s" if abs(t) >= 100 else f"{round(t, 2):g}s"


def _pct(share: float) -> str:
    text = f"{share * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _table(head: list[str], rows: list[list[str]], align: str) -> list[str]:
    marks = {"l": "---", "r": "---:"}
    return ["| " + " | ".join(head) + " |",
            "| " + " | ".join(marks[a] for a in align) + " |",
            *("| " + " | ".join(row) + " |" for row in rows)]


_TEXT_KEYS = ("snippet", "text", "summary", "description", "content")


def _hit(value: object) -> str | None:
    """A search result or a page (a dict with a ``url`` or ``path``) as one line: its
    title, where it is, its snippet; None for any other value."""
    if not isinstance(value, dict):
        return None
    url, path = value.get("url"), value.get("path")
    where = url if isinstance(url, str) and url else path
    if not isinstance(where, str) or not where:
        return None
    title = str(value.get("title") or where)
    link = f"<{where}>" if isinstance(url, str) and _SAFE_URL.fullmatch(url) else None
    line = md_text(_cut(title))
    if where != title or link:
        line += " — " + (link or f"`{md_text(where).replace('`', '')}`")
    key = next((k for k in _TEXT_KEYS if isinstance(value.get(k), str) and value[k].strip()),
               None)
    if key is not None:
        line += f": {md_text(_cut(str(value[key])))}"
    return line


def _words(value: object) -> str:
    """A value inside a finding in words: a dict as "key: value; …", a list joined."""
    hit = _hit(value)
    if hit is not None:
        return hit
    if isinstance(value, dict):
        return "; ".join(f"{md_text(k)}: {_words(v)}" for k, v in
                         list(value.items())[:_MAX_ITEMS]) or "none"
    if isinstance(value, list):
        return ", ".join(_words(v) for v in value[:_MAX_ITEMS]) or "none"
    return md_text(_cut(str(value)))


def _data_lines(data: object, indent: str) -> list[str]:
    """A finding's data as bullets: lists item by item, dicts as key: value, a search
    result as its title, link and snippet (readable text, not JSON)."""
    if isinstance(data, dict):
        lines = []
        for key, value in list(data.items())[:_MAX_ITEMS]:
            if isinstance(value, list) and value:
                lines.append(f"{indent}- {md_text(key)}:")
                lines.extend(f"{indent}  - {_words(v)}" for v in value[:_MAX_ITEMS])
                lines.extend(_more(len(value), indent + "  "))
            elif isinstance(value, dict | list):
                lines.append(f"{indent}- {md_text(key)}: {_words(value)}")
            else:
                lines.append(f"{indent}- {md_text(key)}: {md_text(_cut(str(value)))}")
        return lines + _more(len(data), indent)
    if isinstance(data, list):
        lines = [f"{indent}- {_words(v)}" for v in data[:_MAX_ITEMS]]
        return lines + _more(len(data), indent)
    if data is None:
        return []
    return [f"{indent}- {md_text(_cut(str(data)))}"]


def _more(n: int, indent: str) -> list[str]:
    return [f"{indent}- … {n - _MAX_ITEMS} more"] if n > _MAX_ITEMS else []


def _header(report: Mapping[str, Any], run: Mapping[str, Any] | None) -> list[str]:
    lines = [f"# {md_text(report.get('query', ''))}", ""]
    line = (f"**Outcome:** {md_text(report.get('outcome', ''))} · "
            f"**Coverage:** {_pct(float(report.get('coverage', 0.0)))} · "
            f"**Elapsed:** {_seconds(report.get('elapsed_s') or 0.0)}")
    if run:
        if run.get("id"):
            line += f" · **Run:** {_code(run['id'])}"
        if run.get("status"):
            line += f" ({md_text(run['status'])})"
    lines += [line, ""]
    if run and (run.get("file") or run.get("started")):
        bits = []
        if run.get("file") or run.get("job"):
            bits.append(f"job {_code(run.get('file') or run.get('job'))}")
        if run.get("started"):
            bits.append(f"started {md_text(run['started'])}")
        if run.get("finished"):
            bits.append(f"finished {md_text(run['finished'])}")
        lines += [" · ".join(bits), ""]
    if run and run.get("status") == "interrupted":
        rid = run.get("id") or "RUN_ID"
        lines += [f"> **Interrupted** — `fanout resume {rid}` continues it. This report shows "
                  "what was recorded before it stopped.", ""]
    summary = (report.get("answer") or {}).get("summary")
    if summary:
        lines += [f"*{md_text(summary)}*", ""]
    return lines


def _subtasks(report: Mapping[str, Any]) -> list[str]:
    rows = []
    for s in report.get("subtasks", []):
        span = "–"
        if s.get("started_s") is not None and s.get("ended_s") is not None:
            span = f"{_seconds(s['started_s'])[:-1]}–{_seconds(s['ended_s'])}"
        rows.append([md_cell(s.get("id")), md_cell(s.get("status")),
                     f"{float(s.get('weight', 1.0)):g}", str(s.get("attempts", 0)),
                     str(s.get("rounds", 0)), str(s.get("steps", 0)), str(s.get("findings", 0)),
                     span, md_cell(s.get("query", ""))])
    head = ["subtask", "status", "weight", "attempts", "rounds", "steps", "findings", "time",
            "query"]
    return ["## Subtasks", "", *_table(head, rows, "llrrrrrrl"), ""]


def _gaps(report: Mapping[str, Any]) -> list[str]:
    gaps = list(report.get("gaps", []))
    lines = [f"## Coverage gaps ({len(gaps)})", ""]
    if not gaps:
        return [*lines, "No coverage gaps: every subtask was answered.", ""]
    followups = followup_lines(report)
    for g in gaps:
        lines += [f"### {md_text(g.get('subtask_id'))}", "",
                  f"- **Category:** {md_text(g.get('errorCategory') or 'none')}",
                  f"- **Trigger:** {_code(g.get('trigger'))} "
                  f"({md_text(trigger_words(g.get('trigger')))})"
                  + (f" (was {_code(g['original_trigger'])})" if g.get("original_trigger")
                     else ""),
                  f"- **Route:** {_code(g.get('route'))}",
                  f"- **Attempted query:** {md_text(g.get('attempted_query', ''))}",
                  f"- **Partial results:** {len(g.get('partial_results', []))}",
                  f"- **Message:** {md_text(g.get('message', ''))}"]
        alternatives = g.get("alternatives", [])
        if alternatives:
            lines.append("- **Alternatives:**")
            lines.extend(f"  - {md_text(a)}" for a in alternatives)
        else:
            lines.append("- **Alternatives:** none")
        if g.get("subtask_id") in followups:
            lines.append(f"- **Follow-up:** {md_text(followups[g['subtask_id']])}")
        lines.append("")
    return lines


def _escalations(report: Mapping[str, Any]) -> list[str]:
    escalations = list(report.get("escalations", []))
    lines = [f"## Escalations ({len(escalations)})", ""]
    if not escalations:
        if report.get("decisions"):
            lines += ["Nothing is left with a person.", ""]
        else:
            lines.append("Nothing was handed to a person.")
    for esc in escalations:
        lines.append(f"- **{md_text(esc.get('subtask_id'))}**: "
                     f"{md_text(esc.get('errorCategory') or 'no category')} / "
                     f"{_code(esc.get('trigger'))} — {md_text(esc.get('message', ''))}")
    for d in report.get("decisions", []):
        lines.append(f"- decision {md_text(decision_line(d))}")
    return [*lines, ""]


def _answer(report: Mapping[str, Any]) -> list[str]:
    """What each subtask found: its findings as readable text, its gap in plain words."""
    answer = report.get("answer") or {}
    gaps = {str(g.get("subtask_id")): g for g in report.get("gaps", [])}
    lines = ["## What each subtask found", ""]
    for s in answer.get("sections", []):
        covered = "covered" if s.get("covered") else "not covered"
        lines += [f"### {md_text(s.get('subtask_id'))} — {md_text(s.get('status', ''))}, "
                  f"{covered}", "", f"*{md_text(s.get('query', ''))}*", ""]
        findings, given = split_findings(s.get("findings", []))
        for f in findings:
            flags = []
            if f.get("empty"):
                flags.append("empty: no matches")
            if f.get("complete") is False:
                flags.append("partial data")
            tail = f" ({', '.join(flags)})" if flags else ""
            lines.append(f"- **{md_text(f.get('tool'))}**{tail}")
            lines.extend(_data_lines(f.get("data"), "  "))
        if not findings and not given:
            lines.append("No findings.")
        if given:
            # A person's answer is evidence of its own kind: apart from what tools found.
            lines += ["", "*Given by a person:*", ""]
            lines += [f"- {md_text(person_line(f))}" for f in given]
        if s.get("gap"):
            said = gap_line(gaps[s["subtask_id"]]) if s.get("subtask_id") in gaps else s["gap"]
            lines += ["", f"> gap: {md_text(said)}"]
        lines.append("")
    missing = missing_lines(report)
    lines += ["### Missing", ""]
    lines += [f"- {md_text(m)}" for m in missing] if missing else ["Nothing is missing."]
    return [*lines, ""]



def _source(source: Mapping[str, Any]) -> str:
    """One numbered source: its title, a link only for a plain http(s) URL, its subtask."""
    url, path = source.get("url"), source.get("path")
    if isinstance(url, str) and _SAFE_URL.fullmatch(url):
        where = f"<{url}>"
    elif url or path:
        where = f"`{md_text(url or path).replace('`', '')}`"
    else:
        where = ""
    title = md_text(source.get("title", ""))
    return (f"{int(source.get('n', 0))}. {title}{' — ' + where if where else ''} "
            f"({md_text(source.get('subtask', ''))})")


def _synthesis(report: Mapping[str, Any]) -> list[str]:
    """The lead agent's answer first, with its sources and what it does not cover."""
    answer = report.get("answer") or {}
    if "text" not in answer and "synthesis_error" not in answer and "kind" not in answer:
        return []
    lines = ["## The lead's answer", ""]
    note = extractive_note(answer)
    if note is not None:
        lines += [f"> **{md_text(note)}**", ""]
    marked = marked_lines(answer)
    if marked is not None:
        # A sentence that failed a check is followed by its mark, in italics.
        lines += [" ".join(md_text(sentence) + "".join(f" _{md_text(m)}_" for m in marks)
                           for sentence, marks in line) for line in marked]
        lines.append("")
    elif answer.get("text"):
        # A model's text is untrusted: escaped like any other value, paragraph by paragraph;
        # an extractive answer's passages (one a line) are a list.
        bullet = "- " if note is not None else ""
        lines += [bullet + md_text(p) for p in str(answer["text"]).split("\n") if p.strip()]
        lines.append("")
    if answer.get("text"):
        sources = answer.get("sources") or []
        lines += ["**Sources**", ""] if sources else ["Sources: none cited"]
        lines += [_source(s) for s in sources]
        lines.append("")
    error = answer.get("synthesis_error")
    if error:
        lines += [f"The lead agent's synthesis failed: {md_text(error.get('message', ''))}", ""]
    missing = missing_lines(report)
    lines += ["**Not covered**", ""]
    lines += [f"- {md_text(m)}" for m in missing] if missing else [
        f"- {nothing_missing(answer)}"]
    filled = filled_lines(report)
    if filled:
        lines += ["", "**Covered by a follow-up**", ""]
        lines += [f"- {md_text(m)}" for m in filled]
    return [*lines, ""]


def render_markdown(report: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> str:
    """The coverage report as a GitHub-flavoured Markdown document.

    Args:
        report: the coverage report's wire dict (``CoverageReport.to_wire()``).
        run: the stored run's metadata (id, status, started, ...), if any.
    """
    lines = [*_header(report, run), *_synthesis(report), *_subtasks(report), *_gaps(report),
             *_escalations(report), *_answer(report)]
    return "\n".join(lines).rstrip() + "\n"
