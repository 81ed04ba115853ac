"""The coordinator as a Temporal workflow: the job's one flow, with activities for I/O.

The workflow runs :class:`coordinator.flow.Flow`, the same orchestration code a local run
runs (docs/design.md §15), with itself as the flow's backend: each subtask's round is one
activity (``concurrency`` lanes take subtasks in order), the lead's plan, follow-up plan
and synthesis are activities, settling cut subtasks and closing the run in the store are
activities, and job time is ``workflow.now()`` at the job's speed.

The job deadline is a workflow timer. When it fires, nothing more starts: queued
subtasks become ``deadline`` gaps with 0 attempts, the retry round does not begin.
Running rounds know the deadline too and cut themselves at it, each handing up the
findings it has with the attempt under way counted (a Temporal cancel would lose them:
a cancelled activity returns nothing). A round that has not come back ``grace_s``
after the deadline (its worker lost at the wrong moment) is cancelled and ends with
the state the workflow last knew.

A cancel is the ``cancel`` signal (the executor sends it when the door's cancel is
set): nothing more starts, running rounds are cancelled at once and each hands up the
state its last finished round left (trigger ``cancelled``; what a running round found
since is lost with the cancelled activity), queued subtasks are ``cancelled`` gaps, the
follow-ups do not start, and the partial report is stored. A cancel while the lead
plans waits for the plan (its activity is not cut).

A person (docs/design.md §17): when the door attached a desk (``attended``), an
escalation routed ``escalate`` waits in the workflow as it waits locally. The workflow
offers it (its id ``SUBTASK:N`` and options from :func:`shared.options.offer`, counted
here), publishes it (the ``waiting`` query) and waits for the door's ``decided`` signal
carrying the whole :class:`~coordinator.report.Decision`, bounded by a durable timer of
``job.escalations.wait_s`` after which it is decided ``by: timeout`` (``on_timeout``).
The lane gives its slot to a new lane meanwhile (the flow's :meth:`spawn`); the deadline
ends the wait decided ``accept`` ``by: deadline`` as locally, a cancel ends it
undecided. The escalation waiting and its decision (a person's, the timer's or the
deadline's) are recorded as ``decision.needed``/``decision.made`` events of its
subtask (the ``record_decision`` activity), as a local run's desk records them. The flow
then carries the decision out: ``retry`` runs the subagent's next round from the state
its escalated round brought back (an attended round keeps it), ``use_tool``/``requery``
run as follow-ups, ``stop`` is a cancel. Without a desk, the flow hands each escalation
routed ``escalate`` to a handler as it is counted: the handler lives in the door's
process, which a workflow cannot call; the workflow publishes each one (the
``escalations`` query) and, when the run was started with ``asks`` (the door has a
handler), waits for the door's ``decide`` signal before it counts the next one, so the
stored report carries the ``decisions``.

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
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from coordinator.checkpoint import spent_in
    from coordinator.decision import DEADLINE, TIMEOUT, DecisionRequest, decide, pending_item
    from coordinator.flow import Flow, Lane, Plan
    from coordinator.job import JobSpec
    from coordinator.people import DECISION_MADE, DECISION_NEEDED
    from coordinator.plan_review import PlanEditError, PlanReview, apply_plan_edit, parse_review
    from coordinator.report import CoverageReport, Decision, with_tokens
    from coordinator.rules import CutTrigger, retried_later, review_wait
    from coordinator.store.events import event_data
    from coordinator.temporal.activities import REQUESTS_QUERY, FanoutActivities
    from coordinator.temporal.budget import Allowance, WorkflowBudget
    from coordinator.temporal.lead import lost_decomposition, rejected_on_temporal
    from coordinator.temporal.payloads import (
        WORKFLOW_NAME,
        CatalogueInput,
        DecisionEventInput,
        Decomposition,
        DecompositionInput,
        FinishInput,
        FollowupInput,
        FollowupPlan,
        JobInput,
        LeadPosition,
        PlanInput,
        QueuedInput,
        RoundInput,
        RoundOutput,
        SettleInput,
        SettleItem,
        State,
        SynthesisInput,
    )
    from coordinator.temporal.rounds import failure, last_beat
    from shared.escalation import Escalation
    from shared.options import offer
    from subagents import ProgressEvent, SubagentResult
    from subagents.result import LEAD
    from subagents.spec import SubtaskSettings, SubtaskSpec


@workflow.defn(name=WORKFLOW_NAME)
class FanoutWorkflow:
    """One fan-out job; its result is the coverage report. It is the flow's backend
    (:class:`coordinator.flow.Backend`) on Temporal."""

    def __init__(self) -> None:
        self._results: dict[str, SubagentResult] = {}
        self._states: dict[str, State] = {}
        self._running: set[str] = set()
        self._queued: set[str] = set()
        self._cancelled = False
        self._cut = asyncio.Event()
        self._lanes: list[asyncio.Task[None]] = []
        self._lead: LeadPosition | None = None
        self._tokened = False  # the synthesis activity's report carries the tokens
        self._escalations: list[dict[str, Any]] = []
        self._decided: dict[str, str | None] = {}
        # A person's decisions (docs/design.md §17): escalations offered so far per
        # subtask, those waiting now by id, the decisions signalled for them, and how
        # often a person sent each subtask back to work (``retry``).
        self._offered: dict[str, int] = {}
        self._waiting: dict[str, Escalation] = {}
        self._since: dict[str, float] = {}  # when each waiting escalation began to wait
        self._made: dict[str, Decision] = {}
        self._again: dict[str, int] = {}
        # Waits the job's deadline cut, decided ``accept`` ``by: deadline``, by subtask:
        # the flow carries each out once the lanes end (``Flow(cut_decision=)``).
        self._cut_decided: dict[str, Decision] = {}
        # The lead's plan waiting for a person's review (the ``plan`` query), and the
        # review once made (the ``review_plan`` update).
        self._plan_wait: dict[str, Any] | None = None
        self._reviewed: PlanReview | None = None
        # A person's requests to running subtasks (signal ``asked``), each subtask's in
        # the order made; how far each subtask's were accounted for (read by a round,
        # or recorded unread); the running subtasks whose model reads hints.
        self._asked: dict[str, list[dict[str, Any]]] = {}
        self._accounted: dict[str, int] = {}
        self._hears: dict[str, bool] = {}

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

    @workflow.signal(name="cancel")
    def cancel(self) -> None:
        """A person cancelled the run (docs/design.md §8): nothing more starts, running
        subagents hand up, the partial report is stored."""
        self._cancelled = True

    @workflow.query(name="escalations")
    def escalations(self) -> list[dict[str, Any]]:
        """The escalations routed ``escalate`` so far, each as its wire form."""
        return self._escalations

    @workflow.signal(name="decide")
    def decide(self, decision: dict[str, Any]) -> None:
        """The door's handler decided ``{"subtask_id": ..., "choice": str | None}``."""
        self._decided[str(decision["subtask_id"])] = decision.get("choice")

    @workflow.query(name="waiting")
    def waiting(self) -> list[dict[str, Any]]:
        """The escalations waiting for a person's decision now, offered (with their ids
        and options), oldest first, each as its wire form."""
        return [e.model_dump(mode="json", by_alias=True) for e in self._waiting.values()]

    @workflow.query(name="waiting_since")
    def waiting_since(self) -> dict[str, float]:
        """The job time each escalation waiting now began to wait, by id (a door that
        attaches its desk later, a restarted server, lists it as it was)."""
        return {eid: self._since[eid] for eid in self._waiting}

    @workflow.signal(name="decided")
    def decided(self, decision: Decision) -> None:
        """A person decided a waiting escalation (the :class:`Decision` the door's desk
        made); one for an escalation that no longer waits changes nothing."""
        eid = decision.escalation
        if eid is not None and eid in self._waiting and eid not in self._made:
            self._made[eid] = decision

    @workflow.query(name="plan")
    def plan_waiting(self) -> dict[str, Any] | None:
        """The lead's plan while it waits for a person's review, else None: its
        ``subtasks`` and what an edit is checked with (``defaults``, ``tools``,
        ``planner``), and ``since_s``, the job time it began to wait."""
        return None if self._reviewed is not None else self._plan_wait

    @workflow.update(name="review_plan")
    def review_plan(self, review: dict[str, Any]) -> dict[str, Any]:
        """A person's review of the waiting plan: ``{"verdict": "approve" | "reject" |
        {"edit": {...}}, "by", "at"?}``; returns the :class:`PlanReview` made. The
        validator refuses a bad one before it is written to the history."""
        kind, subtasks = self._checked(review)
        made = PlanReview(verdict=kind, subtasks=subtasks, by=str(review.get("by") or "a person"),
                          at=review.get("at"), at_s=self.now())
        self._reviewed = made
        return made.model_dump(mode="json")

    @review_plan.validator
    def _review_is_valid(self, review: dict[str, Any]) -> None:
        """Refuse a review when no plan waits, or whose edit is no valid plan: an
        ``ApplicationError`` of type ``PlanEditError`` whose details name the field
        (``field``, ``expected``, ``got``), as the door's desk names it."""
        self._checked(review)

    def _checked(self, review: dict[str, Any]) -> tuple[Any, list[SubtaskSpec] | None]:
        """The verdict and (an edit's) plan of ``review``, checked as the local engine
        checks an edit (:func:`coordinator.plan_review.apply_plan_edit`).

        Raises:
            ApplicationError: no plan waits (``NotWaiting``), or the review is no valid
                one (``PlanEditError``, its details naming the field).
        """
        wait = self._plan_wait
        if wait is None or self._reviewed is not None:
            raise ApplicationError("the plan does not wait for review", type="NotWaiting",
                                   non_retryable=True)
        try:
            kind, edit = parse_review(review.get("verdict"))
            subtasks = None if edit is None else apply_plan_edit(
                [SubtaskSpec.model_validate(s) for s in wait["subtasks"]], edit,
                defaults=SubtaskSettings.model_validate(wait["defaults"]), tools=wait["tools"],
                planner=wait["planner"])
        except PlanEditError as exc:
            raise ApplicationError(str(exc), {"field": exc.field, "expected": exc.expected,
                                              "got": exc.got},
                                   type="PlanEditError", non_retryable=True) from None
        return kind, subtasks

    @workflow.signal(name="asked")
    def asked(self, request: dict[str, Any]) -> None:
        """A person asked a running subtask to stop, or gave it a hint (the door's desk's
        ``request.made``: ``{subtask_id, stop: true | hint, by, at_s, at?}``). Its round
        takes it from the ``requests`` query (:mod:`coordinator.temporal.requests`)."""
        self._asked.setdefault(str(request["subtask_id"]), []).append(dict(request))

    @workflow.query(name=REQUESTS_QUERY)
    def requests(self, subtask_id: str) -> list[dict[str, Any]]:
        """Every request made to ``subtask_id`` so far, oldest first."""
        return self._asked.get(subtask_id, [])

    @workflow.query(name="running")
    def running(self) -> list[dict[str, Any]]:
        """The subtasks whose round runs now (a person may ask them to stop), each with
        ``hints``: whether a model reads a hint there (a scripted plan has no turn)."""
        return [{"subtask_id": sid, "hints": hears} for sid, hears in self._hears.items()]

    async def handle(self, escalation: Escalation) -> str | None:
        """The flow's escalation handler on Temporal: publish the escalation (the
        ``escalations`` query) and, when the door has a handler (``asks``), wait for
        its ``decide`` signal (or a cancel); the choice is the door's."""
        sid = escalation.subtask_id
        self._escalations.append(escalation.model_dump(mode="json", by_alias=True))
        if not self._inp.asks:
            return None
        await workflow.wait_condition(lambda: sid in self._decided or self._cancelled)
        return self._decided.get(sid)

    @workflow.run
    async def run(self, inp: JobInput) -> CoverageReport:
        """Run the job's flow (:meth:`coordinator.flow.Flow.run`) on this workflow."""
        self._inp = inp
        self._started = workflow.now().timestamp()
        self._job = inp.job
        # The job's token meter: every round and lead activity brings back its spend.
        self._budget = WorkflowBudget(inp.job.budget)
        await self._catalogue()
        return await Flow(self, self, cut_decision=self.cut_decision).run(inp.job)

    async def _catalogue(self) -> None:
        """Record the job's MCP and research tools' catalogue first, as a local run does
        (an activity: the tools open on a worker). One that cannot be recorded is left
        out: the rounds meet the same trouble and say so in the report."""
        inp = self._inp
        if inp.store is None or not (inp.mcp_servers or inp.research is not None):
            return
        with suppress(ActivityError):
            await workflow.execute_activity_method(
                FanoutActivities.record_catalogue,
                CatalogueInput(run_id=inp.run_id, store=inp.store, mcp_servers=inp.mcp_servers,
                               research=inp.research, source=inp.source),
                activity_id="lead/catalogue",
                start_to_close_timeout=timedelta(seconds=inp.settings.round_timeout_s),
                retry_policy=inp.settings.retry_policy(),
            )

    # -- the lead agent -----------------------------------------------------------------

    @property
    def has_lead(self) -> bool:
        return self._inp.model is not None

    @property
    def lead_plans_followups(self) -> bool:
        return self._inp.followups

    @property
    def synthesizes(self) -> bool:
        return self._inp.synthesize and self._inp.model is not None

    async def plan(self, job: JobSpec) -> Plan:
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
                                   speed=inp.speed, started_at=self._started,
                                   review=self._reviews(job)),
                activity_id="lead/decompose",
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            message = f"the lead's decomposition failed on Temporal: {failure(err)}"
            return Plan(None, lost_decomposition(inp.job, message, self.now()))
        if plan.subtasks is None:
            return Plan(None, plan.gap)
        self._lead = plan.lead
        if plan.lead is not None:
            self._budget.record(LEAD, plan.lead.spent)
        subtasks = list(plan.subtasks)
        if not self._reviews(job):
            return Plan(subtasks, plan.gap)
        # The plan waits for a person (docs/design.md §17), before it is recorded.
        review = await self._review(job, subtasks, plan.tools)
        if review is not None and review.verdict == "reject":
            return Plan(None, rejected_on_temporal(job, plan.lead, seed=inp.seed,
                                                   run_id=inp.run_id, at_s=self.now(),
                                                   by=review.by))
        if review is not None and review.subtasks is not None:
            subtasks = review.subtasks
        if inp.store is not None and plan.lead is not None:
            await workflow.execute_activity_method(
                FanoutActivities.record_plan,
                PlanInput(run_id=inp.run_id, store=inp.store, subtasks=subtasks, gap=plan.gap,
                          lead=plan.lead, at_s=self.now()),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=settings.retry_policy(),
            )
        # (Cancelled while it waited: the plan goes on unreviewed and is cut at once.)
        return Plan(subtasks, plan.gap, cut=review is None)

    def _reviews(self, job: JobSpec) -> bool:
        """Whether the lead's plan waits for a person's review: the job asks for it
        (``review_plan``) and the door attached a person."""
        return job.review_plan and self._inp.attended

    async def _review(
        self, job: JobSpec, subtasks: list[SubtaskSpec], tools: list[str] | None
    ) -> PlanReview | None:
        """Wait for a person's review of ``subtasks`` (the ``plan`` query publishes them,
        the ``review_plan`` update brings the review) under a durable timer of
        ``job.escalations.wait_s``, never past the job's deadline, after which the plan
        is approved ``by: timeout``, as a local run's desk approves it. A cancel ends
        the wait unreviewed (None)."""
        bound = review_wait(job.escalation_wait().wait_s, job.deadline_s, self.now())
        timeout = None if bound is None else timedelta(
            seconds=max(bound / self._inp.speed, 0.001))
        self._plan_wait = {
            "subtasks": [s.model_dump(mode="json") for s in subtasks],
            "defaults": job.defaults.model_dump(mode="json"),
            "tools": tools, "planner": "model", "since_s": self.now(),
        }
        try:
            await workflow.wait_condition(
                lambda: self._reviewed is not None or self._cancelled, timeout=timeout)
        except builtins.TimeoutError:
            self._reviewed = PlanReview(verdict="approve", by=TIMEOUT, at=self._at(),
                                        at_s=self.now())
        finally:
            self._plan_wait = None
        return self._reviewed

    def known_followups(self) -> Sequence[SubtaskSpec] | None:
        return None  # a workflow replays its history: it never resumes from a store

    async def plan_followups(
        self, report: CoverageReport, job: JobSpec
    ) -> Sequence[SubtaskSpec] | None:
        """The follow-ups the lead plans (an activity); one lost on Temporal plans none."""
        inp = self._inp
        assert inp.model is not None
        settings = inp.settings
        try:
            plan: FollowupPlan = await workflow.execute_activity_method(
                FanoutActivities.plan_followups,
                FollowupInput(run_id=inp.run_id, job=job, seed=inp.seed,
                              tools=inp.tools, mcp_servers=inp.mcp_servers,
                              research=inp.research, model=inp.model,
                              source=inp.source, store=inp.store, speed=inp.speed,
                              started_at=self._started, report=report, lead=self._lead),
                activity_id="lead/followups",
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError:
            return []
        if plan.lead is not None:
            self._budget.record(LEAD, plan.lead.spent)
            self._lead = plan.lead
        return plan.followups

    async def synthesize(self, report: CoverageReport) -> CoverageReport:
        """The report with the lead's answer; a synthesis lost on Temporal leaves the
        report whole, with ``answer.synthesis_error`` (docs/design.md §7: never abort)."""
        inp = self._inp
        assert inp.model is not None
        settings = inp.settings
        self._tokened = True
        try:
            out: CoverageReport = await workflow.execute_activity_method(
                FanoutActivities.synthesize,
                SynthesisInput(run_id=inp.run_id, seed=inp.seed, model=inp.model,
                               store=inp.store, speed=inp.speed, started_at=self._started,
                               report=report, lead=self._lead, budget=self._budget.budget,
                               spent=self._budget.meter.snapshot()),
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            error = {"message": f"the lead's synthesis failed on Temporal: {failure(err)}"}
            answer = report.answer.model_copy(update={"text": None, "synthesis_error": error})
            report = report.model_copy(update={"answer": answer, "elapsed_s": self.now()})
            return with_tokens(report, self._budget.meter)
        return out  # with the tokens: the activity's meter counted the synthesis too

    def tokens(self, report: CoverageReport) -> CoverageReport:
        return report if self._tokened else with_tokens(report, self._budget.meter)

    async def record(self, report: CoverageReport) -> CoverageReport:
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

    # -- time and lanes -----------------------------------------------------------------

    def now(self) -> float:
        """Job time: seconds since the job started, at the job's speed."""
        return (workflow.now().timestamp() - self._started) * self._inp.speed

    def cancelled(self) -> bool:
        return self._cancelled

    def stopped(self) -> bool:
        return self._cut.is_set()

    async def lanes(self, n: int, lane: Lane, left: float | None) -> None:
        """``n`` lanes as workflow tasks, until they end, the deadline (a timer, with
        ``grace_s`` for rounds that cut themselves) or a cancel (at once)."""
        self._cut = asyncio.Event()
        tasks = self._lanes = [asyncio.create_task(lane()) for _ in range(n)]

        def all_in() -> bool:
            return all(t.done() for t in tasks)

        timeout = None if left is None else timedelta(seconds=max(left / self._inp.speed, 0))
        with suppress(builtins.TimeoutError):
            await workflow.wait_condition(lambda: all_in() or self._cancelled, timeout=timeout)
        if not all_in():
            self._cut.set()  # nothing more starts; at the deadline running rounds cut themselves
            if not self._cancelled:
                with suppress(builtins.TimeoutError):
                    await workflow.wait_condition(
                        lambda: all_in() or self._cancelled,
                        timeout=timedelta(seconds=self._inp.settings.grace_s),
                    )
            if not all_in():
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        self._queued = set()

    def spawn(self, lane: Lane) -> None:
        self._lanes.append(asyncio.create_task(lane()))

    # -- a person (docs/design.md §17) ------------------------------------------------

    @property
    def attended(self) -> bool:
        """The door attached a person (a desk) to the run when it started it."""
        return self._inp.attended

    async def decision(self, escalation: Escalation, spec: SubtaskSpec) -> Decision | None:
        """A person's decision on ``escalation``: offered with its id and options (the
        ``waiting`` query), waited for until the door's ``decided`` signal or, after
        ``job.escalations.wait_s`` (a durable timer), decided ``by: timeout``. The
        deadline ends the wait decided ``accept`` ``by: deadline`` (recorded then, carried
        out by the flow once the lanes end: :meth:`cut_decision`), as a local run's desk
        decides it (docs/design.md §17); a cancel (or a person's stop) ends it undecided,
        as it cuts a round. None when no person is attached."""
        if not self.attended:
            return None
        sid = spec.id
        n = self._offered[sid] = self._offered.get(sid, 0) + 1
        offered = offer(escalation, list(spec.tools), n)
        eid = offered.id
        assert eid is not None
        self._waiting[eid] = offered
        since = self._since[eid] = self.now()
        await self._record_decision(sid, DECISION_NEEDED,
                                    {"escalation": pending_item(offered, since)})
        wait = self._job.escalation_wait()
        timeout = None if wait.wait_s is None else timedelta(
            seconds=max(wait.wait_s / self._inp.speed, 0))
        try:
            try:
                # (``_cut`` is set when the lanes' deadline timer fires, or at a cancel:
                # the wait never outlasts the job's deadline.)
                await workflow.wait_condition(
                    lambda: eid in self._made or self._cut.is_set() or self._cancelled,
                    timeout=timeout,
                )
            except builtins.TimeoutError:
                made = decide(offered, DecisionRequest(escalation=eid, do=wait.on_timeout),
                              by=TIMEOUT, at=self._at(), at_s=self.now())
            else:
                got = self._made.get(eid)
                if got is None:
                    if self._cancelled:
                        # Cancelled while it waited: the lane ends, the escalation stays
                        # undecided.
                        raise asyncio.CancelledError
                    # The deadline ended the wait: the gap is kept, and said to be so
                    # (``accept``, whatever ``on_timeout`` says: docs/design.md §17).
                    made = decide(offered, DecisionRequest(escalation=eid, do="accept"),
                                  by=DEADLINE, at=self._at(), at_s=self.now())
                    self._cut_decided[sid] = made
                else:
                    # The person's own seconds (the desk's, from the run's start at the
                    # door), as locally: decisions are listed in the order made.
                    made = got if got.at_s is not None else got.model_copy(
                        update={"at_s": self.now()})
        finally:
            del self._waiting[eid]
            del self._since[eid]
        await self._record_decision(sid, DECISION_MADE,
                                    {"decision": made.model_dump(mode="json")})
        if sid in self._cut_decided:
            raise asyncio.CancelledError  # the lane ends as the deadline cut it
        return made

    def cut_decision(self, subtask_id: str) -> Decision | None:
        """The ``by: deadline`` decision of ``subtask_id``'s wait, when the deadline cut
        it (the flow's ``cut_decision``, as the local backend's)."""
        return self._cut_decided.pop(subtask_id, None)

    async def _record_decision(self, sid: str, kind: str, data: dict[str, Any]) -> None:
        """Record ``kind`` (an escalation waits, or is decided) as an event of subtask
        ``sid``, as a local run's desk records it: the trace, a served run's stream and
        ``fanout report`` show it on both engines (docs/design.md §15, §17)."""
        await self._record_event(sid, kind, data)

    async def _record_event(self, sid: str, kind: str, data: dict[str, Any]) -> None:
        """Record one event of subtask ``sid`` in the store (the ``record_decision``
        activity): a person's escalation events, a hint no model read."""
        inp = self._inp
        if inp.store is None:
            return
        await workflow.execute_activity_method(
            FanoutActivities.record_decision,
            DecisionEventInput(run_id=inp.run_id, store=inp.store, subtask_id=sid,
                               kind=kind, at_s=self.now(), data=data),
            # One write: a worker lost under it is retried soon, not in minutes.
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=inp.settings.retry_policy(),
        )

    def _at(self) -> str:
        return workflow.now().astimezone(UTC).isoformat(timespec="seconds")

    def again(self, spec: SubtaskSpec) -> None:
        """``spec``'s next round continues its escalated subagent from its last state
        (kept: the run is attended), as the retry round continues one: a new round of
        the same subagent, its findings, steps and context kept."""
        self._again[spec.id] = self._again.get(spec.id, 0) + 1

    def stop(self) -> None:
        """A person's ``stop``: the run ends as a cancel ends it; nothing more starts."""
        self._cancelled = True
        self._cut.set()

    def continuing(self, specs: Sequence[SubtaskSpec]) -> None:
        """Nothing to prepare: the continuations run as follow-ups' rounds do."""

    # -- the rounds ---------------------------------------------------------------------

    @contextmanager
    def fanning_out(self, job: JobSpec, *, followups: bool) -> Iterator[None]:
        self._job = job
        yield

    def due(self, spec: SubtaskSpec, round_no: int) -> bool:
        """Round 1: every subtask; the retry round: those routed ``retry_later`` whose
        state is known (a round lost for good has none to continue from)."""
        if round_no == 1:
            return True
        result = self._results.get(spec.id)
        return result is not None and self._retried(result)

    def _retried(self, result: SubagentResult) -> bool:
        return result.subtask_id in self._states and retried_later(
            result.escalation, result.rounds, self._job.routes)

    async def queued(self, batch: Sequence[SubtaskSpec], round_no: int) -> None:
        self._queued = {s.id for s in batch}
        inp = self._inp
        if inp.store is not None:
            await workflow.execute_activity_method(
                FanoutActivities.record_queued,
                QueuedInput(run_id=inp.run_id, store=inp.store, at_s=self.now(),
                            subtask_ids=[s.id for s in batch]),
                # A few writes: a worker lost under it is retried soon, not in minutes.
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=inp.settings.retry_policy(),
            )

    async def round(
        self, spec: SubtaskSpec, round_no: int, sharers: Callable[[], int]
    ) -> SubagentResult | None:
        """``spec``'s round as an activity, within what the budget lends it."""
        self._queued.discard(spec.id)
        allowance: Allowance | None = None
        if self._metered(spec):
            got = await self._budget.gate(
                spec.id,
                fresh=round_no == 1 and spec.id not in self._states,
                sharers=sharers,  # the lanes free to take a subtask now share what is left
                cut=self._cut,
            )
            if got is None:  # the round was cut while it waited: still queued
                return None
            if isinstance(got, str):  # the subagents' share is spent (job.budget)
                settled = await self._settle([SettleItem(subtask=spec)], "threshold_breach", got)
                return settled[0]
            allowance = got
        return await self._one(spec, round_no, allowance)

    async def counted(self, result: SubagentResult) -> bool:
        self._results[result.subtask_id] = result
        return not self._retried(result)

    async def settle(
        self, specs: Sequence[SubtaskSpec], trigger: CutTrigger
    ) -> AsyncIterator[SubagentResult]:
        items = [SettleItem(subtask=s, state=self._states.get(s.id)) for s in specs]
        for result in await self._settle(items, trigger):
            yield result

    def last(self, spec: SubtaskSpec) -> SubagentResult | None:
        return self._results.get(spec.id)

    def _metered(self, spec: SubtaskSpec) -> bool:
        """Whether ``spec``'s round spends the job's budget (a model plans it)."""
        return (self._budget.budget is not None and spec.planner == "model"
                and self._inp.model is not None)

    async def _one(
        self, spec: SubtaskSpec, round_no: int, allowance: Allowance | None = None
    ) -> SubagentResult:
        """One subtask's round as an activity; a round lost for good is settled."""
        inp = self._inp
        job = self._job
        state = self._states.get(spec.id)
        # A person's requests made while no round of the subtask ran reached none: a
        # hint among them is recorded unread; this round's begin after them.
        asked_from = await self._account(spec.id)
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
            attended=inp.attended,
            request_poll_s=inp.settings.request_poll_s,
            asked_from=asked_from,
        )
        settings = inp.settings
        self._running.add(spec.id)
        self._hears[spec.id] = spec.planner == "model" and inp.model is not None
        try:
            out: RoundOutput = await workflow.execute_activity_method(
                FanoutActivities.subagent_round,
                round_input,
                # A person's retry runs the round again: an activity id of its own.
                activity_id=f"{spec.id}/round-{round_no}"
                + (f"/again-{self._again[spec.id]}" if spec.id in self._again else ""),
                start_to_close_timeout=timedelta(seconds=settings.round_timeout_s),
                heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
                retry_policy=settings.retry_policy(),
            )
        except ActivityError as err:
            if self._cancelled:
                raise  # cancelled with the run: settled ``cancelled`` once the lanes end
            beat = last_beat(err)
            known = beat.get("state") if beat and beat.get("round") == round_no else None
            item = SettleItem(
                subtask=spec,
                state=known or state,
                done=bool(known and beat and beat.get("done")),
            )
            message = f"the subagent's round failed on Temporal: {failure(err)}"
            self._hears.pop(spec.id, None)
            await self._account(spec.id, asked_from)
            return (await self._settle([item], "internal_error", message))[0]
        finally:
            self._running.discard(spec.id)
            self._hears.pop(spec.id, None)
        # The hints its model never took (the round ended before its next turn) are
        # recorded unread, as a local run's flow records them (docs/design.md §17).
        await self._account(spec.id, asked_from + out.asked)
        self._budget.record(spec.id, out.spent)
        self._results[spec.id] = out.result
        if out.state is not None:
            self._states[spec.id] = out.state
        else:
            self._states.pop(spec.id, None)
        return out.result

    async def _account(self, sid: str, read_to: int | None = None) -> int:
        """Account for the requests made to ``sid`` so far: those up to ``read_to`` its
        round took, a hint after them is recorded ``hint.unread`` (a stop after them
        changed nothing: the round had ended). Returns where the next round's begin."""
        asked = self._asked.get(sid, [])
        end = len(asked)
        start = self._accounted.get(sid, 0)
        unread = [r for r in asked[max(start, read_to or 0):end] if r.get("hint") is not None]
        self._accounted[sid] = end
        for request in unread:
            event = ProgressEvent(sid, "hint.unread", self.now(), text=str(request["hint"]),
                                  by=str(request.get("by") or ""))
            await self._record_event(sid, "hint.unread", event_data(event))
        return end

    async def _settle(
        self, items: list[SettleItem], trigger: Any, message: str = ""
    ) -> list[SubagentResult]:
        inp = self._inp
        results: list[SubagentResult] = await workflow.execute_activity_method(
            FanoutActivities.settle,
            SettleInput(run_id=inp.run_id, seed=inp.seed, store=inp.store,
                        at_s=self.now(), trigger=trigger, message=message, items=items),
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=inp.settings.retry_policy(),
        )
        states = {item.subtask.id: item.state for item in items}
        for result in results:
            # A round cut or lost spent what its last known state says it had.
            self._budget.record(result.subtask_id, spent_in(states.get(result.subtask_id)))
            self._results[result.subtask_id] = result
            self._states.pop(result.subtask_id, None)
        return results
