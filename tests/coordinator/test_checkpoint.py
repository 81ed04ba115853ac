"""A subagent's checkpoint (coordinator/checkpoint.py): what the one writer writes the one
reader reads back into an equal run, with and without the model client's state; rows
stored before there was one writer still read; both engines call these two functions
and nothing else builds or takes apart the dict."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import coordinator.engine.recorded
import coordinator.engine.resume
import coordinator.temporal.activities
import coordinator.temporal.rounds
from coordinator.checkpoint import Checkpoint, restored, spent_in, state_of
from coordinator.jobfile.loader import load_scenario
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from shared.clock import AnyioClock
from shared.ids import SeededTraceIds
from subagents.checkpoint import snapshot_run
from subagents.loop import run_subagent
from subagents.models.scripted import ScriptedModel
from subagents.result import SubagentResult
from subagents.run import SubagentRun
from subagents.simulated.tools import SimulatedTools

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios"
# Checkpoints as the two writers wrote them before there was one (a local run's store
# row, a Temporal round's heartbeat with its "model"), taken mid-run.
STORED = Path(__file__).parent / "data" / "stored_checkpoints.json"
PACKAGES = ("coordinator", "subagents", "shared")


def as_stored(state: Checkpoint) -> Checkpoint:
    """``state`` as a store or a heartbeat gives it back: through JSON."""
    loaded: Checkpoint = json.loads(json.dumps(state))
    return loaded


class Job:
    """One subtask of a library scenario, run on its own simulated tools and trace ids."""

    def __init__(self, name: str, subtask: str, *, own_client: bool) -> None:
        self.scenario: Scenario = load_scenario(LIBRARY / name)
        self.spec = next(s for s in self.scenario.job.subtasks if s.id == subtask)
        self.own_client = own_client
        self.clock = AnyioClock()
        self.sim = SimulatedTools(self.scenario.tools, self.clock)
        self.trace_ids = SeededTraceIds(f"{self.scenario.seed}/run")
        self.planning = JobPlanning(self.scenario, clock=self.clock)
        # A Temporal round's client serves its subagent alone: its state is checkpointed.
        self.client: ScriptedModel | None = None
        if own_client:
            assert isinstance(self.planning.client, ScriptedModel)
            self.client = self.planning.client

    def fresh(self) -> SubagentRun:
        """The subtask's run from the start."""
        return self.planning.fresh_run(self.spec)

    def state(self, run: SubagentRun) -> Checkpoint:
        """The one writer, with this job's counters, trace ids and client."""
        return state_of(run, self.sim, self.trace_ids, self.client)

    def restored(self, state: Checkpoint) -> SubagentRun:
        """The one reader, into this job's counters, trace ids and client."""
        return restored(self.spec, state, seed=self.scenario.seed, sim=self.sim,
                        trace_ids=self.trace_ids, planner=self.planning.planner(self.spec),
                        client=self.client)

    async def run(self, run: SubagentRun, saved: list[Checkpoint] | None = None) -> SubagentResult:
        """Run ``run`` to its end, each checkpoint written by the one writer into ``saved``."""
        return await run_subagent(
            run, self.sim.for_subtask(self.spec.id), clock=self.clock, trace_ids=self.trace_ids,
            checkpoint=None if saved is None else lambda r: saved.append(as_stored(self.state(r))),
        )


CASES = [
    pytest.param("unknown_state.yaml", "sample_order", False, id="scripted-plan-in-flight"),
    pytest.param("retry_round_recovers.yaml", "supply_chain", False, id="scripted-plan"),
    pytest.param("model_escalates.yaml", "pricing", False, id="model-without-its-state"),
    pytest.param("model_escalates.yaml", "pricing", True, id="model-with-its-state"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "subtask", "own_client"), CASES)
async def test_what_the_writer_writes_the_reader_reads_back_into_an_equal_run(
    name: str, subtask: str, own_client: bool
) -> None:
    """Every checkpoint of a run, read back by the one reader into a new job, is the same
    run (written again it is the same checkpoint), and the model client's state, when it
    was written, is the client's again."""
    job = Job(name, subtask, own_client=own_client)
    saved: list[Checkpoint] = []
    await job.run(job.fresh(), saved)
    assert saved, "the run wrote no checkpoint"
    for state in saved:
        assert ("model" in state) == own_client
        again = Job(name, subtask, own_client=own_client)
        run = again.restored(state)
        assert snapshot_run(run) == state["run"]
        assert as_stored(again.state(run)) == state
        if again.client is not None:
            assert again.client.snapshot() == state["model"]


@pytest.mark.anyio
# (A call in flight when its checkpoint was taken is not sent again: that run ends
# unknown_state, tests/reliability/ has it.)
@pytest.mark.parametrize(("name", "subtask", "own_client"), CASES[1:])
async def test_a_run_restored_from_its_first_checkpoint_ends_as_the_uninterrupted_one(
    name: str, subtask: str, own_client: bool
) -> None:
    """Continued from its first checkpoint in a job of its own, a subagent ends with the
    result it has when nothing stops it, times and trace ids included."""
    job = Job(name, subtask, own_client=own_client)
    saved: list[Checkpoint] = []
    uninterrupted = await job.run(job.fresh(), saved)
    again = Job(name, subtask, own_client=own_client)
    if again.spec.planner == "model" and not own_client:
        # A local run's client serves every subagent: the restored planner seeks it.
        assert "model" not in saved[0]
    resumed = await again.run(again.restored(saved[0]))
    assert resumed.model_dump(exclude={"started_s", "ended_s"}) == uninterrupted.model_dump(
        exclude={"started_s", "ended_s"})


