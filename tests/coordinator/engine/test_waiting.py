"""Waiting is durable (docs/design.md §17): a run stopped while an escalation waits for a
person is resumed waiting for the same escalation, and a decision made then applies.

The stop here is in-process (the run's task is cancelled where it stands, its hold on
the run given up as a dead process's is); tests/coordinator/serve/test_lifecycle.py
kills a real ``fanout serve`` the same way with SIGKILL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from coordinator.engine import Hooks, LocalExecutor, RunRequest, Start
from coordinator.engine.resume import recorded_decisions, recorded_waits
from coordinator.jobfile.loader import load_scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from shared.clock import AnyioClock, run_in_virtual_time
from tests.coordinator.engine.sessions import session as _session

WAITS = Path(__file__).parents[1] / "data" / "person_waits.yaml"
DECIDES = Path(__file__).parents[1] / "data" / "person_decides.yaml"  # two escalate
BUDGET = Path(__file__).parents[3] / "scenarios" / "model_budget.yaml"


async def _pending(desk: Desk) -> dict[str, Any]:
    """The desk's first waiting escalation, once one waits."""
    while not desk.pending()["escalations"]:
        await desk.change().wait()
    escalation: dict[str, Any] = desk.pending()["escalations"][0]
    return escalation


def _stopped_while_waiting(store: RunStore) -> tuple[str, dict[str, Any]]:
    """Run the job until patents waits for a person, then stop it there (no report):
    the run id and what waited."""
    scenario = load_scenario(WAITS)
    seen: dict[str, Any] = {}

    async def main() -> None:
        clock = AnyioClock()
        desk = Desk(clock)
        executor = LocalExecutor(store, start=Start.fresh(scenario, clock), clock=clock)
        request = RunRequest(scenario, WAITS.read_text(), str(WAITS))
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.execute, request,
                          Hooks(desk=desk, on_recorded=lambda rid: seen.update(run=rid)))
            seen["escalation"] = await _pending(desk)
            tg.cancel_scope.cancel()  # the run stops where it stands, waiting

    run_in_virtual_time(main)
    store.release(seen["run"])  # its process is gone: the run reads interrupted
    return seen["run"], seen["escalation"]


def _resumed(store: RunStore, run_id: str, decide: dict[str, Any] | None
             ) -> tuple[CoverageReport | None, dict[str, Any]]:
    """Resume ``run_id`` with a new desk; once its escalation waits again, decide
    ``decide`` (None: stop it again). The report, and what waited."""
    row = store.get(run_id)
    scenario = load_scenario(WAITS)
    seen: dict[str, Any] = {}

    async def main() -> CoverageReport | None:
        clock = AnyioClock()
        desk = Desk(clock)
        start = Start.resumed_from(scenario, store, run_id, clock)
        recorder = store.claim_for_resume(run_id)
        executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
        request = RunRequest(scenario, row.spec_text, row.file)
        out: list[CoverageReport] = []

        async def run() -> None:
            out.append(await executor.execute(request, Hooks(desk=desk)))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                seen["escalation"] = await _pending(desk)
                if decide is None:
                    tg.cancel_scope.cancel()
                    return None
                desk.decide(decide | {"escalation": seen["escalation"]["id"]}, by="test")
        finally:
            await recorder.aclose()
        return out[0]

    report = run_in_virtual_time(main)
    if report is None:
        store.release(run_id)
    return report, seen["escalation"]


def test_a_run_stopped_while_an_escalation_waits_waits_again_and_retry_applies(
    tmp_path: Path,
) -> None:
    """Stopped while patents waits: the store holds the pending escalation and patents'
    committed result; resumed (twice) with a new desk, the same escalation waits (id,
    options, since_s), and retry decided then runs patents again to complete."""
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, first = _stopped_while_waiting(store)
    assert first["id"] == "patents:1"
    assert store.get(run_id).status == "interrupted"
    assert "patents" in store.results(run_id)
    waited, numbers = recorded_waits(store, run_id)
    assert waited["patents"].escalation.id == "patents:1" and numbers == {"patents": 1}

    _, again = _resumed(store, run_id, None)  # stopped again while it waits
    assert again == first

    report, last = _resumed(store, run_id, {"do": "retry"})
    assert last == first
    assert report is not None
    rows = {row.id: row.status for row in report.subtasks}
    assert rows == {"patents": "complete", "overview": "complete"}
    [decision] = report.decisions
    assert (decision.escalation, decision.do, decision.by) == ("patents:1", "retry", "test")
    assert decision.change is not None and decision.change.status_after == "complete"
    # overview finished before the stop: it counts in the coverage before the decision.
    assert (decision.change.coverage_before, decision.change.coverage_after) == (0.5, 1.0)
    kinds = [(e["session"], e["kind"]) for e in store.events(run_id)
             if e["kind"].startswith("decision.")]
    assert kinds == [(1, "decision.needed"), (2, "decision.needed"),
                     (3, "decision.needed"), (3, "decision.made"), (3, "decision.changed")]
    assert recorded_waits(store, run_id)[0] == {}
    assert store.get(run_id).status == "finished"


