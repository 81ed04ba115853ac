"""The per-subagent timeline of the HTML report: one inline SVG row per subtask.

Built from the run's trace events (``state``, ``start``, ``attempt``, ``wait``); with
no trace it falls back to each subtask's ``started_s``/``ended_s``. Every string taken
from the report or the trace is escaped, in text and in attributes alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

# Attempt outcomes and their colours; the legend and the CSS swatches use the same table.
OUTCOME_COLOURS = {
    "ok": "#2f9e44",
    "empty": "#4dabf7",
    "partial": "#fab005",
    "transient": "#f76707",
    "validation": "#7950f2",
    "business": "#d6336c",
    "permission": "#c92a2a",
    "internal": "#343a40",
    "cut": "#adb5bd",
}
ROUTE_COLOURS = {"escalate": "#c92a2a", "gap": "#e67700", "retry_later": "#1971c2"}

_LABEL_W = 200  # the left column with the subtask names
_CHART_W = 900
_RIGHT_PAD = 40
_ROW_H = 40
_AXIS_H = 30
_BAR_H = 18
_CHAR_W = 6.4  # average width of an 11px sans-serif character, to place labels


def seconds(value: object) -> str:
    """A time in seconds for people: to 0.01 s below 100 s, whole seconds above."""
    t = float(str(value))
    return f"{t:,.0f}s" if abs(t) >= 100 else f"{round(t, 2):g}s"


def _text(value: object) -> str:
    """``value`` as text escaped for HTML content and attribute values alike."""
    return escape(str(value), quote=True)


@dataclass
class _Block:
    """A time interval on a row, with its look and its tooltip."""

    start: float
    end: float
    kind: str
    tip: str
    css: str = ""


@dataclass
class _Mark:
    """An escalation point: a diamond with a tooltip and an optional visible label."""

    at: float
    colour: str
    tip: str
    label: str = ""


@dataclass
class _Row:
    """Everything drawn on one subtask's row."""

    subtask: Mapping[str, Any]
    queued: list[_Block] = field(default_factory=list)
    spans: list[_Block] = field(default_factory=list)
    attempts: list[_Block] = field(default_factory=list)
    waits: list[_Block] = field(default_factory=list)
    marks: list[_Mark] = field(default_factory=list)


def attempt_outcome(result: Mapping[str, Any]) -> str:
    """ok, empty, partial, or the error category of a tool envelope (wire dict)."""
    if result.get("ok"):
        if result.get("empty"):
            return "empty"
        return "partial" if result.get("complete") is False else "ok"
    category = result.get("errorCategory")
    return category if category in OUTCOME_COLOURS else "internal"


def _attempt_tip(tool: str, attempt: object, result: Mapping[str, Any], start: float,
                 end: float) -> str:
    outcome = attempt_outcome(result)
    tip = f"{tool} attempt {attempt}: {outcome}"
    if result.get("error_type"):
        tip += f" ({result['error_type']})"
    if result.get("message"):
        tip += f" — {result['message']}"
    tip += f"\n{seconds(start)} → {seconds(end)}"
    if result.get("trace_id"):
        tip += f" · {result['trace_id']}"
    return tip


def _gap_tip(gap: Mapping[str, Any]) -> str:
    category = gap.get("errorCategory") or "no category"
    return (f"{gap.get('subtask_id')}: {gap.get('trigger')} ({category}) → {gap.get('route')}"
            f"\n{gap.get('message', '')}")