@pytest.mark.anyio
async def test_the_client_gets_its_state_back_then_the_planner_seeks_its_own_turn() -> None:
    """The reader hands the model client all of its stored state (here a position of
    another subtask, which no planner seeks) before the restored planner seeks the
    subtask's own turn."""
    job = Job("model_escalates.yaml", "pricing", own_client=True)
    saved: list[Checkpoint] = []
    await job.run(job.fresh(), saved)
    state = saved[0]
    state["model"] = {"positions": {"pricing": 0, "other": 3}}
    again = Job("model_escalates.yaml", "pricing", own_client=True)
    again.restored(state)
    assert again.client is not None
    own = state["run"]["planner"]["model_attempts"]
    assert again.client.snapshot() == {"positions": {"other": 3, "pricing": own}}


@pytest.mark.parametrize("index", [0, 1, 2], ids=["temporal-round", "local-store", "in-flight"])
def test_checkpoints_stored_before_the_one_writer_still_read(index: int) -> None:
    """A checkpoint as the local store and a Temporal heartbeat held it before there was
    one writer is read by the one reader, and written again unchanged: the stored shape
    is the writer's."""
    stored: dict[str, Any] = json.loads(STORED.read_text(encoding="utf-8"))[index]
    job = Job(stored["scenario"], stored["subtask"], own_client="model" in stored["state"])
    run = job.restored(stored["state"])
    written = as_stored(job.state(run))
    # The shape grows additively only: a key added since (the model planner's ``turns``,
    # counted for a person's hints) is derived from what was stored; nothing else changes.
    added: set[str] = set()
    assert _as_old(written, stored["state"], added) == stored["state"]
    assert added <= GROWN, added


# Keys the checkpoint gained after these were stored (derived on read from the old shape).
GROWN = {"run.planner.turns"}


def _as_old(value: Any, old: Any, added: set[str], path: str = "") -> Any:
    """``value`` restricted to the keys of ``old`` (recursively); the others in ``added``."""
    if isinstance(value, dict) and isinstance(old, dict):
        added.update(f"{path}{k}".lstrip(".") for k in value if k not in old)
        return {k: _as_old(v, old[k], added, f"{path}{k}.") for k, v in value.items()
                if k in old}
    if isinstance(value, list) and isinstance(old, list) and len(value) == len(old):
        return [_as_old(v, o, added, path) for v, o in zip(value, old, strict=True)]
    return value


def test_a_state_that_is_not_a_checkpoint_is_refused_by_name() -> None:
    """A dict without the checkpoint's keys is a ValueError naming what is missing, and a
    run snapshot of a version the reader does not know is refused too."""
    job = Job("unknown_state.yaml", "sample_order", own_client=False)
    with pytest.raises(ValueError, match="'sample_order' has no sim, trace"):
        restored(job.spec, {"run": {}}, seed=0)
    state = job.state(job.fresh())
    state["run"]["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        restored(job.spec, state, seed=0)


def test_no_state_is_a_fresh_run() -> None:
    """Without a checkpoint the reader gives the subtask's fresh run."""
    job = Job("unknown_state.yaml", "sample_order", own_client=False)
    run = restored(job.spec, None, seed=job.scenario.seed)
    assert snapshot_run(run) == snapshot_run(job.fresh())


def test_spent_in_reads_a_checkpoint() -> None:
    """A checkpoint says what its model planner spent; a scripted plan's says nothing."""
    assert spent_in({"run": {"planner": {"spent": [5, 6, 1]}}}) == [5, 6, 1]
    assert spent_in({"run": {"planner": None}}) is None
    assert spent_in(None) is None


def test_both_engines_call_the_one_writer_and_the_one_reader() -> None:
    """The local engine's recorder and resume and Temporal's round and settle activities
    hold the very functions of coordinator.checkpoint."""
    for module in (coordinator.engine.recorded, coordinator.temporal.rounds,
                   coordinator.temporal.activities):
        assert vars(module)["state_of"] is state_of, module.__name__
    for module in (coordinator.engine.resume, coordinator.temporal.rounds,
                   coordinator.temporal.activities):
        assert vars(module)["restored"] is restored, module.__name__


def _calls(path: Path, names: set[str]) -> list[str]:
    """Where the module at ``path`` calls one of ``names`` (or takes it by name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
    return found


def test_no_other_module_builds_or_takes_apart_a_checkpoint() -> None:
    """Outside coordinator/checkpoint.py no module of the packages snapshots or restores a
    subagent's run, the part every checkpoint is built around (subagents/checkpoint.py
    defines them)."""
    owners = {ROOT / "coordinator" / "checkpoint.py", ROOT / "subagents" / "checkpoint.py"}
    elsewhere = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py")) if path not in owners
        for hit in _calls(path, {"snapshot_run", "restore_run"})
    ]
    assert elsewhere == []
    # The scan sees a call where there is one: the owner's own are found.
    assert _calls(ROOT / "coordinator" / "checkpoint.py", {"snapshot_run", "restore_run"})