# --- decisions made before the stop (docs/design.md §17) ---------------------------------


def _made(report: CoverageReport) -> list[tuple[str | None, str | None, str | None]]:
    """Each decision of ``report`` as (escalation, do, by), in order."""
    return [(d.escalation, d.do, d.by) for d in report.decisions]


def test_decisions_made_before_the_stop_are_in_the_resumed_report_once(
    tmp_path: Path,
) -> None:
    """patents answered, then the run stopped while licences waits: resumed, licences
    waits again and is accepted; the report lists both decisions once, patents' with
    who, when and its change as recorded, and the person's finding kept."""
    store = RunStore(tmp_path / "runs.sqlite")
    answer = {"do": "answer", "text": "Toyota leads with 412 families",
              "source": "https://example.org/ip"}
    run_id, _ = _session(store, DECIDES, None, [{"subtask": "patents", "decide": answer},
                                                {"subtask": "licences", "stop": True}])
    first = next(e for e in store.events(run_id) if e["kind"] == "decision.changed")
    assert first["decision"]["escalation"] == "patents:1"

    _, report = _session(store, DECIDES, run_id, [{"decide": {"do": "accept"}}])
    assert report is not None
    assert _made(report) == [("patents:1", "answer", "test"), ("licences:1", "accept", "test")]
    answered = report.decisions[0]
    assert answered.model_dump(mode="json") == first["decision"]  # as it was recorded
    assert answered.at_s is not None
    assert answered.change is not None and (
        answered.change.status_before, answered.change.status_after) == ("partial", "complete")
    rows = {row.id: row.status for row in report.subtasks}
    assert rows == {"patents": "complete", "licences": "gap", "overview": "complete"}
    patents = next(s for s in report.answer.sections if s.subtask_id == "patents")
    assert any(f.tool == "person" for f in patents.findings)
    [gap] = report.gaps
    assert (gap.subtask_id, gap.decided) == ("licences", "licences:1")
    assert report.to_wire() == store.get(run_id).report


@pytest.mark.parametrize(("decide", "rows"), [
    pytest.param({"do": "retry"}, {"patents": "complete"}, id="retry-done"),
    pytest.param({"do": "use_tool"}, {"patents": "partial", "patents-decided-1": "complete"},
                 id="use_tool-continued-after-the-rounds"),
])
def test_a_decision_done_or_under_way_while_another_waits_is_listed_once(
    tmp_path: Path, decide: dict[str, Any], rows: dict[str, str],
) -> None:
    """patents decided (retry: it ran again and completed; use_tool: its continuation
    waits for the rounds to end), the run stopped while licences waits: resumed, the
    retry is not run again, the continuation runs then; each decision is listed once."""
    store = RunStore(tmp_path / "runs.sqlite")
    stop = {"subtask": "licences", "stop": True}
    if decide["do"] == "retry":
        stop["once_done"] = "patents"
    run_id, _ = _session(store, DECIDES, None, [{"subtask": "patents", "decide": decide}, stop])
    _, report = _session(store, DECIDES, run_id, [{"decide": {"do": "accept"}}])
    assert report is not None
    # (Both may have been decided at one job second: listed in the order measured.)
    assert sorted(_made(report)) == [("licences:1", "accept", "test"),
                                     ("patents:1", decide["do"], "test")]
    assert {row.id: row.status for row in report.subtasks} == {
        "licences": "gap", "overview": "complete", **rows}
    started = {e["subtask_id"] for e in store.events(run_id)
               if e["session"] == 2 and e["kind"] == "start"}
    assert started == ({"patents-decided-1"} if decide["do"] == "use_tool" else set())
    changed = [e["decision"]["escalation"] for e in store.events(run_id)
               if e["kind"] == "decision.changed"]
    assert sorted(changed) == ["licences:1", "patents:1"]  # each measured once