def _rows_from_events(report: Mapping[str, Any], events: Sequence[Mapping[str, Any]],
                      end_of_run: float) -> list[_Row]:
    gaps = {g["subtask_id"]: g for g in report.get("gaps", [])}
    rows = {s["id"]: _Row(s) for s in report.get("subtasks", [])}
    for sid in dict.fromkeys(str(e.get("subtask_id")) for e in events):
        if sid not in rows:
            # Not a subtask: the lead. Its status is a gap only when the report has one for
            # it (its plan or synthesis failed), and its attempts are its model calls.
            attempts = sum(e.get("subtask_id") == sid and e.get("kind") == "attempt"
                           for e in events)
            rows[sid] = _Row({"id": sid, "status": "gap" if sid in gaps else "done",
                              "attempts": attempts})
    by_sub: dict[str, list[Mapping[str, Any]]] = {sid: [] for sid in rows}
    for e in sorted(events, key=lambda e: (e.get("seq", 0))):
        by_sub[str(e.get("subtask_id"))].append(e)
    for sid, row in rows.items():
        queued_at: float | None = None
        span_at: float | None = None
        open_start: Mapping[str, Any] | None = None
        last_result: Mapping[str, Any] = {}
        # (when, the last result before it, how many spans had ended by then)
        escalated: list[tuple[float, Mapping[str, Any], int]] = []
        for e in by_sub[sid]:
            kind, at = e.get("kind"), float(e.get("at", 0.0))
            if open_start is not None and kind in ("start", "state") and (
                kind == "start" or e.get("state") in ("done", "escalated", "queued")
            ):
                # An attempt with no end in the trace was cut (deadline, crash, resume).
                row.attempts.append(_Block(float(open_start["at"]), at, "cut",
                                           f"{open_start.get('tool')} attempt "
                                           f"{open_start.get('attempt')}: cut, no result"))
                open_start = None
            if kind == "state":
                state = e.get("state")
                if state == "queued" and span_at is None:
                    queued_at = at
                elif state == "running" and span_at is None:
                    if queued_at is not None:
                        row.queued.append(_Block(queued_at, at, "queued", "queued"))
                        queued_at = None
                    span_at = at
                elif state in ("done", "escalated"):
                    start = at if span_at is None else span_at
                    row.spans.append(_Block(start, at, f"round{len(row.spans) + 1}", ""))
                    span_at = None
                    if state == "escalated":
                        escalated.append((at, last_result, len(row.spans)))
            elif kind == "start":
                open_start = e
            elif kind == "attempt":
                result = e.get("result") or {}
                begin = at if open_start is None else float(open_start.get("at", at))
                tool = str(e.get("tool"))
                row.attempts.append(_Block(begin, at, attempt_outcome(result),
                                           _attempt_tip(tool, e.get("attempt"), result,
                                                        begin, at)))
                last_result = result
                open_start = None
            elif kind == "wait":
                wait_s = float(e.get("wait_s") or 0.0)
                tip = f"backoff {seconds(wait_s)} before attempt {e.get('attempt')}"
                row.waits.append(_Block(at, at + wait_s, "wait", tip))
        if open_start is not None:
            row.attempts.append(_Block(float(open_start["at"]), end_of_run, "cut",
                                       f"{open_start.get('tool')} attempt "
                                       f"{open_start.get('attempt')}: no result recorded"))
        if queued_at is not None:
            row.queued.append(_Block(queued_at, end_of_run, "queued", "queued, never started"))
        if span_at is not None:
            row.spans.append(_Block(span_at, end_of_run, f"round{len(row.spans) + 1}", ""))
        gap = gaps.get(sid)
        for i, (at, before, ended) in enumerate(escalated):
            retried = len(row.spans) > ended  # a later round started after it
            if not retried and gap is not None:
                continue  # the final escalation is drawn with the gap below
            tip = f"{sid}: round {i + 1} escalated"
            if before:
                tip += f" after {before.get('tool')} {attempt_outcome(before)}"
                if before.get("error_type"):
                    tip += f" ({before['error_type']})"
                if before.get("message"):
                    tip += f"\n{before['message']}"
            tip += "\n→ retried in the next round" if retried else "\n→ to be retried later"
            row.marks.append(_Mark(at, ROUTE_COLOURS["retry_later"], tip))
        if gap is not None:
            at = escalated[-1][0] if escalated else _end_of(row, end_of_run)
            row.marks.append(_gap_mark(gap, at))
    return list(rows.values())


def _end_of(row: _Row, end_of_run: float) -> float:
    ended = row.subtask.get("ended_s")
    if ended is not None:
        return float(str(ended))
    return max((b.end for b in row.spans + row.attempts), default=end_of_run)


def _gap_mark(gap: Mapping[str, Any], at: float) -> _Mark:
    colour = ROUTE_COLOURS.get(str(gap.get("route")), ROUTE_COLOURS["escalate"])
    return _Mark(at, colour, _gap_tip(gap), str(gap.get("trigger", "")))


def _rows_from_subtasks(report: Mapping[str, Any], end_of_run: float) -> list[_Row]:
    gaps = {g["subtask_id"]: g for g in report.get("gaps", [])}
    rows = []
    for s in report.get("subtasks", []):
        row = _Row(s)
        if s.get("started_s") is not None:
            end = float(s["ended_s"]) if s.get("ended_s") is not None else end_of_run
            status = _text(s.get("status", ""))
            row.spans.append(_Block(float(s["started_s"]), end, "round1", "", f" bg-{status}"))
        if s["id"] in gaps:
            row.marks.append(_gap_mark(gaps[s["id"]], _end_of(row, end_of_run)))
        rows.append(row)
    return rows


