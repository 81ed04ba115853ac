"""Benchmark 6b: ``fanout replay`` at full fan-out, concurrency = N: every subagent alive at once.

The same measurement as :mod:`benchmarks.replay_cli` (a fresh CLI process per replay,
the marginal cost per subagent against a bare anyio task group, the peak RSS of a large
file), on files whose ``job.concurrency`` is their number of subtasks, so all N
subagents are alive together: what their live state costs, not only their results.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks import replay_cli
from benchmarks.stats import BenchResult

KEY = replay_cli.FULL_KEY


def run(
    sizes: Sequence[int] = (10, 5_000),
    memory_n: int = 20_000,
    repeat: int = 5,
    memory_repeat: int = 2,
    tree: Path = replay_cli.ROOT,
    warm: bool = True,
) -> BenchResult:
    """Replay at concurrency = N (see :func:`benchmarks.replay_cli.run`)."""
    return replay_cli.run(
        sizes, memory_n, repeat, memory_repeat, tree, full_fanout=True, warm=warm
    )
