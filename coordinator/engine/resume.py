"""Where a run starts: from nothing, or where its stored sessions left it.

``fanout resume``, a service adopting a run whose server died, and the reliability
tests continue a run the same way: the job as it ran (a decomposed job keeps the
subtasks its lead planned), each subagent from its checkpoint, the lead where it stood,
the clock from the last recorded event. :meth:`Start.resumed` is that set-up, written
once; :meth:`Start.fresh` is a new run's. Both are what :func:`~coordinator.engine.run.open_run`
opens a run from.

The rest are reads of a stored run that the doors share: :func:`interrupted_report`
(what ``fanout report`` and the service show of a run that did not finish).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.checkpoint import restored
from coordinator.decision import answered
from coordinator.fanout import Resumed
from coordinator.flow import Decided, Waited, continuation
from coordinator.job import JobSpec
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning, with_followups, with_lead_gap, with_subtasks
from coordinator.people import DECISION_CHANGED, DECISION_MADE, DECISION_NEEDED
from coordinator.report import CoverageReport, Decision, assemble_report, with_decisions
from coordinator.store.runs import RunStore
from shared.clock import Clock
from shared.escalation import Escalation, Option
from shared.ids import SeededTraceIds
from shared.options import parse_escalation_id
from subagents.planners.model import Seekable
from subagents.result import LEAD, SubagentResult
from subagents.run import SubagentRun
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

__all__ = [
    "Start",
    "elapsed_so_far",
    "fresh_runs",
    "interrupted_report",
    "planned_scenario",
    "recorded_decisions",
    "recorded_followups",
    "recorded_lead_gap",
    "recorded_waits",
    "restored_runs",
]


@dataclass(frozen=True)
class Start:
    """Where a run starts: its job (as planned), planners, simulated tools, subagent
    states, and for a resumed run the lead's gap, its follow-ups and the time reached.

    ``trace_ids`` None: seeded by the run id once the run is recorded (a new run).
    """

    scenario: Scenario
    planning: JobPlanning
    simulated: SimulatedTools
    runs: dict[str, SubagentRun]
    trace_ids: SeededTraceIds | None = None
    elapsed_offset: float = 0.0
    lead_gap: SubagentResult | None = None
    followups: list[SubtaskSpec] | None = None
    waited: dict[str, Waited] | None = None
    numbers: dict[str, int] | None = None
    decided: list[Decided] | None = None

    def resumed(self) -> Resumed:
        """Where the lead's run continues (the same ``runs``: a plan adds to them)."""
        return Resumed(self.runs, self.elapsed_offset, self.lead_gap, self.followups,
                       self.waited, self.numbers, tuple(self.decided or ()))

    @classmethod
    def fresh(
        cls,
        scenario: Scenario,
        clock: Clock,
        *,
        planning: JobPlanning | None = None,
        simulated: SimulatedTools | None = None,
    ) -> Start:
        """A new run of ``scenario``: a fresh SubagentRun per declared subtask."""
        planning = planning or JobPlanning(scenario, clock=clock)
        simulated = simulated or SimulatedTools(scenario.tools, clock)
        return cls(scenario, planning, simulated, planning.fresh_runs())

    @classmethod
    def resumed_from(cls, scenario: Scenario, store: RunStore, run_id: str, clock: Clock) -> Start:
        """Run ``run_id`` of ``store`` where it stopped (blocking: reads the store).

        A decomposed job keeps the subtasks its lead planned, finished subtasks are
        kept, unfinished ones continue from their checkpoint, the lead from where it
        stood after its plan (or its follow-ups); a person's decisions made before are
        taken up again, the continuations of their ``use_tool``/``requery`` from their
        checkpoints (docs/design.md §17).
        """
        planned = planned_scenario(scenario, store, run_id)
        simulated = SimulatedTools(planned.tools, clock)
        trace_ids = SeededTraceIds(f"{planned.seed}/{run_id}")
        planning = JobPlanning(planned, clock=clock)
        followups = recorded_followups(store, run_id)
        decided = recorded_decisions(store, run_id)
        checkpoints = store.checkpoints(run_id)
        runs = restored_runs(
            planned, checkpoints, simulated, trace_ids, planning, followups
        )
        specs = {s.id: s for s in [*planned.job.subtasks, *(followups or ())]}
        for spec in continuations(decided, specs):
            saved = checkpoints.get(spec.id)
            if saved is not None:  # it had started: it goes on from there
                runs[spec.id] = restored(spec, saved, seed=planned.seed, sim=simulated,
                                         trace_ids=trace_ids, planner=planning.planner(spec))
        waited, numbers = recorded_waits(store, run_id)
        return cls(
            planned, planning, simulated, runs, trace_ids,
            elapsed_offset=elapsed_so_far(store, run_id),
            lead_gap=recorded_lead_gap(store, run_id),
            followups=followups, waited=waited, numbers=numbers, decided=decided,
        )


def fresh_runs(scenario: Scenario, planning: JobPlanning | None = None) -> dict[str, SubagentRun]:
    """A new SubagentRun per subtask, seeded like a replay, each with its planner."""
    return (planning or JobPlanning(scenario)).fresh_runs()


