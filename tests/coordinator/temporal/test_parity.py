"""Engine parity (docs/design.md §15): the same scenario files through the same door
(``coordinator.run_file``, a handler answering each escalation) on both engines give the
same report, times and ids aside, the same stored report (its ``decisions`` included)
and the same event kinds in the same order per subtask.

Both runs are the one flow (:mod:`coordinator.flow`); the door runs in a process of its
own (``pydoor.py``), so no Temporal client lives in pytest's process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario
from coordinator.store.runs import RunStore
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, normalized

QUEUE = "parity"
LIBRARY = ROOT / "scenarios"
DATA = Path(__file__).parent / "data"
# The contract's list (docs/design.md §15), each with the door's arguments: --choose, a
# handler that picks each escalation's first alternative; --speed, run_file's.
PARITY = [
    # An escalation answered by a handler.
    pytest.param(LIBRARY / "permission_denied.yaml", ("--choose",), id="permission_denied"),
    # A subagent that asks for a person.
    pytest.param(LIBRARY / "human_request.yaml", ("--choose",), id="human_request"),
    # Follow-ups.
    pytest.param(LIBRARY / "followup_fills_gap.yaml", ("--choose",), id="followup_fills_gap"),
    # A plan and a streamed synthesis (answer.delta).
    pytest.param(LIBRARY / "lead_decomposes.yaml", ("--choose",), id="lead_decomposes"),
    # Search first: a model-planned subtask's search runs before its first model turn.
    pytest.param(LIBRARY / "search_first.yaml", ("--choose", "--speed", "5"), id="search_first"),
    # A budget cut: job.budget spent, two subagents hand up while running, one never
    # starts. No handler, so the cut alone is compared (a retry into a spent budget is
    # counted, not offered again: tests/coordinator/api/test_person.py).
    pytest.param(LIBRARY / "model_budget.yaml", ("--speed", "5"), id="model_budget"),
    # A deadline: one subagent cut while it runs, one still queued (the cut 7 virtual
    # seconds from any other event: at speed 4, 1.75 s of real time either side).
    pytest.param(LIBRARY / "deadline.yaml", ("--choose", "--speed", "4"), id="deadline"),
    # MCP and research tools: an MCP server over stdio and a folder of documents.
    pytest.param(DATA / "mcp_and_docs.yaml", ("--choose",), id="mcp_and_docs"),
    # A wait the deadline cuts (docs/design.md §17): a person attached who decides
    # nothing (--decide for no such subtask), both waits decided accept, by: deadline.
    pytest.param(DATA / "deadline_cuts_a_wait.yaml", ("--decide", "nobody=accept",
                                                      "--speed", "2"),
                 id="deadline_cuts_a_wait"),
    # A gap a person decided is not followed up (docs/design.md §17): patents accepted,
    # the lead's follow-up for it dropped and said so, news' follow-up run.
    pytest.param(DATA / "accepted_not_followed_up.yaml", ("--decide", "patents=accept",
                                                          "--speed", "4"),
                 id="accepted_not_followed_up"),
]
# Where the engines differ by design, the report is compared without it:
# model_budget's subagents stopped while running hand up on what the workflow lent
# them, not on the others' spend, which a running activity cannot see
# (coordinator/temporal/budget.py): their hand-up message differs (test_budget.py).
LENT = {"model_budget": {"c", "d"}}
# research_lead.yaml (a lead, follow-ups, simulated tools) gives the same report on both
# engines too (test_library.py), but runs some 150 s at the door's real speed.


@pytest.fixture(scope="module")
def temporal(dev_server: DevServer, workers: Workers) -> str:
    """The dev server's address, with one worker polling the module's task queue."""
    workers.start(QUEUE, concurrency=8)
    return dev_server.address


def run_door(
    path: Path, store: Path, engine: str, address: str, *extra: str
) -> dict[str, Any]:
    """``run_file(path)`` on ``engine`` in a process of its own, with the door's
    arguments ``extra`` (``--choose``: an ``on_escalation`` picking the first alternative)."""
    if engine == "temporal":
        extra = ("--executor", "temporal", "--address", address, "--task-queue", QUEUE, *extra)
    out = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.pydoor", "run_file", str(path),
         "--store", str(store), *extra],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return report


def outcome(report: dict[str, Any]) -> Any:
    """``without_times(report)``, its decisions' coverage before and after dropped: the
    handler here picks an escalation's first alternative, a ``retry`` for a permission
    that is never granted, so a subtask retries again and again while the others finish
    in real time, and the job's coverage at each retry is a race (each decision's status
    change is kept; a person's decisions are compared whole below)."""
    out = without_times(report)
    for decision in out.get("decisions", []):
        change = decision.get("change")
        if change is not None:
            decision["change"] = {k: v for k, v in change.items() if "coverage" not in k}
    return out


