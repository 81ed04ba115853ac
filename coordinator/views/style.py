"""The HTML report's inline stylesheet (no external fonts, images or scripts)."""

from __future__ import annotations

STATUS_COLOURS = {
    "complete": "#2f9e44",
    "empty": "#4dabf7",
    "partial": "#fab005",
    "gap": "#e03131",
}
OUTCOME_BADGE = {"complete": "#2f9e44", "partial": "#e67700", "failed": "#c92a2a"}

CSS = """
:root { --ink:#212529; --muted:#6c757d; --line:#dee2e6; --card:#fff; --bg:#f4f5f7; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans",
  "Liberation Sans", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 24px 48px; }
h1 { font-size: 26px; line-height: 1.25; margin: 6px 0 10px; }
h2 { font-size: 18px; margin: 0 0 12px; display:flex; align-items:center; gap:10px; }
h2 .count { font-size: 13px; font-weight: 600; color: var(--muted); }
h3 { font-size: 15px; margin: 0; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo,
  Consolas, monospace; font-size: 12.5px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 20px; margin: 16px 0; box-shadow: 0 1px 2px rgba(0,0,0,.04); }
.eyebrow { text-transform: uppercase; letter-spacing: .08em; font-size: 12px;
  font-weight: 700; color: var(--muted); }
.meta { display:flex; flex-wrap:wrap; gap: 8px 22px; color: var(--muted); font-size: 14px;
  align-items:center; }
.meta b { color: var(--ink); font-weight: 600; }
.badge { display:inline-block; padding: 2px 10px; border-radius: 999px; font-size: 12.5px;
  font-weight: 700; color:#fff; letter-spacing:.02em; white-space: nowrap; }
.badge.big { font-size: 14px; padding: 4px 14px; }
.badge.soft { background:#e9ecef; color: var(--ink); font-weight:600; }
.banner { border-radius: 10px; padding: 12px 16px; margin: 16px 0; font-weight: 600; }
.banner.interrupted { background:#fff5f5; border:1px solid #ffa8a8; color:#a61e1e; }
.banner.running { background:#e7f5ff; border:1px solid #74c0fc; color:#1864ab; }
.banner code { background: rgba(0,0,0,.06); padding: 1px 6px; border-radius: 4px; }
.cov-head { display:flex; align-items:baseline; gap:14px; margin-bottom:10px; }
.cov-pct { font-size: 34px; font-weight: 800; line-height:1; }
.cov-sub { color: var(--muted); }
.covbar { display:flex; height: 34px; border-radius: 8px; overflow:hidden;
  border:1px solid var(--line); background:#f1f3f5; }
.covbar .seg { display:flex; align-items:center; justify-content:center; color:#fff;
  font-size: 12px; font-weight:600; overflow:hidden; white-space:nowrap;
  text-overflow: ellipsis; border-right: 2px solid #fff; padding: 0 4px; min-width: 0; }
.covbar .seg.partial { color:#5c3c00; }
.covbar .seg.filled { box-shadow: inset 0 -6px 0 #2f9e44; }
.covbar .seg:last-child { border-right: 0; }
.legend { display:flex; flex-wrap:wrap; gap: 6px 16px; margin-top: 10px; font-size: 13px;
  color: var(--muted); }
.key { display:inline-flex; align-items:center; gap:6px; }
.key i { width: 14px; height: 12px; border-radius: 3px; display:inline-block; }
.key i.filled-key { background:#fab005; box-shadow: inset 0 -4px 0 #2f9e44; }
.key i.hatch { background: repeating-linear-gradient(45deg,#f76707 0 2px,#fff4e6 2px 5px); }
.key i.queued { height: 0; border-top: 2px dotted #adb5bd; border-radius:0; width: 18px; }
.key i.span-key { background:#f1f3f5; border:1px solid #ced4da; }
.key i.span-key.r2 { background:#e7f5ff; border:1.5px dashed #1971c2; }
.key b.diamond { width: 10px; height: 10px; transform: rotate(45deg); display:inline-block;
  margin: 0 2px; }
.key b.diamond.hollow { background:#fff; border: 2px solid #e67700; width: 9px; height: 9px; }
svg.timeline { display:block; font-family: inherit; }
svg.timeline .band { fill: transparent; }
svg.timeline .band.alt { fill: #f8f9fa; }
svg.timeline .attempt { stroke: #fff; stroke-width: 1; }
svg.timeline .grid { stroke: #e9ecef; stroke-width: 1; }
svg.timeline .end { stroke: #495057; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg.timeline .resume { stroke: #0c8599; stroke-width: 2; stroke-dasharray: 2 3; }
svg.timeline .endlabel { font-size: 12px; font-weight: 700; fill: #495057; }
svg.timeline .tick { font-size: 12px; fill: var(--muted); }
svg.timeline .sid { font-size: 13.5px; font-weight: 700; fill: var(--ink); }
svg.timeline .detail { font-size: 11.5px; fill: var(--muted); }
svg.timeline .queued { stroke: #adb5bd; stroke-width: 2; stroke-dasharray: 2 4; }
svg.timeline .span { fill: #f1f3f5; stroke: #ced4da; stroke-width: 1; }
svg.timeline .span.round2, svg.timeline .span.round3 { fill: #e7f5ff; stroke: #1971c2;
  stroke-width: 1.5; stroke-dasharray: 5 3; }
svg.timeline .span.bg-complete { fill: #b2f2bb; stroke: #2f9e44; }
svg.timeline .span.bg-empty { fill: #d0ebff; stroke: #4dabf7; }
svg.timeline .span.bg-partial { fill: #fff3bf; stroke: #fab005; }
svg.timeline .span.bg-gap { fill: #ffe3e3; stroke: #e03131; }
svg.timeline .wait { fill: url(#hatch); }
svg.timeline .round { font-size: 11.5px; font-weight: 700; fill: #1971c2; }
svg.timeline .trigger { font-size: 12px; font-weight: 700; }
svg.timeline .st-complete { fill: #2f9e44; } svg.timeline .st-empty { fill: #4dabf7; }
svg.timeline .st-partial { fill: #fab005; } svg.timeline .st-gap { fill: #e03131; }
svg.timeline .st-done { fill: #2f9e44; }
.note { color: var(--muted); font-size: 13px; margin: 8px 0 0; }
table { width:100%; border-collapse: collapse; font-size: 13.5px; }
th { text-align:left; font-size: 12px; text-transform: uppercase; letter-spacing:.05em;
  color: var(--muted); border-bottom: 2px solid var(--line); padding: 6px 8px; }
td { border-bottom: 1px solid var(--line); padding: 8px; vertical-align: top; }
td ul { margin: 0; padding-left: 18px; }
table.gaps { table-layout: fixed; }
table.gaps td { overflow-wrap: anywhere; }
table.gaps td.mono { font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pill { display:inline-block; padding: 1px 8px; border-radius: 6px; font-size: 12.5px;
  font-weight:600; background:#f1f3f5; white-space: nowrap; }
.pill.transient { background:#fff4e6; color:#d9480f; }
.pill.validation { background:#f3f0ff; color:#5f3dc4; }
.pill.business { background:#fff0f6; color:#a61e4d; }
.pill.permission { background:#fff5f5; color:#c92a2a; }
.pill.internal { background:#e9ecef; color:#212529; }
.pill.escalate { background:#c92a2a; color:#fff; }
.pill.gap { background:#fff3bf; color:#7c5400; }
.pill.retry_later { background:#ffe8cc; color:#d9480f; }
.esc { border-left: 4px solid #c92a2a; padding: 6px 12px; margin: 10px 0; background:#fffafa; }
.esc p { margin: 4px 0; }
.sections { display:grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
.section { border:1px solid var(--line); border-radius: 8px; padding: 12px 14px;
  border-top: 4px solid var(--line); overflow-wrap: anywhere; }
.section .q { color: var(--muted); font-size: 13.5px; margin: 2px 0 8px; }
.section .head { display:flex; align-items:center; gap:8px; flex-wrap: wrap; }
.finding { margin: 8px 0 0; padding-top: 8px; border-top: 1px dashed var(--line); }
.finding .tool { font-weight: 600; font-size: 13px; }
.finding ul { margin: 4px 0 0; padding-left: 18px; }
.given { margin-top: 8px; padding-left: 8px; border-left: 3px solid var(--line); }
.finding li { margin: 1px 0; }
.finding .k { color: var(--muted); }
.finding .hit { margin: 4px 0; }
.finding .snippet { color: var(--ink); }
.finding .more { color: var(--muted); font-size: 12px; }
.gapline { margin-top: 8px; font-size: 13px; color:#a61e1e; background:#fff5f5;
  border-radius:6px; padding: 6px 8px; }
.summary { font-size: 16px; margin: 0 0 14px; }
.missing li { margin: 4px 0; }
#synthesis { border-left: 4px solid #1971c2; }
.synthesis { font-size: 15px; line-height: 1.55; margin: 8px 0; }
.sources { color: #555; font-size: 13px; }
ol.sources { padding-left: 22px; } ol.sources li { margin: 2px 0; }
ol.sources .where { color: #868e96; font-size: 12px; word-break: break-all; }
.synthesis-error { color: #c92a2a; }
.extractive-note { background:#fff3bf; color:#7c5400; border-radius:6px; padding: 6px 10px;
  font-weight: 600; }
ul.passages { font-size: 15px; line-height: 1.55; padding-left: 20px; }
.unverified { background:#fff3bf; border-bottom: 2px dotted #e67700; }
.check-mark { color:#d9480f; font-size: 12.5px; font-weight: 600; white-space: nowrap; }
details.rejected pre { white-space: pre-wrap; font-size: 12px; max-height: 16em; overflow: auto;
  background:#f8f9fa; padding: 8px; border-radius: 6px; }
footer { color: var(--muted); font-size: 12.5px; text-align:center; margin-top: 28px; }
@media (max-width: 820px) { .sections { grid-template-columns: 1fr; } }
"""