def restored_runs(
    scenario: Scenario,
    checkpoints: dict[str, dict[str, Any]],
    tools: SimulatedTools,
    trace_ids: SeededTraceIds,
    planning: JobPlanning | None = None,
    followups: list[SubtaskSpec] | None = None,
) -> dict[str, SubagentRun]:
    """SubagentRuns continued from the store's checkpoints (fresh where there is none).

    ``followups`` are the follow-ups the lead planned before the run stopped (None: it
    had not planned them yet); their runs continue too.
    """
    planning = planning or JobPlanning(scenario)
    runs = planning.fresh_runs()
    saved_lead = checkpoints.get(LEAD, {})
    # After its follow-up plan the lead continues from there; else after its first plan.
    lead = saved_lead.get("followups") if followups is not None else None
    lead = lead or saved_lead.get("lead")
    if lead is not None and scenario.job.subtasks and scenario.model is not None:
        # A decomposed run resumed with its recorded plan: the lead continues after it.
        trace_ids.set_position(LEAD, int(lead["trace"]))
        client = planning.client
        if isinstance(client, Seekable):
            client.seek(LEAD, int(lead["model_attempts"]))
        # What the lead's calls spent before the run stopped counts against job.budget.
        planning.meter.record(LEAD, lead.get("spent", [0, 0, 0]))
    for spec in followups or ():
        runs[spec.id] = planning.fresh_run(spec)
    for spec in [*scenario.job.subtasks, *(followups or ())]:
        saved = checkpoints.get(spec.id)
        if saved is None:
            continue
        runs[spec.id] = restored(spec, saved, seed=scenario.seed, sim=tools,
                                 trace_ids=trace_ids, planner=planning.planner(spec))
    return runs


def planned_scenario(scenario: Scenario, store: RunStore, run_id: str) -> Scenario:
    """The scenario as it ran: a decomposed job gets the subtasks its lead recorded."""
    if scenario.job.subtasks:
        return scenario
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "plan":
            subtasks = [SubtaskSpec.model_validate(s) for s in event["subtasks"]]
            return with_subtasks(scenario, subtasks)
    return scenario


def recorded_followups(store: RunStore, run_id: str) -> list[SubtaskSpec] | None:
    """The follow-ups the lead of run ``run_id`` planned; None when it had not yet."""
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "followups":
            return [SubtaskSpec.model_validate(s) for s in event["followups"]]
    return None


def recorded_lead_gap(store: RunStore, run_id: str) -> SubagentResult | None:
    """The gap of a lead that could not plan run ``run_id`` (its plan was degraded)."""
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "plan":
            gap = event.get("lead_gap")
            return None if gap is None else SubagentResult.model_validate(gap)
    return None


def recorded_waits(
    store: RunStore, run_id: str
) -> tuple[dict[str, Waited], dict[str, int]]:
    """The escalations of run ``run_id`` that waited for a person when it stopped, by
    subtask, and how many escalations each subtask had offered (docs/design.md §17).

    An escalation waits when a ``decision.needed`` event of its subtask names it, no
    ``decision.made`` names it, and the subtask's committed result is still the one that
    escalated (a retry decided and run again commits a new result).
    """
    needed: dict[str, dict[str, Any]] = {}
    made: set[str] = set()
    numbers: dict[str, int] = {}
    for event in store.events(run_id):
        kind = event["kind"]
        if kind == DECISION_NEEDED and isinstance(event.get("escalation"), dict):
            item = event["escalation"]
            needed[str(item["id"])] = item
            parsed = parse_escalation_id(str(item["id"]))
            if parsed is not None:
                numbers[parsed[0]] = max(numbers.get(parsed[0], 0), parsed[1])
        elif kind == DECISION_MADE and isinstance(event.get("decision"), dict):
            made.add(str(event["decision"].get("escalation")))
    results = store.results(run_id)
    waited: dict[str, Waited] = {}
    for esc_id, item in needed.items():
        sid = str(item["subtask_id"])
        if esc_id in made or sid not in results:
            continue
        result = SubagentResult.model_validate(results[sid])
        escalation = result.escalation
        if escalation is None or escalation.trigger != item.get("trigger"):
            continue  # its result changed since (it ran again)
        offered: Escalation = escalation.model_copy(update={
            "id": esc_id, "options": [Option.model_validate(o) for o in item["options"]]})
        waited[sid] = Waited(result, offered, float(item.get("since_s") or 0.0))
    return waited, numbers