def _tick_step(span: float) -> float:
    """A 1-2-5 step giving at most ten ticks over ``span`` seconds."""
    raw = max(span, 1e-9) / 10
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def timeline_svg(report: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str:
    """The timeline as an inline SVG element (a shared time axis, a row per subtask)."""
    times = [float(e.get("at", 0.0)) + float(e.get("wait_s") or 0.0) for e in events]
    times += [float(s[k]) for s in report.get("subtasks", []) for k in ("started_s", "ended_s")
              if s.get(k) is not None]
    end_of_run = max([float(report.get("elapsed_s") or 0.0), *times])
    rows = (_rows_from_events(report, events, end_of_run) if events
            else _rows_from_subtasks(report, end_of_run))
    horizon = max(end_of_run, 1e-9)
    step = _tick_step(horizon)
    horizon = math.ceil(horizon / step - 1e-9) * step
    width = _LABEL_W + _CHART_W + _RIGHT_PAD
    height = _AXIS_H + _ROW_H * len(rows) + 22

    def x(t: float) -> float:
        return _LABEL_W + _CHART_W * min(max(t, 0.0), horizon) / horizon

    out = [f'<svg class="timeline" viewBox="0 0 {width} {height}" width="100%" '
           f'role="img" aria-label="timeline per subagent" xmlns="http://www.w3.org/2000/svg">',
           '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff4e6"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#f76707" stroke-width="2.2"/>'
           '</pattern></defs>']
    bottom = height - 20
    # Row bands and labels first, so the grid and the end line are drawn over the bands.
    for i, row in enumerate(rows):
        out.append(_label_svg(row, _AXIS_H + i * _ROW_H, width, alt=i % 2 == 1))
    n_ticks = round(horizon / step)
    for i in range(n_ticks + 1):
        t = i * step
        out.append(f'<line class="grid" x1="{x(t):.1f}" y1="{_AXIS_H - 6}" x2="{x(t):.1f}" '
                   f'y2="{bottom}"/>')
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{_AXIS_H - 12}" '
                   f'text-anchor="middle">{t:g}s</text>')
    elapsed = float(report.get("elapsed_s") or 0.0)
    if elapsed > 0:
        out.append(f'<line class="end" x1="{x(elapsed):.1f}" y1="{_AXIS_H - 6}" '
                   f'x2="{x(elapsed):.1f}" y2="{bottom + 4}"><title>job ended at {seconds(elapsed)}'
                   f'</title></line><text class="endlabel" x="{x(elapsed):.1f}" '
                   f'y="{bottom + 16}" text-anchor="middle">end {seconds(elapsed)}</text>')
    for session_start in _session_starts(events):
        out.append(f'<line class="resume" x1="{x(session_start):.1f}" y1="{_AXIS_H - 6}" '
                   f'x2="{x(session_start):.1f}" y2="{bottom}"><title>resumed at '
                   f'{seconds(session_start)}</title></line>')
    for i, row in enumerate(rows):
        out.append(_row_svg(row, _AXIS_H + i * _ROW_H, x, width))
    out.append("</svg>")
    return "\n".join(out)


def _session_starts(events: Sequence[Mapping[str, Any]]) -> list[float]:
    firsts: dict[object, float] = {}
    for e in sorted(events, key=lambda e: e.get("seq", 0)):
        firsts.setdefault(e.get("session"), float(e.get("at", 0.0)))
    return sorted(firsts.values())[1:]


def _label_svg(row: _Row, top: float, width: float, *, alt: bool) -> str:
    s = row.subtask
    mid = top + _ROW_H / 2
    status = str(s.get("status", ""))
    detail = f"{status} · {s.get('attempts', 0)} attempt(s)"
    if int(s.get("rounds") or 0) > 1:
        detail += f" · {s.get('rounds')} rounds"
    band = "band alt" if alt else "band"
    return (f'<g class="label"><rect class="{band}" x="0" y="{top:.1f}" width="{width}" '
            f'height="{_ROW_H}"/><text class="sid" x="12" y="{mid - 3:.1f}">{_text(s.get("id"))}'
            f'<title>{_text(s.get("query", ""))}</title></text>'
            f'<circle cx="{_LABEL_W - 14}" cy="{mid - 7:.1f}" r="5" class="st-{_text(status)}"/>'
            f'<text class="detail" x="12" y="{mid + 11:.1f}">{_text(detail)}</text></g>')