@pytest.mark.parametrize(("decide", "rows", "after"), [
    pytest.param({"do": "retry"}, {"patents": "complete"}, "complete", id="retry-runs-again"),
    pytest.param({"do": "use_tool"}, {"patents": "partial", "patents-decided-1": "complete"},
                 "complete", id="use_tool-continues"),
    pytest.param({"do": "answer", "text": "Toyota leads"}, {"patents": "complete"},
                 "complete", id="answer"),
    pytest.param({"do": "accept"}, {"patents": "partial"}, "partial", id="accept"),
])
@pytest.mark.parametrize("person", [True, False], ids=["with-a-person", "without"])
def test_a_decision_the_run_had_not_acted_on_when_it_stopped_is_carried_out_on_resume(
    tmp_path: Path, decide: dict[str, Any], rows: dict[str, str], after: str, person: bool,
) -> None:
    """Stopped right after a person decided (decision.made recorded, nothing done about
    it): the resumed run, with a person or without, carries the decision out (a retry
    runs patents again, use_tool its continuation) and lists it once, with what it
    changed (use_tool: the continuation's status)."""
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _ = _session(store, WAITS, None, [{"decide": decide, "then_stop": True}])
    kinds = [e["kind"] for e in store.events(run_id) if e["kind"].startswith("decision.")]
    assert kinds == ["decision.needed", "decision.made"]

    _, report = _session(store, WAITS, run_id, [], person=person)
    assert report is not None
    [decision] = report.decisions
    assert (decision.escalation, decision.do, decision.by) == ("patents:1", decide["do"], "test")
    assert decision.change is not None
    assert (decision.change.status_before, decision.change.status_after) == ("partial", after)
    assert decision.change.coverage_before == 0.5  # overview had finished
    assert {row.id: row.status for row in report.subtasks} == {"overview": "complete", **rows}
    again = {e["subtask_id"] for e in store.events(run_id)
             if e["session"] == 2 and e["kind"] == "start"}
    assert again == ({"patents"} if decide["do"] == "retry" else
                     {"patents-decided-1"} if decide["do"] == "use_tool" else set())
    assert not any(e["kind"] == "decision.needed" for e in store.events(run_id)
                   if e["session"] == 2)  # nothing waited again


def test_a_retry_killed_between_its_calls_goes_on_from_its_checkpoint(tmp_path: Path) -> None:
    """A retry that had called patent_db again (checkpointed) when the run stopped goes
    on from there on resume: patent_db is not called again, the call after it is, and
    the retry is listed once with what it changed."""
    three = tmp_path / "three_calls.yaml"  # patents calls web_search once more at the end
    db_step = '          args: {cpc: "H01M10/0562", group_by: "assignee"}\n'
    three.write_text(WAITS.read_text().replace(db_step, db_step + (
        "        - call: web_search\n"
        '          args: {query: "solid-state electrolyte licensing"}\n'), 1))
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _ = _session(store, three, None, [
        {"decide": {"do": "retry"}},
        {"escalation": False, "once_ok": "patents/patent_db", "stop": True}])
    _, report = _session(store, three, run_id, [], person=False)
    assert report is not None
    [decision] = report.decisions
    assert (decision.escalation, decision.do) == ("patents:1", "retry")
    assert decision.change is not None
    assert (decision.change.status_before, decision.change.status_after) == (
        "partial", "complete")
    calls = [e["tool"] for e in store.events(run_id)
             if e["session"] == 2 and e["kind"] == "call" and e["subtask_id"] == "patents"]
    assert calls == ["web_search"]