def kinds_per_subtask(store: RunStore, run_id: str) -> dict[str, list[str]]:
    """Each subtask's event kinds (a state change as ``state:STATE``), in order; a
    person's escalation events left out: ``decision.needed``/``decision.made`` are
    compared on their own (:func:`decision_events`), and ``decision.changed`` (what a
    decision changed, recorded for a resume to list it) is the local engine's only,
    where a run resumes from the store; a Temporal run's is the workflow's history."""
    kinds: dict[str, list[str]] = defaultdict(list)
    for event in store.events(run_id):
        kind = event["kind"]
        if kind.startswith("decision."):
            continue
        if kind == "state":
            kind = f"state:{event.get('state')}"
        kinds[event["subtask_id"]].append(kind)
    return dict(kinds)


def without_messages(report: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """``report`` with the hand-up messages of subtasks ``ids`` left out."""
    out = dict(report)
    for key in ("gaps", "escalations"):
        out[key] = [{k: v for k, v in item.items() if k != "message"}
                    if item["subtask_id"] in ids else item for item in report[key]]
    return out


def decision_events(store: RunStore, run_id: str) -> dict[str, list[tuple[str, Any]]]:
    """Each subtask's ``decision.needed``/``decision.made`` events, kind and data, in
    order, times left out (each engine's own clock)."""
    out: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for event in store.events(run_id):
        if event["kind"] in ("decision.needed", "decision.made"):
            data = {k: {n: x for n, x in v.items() if n != "since_s"}
                    for k, v in event.items() if k in ("escalation", "decision")}
            out[event["subtask_id"]].append((event["kind"], without_times(data)))
    return dict(out)


@pytest.mark.parametrize(("path", "door"), PARITY)
def test_both_engines_give_the_same_report_and_trace(
    path: Path, door: tuple[str, ...], temporal: str, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """The report, the stored report with its decisions, and the event kinds per
    subtask are the same on both engines."""
    runs = {}
    catalogues = {}
    decided = {}
    for engine in ("local", "temporal"):
        store_path = tmp_path / f"{engine}.sqlite"
        report = run_door(path, store_path, engine, temporal, *door)
        store = RunStore(store_path)
        (row,) = store.runs()
        stored = store.get(row.id).report
        assert stored is not None
        runs[engine] = (report, stored, kinds_per_subtask(store, row.id))
        catalogues[engine] = store.events(row.id)[0].get("tools")
        decided[engine] = decision_events(store, row.id)
    local, on_temporal = runs["local"], runs["temporal"]
    lent = LENT.get(request.node.callspec.id, set())
    for report in (on_temporal[0], on_temporal[1]):
        messages = {g["subtask_id"]: g["message"] for g in report["gaps"]}
        assert all("the workflow lent it" in messages[sid] for sid in lent)
    # (A decision's ``at``/``at_s`` are times: each engine's own, dropped too.)
    for n in (0, 1):
        assert (outcome(without_messages(on_temporal[n], lent))
                == outcome(without_messages(local[n], lent)))
    assert on_temporal[2] == local[2]
    # A person's escalations are recorded alike: what waited, what was decided.
    assert decided["temporal"] == decided["local"]
    if request.node.callspec.id == "deadline_cuts_a_wait":
        # (Compared alike above; here, that it is the deadline that decided them.)
        made = {d["escalation"]: (d["do"], d["by"]) for d in on_temporal[1]["decisions"]}
        assert made == {"patents:1": ("accept", "deadline"),
                        "licence_prices:1": ("accept", "deadline")}
        assert {g["subtask_id"]: g.get("decided") for g in on_temporal[1]["gaps"]} == {
            "patents": "patents:1", "licence_prices": "licence_prices:1"}
    if request.node.callspec.id == "accepted_not_followed_up":
        # (Alike above; here, that the accepted gap's follow-up did not run, and why.)
        assert [r["id"] for r in on_temporal[1]["subtasks"]] == [
            "market", "patents", "news", "news_web"]
        gaps = {g["subtask_id"]: g for g in on_temporal[1]["gaps"]}
        assert gaps["patents"]["skipped_followups"] == ["patents_db"]
        assert gaps["news"]["filled_by"] == ["news_web"]
    if load_scenario(path).mcp_servers:
        # The job's tool catalogue is its first event, its MCP and docs tools in it.
        assert on_temporal[2]["lead"][0] == "catalogue"
        assert catalogues["temporal"] == catalogues["local"]
        assert {"lab.echo", "docs.search", "docs.read"} <= set(catalogues["temporal"] or ())


def test_the_parity_list_has_a_decision_in_it(temporal: str, tmp_path: Path) -> None:
    """An escalation the handler answers is a decision in the stored report on Temporal."""
    store_path = tmp_path / "runs.sqlite"
    run_door(LIBRARY / "permission_denied.yaml", store_path, "temporal", temporal, "--choose")
    store = RunStore(store_path)
    (row,) = store.runs()
    stored = store.get(row.id).report
    assert stored is not None and stored["decisions"]


CANCELLED = {
    "scenario": "cancelled-mid-run",
    "seed": 0,
    "job": {
        "query": "two things, one slow",
        "concurrency": 1,
        "subtasks": [
            {"id": "slow", "query": "the slow one", "tools": ["slow_tool"],
             "plan": [{"call": "slow_tool", "args": {}}]},
            {"id": "waiting", "query": "the queued one", "tools": ["slow_tool"],
             "plan": [{"call": "slow_tool", "args": {}}]},
        ],
    },
    "tools": {"slow_tool": {"latency_s": 60, "responses": [{"ok": {"found": 1}}]}},
}


@pytest.mark.parametrize("engine", ["local", "temporal"])
def test_a_cancel_reaches_the_run_on_both_engines(
    engine: str, temporal: str, tmp_path: Path
) -> None:
    """Cancelled while a subagent calls its tool: the running one hands up with
    ``cancelled``, the queued one is a ``cancelled`` gap with 0 attempts, and the partial
    report is stored, on Temporal as locally."""
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(CANCELLED, sort_keys=False))
    stored = run_door(job, tmp_path / "runs.sqlite", engine, temporal, "--cancel-on", "slow")
    gaps = {g["subtask_id"]: g for g in stored["gaps"]}
    assert {sid: g["trigger"] for sid, g in gaps.items()} == {
        "slow": "cancelled", "waiting": "cancelled",
    }
    attempts = {s["id"]: s["attempts"] for s in stored["subtasks"]}
    assert attempts["waiting"] == 0
    assert stored["elapsed_s"] < 60  # the slow tool's call did not run to its end


# A person's decision (docs/design.md §17): the library's person_*.yaml without their
# scripted people (a Python on_escalation decides instead) and with a short wait, so the
# escalation nobody decides is decided by timeout on both engines.
PERSON = [
    ("person_retry.yaml", "patents=retry"),
    ("person_answer.yaml", "patents=answer:Toyota holds 412 families (WIPO 2025)"),
    ("person_use_tool.yaml", "patents=use_tool"),
    ("person_stop.yaml", "patents=stop"),
]
WAIT_S = 3.0


def without_times(value: Any) -> Any:
    """``normalized``, the decisions' times dropped too (each engine's own clock), and
    the decisions in escalation order: decisions on different subtasks made at nearly
    the same moment are listed in the order real time made them."""
    if isinstance(value, dict):
        out = {k: without_times(v) for k, v in normalized(value).items()
               if k not in {"at", "at_s"}}
        if isinstance(out.get("decisions"), list):
            out["decisions"] = sorted(out["decisions"], key=lambda d: (
                str(d.get("subtask_id")), len(str(d.get("escalation"))),
                str(d.get("escalation"))))
        return out
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def person_job(name: str, tmp_path: Path) -> Path:
    """The library's ``name`` with no scripted person and escalations waiting WAIT_S."""
    spec = yaml.safe_load((LIBRARY / name).read_text())
    spec.pop("people", None)
    spec.pop("expect", None)
    spec["job"]["escalations"] = {"wait_s": WAIT_S, "on_timeout": "accept"}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize(("name", "decide"), PERSON)
def test_a_persons_decision_is_carried_out_the_same_on_both_engines(
    name: str, decide: str, temporal: str, tmp_path: Path
) -> None:
    """A person's decision made through the Python door waits, is carried out and is
    stored with what it changed, on Temporal as locally; the escalation nobody decides
    is decided by timeout on both."""
    path = person_job(name, tmp_path)
    runs = {}
    for engine in ("local", "temporal"):
        store_path = tmp_path / f"{engine}.sqlite"
        report = run_door(path, store_path, engine, temporal, "--decide", decide)
        store = RunStore(store_path)
        (row,) = store.runs()
        stored = store.get(row.id).report
        assert stored is not None
        runs[engine] = (report, stored, kinds_per_subtask(store, row.id))
    local, on_temporal = runs["local"], runs["temporal"]
    assert without_times(on_temporal[1])["decisions"] == without_times(local[1])["decisions"]
    assert on_temporal[2] == local[2]
    if decide.endswith("=stop"):
        # A stop is a cancel: on Temporal the running round is cancelled with its
        # activity and hands up what its last finished round left (here: nothing), where
        # a local subagent hands up its call under way (docs/design.md §15).
        for report in (on_temporal[0], local[0]):
            assert {g["subtask_id"]: g["trigger"] for g in report["gaps"]} == {
                "patents": "permission_denied", "licence_prices": "cancelled"}
    else:
        assert without_times(on_temporal[0]) == without_times(local[0])
        assert without_times(on_temporal[1]) == without_times(local[1])
    decisions = {d["escalation"]: d for d in on_temporal[1]["decisions"]}
    sid, _, do = decide.partition("=")
    assert decisions[f"{sid}:1"]["do"] == do.partition(":")[0]
    assert "change" in decisions[f"{sid}:1"]
    if do != "stop":
        assert decisions["licence_prices:1"]["by"] == "timeout"


def test_the_tool_catalogue_is_recorded_on_both_engines(temporal: str, tmp_path: Path) -> None:
    """A job with an MCP server records the same tool catalogue (the lead's first event)
    on Temporal as locally, so a recording of either can stand simulated tools in."""
    job = {
        "scenario": "catalogued", "seed": 0,
        "mcp_servers": {"time": {
            "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
            "startup_timeout_s": 30}},
        "job": {"query": "what time is it", "subtasks": [
            {"id": "clock", "query": "the time in UTC", "tools": ["time.get_current_time"],
             "plan": [{"call": "time.get_current_time", "args": {"timezone": "UTC"}}]}]},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    catalogues = {}
    for engine in ("local", "temporal"):
        store_path = tmp_path / f"{engine}.sqlite"
        run_door(path, store_path, engine, temporal)
        store = RunStore(store_path)
        (row,) = store.runs()
        events = store.events(row.id)
        assert events[0]["kind"] == "catalogue"
        catalogues[engine] = events[0]["tools"]
    assert "time.get_current_time" in catalogues["temporal"]
    assert catalogues["temporal"] == catalogues["local"]


def test_a_run_whose_workflow_never_started_is_failed_with_its_reason(
    temporal: str, tmp_path: Path
) -> None:
    """A run registered in the store whose workflow cannot start (here: a namespace the
    service does not have) is stored finished ``failed``, the reason in the lead's gap,
    not left ``interrupted``; the door says why."""
    store_path = tmp_path / "runs.sqlite"
    out = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.pydoor", "run_file",
         str(LIBRARY / "permission_denied.yaml"), "--store", str(store_path),
         "--executor", "temporal", "--address", temporal, "--task-queue", QUEUE,
         "--namespace", "no-such-namespace"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert out.returncode != 0
    assert "did not start on Temporal" in out.stderr
    store = RunStore(store_path)
    (row,) = store.runs()
    assert row.status == "finished"
    report = store.get(row.id).report
    assert report is not None and report["outcome"] == "failed"
    (gap,) = report["gaps"]
    assert gap["subtask_id"] == "lead" and "no-such-namespace" in gap["message"]


# A plan review (docs/design.md §17): a scripted lead's plan waits for a Python on_plan,
# which approves, edits or rejects it; patents' escalation waits too (nobody answers it
# there) and is accepted by timeout on both engines.
REVIEW_PLAN = ROOT / "tests" / "coordinator" / "data" / "review_plan.yaml"


@pytest.mark.parametrize(("verdict", "ids", "outcome"), [
    pytest.param("approve", ["market", "patents"], "partial", id="approve"),
    pytest.param({"edit": {"remove": ["patents"]}}, ["market"], "complete", id="edit"),
    pytest.param("reject", ["lead"], "failed", id="reject"),
])
def test_a_plan_review_is_carried_out_the_same_on_both_engines(
    verdict: Any, ids: list[str], outcome: str, temporal: str, tmp_path: Path
) -> None:
    """``run_file(on_plan=...)``: the plan waits (on Temporal in the workflow), and the
    review approves, edits or rejects it (a rejected plan is the lead's
    ``plan_rejected`` gap); both engines give the same report and stored report."""
    spec = yaml.safe_load(REVIEW_PLAN.read_text(encoding="utf-8"))
    spec["job"]["escalations"] = {"wait_s": WAIT_S, "on_timeout": "accept"}
    path = tmp_path / "review_plan.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    runs = {}
    for engine in ("local", "temporal"):
        store_path = tmp_path / f"{engine}.sqlite"
        report = run_door(path, store_path, engine, temporal, "--review", json.dumps(verdict),
                          "--speed", "10")
        store = RunStore(store_path)
        (row,) = store.runs()
        runs[engine] = (report, store.get(row.id).report)
    report = runs["temporal"][0]
    assert [s["id"] for s in report["subtasks"]] == ids
    assert report["outcome"] == outcome
    if verdict == "reject":
        assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
            ("lead", "plan_rejected")]
    for n in (0, 1):
        assert without_times(runs["temporal"][n]) == without_times(runs["local"][n])


def test_a_plan_nobody_reviews_waits_no_longer_than_the_deadline_on_both_engines(
    temporal: str, tmp_path: Path
) -> None:
    """A plan whose reviewer never answers waits wait_s (120 s) but never past the
    job's deadline (20 s) on either engine: approved by timeout then, its subtasks cut
    as deadline gaps, the same report on both (docs/design.md §17)."""
    spec = yaml.safe_load(REVIEW_PLAN.read_text(encoding="utf-8"))
    spec["job"].update({"deadline_s": 20, "escalations": {"wait_s": 120, "on_timeout": "accept"}})
    path = tmp_path / "review_plan.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    runs = {}
    for engine in ("local", "temporal"):
        store_path = tmp_path / f"{engine}.sqlite"
        report = run_door(path, store_path, engine, temporal, "--review", "never",
                          "--speed", "10")
        store = RunStore(store_path)
        (row,) = store.runs()
        runs[engine] = (report, store.get(row.id).report)
        assert report["elapsed_s"] < 120  # the deadline ended the wait, not wait_s
        assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
            ("market", "deadline"), ("patents", "deadline")]
    for n in (0, 1):
        assert without_times(runs["temporal"][n]) == without_times(runs["local"][n])
