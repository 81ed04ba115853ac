"""``GET /``: the web page, one self-contained document (inline CSS and script, no CDN).

The page is the same bytes for everyone and holds no data; everything it shows comes
from the API with the token the person signs in with. Without the token the answer is
a 401 that carries the page, which then asks for it (see :mod:`coordinator.serve.auth`).
Its Content-Security-Policy allows its own script only (by hash) and requests to this
service only.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from coordinator.serve.auth import Authorizer
from coordinator.serve.page_script import SCRIPT
from coordinator.views.style import CSS

PAGE_CSS: Final = """
header.top { display:flex; align-items:center; gap: 16px; }
header.top > div { flex: 1; }
header.top h1 { margin: 0; }
#run h3 { margin: 20px 0 6px; }
textarea { width: 100%; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
  font-size: 12.5px; border: 1px solid var(--line); border-radius: 8px; padding: 10px; }
.row { display:flex; flex-wrap: wrap; gap: 12px; align-items: center; margin-top: 10px; }
input[type=number] { width: 6em; }
input, button { font: inherit; }
button { border: 1px solid #adb5bd; background: #fff; border-radius: 6px; padding: 4px 12px;
  cursor: pointer; }
button:disabled { opacity: .5; cursor: default; }
#cancel-btn:not(:disabled) { border-color: #c92a2a; color: #c92a2a; }
.error, ul.errors { color: #a61e1e; }
ul.errors code { background: #fff5f5; padding: 0 4px; border-radius: 4px; }
.muted { color: var(--muted); }
.query { font-size: 17px; margin: 0 0 10px; }
.answer { white-space: pre-wrap; }
.meter { width: 220px; height: 10px; border-radius: 5px; background: #f1f3f5;
  border: 1px solid var(--line); overflow: hidden; }
#covfill { height: 100%; width: 0; background: #2f9e44; transition: width .3s; }
.pill.st-queued { background:#f1f3f5; color:#495057; }
.pill.st-running { background:#e7f5ff; color:#1864ab; }
.pill.st-retrying { background:#f3d9fa; color:#862e9c; }
.pill.st-thinking { background:#fff9db; color:#946c00; }
.pill.st-throttled { background:#fff4e6; color:#d9480f; }
.pill.st-done, .pill.st-finished { background:#d3f9d8; color:#2b8a3e; }
.pill.st-escalated, .pill.st-interrupted { background:#ffe3e3; color:#c92a2a; }
.pill.st-gap { background:#fff4e6; color:#d9480f; }
.pill.st-waiting { background:#f1f3f5; color:#495057; }
td.c-query { color: var(--muted); overflow-wrap: anywhere; }
tr.run-row a { color: #1864ab; }
#ask-question { font-family: inherit; font-size: 15px; }
#people { margin-top: 14px; }
.esc-card, #plan-review { border: 1px solid #f08c00; background: #fff9db; border-radius: 8px;
  padding: 10px 12px; margin: 8px 0; }
.esc-card .msg { margin: 4px 0; }
.esc-card .options { display:flex; flex-direction: column; align-items: flex-start; gap: 6px;
  margin-top: 8px; }
.esc-card .options button { text-align: left; }
.esc-card .answer-row { display:flex; gap: 8px; width: 100%; align-items: flex-start; }
.esc-card textarea.answer-text { flex: 1; }
.esc-card input.answer-source { width: 22em; }
#plan-table input.plan-query { width: 100%; }
#plan-table input.plan-weight { width: 5em; }
iframe#report { width: 100%; height: 900px; border: 1px solid var(--line); border-radius: 8px;
  background: var(--bg); }
"""

_BODY: Final = """
<main>
<header class="top">
  <div><div class="eyebrow">fanout service</div><h1>Research runs</h1></div>
  <button id="logout" type="button" hidden>Sign out</button>
</header>
<section id="login" class="card" hidden>
  <h2>Sign in</h2>
  <p class="muted">This service needs its token (FANOUT_TOKEN or the first line of
  --token-file). The page keeps it in this tab only.</p>
  <form id="login-form" class="row">
    <input id="token" type="password" autocomplete="current-password" placeholder="token"
      aria-label="token">
    <button type="submit">Sign in</button>
  </form>
  <p id="login-error" class="error"></p>
</section>
<div id="app" hidden>
<section id="ask" class="card">
  <h2>Ask a question</h2>
  <form id="ask-form">
    <textarea id="ask-question" rows="3" aria-label="question"
      placeholder="What do my documents say about sodium-ion cells?"></textarea>
    <div class="row">
      <label>documents <input id="ask-docs" type="text" aria-label="documents folder"
        placeholder="blank: the server's first folder"></label>
      <label><input id="ask-web" type="checkbox"> the web</label>
      <label>model <input id="ask-model" type="text" placeholder="the server's"
        aria-label="model"></label>
      <button id="ask-btn" type="submit">Ask</button>
      <span id="ask-result" class="muted"></span>
    </div>
  </form>
  <ul id="ask-errors" class="errors"></ul>
</section>
<section id="submit" class="card">
  <h2>Submit a job</h2>
  <form id="job-form">
    <textarea id="job-text" rows="12" spellcheck="false" aria-label="job file"
      placeholder="scenario: my-job&#10;job:&#10;  query: ...&#10;  subtasks: [...]&#10;tools: ..."
    ></textarea>
    <div class="row">
      <input type="file" id="job-file" accept=".yaml,.yml,.json" aria-label="job file to upload">
      <label>speed <input id="speed" type="number" value="1" min="0.01" step="any"></label>
      <button id="submit-btn" type="submit">Submit</button>
      <span id="submit-result" class="muted"></span>
    </div>
  </form>
  <ul id="submit-errors" class="errors"></ul>
</section>
<section id="run" class="card" hidden>
  <h2>Run <span id="run-id" class="mono"></span> <span id="run-status" class="pill"></span>
    <button id="cancel-btn" type="button">Cancel</button></h2>
  <p id="run-query" class="query"></p>
  <div class="meta">
    <span>coverage so far <b id="coverage">0%</b></span>
    <div class="meter"><div id="covfill"></div></div>
    <span id="progress"></span>
  </div>
  <div id="people" hidden>
    <h3>Waiting for a person <span id="pending-count" class="count"></span></h3>
    <div id="escalations"></div>
    <div id="plan-review" hidden>
      <b>The lead's plan waits for review.</b>
      <span class="muted">Change a query or a weight, or remove a subtask, then approve.</span>
      <table id="plan-table">
        <thead><tr><th>subtask</th><th>query</th><th>weight</th><th>remove</th></tr></thead>
        <tbody></tbody>
      </table>
      <div class="row">
        <button id="plan-approve" type="button">Approve</button>
        <button id="plan-reject" type="button">Reject</button>
        <span id="plan-result" class="muted"></span>
      </div>
      <ul id="plan-errors" class="errors"></ul>
    </div>
  </div>
  <table id="subagents">
    <thead><tr><th>subtask</th><th>query</th><th>state</th><th>attempts</th>
      <th>last result</th><th>trigger</th></tr></thead>
    <tbody></tbody>
  </table>
  <h3>Gaps <span id="gap-count" class="count"></span></h3>
  <table id="gaps" class="gaps">
    <thead><tr><th>subtask</th><th>errorCategory</th><th>trigger</th><th>route</th>
      <th>message</th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="no-gaps" class="muted">No gaps so far.</p>
  <div id="answer-box" hidden>
    <h3>Answer <span id="answer-note" class="muted"></span></h3>
    <p id="answer-text" class="answer"></p>
  </div>
  <div id="report-box" hidden>
    <h3>Report</h3>
    <iframe id="report" sandbox="allow-same-origin allow-popups allow-popups-to-escape-sandbox"
      title="coverage report"></iframe>
  </div>
</section>
<section id="runs" class="card">
  <h2>Runs <button id="refresh" type="button">Refresh</button></h2>
  <table id="runs-table">
    <thead><tr><th>run</th><th>job</th><th>status</th><th>outcome</th><th>coverage</th>
      <th>started</th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="no-runs" class="muted" hidden>No runs yet.</p>
</section>
</div>
</main>
"""

PAGE: Final = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    '<title>fanout</title><link rel="icon" href="data:,">'
    f"<style>{CSS}{PAGE_CSS}</style></head>\n<body>{_BODY}<script>{SCRIPT}</script>"
    "</body></html>\n"
)

_SCRIPT_HASH: Final = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        f"default-src 'none'; script-src 'sha256-{_SCRIPT_HASH}'; "
        "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def page_response(status_code: int = 200) -> HTMLResponse:
    """The page, as the answer ``status_code`` (401 asks for the token)."""
    return HTMLResponse(PAGE, status_code=status_code, headers=PAGE_HEADERS)


def page_router(auth: Authorizer) -> APIRouter:
    """``/``: the page."""
    router = APIRouter(dependencies=[Depends(auth.page)], include_in_schema=False)

    @router.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return page_response()

    return router
