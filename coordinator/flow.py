"""The job's flow, written once (docs/design.md §15, "One engine").

:class:`Flow` is the whole of a job's orchestration, read top to bottom in
:meth:`Flow.run`: plan (or take the plan), the rounds with their lanes and the deadline,
the retry round, the follow-ups, the lead's gap, the answer (synthesis, streamed, or
extractive), the tokens, the record. Both engines run this code:

- locally, :class:`coordinator.fanout.LocalBackend` runs it in this process (anyio; under
  trio's virtual time in replays);
- on Temporal, :class:`coordinator.temporal.workflow.FanoutWorkflow` runs it inside the
  workflow with a backend whose rounds, lead calls and synthesis are activities and whose
  time is workflow time.

What differs between the engines is asked of a :class:`Backend`: time (``now``, the
lanes run under the deadline and the cancel), where a subtask's round and a lead call
run, how cut subtasks are settled, what is recorded. The decisions themselves (retry
later, the cuts, follow-up eligibility) are the pure functions of :mod:`coordinator.rules`.
Nothing here imports anyio or asyncio: the backend brings its own primitives, so the
workflow's sandbox runs this module deterministically.

**Escalations.** A result that ends its subtask escalated, routed ``escalate``, goes to
the run's person when one is attached (``Backend.attended``): the lane holds it, gives its
slot to a new lane, waits for ``Backend.decision`` and :meth:`Flow.carry_out` does what
the decision says (docs/design.md §17). Without a person it is handed to the run's
:class:`~coordinator.routing.EscalationHandler` in :meth:`Flow.escalated` as it is
counted; its choice is one of the report's ``decisions``.

**Waiting, durably.** A resumed run gets the escalations that waited for a person when
the run stopped (:class:`Waited`, read from the store's ``decision.needed`` and
``decision.made`` events): with a person attached, :meth:`Flow.fan_out` holds each of
those subtasks again, with the same escalation, and carries out the decision then made
as it does for a fresh one (a ``retry`` runs the subtask again). The decisions made
before it stopped (:class:`Decided`, read from ``decision.made`` and
``decision.changed``) are the report's again, each once: what a decision did to its
subtask's result is done again as it is counted (``answer``'s finding, ``accept``'s
mark), and what one had under way goes on (a ``retry`` runs its subtask again, a
``use_tool``/``requery`` its continuation); :meth:`Flow.fan_out` counts what the run had
finished first, so a decision's ``coverage_before`` counts it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from coordinator.decision import answered, with_change
from coordinator.job import JobSpec
from coordinator.lead.decompose import failed_decomposition, with_lead_gap
from coordinator.lead.extractive import with_extractive_answer
from coordinator.lead.followups import with_followups, with_skipped_followups
from coordinator.lead.research import planned_job
from coordinator.report import (
    CoverageReport,
    Decision,
    ReportBuilder,
    SubtaskStatus,
    coverage_of,
    subtask_status,
    with_decisions,
)
from coordinator.routing import EscalationHandler
from coordinator.rules import (
    CutTrigger,
    asks_for_followups,
    follows_up,
    followup_job,
    next_round_starts,
    split_followups,
    time_left,
)
from shared.escalation import Escalation
from subagents.result import SubagentResult
from subagents.spec import CallStep, PlanStep, SubtaskSpec

__all__ = ["Backend", "Decided", "Flow", "Plan", "Waited", "continuation"]

Lane = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Plan:
    """The lead's plan: its subtasks (None: the plan was lost, the job fails with the
    lead's gap), the lead's gap when it could not plan (the subtasks are then the
    degraded plan), and whether a cancel cut the planning (nothing is written up then)."""

    subtasks: list[SubtaskSpec] | None
    gap: SubagentResult | None = None
    cut: bool = False


@dataclass(frozen=True)
class Waited:
    """An escalation that waited for a person when its run stopped (docs/design.md §17):
    the subtask's committed ``result``, its ``escalation`` as offered (``id`` and
    ``options``), and ``since_s``, the job time its wait began. A resumed run with a
    person attached waits for it again."""

    result: SubagentResult
    escalation: Escalation
    since_s: float


@dataclass(frozen=True)
class Decided:
    """A person's decision made before its run stopped (docs/design.md §17): the
    ``decision`` as recorded (with its ``change`` once that was measured), ``result``,
    its subtask's committed result when the run stopped (None: none), and ``done``:
    what the decision started had been counted (else it was under way: a retry running
    or not started again, a continuation not counted)."""

    decision: Decision
    result: SubagentResult | None = None
    done: bool = True


class Backend(Protocol):
    """What an engine supplies the flow: time, lanes, where things run, the record."""

    # -- the lead ---------------------------------------------------------------------

    @property
    def has_lead(self) -> bool:
        """The job has a model: a lead that plans, follows up and writes the answer."""
        ...

    @property
    def lead_plans_followups(self) -> bool:
        """The lead may be asked for follow-ups (:func:`coordinator.rules.follows_up`)."""
        ...

    @property
    def synthesizes(self) -> bool:
        """The lead writes the answer (the job has a model and asks for a synthesis)."""
        ...

    async def plan(self, job: JobSpec) -> Plan:
        """The lead's plan of ``job`` (a job without subtasks); hears a cancel."""
        ...

    def known_followups(self) -> Sequence[SubtaskSpec] | None:
        """The follow-ups planned before (a resumed run), or None: not planned yet."""
        ...

    async def plan_followups(
        self, report: CoverageReport, job: JobSpec
    ) -> Sequence[SubtaskSpec] | None:
        """The follow-ups the lead plans from ``report``'s gaps (None: cut while it
        planned them, nothing more starts)."""
        ...

    async def synthesize(self, report: CoverageReport) -> CoverageReport:
        """``report`` with the lead's answer, its ``elapsed_s`` at the answer's end."""
        ...

    # -- time and lanes ---------------------------------------------------------------

    def now(self) -> float:
        """Job time: seconds since the job started."""
        ...

    def cancelled(self) -> bool:
        """A person cancelled the run: nothing more starts."""
        ...

    def stopped(self) -> bool:
        """The round was cut (deadline or cancel): a lane takes no more subtasks."""
        ...

    async def lanes(self, n: int, lane: Lane, left: float | None) -> None:
        """Run ``n`` lanes to their end, cut after ``left`` job seconds (None: no
        deadline) or at a cancel; a cut lane's subtask is left to :meth:`settle`."""
        ...

    def spawn(self, lane: Lane) -> None:
        """Start one more lane beside those :meth:`lanes` runs (a subtask that waits for
        a person gives its slot to it); :meth:`lanes` returns once it ends too."""
        ...

    # -- a person (docs/design.md §17) ------------------------------------------------

    @property
    def attended(self) -> bool:
        """A person is attached to the run: escalations routed ``escalate`` wait for them."""
        ...

    async def decision(self, escalation: Escalation, spec: SubtaskSpec) -> Decision | None:
        """A person's decision on ``escalation`` (routed ``escalate``), waited for with
        the job's ``escalations`` bounds; None when no person is attached to the run.
        Cut by the deadline or a cancel like a round."""
        ...

    def again(self, spec: SubtaskSpec) -> None:
        """Make ``spec``'s escalated subagent ready to run once more from where it
        stopped (a person's ``retry``): its next :meth:`round` continues it."""
        ...

    def stop(self) -> None:
        """End the run now, as a cancel does (a person's ``stop``)."""
        ...

    def continuing(self, specs: Sequence[SubtaskSpec]) -> None:
        """``specs`` continue subtasks a person decided ``use_tool``/``requery`` for;
        they run next, as follow-ups."""
        ...

    # -- the rounds -------------------------------------------------------------------

    def fanning_out(self, job: JobSpec, *, followups: bool) -> AbstractContextManager[None]:
        """The scope of one fan-out of ``job`` (the job's subtasks, or its follow-ups)."""
        ...

    def due(self, spec: SubtaskSpec, round_no: int) -> bool:
        """Whether ``spec`` runs in round ``round_no`` (1, or 2: the retry round)."""
        ...

    async def queued(self, batch: Sequence[SubtaskSpec], round_no: int) -> None:
        """``batch`` waits for a lane (recorded as such)."""
        ...

    async def round(
        self, spec: SubtaskSpec, round_no: int, sharers: Callable[[], int]
    ) -> SubagentResult | None:
        """Run ``spec``'s round in its lane to its result (None: it did not start, the
        round was cut while it waited; it is still queued). ``sharers``: how many lanes
        are free to share what is left of a budget."""
        ...

    async def counted(self, result: SubagentResult) -> bool:
        """Record ``result`` before it is counted; return whether it is its subtask's
        last (no retry round will replace it)."""
        ...

    def settle(
        self, specs: Sequence[SubtaskSpec], trigger: CutTrigger
    ) -> AsyncIterator[SubagentResult]:
        """End the subtasks a cut left: running ones hand up what they found, queued
        ones are gaps with 0 attempts; one result each, in order."""
        ...

    def last(self, spec: SubtaskSpec) -> SubagentResult | None:
        """``spec``'s result when the fan-out ends and it was not counted as final."""
        ...

    # -- the answer and the record ----------------------------------------------------

    def tokens(self, report: CoverageReport) -> CoverageReport:
        """``report`` with the tokens the job spent."""
        ...

    async def record(self, report: CoverageReport) -> CoverageReport:
        """Close the run with ``report`` where it is recorded; return it."""
        ...