def recorded_decisions(store: RunStore, run_id: str) -> list[Decided]:
    """The decisions a person made on run ``run_id``'s escalations, in the order made
    (docs/design.md §17): each ``decision.made``, as its ``decision.changed`` recorded it
    once what it changed was measured, with its subtask's committed result.

    A decision is done when its change was recorded, or when it was a ``retry`` whose
    subtask's committed result is no longer the escalated one (it ran again and was
    counted, its change not recorded yet): it has run more rounds than the escalated
    subagent had (the ``decision.needed``'s ``rounds``), so a retry that made no call and
    escalated the same way is done too; a store without ``rounds`` (recorded before it
    was) is read by the result's escalation: none, or another trigger. Else it was under
    way when the run stopped.
    """
    made: dict[str, Decision] = {}
    changed: dict[str, Decision] = {}
    triggers: dict[str, Any] = {}
    rounds: dict[str, int] = {}
    for event in store.events(run_id):
        kind, data = event["kind"], event.get("decision")
        if kind == DECISION_NEEDED and isinstance(event.get("escalation"), dict):
            eid = str(event["escalation"].get("id"))
            triggers[eid] = event["escalation"].get("trigger")
            if isinstance(event.get("rounds"), int):
                rounds[eid] = event["rounds"]
        elif kind in (DECISION_MADE, DECISION_CHANGED) and isinstance(data, dict):
            decision = Decision.model_validate(data)
            if decision.escalation is None:
                continue
            if kind == DECISION_MADE:
                made.setdefault(decision.escalation, decision)
            else:
                changed[decision.escalation] = decision
    results = {sid: SubagentResult.model_validate(r) for sid, r in store.results(run_id).items()}
    out: list[Decided] = []
    for esc_id, decision in made.items():
        result = results.get(decision.subtask_id)
        done = esc_id in changed
        if not done and decision.do == "retry":
            escalated = result.escalation if result is not None else None
            done = escalated is None or escalated.trigger != triggers.get(esc_id) or (
                esc_id in rounds and result is not None and result.rounds > rounds[esc_id])
        out.append(Decided(changed.get(esc_id, decision), result, done))
    return out


def continuations(decided: list[Decided], specs: dict[str, SubtaskSpec]) -> list[SubtaskSpec]:
    """The subtasks continuing those a person decided ``use_tool``/``requery`` for, as
    the flow makes them (``SUBTASK-decided-N``, N counting that subtask's)."""
    out: list[SubtaskSpec] = []
    for one in decided:
        decision = one.decision
        spec = specs.get(decision.subtask_id)
        if spec is None or decision.do not in ("use_tool", "requery"):
            continue
        n = sum(1 for s in out if s.followup_of == spec.id) + 1
        out.append(continuation(spec, decision, n))
    return out


def elapsed_so_far(store: RunStore, run_id: str) -> float:
    """The job time a run had reached when it stopped: its last recorded event."""
    return store.last_event_at(run_id)


def interrupted_report(
    scenario: Scenario, store: RunStore, run_id: str, *, resume_hint: str
) -> CoverageReport:
    """The report of a run that did not finish: committed results, and gaps for the rest,
    with the decisions a person made so far (docs/design.md §17), as a resumed run
    lists them: each ``decision.made`` once, as its ``decision.changed`` recorded it, an
    ``answer``'s finding counted, an ``accept``'s gap marked decided."""
    scenario = planned_scenario(scenario, store, run_id)
    decided = [one.decision for one in recorded_decisions(store, run_id)]
    answers = {d.subtask_id: d for d in decided if d.do == "answer"}
    out = _results_of(scenario.job, store, run_id, resume_hint, seed=scenario.seed,
                      answers=answers)
    elapsed = elapsed_so_far(store, run_id)
    report = assemble_report(scenario.job, out, elapsed_s=elapsed)
    followups = recorded_followups(store, run_id)
    if followups:
        job = scenario.job.model_copy(update={"subtasks": followups})
        found = _results_of(job, store, run_id, resume_hint, seed=scenario.seed,
                            answers=answers)
        extra = assemble_report(job, found, elapsed_s=elapsed)
        report = with_followups(report, extra, followups)
    lead_gap = recorded_lead_gap(store, run_id)
    if lead_gap is not None:
        report = with_lead_gap(report, scenario.job, lead_gap)
    if all(d.at_s is not None for d in decided):
        decided.sort(key=lambda d: d.at_s or 0.0)  # in the order made, as Flow.decided
    return with_decisions(report, decided)


def _results_of(
    job: JobSpec, store: RunStore, run_id: str, resume_hint: str, *, seed: object,
    answers: dict[str, Decision] | None = None,
) -> list[SubagentResult]:
    """Each subtask's committed result, or what its checkpoint held, cut as interrupted;
    a committed escalated result a person ``answers`` carries their finding."""
    results = store.results(run_id)
    checkpoints = store.checkpoints(run_id)
    out: list[SubagentResult] = []
    for spec in job.subtasks:
        if spec.id in results:
            result = SubagentResult.model_validate(results[spec.id])
            answer = (answers or {}).get(spec.id)
            if answer is not None and result.escalation is not None:
                result = answered(result, answer)
            out.append(result)
            continue
        saved = checkpoints.get(spec.id)
        if saved is not None:
            # Only the result is read: the planner's own state is not needed.
            run = restored(spec, saved, seed=seed, with_planner=False)
        else:
            run = SubagentRun.for_subtask(spec, seed=seed)
        run.escalate("interrupted", resume_hint)
        out.append(run.result())
    return out