def test_a_stop_decided_before_the_stop_stops_the_resumed_run(tmp_path: Path) -> None:
    """A person's stop, made as the run was killed, stops the resumed run too: it is
    listed once, and the subtask that was running is cut, not run on."""
    # One lane: overview starts when patents, waiting, gives its slot up.
    one_lane = tmp_path / "one_lane.yaml"
    one_lane.write_text(WAITS.read_text().replace("concurrency: 2", "concurrency: 1"))
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _ = _session(store, one_lane, None, [{"decide": {"do": "stop"}, "then_stop": True}])
    assert "overview" not in store.results(run_id)  # it was running
    _, report = _session(store, one_lane, run_id, [], person=False)
    assert report is not None
    assert _made(report) == [("patents:1", "stop", "test")]
    assert {g.subtask_id: g.trigger for g in report.gaps} == {
        "patents": "permission_denied", "overview": "cancelled"}
    assert not [e for e in store.events(run_id) if e["session"] == 2 and e["kind"] == "call"]


def test_a_run_killed_the_instant_its_escalated_result_is_stored_waits_again(
    tmp_path: Path,
) -> None:
    """Killed right after patents' escalated result is committed (nothing written since):
    the store already holds the escalation's decision.needed, so the resumed run with a
    person waits for patents:1 again, and the retry decided then applies."""
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _ = _session(store, WAITS, None, [{"stop": True}], dies_after="patents")
    assert "patents" in store.results(run_id)
    waited, _ = recorded_waits(store, run_id)
    assert waited["patents"].escalation.id == "patents:1"
    assert store.waiting(run_id) == ["patents:1"]

    _, report = _session(store, WAITS, run_id, [{"subtask": "patents",
                                                 "decide": {"do": "retry"}}])
    assert report is not None
    assert _made(report) == [("patents:1", "retry", "test")]
    assert {row.id: row.status for row in report.subtasks} == {
        "patents": "complete", "overview": "complete"}


def test_a_wait_the_deadline_cuts_is_decided_by_the_deadline(tmp_path: Path) -> None:
    """Nobody decides patents before the job's deadline (wait_s 600, on_timeout stop):
    the deadline ends the wait decided accept, by: deadline, at the deadline, recorded
    as decision.made then (nothing waits from that instant) and listed with its change;
    the gap is kept, marked decided, and the run is not stopped."""
    short = tmp_path / "short.yaml"
    short.write_text(WAITS.read_text()
                     .replace("concurrency: 2", "concurrency: 2\n  deadline_s: 5")
                     .replace("on_timeout: accept", "on_timeout: stop"))
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, report = _session(store, short, None, [])
    assert report is not None
    [decision] = report.decisions
    assert (decision.escalation, decision.do, decision.by, decision.at_s) == (
        "patents:1", "accept", "deadline", 5.0)
    assert decision.change is not None
    assert (decision.change.status_before, decision.change.status_after) == (
        "partial", "partial")
    [gap] = report.gaps
    assert (gap.subtask_id, gap.decided) == ("patents", "patents:1")
    made = [e for e in store.events(run_id) if e["kind"] == "decision.made"]
    assert [(e["at"], e["decision"]["by"]) for e in made] == [(5.0, "deadline")]


def test_a_retry_that_made_no_call_is_read_back_done(tmp_path: Path) -> None:
    """model_budget.yaml with a person: e (its job budget spent, 0 attempts) is decided
    retry, runs again without a call and escalates the same way; the process is killed
    the instant that result is committed (before what the retry changed is recorded).
    The resumed run reads the retry as done (its subtask ran again and was counted), so
    e does not run a third time; the retry is listed once."""
    budget = tmp_path / "model_budget.yaml"
    spec = yaml.safe_load(BUDGET.read_text())
    spec.pop("expect")
    spec["job"]["escalations"] = {"wait_s": 60, "on_timeout": "accept"}
    budget.write_text(yaml.safe_dump(spec, sort_keys=False))
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _ = _session(store, budget, None, [
        {"subtask": "e", "decide": {"do": "retry"}},
        {"escalation": False, "until_dead": True, "stop": True}], dies_after="e#2")
    assert store.results(run_id)["e"]["rounds"] == 2  # the retry's result is committed
    [retry] = [d for d in recorded_decisions(store, run_id) if d.decision.subtask_id == "e"]
    assert retry.done
    _, report = _session(store, budget, run_id, [], person=False)
    assert report is not None
    assert [e["kind"] for e in store.events(run_id)
            if e["session"] == 2 and e["subtask_id"] == "e" and e["kind"] == "state"] == []
    assert [d.escalation for d in report.decisions if d.do == "retry"] == ["e:1"]
