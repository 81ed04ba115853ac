"""Trace ids: short, unique, and reproducible in replays."""

from __future__ import annotations

import re

from shared import RandomTraceIds, SeededTraceIds, new_trace_id

TRACE_ID = re.compile(r"^tr_[0-9a-f]{12}$")


def test_new_trace_ids_are_short_and_unique() -> None:
    """A fresh trace id is tr_ and 12 hex digits, and ids do not repeat."""
    ids = {new_trace_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(TRACE_ID.match(i) for i in ids)
    assert TRACE_ID.match(RandomTraceIds().next("s"))


def test_seeded_trace_ids_repeat_per_seed_and_scope() -> None:
    """The same seed gives the same ids per scope, however scopes interleave."""
    a, b = SeededTraceIds(7), SeededTraceIds(7)
    first = [a.next("market"), a.next("patents"), a.next("market")]
    second_patents = b.next("patents")
    second_market = [b.next("market"), b.next("market")]
    assert first[1] == second_patents
    assert [first[0], first[2]] == second_market
    assert len(set(first)) == 3
    assert all(TRACE_ID.match(i) for i in first)
    assert SeededTraceIds(8).next("market") != first[0]
