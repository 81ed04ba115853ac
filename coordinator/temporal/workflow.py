"""The coordinator as a Temporal workflow: scheduling, the retry round, the deadline, the report.

The workflow does what :func:`coordinator.fanout.run_job` does, with activities for
subagents: ``concurrency`` lanes take subtasks in order (FIFO), each subtask's round is
one activity; once every first-round subagent is in, subtasks routed ``retry_later``
run once more, from the state their first round ended in; the report is the same pure
:func:`coordinator.report.assemble_report` of the results.

A job without subtasks is planned by its lead agent first (one activity, ``decompose``,
which records the plan): its subtasks then fan out as a file's would, each planned by
the model, or, when the lead cannot plan, the job ends ``failed`` with the lead's gap
(:func:`coordinator.lead.failed_decomposition`). The lead's time counts in the job's:
job time starts with the workflow, before the plan. For a job with a model, the lead
then writes the answer (one more activity, ``synthesize``), continuing at the lead's
position after its plan (its next scripted turn, trace id and jitter draw).

The job deadline is a workflow timer. When it fires, nothing more starts: queued
subtasks become ``deadline`` gaps with 0 attempts, the retry round does not begin.
Running rounds know the deadline too and cut themselves at it, each handing up the
findings it has with the attempt under way counted (a Temporal cancel would lose them:
a cancelled activity returns nothing). A round that has not come back ``grace_s``
after the deadline (its worker lost at the wrong moment) is cancelled and ends with
the state the workflow last knew.

``job.budget``: the workflow keeps the job's token meter from what each round and lead
activity brings back, lends each model-planned round a part of what is left of the
subagents' share, and settles a new subagent as a budget gap when the share is spent
(:mod:`coordinator.temporal.budget` says how, and where this differs from a local run).

Nothing here reads a clock, draws a random number or does I/O: job time is
``workflow.now()``, everything else is a function of the activities' results.

One job is one workflow; each round adds about three events to its history, so a job
stays well inside Temporal's 50,000-event limit up to some 10,000 subtasks (beyond
that it would want child workflows, which this does not do).
"""

from __future__ import annotations

import asyncio
import builtins
from collections import deque
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from coordinator.lead import (
        failed_decomposition,
        planned_job,
        with_followups,
        with_lead_gap,
    )
    from coordinator.lead.extractive import with_extractive_answer
    from coordinator.report import CoverageReport, assemble_report, with_tokens
    from coordinator.rules import (
        asks_for_followups,
        follows_up,
        followup_job,
        past_deadline,
        retried_later,
        time_left,
    )
    from coordinator.temporal.activities import FanoutActivities
    from coordinator.temporal.budget import Allowance, WorkflowBudget, spent_in
    from coordinator.temporal.lead import lost_decomposition
    from coordinator.temporal.payloads import (
        WORKFLOW_NAME,
        Decomposition,
        DecompositionInput,
        FinishInput,
        FollowupInput,
        FollowupPlan,
        JobInput,
        LeadPosition,
        RoundInput,
        RoundOutput,
        SettleInput,
        SettleItem,
        State,
        SynthesisInput,
    )
    from coordinator.temporal.rounds import failure, last_beat
    from subagents import SubagentResult
    from subagents.result import LEAD
    from subagents.spec import SubtaskSpec


