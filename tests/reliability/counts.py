"""What the reliability suites did, counted for the session-end summary (conftest.py)."""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()
"""Keys: ``cases`` (generated jobs), ``faults`` (fault responses executed or calls refused),
``fault:KIND`` per kind, ``files`` (fuzzed inputs), ``kills``, ``requests``."""


def count(key: str, n: int = 1) -> None:
    """Add ``n`` to one counter."""
    COUNTS[key] += n
