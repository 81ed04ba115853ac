"""Performance harness: ratios against baselines run side by side, never timed tests.

Run it with ``make bench`` (or ``python -m benchmarks``); ``benchmarks/README.md`` says
what each benchmark measures and holds the latest table.
"""

from __future__ import annotations

__all__ = [
    "context_gate",
    "failure_path",
    "overhead",
    "replay_speed",
    "results",
    "scale",
    "stats",
    "workloads",
]