@workflow.defn(name=WORKFLOW_NAME)
class FanoutWorkflow:
    """One fan-out job; its result is the coverage report."""

    def __init__(self) -> None:
        self._results: dict[str, SubagentResult] = {}
        self._states: dict[str, State] = {}
        self._running: set[str] = set()
        self._queued: set[str] = set()

    @workflow.query(name="progress")
    def progress(self) -> dict[str, int]:
        """Subagents queued, running, done and escalated so far."""
        escalated = sum(r.escalation is not None for r in self._results.values())
        return {
            "queued": len(self._queued),
            "running": len(self._running),
            "done": len(self._results) - escalated,
            "escalated": escalated,
        }

    @workflow.run
    async def run(self, inp: JobInput) -> CoverageReport:
        """Plan the job if it has no subtasks, fan it out, run the retry round, assemble
        and record the report."""
        self._inp = inp
        self._started = workflow.now().timestamp()
        self._job = job = inp.job
        # The job's token meter: every round and lead activity brings back its spend.
        self._budget = WorkflowBudget(job.budget)
        lead: LeadPosition | None = None
        lead_gap: SubagentResult | None = None
        if not job.subtasks:
            plan = await self._decompose()
            if plan.subtasks is None:
                assert plan.gap is not None
                return await self._record(failed_decomposition(job, plan.gap, self._job_now()))
            self._job = job = planned_job(job, plan.subtasks)
            lead = plan.lead
            if lead is not None:
                self._budget.record(LEAD, lead.spent)
            lead_gap = plan.gap
        self._queued = {s.id for s in job.subtasks}
        await self._rounds(job.subtasks)
        report = assemble_report(
            job,
            [r for s in job.subtasks if (r := self._results.get(s.id)) is not None],
            elapsed_s=self._job_now(),
        )
        if follows_up(
            job, lead=inp.model is not None, lead_failed=lead_gap is not None,
            lead_plans=inp.followups,
        ) and asks_for_followups(report, job.deadline_s, self._job_now(), cancelled=False):
            report, lead = await self._follow_up(report, lead)
        if lead_gap is not None:
            # A degraded plan (docs/design.md §7): the lead's failure stays visible.
            report = with_lead_gap(report, job, lead_gap)
        if inp.synthesize and inp.model is not None:
            report = await self._synthesize(report, lead)
        else:
            if job.answer == "extractive":
                # Retrieval only (docs/design.md §7): the best passages, cited, as run locally.
                report = with_extractive_answer(report, None)
            report = with_tokens(report, self._budget.meter)
        return await self._record(report)

    # -- the lead agent -----------------------------------------------------------------

    async def _decompose(self) -> Decomposition:
        """The lead's plan (an activity: the model call is I/O), or the lead's gap."""
        inp = self._inp
        assert inp.model is not None  # the loader refuses a job with neither
        settings = inp.settings
        try:
            plan: Decomposition = await workflow.execute_activity_method(
                FanoutActivities.decompose,
                DecompositionInput(run_id=inp.run_id, job=inp.job, seed=inp.seed,
                                   tools=inp.tools, mcp_servers=inp.mcp_servers,
                                   research=inp.research, model=inp.model,
                                   source=inp.source, store=inp.store,
                                   speed=inp.speed, started_at=self._started),
                activity_id="lead/decompose",
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            message = f"the lead's decomposition failed on Temporal: {failure(err)}"
            gap = lost_decomposition(inp.job, message, self._job_now())
            return Decomposition(gap=gap)
        return plan

    async def _follow_up(
        self, report: CoverageReport, lead: LeadPosition | None
    ) -> tuple[CoverageReport, LeadPosition | None]:
        """One round of follow-ups planned from the gaps (docs/design.md §11), as run_research's:
        the plan (an activity), their rounds and retry round, the report with them."""
        inp = self._inp
        assert inp.model is not None
        settings = inp.settings
        try:
            plan: FollowupPlan = await workflow.execute_activity_method(
                FanoutActivities.plan_followups,
                FollowupInput(run_id=inp.run_id, job=self._job, seed=inp.seed,
                              tools=inp.tools, mcp_servers=inp.mcp_servers,
                              research=inp.research, model=inp.model,
                              source=inp.source, store=inp.store, speed=inp.speed,
                              started_at=self._started, report=report, lead=lead),
                activity_id="lead/followups",
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError:
            # A follow-up plan lost on Temporal plans none: the report stays the fan-out's.
            return report, lead
        specs = plan.followups
        if plan.lead is not None:
            self._budget.record(LEAD, plan.lead.spent)
        if not specs:
            return report, plan.lead
        await self._rounds(specs)
        extra = assemble_report(
            followup_job(self._job, specs),
            [r for s in specs if (r := self._results.get(s.id)) is not None],
            elapsed_s=self._job_now(),
        )
        return with_followups(report, extra, specs), plan.lead

    async def _synthesize(
        self, report: CoverageReport, lead: LeadPosition | None
    ) -> CoverageReport:
        """The report with the lead's answer; a synthesis lost on Temporal leaves the
        report whole, with ``answer.synthesis_error`` (docs/design.md §7: never abort)."""
        inp = self._inp
        assert inp.model is not None
        settings = inp.settings
        try:
            out: CoverageReport = await workflow.execute_activity_method(
                FanoutActivities.synthesize,
                SynthesisInput(run_id=inp.run_id, seed=inp.seed, model=inp.model,
                               store=inp.store, speed=inp.speed, started_at=self._started,
                               report=report, lead=lead, budget=self._budget.budget,
                               spent=self._budget.meter.snapshot()),
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            error = {"message": f"the lead's synthesis failed on Temporal: {failure(err)}"}
            answer = report.answer.model_copy(update={"text": None, "synthesis_error": error})
            report = report.model_copy(update={"answer": answer, "elapsed_s": self._job_now()})
            return with_tokens(report, self._budget.meter)
        return out  # with the tokens: the activity's meter counted the synthesis too

    async def _record(self, report: CoverageReport) -> CoverageReport:
        """Close the run in the store with ``report`` (when it is recorded); return it."""
        inp = self._inp
        if inp.store is not None:
            await workflow.execute_activity_method(
                FanoutActivities.record_report,
                FinishInput(run_id=inp.run_id, store=inp.store, report=report,
                            routing=dict(self._job.routing)),
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=inp.settings.retry_policy(),
            )
        return report

    # -- time ---------------------------------------------------------------------------

    def _job_now(self) -> float:
        """Job time: seconds since the job started, at the job's speed."""
        return (workflow.now().timestamp() - self._started) * self._inp.speed

    def _until_deadline(self) -> float | None:
        """Real seconds until the deadline (None: no deadline): a workflow timer's."""
        left = time_left(self._job.deadline_s, self._job_now())
        return None if left is None else left / self._inp.speed

    def _past_deadline(self) -> bool:
        return past_deadline(self._job.deadline_s, self._job_now())

    # -- scheduling ---------------------------------------------------------------------

    async def _rounds(self, batch: list[SubtaskSpec]) -> None:
        """``batch``'s first round, then the retry round of those routed ``retry_later``
        (as run_job's), unless the deadline has passed. A subagent whose round was lost
        for good has no state to continue from: it is not retried."""
        await self._round(list(batch), 1)
        retry = [
            s for s in batch
            if (r := self._results.get(s.id)) is not None
            and retried_later(r.escalation, r.rounds, self._job.routes)
            and s.id in self._states
        ]
        if retry and not self._past_deadline():
            await self._round(retry, 2)

    async def _round(self, batch: list[SubtaskSpec], round_no: int) -> None:
        """Run ``batch``'s rounds under the capacity limit, FIFO, until the deadline."""
        queue = deque(batch)
        self._queued = {s.id for s in batch}
        in_flight: dict[str, State | None] = {}
        cut = asyncio.Event()

        n_lanes = min(self._job.concurrency, len(queue))

        async def lane() -> None:
            while queue and not cut.is_set():
                spec = queue.popleft()
                self._queued.discard(spec.id)
                allowance: Allowance | None = None
                if self._metered(spec):
                    got = await self._budget.gate(
                        spec.id,
                        fresh=round_no == 1 and spec.id not in self._states,
                        # The lanes free to take a subtask now share what is left.
                        sharers=lambda: min(n_lanes - len(in_flight), 1 + len(queue)),
                        cut=cut,
                    )
                    if got is None:  # the deadline fell while it waited: still queued
                        queue.appendleft(spec)
                        return
                    if isinstance(got, str):  # the subagents' share is spent (job.budget)
                        await self._settle([SettleItem(subtask=spec)], "threshold_breach", got)
                        continue
                    allowance = got
                in_flight[spec.id] = self._states.get(spec.id)
                await self._one(spec, round_no, allowance)
                del in_flight[spec.id]

        lanes = [asyncio.create_task(lane()) for _ in range(n_lanes)]

        def all_in() -> bool:
            return all(t.done() for t in lanes)

        remaining = self._until_deadline()
        if remaining is None:
            await asyncio.gather(*lanes)
            return
        try:
            await workflow.wait_condition(all_in, timeout=timedelta(seconds=max(remaining, 0)))
        except builtins.TimeoutError:
            cut.set()  # the deadline: running rounds cut themselves, nothing more starts
            try:
                await workflow.wait_condition(
                    all_in, timeout=timedelta(seconds=self._inp.settings.grace_s)
                )
            except builtins.TimeoutError:
                for task in lanes:
                    task.cancel()
                await asyncio.gather(*lanes, return_exceptions=True)
        self._queued = set()
        items = [SettleItem(subtask=s, state=self._states.get(s.id)) for s in queue]
        items += [
            SettleItem(subtask=s, state=in_flight[s.id]) for s in batch if s.id in in_flight
        ]
        if items:
            await self._settle(items, "deadline")

    def _metered(self, spec: SubtaskSpec) -> bool:
        """Whether ``spec``'s round spends the job's budget (a model plans it)."""
        return (self._budget.budget is not None and spec.planner == "model"
                and self._inp.model is not None)

    async def _one(
        self, spec: SubtaskSpec, round_no: int, allowance: Allowance | None = None
    ) -> None:
        """One subtask's round as an activity; a round lost for good is settled."""
        inp = self._inp
        job = self._job
        state = self._states.get(spec.id)
        round_input = RoundInput(
            run_id=inp.run_id,
            round=round_no,
            subtask=spec,
            seed=inp.seed,
            tools=inp.tools,
            mcp_servers=inp.mcp_servers,
            research=inp.research,
            model=inp.model,
            source=inp.source,
            store=inp.store,
            speed=inp.speed,
            started_at=self._started,
            deadline_s=job.deadline_s,
            routing=dict(job.routing),
            state=state,
            budget=job.budget if allowance is not None else None,
            spent_before=self._budget.others(spec.id),
            allowance=allowance,
            search_first=job.search_first == "auto",
        )
        settings = inp.settings
        self._running.add(spec.id)
        try:
            out: RoundOutput = await workflow.execute_activity_method(
                FanoutActivities.subagent_round,
                round_input,
                activity_id=f"{spec.id}/round-{round_no}",
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            beat = last_beat(err)
            known = beat.get("state") if beat and beat.get("round") == round_no else None
            item = SettleItem(
                subtask=spec,
                state=known or state,
                done=bool(known and beat and beat.get("done")),
            )
            message = f"the subagent's round failed on Temporal: {failure(err)}"
            await self._settle([item], "internal_error", message)
            return
        finally:
            self._running.discard(spec.id)
        self._budget.record(spec.id, out.spent)
        self._results[spec.id] = out.result
        if out.state is not None:
            self._states[spec.id] = out.state
        else:
            self._states.pop(spec.id, None)

    async def _settle(self, items: list[SettleItem], trigger: Any, message: str = "") -> None:
        inp = self._inp
        results: list[SubagentResult] = await workflow.execute_activity_method(
            FanoutActivities.settle,
            SettleInput(run_id=inp.run_id, seed=inp.seed, store=inp.store,
                        at_s=self._job_now(), trigger=trigger, message=message, items=items),
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=inp.settings.retry_policy(),
        )
        states = {item.subtask.id: item.state for item in items}
        for result in results:
            # A round cut or lost spent what its last known state says it had.
            self._budget.record(result.subtask_id, spent_in(states.get(result.subtask_id)))
            self._results[result.subtask_id] = result
            self._states.pop(result.subtask_id, None)
