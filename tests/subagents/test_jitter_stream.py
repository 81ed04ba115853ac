"""A subagent's jitter stream is random.Random(f"{seed}/{subtask_id}"), seeded or not yet."""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest

from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec

SPEC = SubtaskSpec(id="market", query="q")


def _reference() -> random.Random:
    return random.Random("7/market")


def _stream() -> Any:
    """A fresh subagent's stream (a DeferredRandom: random.Random's interface, made lazily)."""
    return SubagentRun.for_subtask(SPEC, seed=7).rng


def test_draws_follow_the_seeded_stream() -> None:
    """uniform, random and getrandbits draw exactly what the seeded Random draws."""
    rng = _stream()
    reference = _reference()
    assert [rng.uniform(0, 8) for _ in range(5)] == [reference.uniform(0, 8) for _ in range(5)]
    assert rng.random() == reference.random()
    assert rng.getrandbits(70) == reference.getrandbits(70)
    assert rng.randrange(1000) == reference.randrange(1000)


def test_state_before_any_draw_is_the_seeded_state() -> None:
    """A checkpoint taken before the first draw saves the seeded state, not a blank one."""
    assert _stream().getstate() == _reference().getstate()


@pytest.mark.parametrize(
    "clone",
    [
        pytest.param(lambda r: pickle.loads(pickle.dumps(r)), id="pickle"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_copies_continue_the_same_stream(clone: Callable[[Any], Any]) -> None:
    """A pickled or copied stream, fresh or part-drawn, continues where the original is."""
    reference = _reference()
    fresh = _stream()
    assert clone(fresh).random() == reference.random()
    used = _stream()
    used.random()
    twin = clone(used)
    expected = [reference.random() for _ in range(3)]
    assert [twin.random() for _ in range(3)] == expected
    assert [used.random() for _ in range(3)] == expected


def test_setstate_and_seed_replace_the_pending_seed() -> None:
    """Restoring a state or reseeding wins over the seed given at creation."""
    rng = _stream()
    other = random.Random(99)
    rng.setstate(other.getstate())
    assert rng.random() == other.random()
    rng = _stream()
    rng.seed(5)
    assert rng.random() == random.Random(5).random()
