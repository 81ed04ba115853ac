"""The web page's script: plain JavaScript, no library, no network but this service.

Everything shown is set with ``textContent`` or an attribute value, never as HTML: a
subtask query, a tool's message or a run id reads as text, whatever it holds. The
report (already escaped HTML from the server) goes into a sandboxed ``iframe`` with
no script.
"""

from __future__ import annotations

from typing import Final

SCRIPT: Final = r"""
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const KINDS = ["state", "call", "start", "attempt", "wait", "plan", "followups", "answer.delta",
    "answer", "hint", "hint.unread"];
  const session = window.sessionStorage;
  let token = session.getItem("fanout-token") || "";
  let current = null;
  let runsTimer = null;
  // The run each form's result line names: the line follows that run to its end.
  const named = { "ask-result": null, "submit-result": null };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function pct(x) { return (Math.round(x * 1000) / 10) + "%"; }
  function auth(headers) {
    const out = Object.assign({}, headers || {});
    if (token) out["Authorization"] = "Bearer " + token;
    return out;
  }
  async function api(path, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = auth(opts.headers);
    const res = await fetch(path, opts);
    if (res.status === 401) {
      showLogin("The service refused that token.");
      throw new Error("401");
    }
    return res;
  }
  const runPath = (id) => "/runs/" + encodeURIComponent(id);

  // -- signing in ---------------------------------------------------------------------
  function showLogin(message) {
    stopRun();
    $("app").hidden = true;
    $("login").hidden = false;
    $("logout").hidden = true;
    $("login-error").textContent = message || "";
    $("token").focus();
  }
  async function start() {
    const res = await fetch("/runs", { headers: auth() });
    if (res.status === 401) { showLogin(token ? "The service refused that token." : ""); return; }
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = !token;
    renderRuns((await res.json()).runs);
    if (runsTimer === null) runsTimer = setInterval(() => loadRuns().catch(() => {}), 5000);
    route();
  }
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    token = $("token").value.trim();
    session.setItem("fanout-token", token);
    $("token").value = "";
    start();
  });
  $("logout").addEventListener("click", () => {
    token = "";
    session.removeItem("fanout-token");
    showLogin("");
  });

  // -- the runs list ------------------------------------------------------------------
  async function loadRuns() {
    const res = await api("/runs");
    if (res.ok) renderRuns((await res.json()).runs);
  }
  function renderRuns(runs) {
    const body = $("runs-table").tBodies[0];
    body.replaceChildren();
    for (const r of runs) {
      const tr = el("tr", "run-row");
      tr.dataset.run = r.id;
      const link = el("a", "mono", r.id);
      link.href = "#run=" + encodeURIComponent(r.id);
      const idCell = el("td"); idCell.append(link);
      const status = el("td"); status.append(el("span", "pill st-" + r.status, r.status));
      tr.append(idCell, el("td", "", r.job), status, el("td", "", r.outcome || ""),
                el("td", "num", r.coverage === null ? "" : pct(r.coverage)),
                el("td", "", r.started));
      body.append(tr);
      for (const [line, id] of Object.entries(named)) {
        if (id === r.id) $(line).textContent = "run " + r.id + " " + r.status;
      }
    }
    $("no-runs").hidden = runs.length > 0;
  }
  $("refresh").addEventListener("click", () => loadRuns());

  // -- submitting a job ---------------------------------------------------------------
  $("job-file").addEventListener("change", async () => {
    const file = $("job-file").files[0];
    if (file) $("job-text").value = await file.text();
  });
  $("job-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("job-text").value;
    const type = /^\s*[\[{]/.test(text) ? "application/json" : "application/yaml";
    const speed = $("speed").value || "1";
    const errors = $("submit-errors");
    errors.replaceChildren();
    $("submit-result").textContent = "submitting…";
    const res = await api("/runs?speed=" + encodeURIComponent(speed),
                          { method: "POST", headers: { "Content-Type": type }, body: text });
    let data = {};
    try { data = await res.json(); } catch (_) { data = {}; }
    if (res.status === 201) {
      named["submit-result"] = data.run_id;
      $("submit-result").textContent = "run " + data.run_id + " " + data.status;
      location.hash = "run=" + encodeURIComponent(data.run_id);
      loadRuns();
      return;
    }
    named["submit-result"] = null;
    $("submit-result").textContent = "not submitted (" + res.status + ")";
    showProblems($("submit-errors"), data, res);
  });
  function showProblems(list, data, res, rename) {
    const problems = data.errors || [{ message: data.detail || res.statusText }];
    for (const raw of problems) {
      const p = rename ? rename(raw) : raw;
      const li = el("li");
      if (p.line !== undefined && p.line !== null) li.append(el("b", "", "line " + p.line + " "));
      if (p.field) li.append(el("code", "", p.field), " ");
      li.append(p.expected ? "expected " + p.expected + (p.got ? ", got " + p.got : "")
                           : (p.message || ""));
      list.append(li);
    }
  }

  // -- asking a question (POST /ask) ------------------------------------------------
  $("ask-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { question: $("ask-question").value, web: $("ask-web").checked };
    const docs = $("ask-docs").value.trim();
    const model = $("ask-model").value.trim();
    if (docs) body.docs = docs;
    if (model) body.model = model;
    const errors = $("ask-errors");
    errors.replaceChildren();
    $("ask-result").textContent = "asking…";
    const res = await api("/ask", { method: "POST", body: JSON.stringify(body),
                                    headers: { "Content-Type": "application/json" } });
    let data = {};
    try { data = await res.json(); } catch (_) { data = {}; }
    if (res.status === 201) {
      named["ask-result"] = data.run_id;
      $("ask-result").textContent = "run " + data.run_id + " " + data.status;
      location.hash = "run=" + encodeURIComponent(data.run_id);
      loadRuns();
      return;
    }
    named["ask-result"] = null;
    $("ask-result").textContent = "not asked (" + res.status + ")";
    showProblems(errors, data, res, askProblem);
  });
  // POST /ask names its JSON fields; the box shows its own labels. A blank folder is the
  // server's first; a refused folder's problem lists those the server serves.
  const ASK_LABELS = { question: "question", docs: "documents", web: "the web",
                       search: "the web", model: "model",
                       "research_tools.docs.path": "documents",
                       "research_tools.web.search": "the web" };
  function askProblem(p) {
    if (p.field === "tools" && p.got === "no tools") {
      // Only a server with no folders hears this: its words say what it has instead.
      return { field: "documents", expected: p.expected };
    }
    if (p.field === "model" && p.got === "no model") {
      return { field: "model", expected: "PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5 " +
               "(this server has no model of its own)" };
    }
    const label = ASK_LABELS[p.field];
    return label ? Object.assign({}, p, { field: label }) : p;
  }

  // -- a run, live --------------------------------------------------------------------
  function route() {
    const m = /^#run=(.+)$/.exec(location.hash);
    if (m) openRun(decodeURIComponent(m[1]));
  }
  window.addEventListener("hashchange", route);

  function stopRun() {
    if (current && current.es) current.es.close();
    if (current && current.timer) clearTimeout(current.timer);
    current = null;
  }
  function rowFor(cur, id, query) {
    let row = cur.rows.get(id);
    if (row) return row;
    const tr = el("tr", "sub");
    tr.dataset.subtask = id;
    const cells = {};
    for (const name of ["id", "query", "state", "attempts", "last", "trigger"]) {
      cells[name] = el("td", "c-" + name);
      tr.append(cells[name]);
    }
    cells.id.textContent = id;
    cells.query.textContent = query || "";
    cells.attempts.className += " num";
    row = { tr, cells, state: "queued", attempts: 0, last: "", trigger: "", tool: "" };
    cur.rows.set(id, row);
    $("subagents").tBodies[0].append(tr);
    paint(row);
    return row;
  }
  function paint(row) {
    row.tr.dataset.state = row.state;
    const label = { throttled: "waiting for the rate limit",
                    waiting: "waiting for subagents" }[row.state] || row.state;
    row.cells.state.replaceChildren(el("span", "pill st-" + row.state, label));
    if (row.tool && (row.state === "running" || row.state === "retrying")) {
      row.cells.state.append(" ", el("span", "muted", row.tool));
    }
    row.cells.attempts.textContent = String(row.attempts);
    row.cells.last.textContent = row.last;
    row.cells.trigger.textContent = row.trigger;
  }
  function outcome(result) {
    if (!result) return "";
    if (result.ok) return result.empty ? "empty" : (result.complete === false ? "partial" : "ok");
    return (result.errorCategory || "error") + ": " + (result.error_type || "");
  }
  function onEvent(cur, ev) {
    if (cur !== current || ev.seq <= cur.lastSeq) return;
    cur.lastSeq = ev.seq;
    if (ev.kind === "plan" || ev.kind === "followups") {  // the lead's (next) subtasks
      for (const s of ev.subtasks || ev.followups || []) rowFor(cur, s.id, s.query);
    }
    if (ev.kind === "answer.delta" || ev.kind === "answer") {  // the answer as it is written
      showAnswer(ev);
      return;
    }
    const row = rowFor(cur, ev.subtask_id);
    if (ev.kind === "plan" || ev.kind === "followups") {
      row.state = "waiting";  // the lead, until its subagents are done
    } else if (ev.kind === "state") {
      row.state = ev.state;
      row.trigger = ev.state === "escalated" ? (ev.trigger || "") : "";
      if (ev.state === "done" || ev.state === "escalated") refreshSoon(cur);
    } else if (ev.kind === "call") {
      row.tool = ev.tool || "";
    } else if (ev.kind === "start") {
      row.attempts += 1;
      // The lead has no state events: a call of its model is the lead at work.
      if (row.state === "queued" || row.state === "waiting") {
        row.state = ev.tool === "model" ? "thinking" : "running";
      }
    } else if (ev.kind === "attempt") {
      row.last = outcome(ev.result);
    } else if (ev.kind === "hint") {  // a person's hint its model read (docs/design.md §17)
      row.last = "read a person's hint (turn " + ev.turn + ")";
    } else if (ev.kind === "hint.unread") {
      row.last = "a person's hint went unread";
    }
    paint(row);
  }
  function showAnswer(ev) {
    const text = $("answer-text");
    $("answer-box").hidden = false;
    if (ev.kind === "answer.delta") {
      text.textContent = ev.restart ? (ev.text || "") : text.textContent + (ev.text || "");
      $("answer-note").textContent = "being written";
      return;
    }
    // The checked answer replaces what was streamed (a rejected one by the extractive).
    text.textContent = ev.text || "";
    $("answer-note").textContent = ev.answer_kind === "extractive"
      ? "the model's answer was rejected (" + (ev.reason || "") + "): extractive"
      : (ev.answer_kind ? "" : (ev.reason || ""));
  }
  function refreshSoon(cur) {
    if (cur.timer) return;
    cur.timer = setTimeout(() => {
      cur.timer = null;
      refresh(cur).catch(() => {});
    }, 250);
  }
  async function refresh(cur) {
    const res = await api(runPath(cur.id));
    if (!res.ok || cur !== current) return;
    showDetail(cur, await res.json());
    return await loadGaps(cur);
  }
  function showDetail(cur, run) {
    $("run-status").textContent = run.status;
    $("run-status").className = "pill st-" + run.status;
    $("coverage").textContent = pct(run.coverage_so_far);
    $("covfill").style.width = pct(run.coverage_so_far);
    const p = run.progress;
    $("progress").textContent = p.queued + " queued · " + p.running + " running · " +
      p.done + " done · " + p.escalated + " escalated";
    $("cancel-btn").disabled = !(run.status === "running" || run.status === "queued");
  }
  async function loadGaps(cur) {
    const res = await api(runPath(cur.id) + "/gaps");
    if (!res.ok || cur !== current) return null;
    const gaps = (await res.json()).gaps;
    const body = $("gaps").tBodies[0];
    body.replaceChildren();
    for (const g of gaps) {
      const tr = el("tr", "gap");
      tr.dataset.subtask = g.subtask_id;
      const route = el("td"); route.append(el("span", "pill " + g.route, g.route));
      tr.append(el("td", "mono", g.subtask_id), el("td", "", g.errorCategory || "—"),
                el("td", "mono", g.trigger), route, el("td", "", g.message));
      body.append(tr);
    }
    $("gap-count").textContent = String(gaps.length);
    $("no-gaps").hidden = gaps.length > 0;
    return gaps;
  }
  // Once a run has ended, no row may still look at work: the lead (which has no state
  // events) and subtasks a cancel or a deadline cut before they started take their end.
  function settle(cur, status, gaps) {
    const byId = new Map((gaps || []).map((g) => [g.subtask_id, g]));
    for (const [id, row] of cur.rows) {
      if (row.state === "done" || row.state === "escalated") continue;
      const gap = byId.get(id);
      if (status === "interrupted") {
        row.state = "interrupted";
      } else if (gap) {
        row.state = "gap";
        row.trigger = gap.trigger || "";
      } else {
        row.state = "done";
      }
      paint(row);
    }
  }
  async function loadReport(cur) {
    const res = await api(runPath(cur.id) + "/report?format=html");
    if (!res.ok || cur !== current) return;
    const frame = $("report");
    frame.onload = () => {
      const doc = frame.contentDocument;
      if (doc && doc.documentElement) {
        frame.style.height = (doc.documentElement.scrollHeight + 24) + "px";
      }
    };
    frame.srcdoc = await res.text();
    $("report-box").hidden = false;
  }
  async function onEnd(cur, data) {
    if (cur !== current) return;
    cur.ended = true;
    $("run-status").textContent = data.status;
    showPending(cur, { escalations: [], plan: null });  // nothing waits once it has ended
    const gaps = await refresh(cur);
    if (cur !== current) return;
    settle(cur, data.status, gaps);
    if (data.status === "finished" || data.status === "interrupted") await loadReport(cur);
    loadRuns();
  }
  // -- a person decides (docs/design.md §17) -----------------------------------------
  // What waits comes from GET /runs/{id}/pending when a run opens and the stream
  // (re)connects; decision.needed and decision.made on the stream keep it current.
  function showPending(cur, pending) {
    if (cur !== current) return;
    $("escalations").replaceChildren();
    cur.cards = new Map();
    for (const esc of pending.escalations || []) addCard(cur, esc);
    showPlan(cur, pending.plan);
  }
  // A snapshot asked before a decision.needed/decision.made that arrived while it was on
  // its way is older than what the page shows: it is asked again rather than shown.
  async function loadPending(cur) {
    for (let tries = 0; tries < 5; tries++) {
      const seen = cur.deskSeq;
      const res = await api(runPath(cur.id) + "/pending");
      if (!res.ok) return;
      const pending = await res.json();
      if (cur.deskSeq === seen) { showPending(cur, pending); return; }
    }
  }
  function countPending(cur) {
    const n = cur.cards.size + (cur.plan ? 1 : 0);
    $("pending-count").textContent = n ? String(n) : "";
    $("people").hidden = n === 0;
  }
  function addCard(cur, esc) {
    if (cur.cards.has(esc.id)) return;
    const card = el("div", "esc-card");
    card.dataset.escalation = esc.id;
    const head = el("div");
    head.append(el("b", "mono", esc.subtask_id), " ",
                el("span", "pill st-escalated", esc.trigger), " ",
                el("span", "muted", esc.errorCategory || ""));
    card.append(head, el("p", "msg", esc.message));
    if (esc.attempted_query) card.append(el("div", "muted", "tried: " + esc.attempted_query));
    const options = el("div", "options");
    const errors = el("ul", "errors");
    for (const o of esc.options || []) {
      if (o.do === "answer") {
        const row = el("div", "answer-row");
        const text = el("textarea", "answer-text");
        text.rows = 2;
        text.placeholder = "your answer: it becomes a finding, cited as given by you";
        text.setAttribute("aria-label", "answer for " + esc.id);
        const source = el("input", "answer-source");
        source.type = "url";
        source.placeholder = "source URL (optional)";
        source.setAttribute("aria-label", "source for " + esc.id);
        const btn = el("button", "option", "Answer");
        btn.type = "button";
        btn.title = o.text;
        btn.dataset.option = o.id;
        btn.dataset.do = o.do;
        btn.addEventListener("click", () => {
          const body = { escalation: esc.id, option: o.id, text: text.value };
          if (source.value.trim()) body.source = source.value.trim();
          decide(cur, card, errors, body);
        });
        row.append(text, source, btn);
        options.append(row);
        continue;
      }
      const btn = el("button", "option", o.text);
      btn.type = "button";
      btn.dataset.option = o.id;
      btn.dataset.do = o.do;
      btn.addEventListener("click", () => decide(cur, card, errors,
                                                 { escalation: esc.id, option: o.id }));
      options.append(btn);
    }
    card.append(options, errors);
    cur.cards.set(esc.id, card);
    $("escalations").append(card);
    countPending(cur);
  }
  function dropCard(cur, id) {
    const card = cur.cards.get(id);
    if (!card) return;
    card.remove();
    cur.cards.delete(id);
    countPending(cur);
  }
  async function decide(cur, card, errors, body) {
    errors.replaceChildren();
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    const res = await api(runPath(cur.id) + "/decisions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body) });
    let data = {};
    try { data = await res.json(); } catch (_) { data = {}; }
    if (res.ok || res.status === 409) {  // decided: here, or elsewhere, or timed out
      dropCard(cur, body.escalation);
      return;
    }
    for (const b of card.querySelectorAll("button")) b.disabled = false;
    showProblems(errors, data, res);
  }
  function showPlan(cur, plan) {
    cur.plan = plan || null;
    const body = $("plan-table").tBodies[0];
    body.replaceChildren();
    $("plan-errors").replaceChildren();
    $("plan-result").textContent = "";
    $("plan-review").hidden = !plan;
    for (const b of [$("plan-approve"), $("plan-reject")]) b.disabled = !plan;
    if (plan) {
      for (const s of plan.subtasks) {
        const tr = el("tr", "plan-row");
        tr.dataset.subtask = s.id;
        const query = el("input", "plan-query");
        query.type = "text";
        query.value = s.query;
        query.setAttribute("aria-label", "query of " + s.id);
        const weight = el("input", "plan-weight");
        weight.type = "number";
        weight.step = "any";
        weight.min = "0";
        weight.value = String(s.weight);
        weight.setAttribute("aria-label", "weight of " + s.id);
        const remove = el("input", "plan-remove");
        remove.type = "checkbox";
        remove.setAttribute("aria-label", "remove " + s.id);
        const cells = [el("td", "mono", s.id), el("td"), el("td"), el("td")];
        cells[1].append(query);
        cells[2].append(weight);
        cells[3].append(remove);
        tr.append(...cells);
        body.append(tr);
      }
    }
    countPending(cur);
  }
  // The edit the plan's inputs make: removed ids, changed queries and weights.
  function planEdit(cur) {
    const edit = { remove: [], change: {} };
    const byId = new Map(cur.plan.subtasks.map((s) => [s.id, s]));
    for (const tr of $("plan-table").tBodies[0].rows) {
      const id = tr.dataset.subtask;
      const was = byId.get(id);
      if (tr.querySelector(".plan-remove").checked) { edit.remove.push(id); continue; }
      const change = {};
      const query = tr.querySelector(".plan-query").value;
      const weight = tr.querySelector(".plan-weight").value;
      if (query !== was.query) change.query = query;
      if (weight !== "" && Number(weight) !== was.weight) change.weight = Number(weight);
      if (Object.keys(change).length) edit.change[id] = change;
    }
    return edit;
  }
  async function review(cur, verdict) {
    if (!cur || !cur.plan) return;
    let body = { verdict };
    if (verdict === "approve") {
      const edit = planEdit(cur);
      if (edit.remove.length || Object.keys(edit.change).length) body = { edit };
    }
    $("plan-errors").replaceChildren();
    for (const b of [$("plan-approve"), $("plan-reject")]) b.disabled = true;
    const res = await api(runPath(cur.id) + "/plan", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body) });
    let data = {};
    try { data = await res.json(); } catch (_) { data = {}; }
    if (res.ok || res.status === 409) {
      showPlan(cur, null);
      $("plan-result").textContent = res.ok ? "plan " + data.verdict : "";
      return;
    }
    for (const b of [$("plan-approve"), $("plan-reject")]) b.disabled = false;
    showProblems($("plan-errors"), data, res);
  }
  $("plan-approve").addEventListener("click", () => review(current, "approve"));
  $("plan-reject").addEventListener("click", () => review(current, "reject"));
  function onDesk(cur, kind, data) {
    if (cur !== current) return;
    cur.deskSeq += 1;
    if (kind === "decision.needed") {
      if (data.escalation) addCard(cur, data.escalation);
      if (data.plan) showPlan(cur, data.plan);
    } else if (kind === "decision.made") {
      if (data.decision) dropCard(cur, data.decision.escalation);
      if (data.plan_review) showPlan(cur, null);
    }
  }

  async function connect(cur) {
    if (cur !== current || cur.ended) return;
    const params = new URLSearchParams();
    if (token) {
      const res = await api(runPath(cur.id) + "/ticket", { method: "POST" });
      params.set("ticket", (await res.json()).ticket);
    }
    if (cur.lastSeq) params.set("after", String(cur.lastSeq));
    const query = params.toString();
    const es = new EventSource(runPath(cur.id) + "/events" + (query ? "?" + query : ""));
    cur.es = es;
    for (const kind of KINDS) es.addEventListener(kind, (m) => onEvent(cur, JSON.parse(m.data)));
    for (const kind of ["decision.needed", "decision.made", "request.made"]) {
      es.addEventListener(kind, (m) => onDesk(cur, kind, JSON.parse(m.data)));
    }
    // Whatever waited or was decided while no stream was open: asked once it is open.
    es.addEventListener("open", () => loadPending(cur).catch(() => {}));
    es.addEventListener("end", (m) => { es.close(); onEnd(cur, JSON.parse(m.data)); });
    es.onerror = () => {
      // EventSource retries by itself; once it gives up (a 401 for an expired ticket,
      // a restarted server) a new ticket and Last-Event-ID's value pick up from here.
      if (es.readyState === EventSource.CLOSED && cur === current && !cur.ended) {
        setTimeout(() => connect(cur).catch(() => {}), 2000);
      }
    };
  }
  async function openRun(id) {
    stopRun();
    const res = await api(runPath(id));
    if (!res.ok) { $("run").hidden = true; return; }
    const run = await res.json();
    const cur = { id, rows: new Map(), lastSeq: 0, es: null, ended: false, timer: null,
                  cards: new Map(), plan: null, deskSeq: 0 };
    current = cur;
    $("run").hidden = false;
    $("run-id").textContent = id;
    $("run-query").textContent = run.query;
    $("subagents").tBodies[0].replaceChildren();
    $("gaps").tBodies[0].replaceChildren();
    $("report-box").hidden = true;
    $("report").removeAttribute("srcdoc");
    $("answer-box").hidden = true;
    $("answer-text").textContent = "";
    $("answer-note").textContent = "";
    for (const s of run.subtasks) rowFor(cur, s.id, s.query);
    showPending(cur, { escalations: [], plan: null });
    showDetail(cur, run);
    await loadGaps(cur);
    await connect(cur);
  }
  $("cancel-btn").addEventListener("click", async () => {
    if (!current) return;
    $("cancel-btn").disabled = true;
    await api(runPath(current.id) + "/cancel", { method: "POST" });
  });

  start().catch((err) => { $("login-error").textContent = String(err); });
})();
"""
