"""A subagent's checkpoint: the one writer and the one reader both engines use.

A checkpoint is everything needed to continue a subagent where it stood
(docs/design.md §15): a local run streams it to the run store after every logical call
(``coordinator/engine/recorded.py``) and ``fanout resume`` reads it back
(``coordinator/engine/resume.py``); on Temporal a round heartbeats it and writes it to
the store (``coordinator/temporal/rounds.py``), and a retried round, the retry round
and the ``settle`` activity continue from it. Both write it with :func:`state_of` and
read it with :func:`restored`; nothing else builds or takes apart the dict.

Its shape, stored as JSON (a store's ``checkpoints`` rows, a round's heartbeat)::

    {"run":   snapshot_run(run),        # subagents/checkpoint.py, carries its "version"
     "sim":   [[tool, rule, n], ...],   # the simulated tools' response counters
     "trace": n,                        # the subtask's trace-id position
     "model": {...}}                    # optional: the model client's own state

The outer dict has no version of its own: keys are only ever added, optional, so every
row stored since the run store began (``run``, ``sim``, ``trace``) still reads; the
run's snapshot is versioned and :func:`~subagents.checkpoint.restore_run` refuses a
version it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from shared.ids import SeededTraceIds
from subagents.checkpoint import restore_run, snapshot_run
from subagents.models.spend import Spent
from subagents.planners import Planner
from subagents.run import SubagentRun
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

__all__ = ["Checkpoint", "KeepsState", "restored", "spent_in", "state_of"]

Checkpoint = dict[str, Any]
"""A subagent's checkpoint as JSON-ready data (the shape in the module docstring)."""

_REQUIRED = ("run", "sim", "trace")


@runtime_checkable
class KeepsState(Protocol):
    """A model client whose answers depend on what it has served (the scripted model)."""

    def snapshot(self) -> dict[str, Any]:
        """The client's own state as plain JSON."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from a :meth:`snapshot`."""
        ...


def state_of(
    run: SubagentRun,
    sim: SimulatedTools,
    trace_ids: SeededTraceIds,
    client: object | None = None,
) -> Checkpoint:
    """Everything needed to continue ``run``: its state, its simulated tools' counters,
    its trace-id position and, given a ``client`` that keeps state, the client's.

    Only a client that serves this subagent alone belongs here (a Temporal round makes
    its own): a local run's client serves every subagent, and each restored
    :class:`~subagents.planners.model.ModelPlanner` seeks it to its own position.
    """
    sid = run.spec.id
    state: Checkpoint = {
        "run": snapshot_run(run),
        "sim": sim.snapshot(sid),
        "trace": trace_ids.position(sid),
    }
    if isinstance(client, KeepsState):
        state["model"] = client.snapshot()
    return state


def restored(
    spec: SubtaskSpec,
    state: Mapping[str, Any] | None,
    *,
    seed: object,
    sim: SimulatedTools | None = None,
    trace_ids: SeededTraceIds | None = None,
    planner: Planner | None = None,
    client: object | None = None,
    with_planner: bool = True,
) -> SubagentRun:
    """The subagent continued from ``state`` (a fresh one without it), the counters,
    trace-id position and client state it holds put back where given.

    ``sim``/``trace_ids`` None: those are not restored (a reader that needs only the
    run's result, an interrupted run's report, which passes ``with_planner=False`` too).

    Raises:
        ValueError: ``state`` is not a checkpoint, or its run's version is unknown.
    """
    if state is None:
        return SubagentRun.for_subtask(spec, seed=seed, planner=planner)
    missing = [key for key in _REQUIRED if key not in state]
    if missing:
        raise ValueError(f"checkpoint of {spec.id!r} has no {', '.join(missing)}")
    if sim is not None:
        sim.restore(spec.id, state["sim"])
    if trace_ids is not None:
        trace_ids.set_position(spec.id, int(state["trace"]))
    model = state.get("model")
    if model is not None and isinstance(client, KeepsState):
        # Before the run: a restored model planner then seeks the client to its own turn.
        client.restore(model)
    return restore_run(spec, state["run"], planner=planner, with_planner=with_planner)


def spent_in(state: Mapping[str, Any] | None) -> Spent | None:
    """What a checkpoint says its subagent's model calls spent (None: nothing known)."""
    if not state:
        return None
    planner = (state.get("run") or {}).get("planner") or {}
    spent = planner.get("spent")
    return None if spent is None else [int(n) for n in spent]