def _row_svg(row: _Row, top: float, x: Any, width: float) -> str:
    sid = _text(row.subtask.get("id"))
    mid = top + _ROW_H / 2
    bar_y = mid - _BAR_H / 2
    parts = [f'<g class="row" data-subtask="{sid}">']
    for q in row.queued:
        if q.end > q.start:
            parts.append(f'<line class="queued" x1="{x(q.start):.1f}" y1="{mid:.1f}" '
                         f'x2="{x(q.end):.1f}" y2="{mid:.1f}"><title>queued {seconds(q.start)} → '
                         f'{seconds(q.end)}</title></line>')
    for span in row.spans:
        when = f"{seconds(span.start)} → {seconds(span.end)}"
        parts.append(f'<rect class="span {span.kind}{span.css}" x="{x(span.start) - 2:.1f}" '
                     f'y="{bar_y - 4:.1f}" width="{x(span.end) - x(span.start) + 4:.1f}" '
                     f'height="{_BAR_H + 8}" rx="5"><title>{sid} '
                     f'{span.kind.replace("round", "round ")}: {when}</title></rect>')
        if span.kind != "round1":
            # Named beside the span when there is room and no trigger label is there;
            # the dashed outline (see the legend) marks the round either way.
            label = f"↻ {span.kind.replace('round', 'round ')}"
            lx = x(span.end) + 6
            taken = any(m.label and x(m.at) >= x(span.end) - 10 for m in row.marks)
            if not taken and lx + len(label) * _CHAR_W < width:
                parts.append(f'<text class="round" x="{lx:.1f}" y="{mid + 4:.1f}">{label}</text>')
    for w in row.waits:
        parts.append(f'<rect class="wait" x="{x(w.start):.1f}" y="{bar_y + 3:.1f}" '
                     f'width="{max(x(w.end) - x(w.start), 1.5):.1f}" height="{_BAR_H - 6}">'
                     f'<title>{_text(w.tip)}</title></rect>')
    # Instant attempts (a call refused before execution) are drawn last, as tall ticks,
    # so the attempt that follows at the same moment does not hide them.
    for a in sorted(row.attempts, key=lambda a: x(a.end) - x(a.start) < 2):
        w_px = x(a.end) - x(a.start)
        left, top_y, height = x(a.start), bar_y, float(_BAR_H)
        if w_px < 2:
            left, top_y, height, w_px = left - 2.5, bar_y - 4, _BAR_H + 8.0, 5.0
        parts.append(f'<rect class="attempt" x="{left:.1f}" y="{top_y:.1f}" '
                     f'width="{w_px:.1f}" height="{height:.1f}" rx="2" '
                     f'fill="{OUTCOME_COLOURS.get(a.kind, "#868e96")}" data-outcome="{a.kind}">'
                     f'<title>{_text(a.tip)}</title></rect>')
    for m in row.marks:
        mx = x(m.at)
        d = 8
        # A gap is drawn hollow: recorded, not handed to anyone; the others are filled.
        hollow = m.colour == ROUTE_COLOURS["gap"]
        paint = (f'fill="#fff" stroke="{m.colour}" stroke-width="2.5"' if hollow
                 else f'fill="{m.colour}" stroke="#fff" stroke-width="1.5"')
        parts.append(f'<g class="mark"><path d="M{mx:.1f} {mid - d:.1f} L{mx + d:.1f} {mid:.1f} '
                     f'L{mx:.1f} {mid + d:.1f} L{mx - d:.1f} {mid:.1f} Z" {paint}/>'
                     f"<title>{_text(m.tip)}</title>")
        if m.label:
            right = mx + d + 5 + len(m.label) * _CHAR_W < width
            lx, anchor = (mx + d + 5, "start") if right else (mx - d - 5, "end")
            parts.append(f'<text class="trigger" x="{lx:.1f}" y="{mid + 4:.1f}" '
                         f'text-anchor="{anchor}" fill="{m.colour}">{_text(m.label)}</text>')
        parts.append("</g>")
    parts.append("</g>")
    return "".join(parts)


def legend_html(*, traced: bool = True) -> str:
    """The timeline's legend: attempt outcomes, waits, queueing, rounds and markers.

    Without a trace the bars are subtask spans coloured by status, so only the markers
    are explained.
    """
    items = []
    if traced:
        items += [f'<span class="key"><i style="background:{c}"></i>{name}</span>'
                  for name, c in OUTCOME_COLOURS.items() if name != "cut"]
        items += [
            f'<span class="key"><i style="background:{OUTCOME_COLOURS["cut"]}"></i>'
            "cut / no result</span>",
            '<span class="key"><i class="hatch"></i>backoff wait</span>',
            '<span class="key"><i class="queued"></i>queued</span>',
            '<span class="key"><i class="span-key"></i>running</span>',
            '<span class="key"><i class="span-key r2"></i>retry round</span>',
        ]
    items += [
        '<span class="key"><b class="diamond" style="background:#c92a2a"></b>escalated</span>',
        '<span class="key"><b class="diamond hollow"></b>gap recorded</span>',
        '<span class="key"><b class="diamond" style="background:#1971c2"></b>retried later'
        "</span>",
    ]
    return '<div class="legend">' + "".join(items) + "</div>"