class Flow:
    """One job's orchestration on ``backend``; ``handler`` hears its escalations."""

    def __init__(
        self, backend: Backend, handler: EscalationHandler | None = None,
        *, lead_gap: SubagentResult | None = None, waited: Mapping[str, Waited] | None = None,
        decided: Sequence[Decided] = (), on_change: Callable[[Decision], None] | None = None,
        cut_decision: Callable[[str], Decision | None] | None = None,
    ) -> None:
        self.backend = backend
        self.handler = handler
        self.lead_gap = lead_gap  # a resumed run's lead that could not plan
        # A resumed run's escalations that waited for a person, by subtask: they wait
        # again in the fan-out of their subtask (when a person is attached).
        self.waited: dict[str, Waited] = dict(waited or {})
        # A resumed run's decisions made before it stopped, by subtask, in the order made:
        # taken up in the fan-out of their subtask.
        self.restored: dict[str, list[Decided]] = {}
        for made in decided:
            self.restored.setdefault(made.decision.subtask_id, []).append(made)
        # Hears each of a person's decisions once what it changed is measured (the run
        # store records it: a resumed run lists it as it was).
        self.on_change = on_change
        # What decided a subtask's wait that the deadline cut (None: nothing, it stays
        # undecided): the backend's ``by: deadline`` decision (docs/design.md §17).
        self.cut_decision = cut_decision
        self.decisions: list[Decision] = []
        # A person's decisions under way: the subtask's status and the job's coverage
        # before, kept until what the decision started is counted (docs/design.md §17).
        self._acting: dict[str, tuple[Decision, SubtaskStatus, float]] = {}
        # The same for use_tool / requery, measured once their continuation is counted.
        self._continuing: dict[str, tuple[Decision, SubtaskStatus, float]] = {}
        # A person's retry: the subtask's attempts and steps when it was decided.
        self._retried_at: dict[str, tuple[int, int]] = {}
        # What a person's use_tool / requery continue with, run after the rounds.
        self._continued: list[SubtaskSpec] = []
        # The job's report while follow-ups fan out (theirs or a person's continuations):
        # a decision made then is measured against the whole job's coverage.
        self._outer: CoverageReport | None = None

    async def run(self, job: JobSpec) -> CoverageReport:
        """Run ``job`` to its report; never raises for a failure inside the job."""
        backend = self.backend
        cut_while_planning = False
        if not job.subtasks:
            plan = await backend.plan(job)
            if plan.subtasks is None:
                assert plan.gap is not None
                return await backend.record(failed_decomposition(job, plan.gap, backend.now()))
            job = planned_job(job, plan.subtasks)
            self.lead_gap, cut_while_planning = plan.gap, plan.cut
        report = await self.fan_out(job, followups=False)
        while self._continued:  # (a continuation may escalate and be continued in turn)
            report = await self.continued(report, job)
        if follows_up(job, lead=backend.has_lead, lead_failed=self.lead_gap is not None,
                      lead_plans=backend.lead_plans_followups):
            report = await self.follow_up(report, job)
            while self._continued:  # decided during the follow-ups: carried out the same way
                report = await self.continued(report, job)
        if self.lead_gap is not None:
            # The plan failed, the job went on (docs/design.md §7): the lead's gap stays.
            report = with_lead_gap(report, job, self.lead_gap)
        if backend.synthesizes and not cut_while_planning:
            # (A run cancelled before its lead had planned found nothing to write up.)
            report = await backend.synthesize(report)
        elif job.answer == "extractive":
            # Retrieval only (docs/design.md §7): the best passages of the findings, cited.
            report = with_extractive_answer(report, None)
        return await backend.record(self.decided(backend.tokens(report)))

    async def follow_up(self, report: CoverageReport, job: JobSpec) -> CoverageReport:
        """``report`` after one round of follow-ups planned from its gaps (docs/design.md §11).

        The lead plans from the report with a person's decisions so far: a gap a person
        decided (``accept``, ``stop``, ``answer``) is their word on it, and one a
        person's ``use_tool``/``requery`` continuation filled is filled, so the lead is
        not shown it and a follow-up planned for it anyway does not run; the gap says so
        (``skipped_followups``) (docs/design.md §17, :func:`coordinator.rules.settled`)."""
        backend = self.backend
        if backend.cancelled():
            return report  # a cancelled run starts nothing more, follow-ups included
        shown = self._with_persons(report)
        specs = backend.known_followups()
        if specs is None:
            if not asks_for_followups(shown, job.deadline_s, backend.now(), cancelled=False):
                return report
            specs = await backend.plan_followups(shown, job)
            if specs is None:
                return report  # cancelled while it planned them
        specs, skipped = split_followups(specs, shown)
        if not specs:
            return with_skipped_followups(report, skipped)
        # The same deadline, concurrency and routing as the job's, their own rounds.
        extra = await self.beside(report, followup_job(job, specs))
        return with_skipped_followups(with_followups(report, extra, specs), skipped)

    def _with_persons(self, report: CoverageReport) -> CoverageReport:
        """``report`` with the decisions made so far among its ``decisions``, those still
        under way included (in the order made per subtask): what the lead plans from."""
        made = [*self.decisions, *(d for d, _, _ in self._acting.values()),
                *(d for d, _, _ in self._continuing.values())]
        return report.model_copy(update={"decisions": [*report.decisions, *made]})

    async def beside(self, report: CoverageReport, job: JobSpec) -> CoverageReport:
        """The fan-out of ``job``'s follow-ups beside ``report``, the job's so far."""
        self._outer = report
        try:
            return await self.fan_out(job, followups=True)
        finally:
            self._outer = None

    def _coverage(self, rows: ReportBuilder) -> float:
        """The job's coverage so far (a decision's before → after): ``rows``' own, or
        while follow-ups fan out, the job's with the gaps they have filled so far."""
        outer = self._outer
        if outer is None:
            return rows.coverage()
        parent = {r.id: r.followup_of for r in outer.subtasks if r.followup_of}
        parent.update({s.id: s.followup_of for s in rows.job.subtasks if s.followup_of})
        filled: set[str] = set()
        for spec in rows.job.subtasks:
            if spec.id in rows and rows.status(spec.id) in ("complete", "empty"):
                gap = spec.followup_of
                while gap is not None and gap not in filled:
                    filled.add(gap)
                    gap = parent.get(gap)
        # (Only whether a gap is filled counts for its coverage, not by what.)
        gaps = [g.model_copy(update={"filled_by": ["…"]})
                if g.subtask_id in filled and not g.filled_by else g for g in outer.gaps]
        return coverage_of(outer.subtasks, gaps)[0]

    async def continued(self, report: CoverageReport, job: JobSpec) -> CoverageReport:
        """``report`` after the subtasks a person continued (``use_tool``, ``requery``):
        follow-ups whose ``filled_by`` names the gap they were decided for."""
        specs, self._continued = self._continued, []
        if self.backend.cancelled():
            for spec in specs:  # nothing more starts: the decision changed nothing
                if (spec.followup_of or spec.id) in self._continuing:
                    self._acted(self._continuing, spec.followup_of or spec.id, "gap",
                                report.coverage)
            return report
        self.backend.continuing(specs)
        extra = await self.beside(report, followup_job(job, specs))
        report = with_followups(report, extra, specs)
        rows = {row.id: row.status for row in report.subtasks}
        for spec in specs:
            if (spec.followup_of or spec.id) in self._continuing:  # (else measured before a stop)
                self._acted(self._continuing, spec.followup_of or spec.id,
                            rows.get(spec.id, "gap"), report.coverage)
        return report

    async def fan_out(self, job: JobSpec, *, followups: bool) -> CoverageReport:
        """``job``'s subtasks to their report: the first round, then the retry round of
        those routed ``retry_later`` unless the run was cut."""
        backend = self.backend
        with backend.fanning_out(job, followups=followups):
            rows = ReportBuilder(job)
            kept: dict[str, SubagentResult] = {}  # results the retry round may replace
            first = [s for s in job.subtasks if backend.due(s, 1)]
            # A resumed run's subtasks that waited for a person wait again (their round
            # is over: they take no lane until decided).
            waited = [(s, self.waited.pop(s.id)) for s in job.subtasks
                      if s.id in self.waited and backend.attended]
            again = await self.picked_up(job, rows, {s.id for s, _ in waited})
            if again:  # a retry under way when the run stopped: its subtask runs again
                first = [s for s in job.subtasks if s.id in again or backend.due(s, 1)]
            if first or waited:
                await self.round(job, first, 1, rows, kept, waited)
            # A resumed run may have been cut inside the retry round: those continue in it.
            retry = [s for s in job.subtasks if backend.due(s, 2)]
            if retry and next_round_starts(job.deadline_s, backend.now(),
                                           cancelled=backend.cancelled()):
                await self.round(job, retry, 2, rows, kept)
            for spec in job.subtasks:
                if spec.id not in rows:
                    result = kept.pop(spec.id, None) or backend.last(spec)
                    if result is not None:
                        await self.add(rows, result)
            return rows.report(elapsed_s=backend.now())

    async def picked_up(
        self, job: JobSpec, rows: ReportBuilder, held: set[str]
    ) -> set[str]:
        """What a resumed run had finished, counted before its rounds, and the decisions
        made before it stopped taken up again (docs/design.md §17); the ids of the
        subtasks a ``retry`` under way runs again. ``held``: the subtasks that wait for a
        person again. (A fresh run has nothing finished: nothing is counted here.)"""
        backend = self.backend
        ready: list[tuple[SubtaskSpec, Decided | None]] = []
        under_way: list[tuple[SubtaskSpec, Decided]] = []
        for spec in job.subtasks:
            made = self.restored.pop(spec.id, [])
            last = made[-1] if made else None
            for one in made:  # (an earlier one not measured was cut by the stop: as it was)
                if one.done or one is not last:
                    self.decisions.append(one.decision)
            if last is not None and not last.done:
                under_way.append((spec, last))
            elif spec.id not in held and not backend.due(spec, 1) and not backend.due(spec, 2):
                ready.append((spec, last))
        for spec, last in ready:  # finished before the stop, the decision on it done
            result = backend.last(spec)
            if result is None:
                continue
            if last is not None and last.decision.do != "retry":
                # What a person decided stands (the handler is not asked); a retry's new
                # result is the subtask's own.
                await self.act_again(last.decision, spec, result, rows)
            else:
                await self.add(rows, result)
        again: set[str] = set()
        for spec, last in under_way:
            decision, result = last.decision, last.result or backend.last(spec)
            if result is None:
                continue
            before = (decision, subtask_status(result), self._coverage(rows))
            if decision.do == "retry":
                # Measured once its subtask is counted; one that escalated again and
                # waits is measured as that escalation is decided (Flow.carry_out).
                self._acting[spec.id] = before
                if spec.id not in held:
                    if not backend.due(spec, 1) and not backend.due(spec, 2):
                        backend.again(spec)  # escalated still: it had not started again
                    again.add(spec.id)
            elif decision.do in ("use_tool", "requery"):
                self._continuing[spec.id] = before
                await self.act_again(decision, spec, result, rows)
            else:
                self._acting[spec.id] = before
                await self.act_again(decision, spec, result, rows)
        return again

    async def act_again(
        self, decision: Decision, spec: SubtaskSpec, result: SubagentResult,
        rows: ReportBuilder,
    ) -> None:
        """Count ``result`` as ``decision``, made before the run stopped, had it counted
        (an ``answer``'s finding added; the handler not asked); a ``use_tool``/``requery``
        continues it again, a ``stop`` stops the resumed run."""
        do = decision.do
        await self.add(rows, answered(result, decision) if do == "answer" else result,
                       ask=False)
        if do in ("use_tool", "requery"):
            self._continued.append(self._continuation(spec, decision))
        elif do == "stop":
            self.backend.stop()

    async def round(
        self, job: JobSpec, batch: list[SubtaskSpec], round_no: int,
        rows: ReportBuilder, kept: dict[str, SubagentResult],
        waited: Sequence[tuple[SubtaskSpec, Waited]] = (),
    ) -> None:
        """One round of ``batch`` on ``job.concurrency`` lanes taking subtasks in order
        (FIFO), until the deadline or a cancel; what the cut left is settled.

        A subtask whose escalation waits for a person gives its lane's slot to a new lane
        while it waits (every other subtask goes on); once decided, it goes back to work
        only if fewer than ``job.concurrency`` lanes are working. ``waited``: a resumed
        run's subtasks that waited for a person when it stopped; they wait again here,
        holding no lane, and a retry decided then takes a lane as a decided one does."""
        backend = self.backend
        queue = deque(batch)
        running: set[str] = set()
        held: dict[str, SubagentResult] = {}  # escalated, waiting for a person
        working = [0]  # lanes taking subtasks (not waiting for a person)
        await backend.queued(batch, round_no)
        n_lanes = min(job.concurrency, len(queue) + len(waited))
        waiters = list(waited)

        async def count(result: SubagentResult) -> None:
            if await backend.counted(result):
                kept.pop(result.subtask_id, None)
                await self.add(rows, result)
            else:
                kept[result.subtask_id] = result

        async def lane() -> None:
            working[0] += 1
            try:
                while queue and not backend.stopped():
                    spec = queue.popleft()
                    running.add(spec.id)
                    result = await backend.round(
                        spec, round_no, lambda: min(n_lanes - len(running) + 1, 1 + len(queue))
                    )
                    running.discard(spec.id)
                    if result is None:  # cut while it waited for its turn: still queued
                        queue.appendleft(spec)
                        return
                    escalation = result.escalation
                    if (not backend.attended or escalation is None
                            or job.routes.route(escalation).route != "escalate"):
                        await count(result)
                        continue
                    if not await backend.counted(result):
                        kept[result.subtask_id] = result
                        continue
                    kept.pop(result.subtask_id, None)
                    if not self.waits(job, result):
                        # A retry that made no call (the job's budget is spent, say)
                        # escalates the same way again at once: asking again would loop,
                        # a person or a handler choosing retry forever in no time at all.
                        await self.add(rows, result, ask=False)
                        continue
                    # Its slot goes to another lane while a person decides.
                    working[0] -= 1
                    backend.spawn(lane)
                    try:
                        await decide(spec, result, escalation)
                    finally:
                        working[0] += 1
                    if working[0] > n_lanes:
                        return  # the lane that took its slot goes on
            finally:
                working[0] -= 1

        async def decide(spec: SubtaskSpec, result: SubagentResult,
                         escalation: Escalation) -> None:
            # The subtask waits for a person's decision (holding no lane), then the
            # decision is carried out.
            held[spec.id] = result
            decision = await backend.decision(escalation, spec)
            del held[spec.id]
            if decision is None:
                await self.add(rows, result)
            elif await self.carry_out(decision, spec, result, rows):
                queue.appendleft(spec)  # a retry: it runs again from where it stopped

        async def waiter(spec: SubtaskSpec, waited: Waited) -> None:
            # A resumed run's subtask that waited when the run stopped waits again; a
            # retry then takes a lane when one is free (else a working lane takes it).
            await decide(spec, waited.result, waited.escalation)
            if queue and working[0] < n_lanes and not backend.stopped():
                await lane()

        async def first_lane() -> None:
            # The first lane to start starts the resumed waits beside the lanes.
            while waiters:
                spec, one = waiters.pop(0)
                backend.spawn(partial(waiter, spec, one))
            await lane()

        await backend.lanes(n_lanes, first_lane if waiters else lane,
                            time_left(job.deadline_s, backend.now()))
        for sid, result in held.items():
            # The deadline or a cancel fell while a person had not decided. A wait the
            # deadline cut is decided by the backend (accepted ``by: deadline``, on both
            # engines) and carried out, so it is listed with what it changed; a cancel's
            # stays undecided.
            decision = self.cut_decision(sid) if self.cut_decision is not None else None
            if decision is None:
                await self.add(rows, result, ask=False)
            else:
                spec = next(s for s in [*batch, *(w for w, _ in waited)] if s.id == sid)
                await self.carry_out(decision, spec, result, rows)
        # (A resumed wait decided retry may have been cut before it ran again, too.)
        left = [s for s in [*batch, *(spec for spec, _ in waited)]
                if s.id not in rows and not self._done(s, kept, round_no)]
        if left:
            trigger: CutTrigger = "cancelled" if backend.cancelled() else "deadline"
            async for result in backend.settle(left, trigger):
                await count(result)

    @staticmethod
    def _done(spec: SubtaskSpec, kept: dict[str, SubagentResult], round_no: int) -> bool:
        """Whether ``spec`` came back from round ``round_no`` (kept for the retry round)."""
        result = kept.get(spec.id)
        return result is not None and result.rounds >= round_no

    def decided(self, report: CoverageReport) -> CoverageReport:
        """``report`` with the decisions made during the run (a handler's choices, a
        person's decisions with what they changed); accepted gaps marked decided."""
        for made in self.restored.values():  # (their fan-out never came: as recorded)
            self.decisions.extend(one.decision for one in made)
        self.restored.clear()
        for pending in (self._acting, self._continuing):
            for sid in list(pending):  # started, never counted again (the run was cut)
                status: SubtaskStatus = next(
                    (r.status for r in report.subtasks if r.id == sid), "gap")
                self._acted(pending, sid, status, report.coverage)
        decisions = [*report.decisions, *self.decisions]
        if all(d.at_s is not None for d in decisions):
            # A person's, in the order made (each is listed once what it did is counted).
            decisions.sort(key=lambda d: d.at_s or 0.0)
        return with_decisions(report.model_copy(update={"decisions": []}), decisions)

    async def add(self, rows: ReportBuilder, result: SubagentResult, *, ask: bool = True) -> None:
        """Count ``result`` as its subtask's last: its report rows, and its escalation
        handed over when it is routed ``escalate``."""
        rows.add(result)
        sid = result.subtask_id
        if sid in self._acting:
            self._acted(self._acting, sid, rows.status(sid), self._coverage(rows))
        escalation = rows.escalation(sid)
        if escalation is not None and ask:
            await self.escalated(escalation)

    async def escalated(self, escalation: Escalation) -> None:
        """Hand an escalation routed ``escalate`` to the run's handler as its subtask is
        counted (a run without a person attached); its choice becomes one of the
        report's ``decisions``."""
        if self.handler is None:
            return
        choice = await self.handler.handle(escalation)
        if choice is not None:
            self.decisions.append(Decision(subtask_id=escalation.subtask_id, choice=choice))

    # -- a person's decision, carried out (docs/design.md §17) ----------------------------

    async def carry_out(
        self, decision: Decision, spec: SubtaskSpec, result: SubagentResult,
        rows: ReportBuilder,
    ) -> bool:
        """Do what ``decision`` says for ``spec``, escalated with ``result``; True when
        the subtask runs again (``retry``). Its change (the subtask's status and the
        job's coverage before → after) is measured once what it started is counted."""
        sid = spec.id
        if sid in self._acting:  # a retry that escalated again: the first one is done
            self._acted(self._acting, sid, subtask_status(result), self._coverage(rows))
        before = (decision, subtask_status(result), self._coverage(rows))
        do = decision.do
        if do == "retry":
            self._acting[sid] = before
            self._retried_at[sid] = (result.attempts, result.steps)
            self.backend.again(spec)
            return True
        if do in ("use_tool", "requery"):
            await self.add(rows, result, ask=False)  # the gap stays; a follow-up may fill it
            self._continuing[sid] = before  # measured once the continuation is counted
            self._continued.append(self._continuation(spec, decision))
            return False
        self._acting[sid] = before
        await self.add(rows, answered(result, decision) if do == "answer" else result, ask=False)
        if do == "stop":
            self.backend.stop()
        return False

    def waits(self, job: JobSpec, result: SubagentResult) -> bool:
        """Whether ``result``, its subtask's last, waits for a person once counted: an
        escalation routed ``escalate`` on a run a person attends, unless a person's retry
        just ended the same way without a call (:meth:`_retried_in_vain`). The local
        backend asks it before committing the result, to open the wait first
        (docs/design.md §17)."""
        escalation = result.escalation
        return (self.backend.attended and escalation is not None
                and job.routes.route(escalation).route == "escalate"
                and not self._retried_in_vain(result))

    def _retried_in_vain(self, result: SubagentResult) -> bool:
        """Whether ``result`` escalated again after a person's ``retry`` without a single
        attempt or step since (docs/design.md §17): that retry changed nothing, and
        offering it again would loop."""
        since = self._retried_at.get(result.subtask_id)
        return since is not None and (result.attempts, result.steps) <= since

    def _continuation(self, spec: SubtaskSpec, decision: Decision) -> SubtaskSpec:
        """The follow-up a person's ``use_tool`` or ``requery`` continues ``spec`` with."""
        n = sum(1 for s in self._continued if s.followup_of == spec.id) + 1
        return continuation(spec, decision, n)

    def _acted(
        self, pending: dict[str, tuple[Decision, SubtaskStatus, float]], sid: str,
        status_after: SubtaskStatus, coverage_after: float,
    ) -> None:
        """Close the decision under way for ``sid`` in ``pending`` with what it changed."""
        decision, status_before, coverage_before = pending.pop(sid)
        changed = with_change(
            decision, status_before=status_before, status_after=status_after,
            coverage_before=coverage_before, coverage_after=coverage_after,
        )
        self.decisions.append(changed)
        if self.on_change is not None:
            self.on_change(changed)


def continuation(spec: SubtaskSpec, decision: Decision, n: int = 1) -> SubtaskSpec:
    """The ``n``-th follow-up a person's ``use_tool`` or ``requery`` continues ``spec``
    with (``SUBTASK-decided-N``): weight 0, ``followup_of`` the gap; a model plans it
    when one planned ``spec``, else it calls the tool with the arguments given (the
    query when none). A resumed run makes the same one again (docs/design.md §17)."""
    query = decision.query or spec.query
    tools = [decision.tool] if decision.tool else list(spec.tools)
    plan: list[PlanStep] = []
    if spec.planner != "model":
        if decision.tool:
            plan = [CallStep(call=decision.tool, args=decision.args or {"query": query})]
        else:  # the subtask's own calls, the old query replaced by the new one
            plan = [
                step.model_copy(update={"args": {
                    k: (query if v == spec.query else v) for k, v in step.args.items()}})
                if isinstance(step, CallStep) else step
                for step in spec.plan
            ]
    return spec.model_copy(update={
        "id": f"{spec.id}-decided-{n}", "query": query, "tools": tools, "plan": plan,
        "weight": 0.0, "followup_of": spec.id,
    })
