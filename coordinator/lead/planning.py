"""Who plans each subtask of a job: its scripted plan, or the job's model (docs/design.md §7).

A :class:`JobPlanning` holds the job's model client, opened once per job (the key read
from the environment then, never stored), and makes each subtask's planner and its
fresh or restored :class:`~subagents.run.SubagentRun`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from coordinator.jobfile.scenario import Scenario
from shared.clock import Clock
from subagents.models.base import ModelClient
from subagents.models.factory import build_client
from subagents.models.scripted import ScriptedModel
from subagents.models.spend import TokenMeter
from subagents.planners import Planner, ScriptedPlanner
from subagents.planners.model import ModelPlanner
from subagents.result import LEAD
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec


class JobPlanning:
    """The job's model client and a planner per subtask."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        clock: Clock | None = None,
        client: ModelClient | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.scenario = scenario
        self._clock = clock
        self._environ = os.environ if environ is None else environ
        self._client = client
        # What the job's model calls spend, against job.budget: the lead's and every
        # subagent's (one meter per job).
        self.meter = TokenMeter(scenario.job.budget)

    @property
    def model_planned(self) -> bool:
        """Whether any subtask is planned by the model (or the lead decomposes the job)."""
        return self.scenario.model is not None and (
            not self.scenario.job.subtasks
            or any(s.planner == "model" for s in self.scenario.job.subtasks)
        )

    @property
    def synthesizes(self) -> bool:
        """Whether the lead writes the answer: every job with a model (docs/design.md §7).

        A scripted model synthesizes only when its file scripts ``lead`` turns: a
        scenario that does not mention the lead replays without one.
        """
        model = self.scenario.model
        if model is None:
            return False
        scripted = (
            isinstance(self._client, ScriptedModel)
            if self._client is not None
            else model.provider == "scripted"
        )
        return not scripted or LEAD in model.turns

    @property
    def plans_followups(self) -> bool:
        """Whether the lead may be asked for follow-ups (docs/design.md §11).

        A scripted model is asked only when its file scripts a ``followups`` turn for
        ``lead``: a scenario without one replays exactly as before, byte for byte.
        """
        model = self.scenario.model
        if model is None:
            return False
        if not self._scripted():
            return True
        return any(t.followups is not None for t in model.turns.get(LEAD, []))

    def _scripted(self) -> bool:
        model = self.scenario.model
        if self._client is not None:
            return isinstance(self._client, ScriptedModel)
        return model is not None and model.provider == "scripted"

    @property
    def client(self) -> ModelClient:
        """The job's model client, built on first use.

        Raises:
            MissingModelKey: the provider's key variable is not set.
        """
        if self._client is None:
            spec = self.scenario.model
            if spec is None:
                raise ValueError(f"{self.scenario.source}: the job has no model block")
            self._client = build_client(spec, environ=self._environ, clock=self._clock)
        return self._client

    def open(self) -> None:
        """Build the client now, so a missing key fails before anything runs."""
        if self.scenario.model is not None:
            _ = self.client

    def planner(self, spec: SubtaskSpec) -> Planner:
        """The planner of subtask ``spec``."""
        model = self.scenario.model
        if spec.planner == "model" and model is not None:
            return ModelPlanner(
                self.client,
                model,
                spec.id,
                seed=self.scenario.seed,
                meter=self.meter,
                search_first=self.scenario.job.search_first == "auto",
            )
        return ScriptedPlanner(list(spec.plan))

    def fresh_run(self, spec: SubtaskSpec) -> SubagentRun:
        """A new SubagentRun for ``spec``, seeded like a replay."""
        return SubagentRun.for_subtask(spec, seed=self.scenario.seed, planner=self.planner(spec))

    def fresh_runs(self) -> dict[str, SubagentRun]:
        """A new SubagentRun per subtask."""
        return {s.id: self.fresh_run(s) for s in self.scenario.job.subtasks}

    async def aclose(self) -> None:
        """Close the model client's connections."""
        if self._client is not None:
            await self._client.aclose()
