"""A subagent's context: counted once, truncated to the tool budget, compacted with pins."""

from __future__ import annotations

from typing import Any

import pytest

from shared import TokenCounter, ToolError, ToolResult
from subagents.context import Context, Message, summarize


class CountingCounter(TokenCounter):
    """A token counter that remembers every text it was asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


def _ok(tool: str, items: int = 2, words: int = 1) -> ToolResult:
    data = {"results": [" ".join(["word"] * words)] * items}
    return ToolResult.success(tool, data, trace_id=f"tr_{tool}")


def _failed(tool: str, category: Any, **details: Any) -> ToolResult:
    error = ToolError.of(category, "e", f"{tool}: {category} failure", **details)
    return ToolResult.failure(tool, error, trace_id=f"tr_{tool}")


def _fresh_total(context: Context) -> int:
    counter = TokenCounter()
    return sum(counter.count(m.text) for m in context.messages)


def test_each_message_is_counted_once() -> None:
    """Adding messages and running the gate counts each message's text exactly once."""
    counter = CountingCounter()
    context = Context(
        "solid-state batteries", window=16000, active_tool_budget=2000, counter=counter
    )
    for i in range(5):
        context.add_call(f"tool{i}", {"query": f"q{i}"})
        context.gate()
        context.add_result(_ok(f"tool{i}"))
        context.gate()
    assert len(counter.counted) == len(context.messages) == 11
    assert counter.counted == [m.text for m in context.messages]
    assert context.tokens == sum(m.tokens for m in context.messages) == _fresh_total(context)


def test_a_large_result_enters_truncated_to_the_tool_budget() -> None:
    """A result over active_tool_budget is cut to that many tokens; smaller ones are whole."""
    context = Context("q", window=16000, active_tool_budget=100)
    big = _ok("web_search", items=20, words=20)
    small = _ok("web_search")
    context.add_result(big)
    context.add_result(small)
    cut, whole = context.messages[1], context.messages[2]
    assert cut.tokens <= 100 < TokenCounter().count(big.to_json())
    assert big.to_json().startswith(cut.text)
    assert whole.text == small.to_json()
    assert context.tokens == _fresh_total(context)


def test_compaction_keeps_query_pins_and_the_newest_result() -> None:
    """Every unpinned result but the newest becomes a summary; pins and the query stay."""
    context = Context("battery patents since 2024", window=16000, active_tool_budget=2000)
    results = [
        _ok("web_search", items=5, words=30),
        _failed("patent_db", "validation", field="since", expected="a date"),
        _ok("news", items=3, words=30),
        _failed("patent_db", "permission"),
        _ok("web_search", items=4, words=30),
    ]
    for r in results:
        context.add_call(r.tool, {})
        context.add_result(r)
    before = context.tokens
    freed = context.compact()
    kinds = [(m.kind, m.tool) for m in context.messages]
    assert context.messages[0].kind == "query"
    assert context.messages[0].text == "battery patents since 2024"
    assert kinds[2::2] == [
        ("summary", "web_search"),
        ("result", "patent_db"),
        ("summary", "news"),
        ("result", "patent_db"),
        ("result", "web_search"),
    ]
    assert context.messages[-1].text == results[-1].to_json()
    assert context.messages[4].text == results[1].to_json()
    assert context.messages[8].text == results[3].to_json()
    assert freed > 0 and context.tokens == before - freed == _fresh_total(context)
    assert context.compactions == 1


def test_summary_names_the_tool_the_outcome_and_the_items() -> None:
    """A compacted result leaves the tool, ok/empty/partial or the category, and an item count."""
    partial = ToolResult.success("news", [1, 2, 3], trace_id="t", complete=False)
    assert summarize(_ok("web_search", items=4)) == "[compacted] web_search: ok, 4 items"
    assert summarize(partial) == "[compacted] news: ok, partial, 3 items"
    assert "transient" in summarize(_failed("news", "transient"))


def test_ensure_room_compacts_when_the_margin_is_short() -> None:
    """When the margin is short the gate compacts once and lets the next call go."""
    context = Context("q", window=3000, active_tool_budget=400)
    for _ in range(10):
        context.add_call("web_search", {})
        context.add_result(_ok("web_search", items=10, words=25))
        if context.gate().decision == "compact_before_next_tool":
            break
    else:
        pytest.fail("the context never reached the margin")
    decision = context.ensure_room()
    assert decision.decision == "continue"
    assert context.compactions == 1
    assert decision.remaining_tokens >= decision.required_margin


@pytest.mark.parametrize(
    ("query", "window", "budget"),
    [
        pytest.param("q", 10, 8000, id="tool-budget-larger-than-window"),
        pytest.param("word " * 200, 100, 0, id="query-longer-than-window"),
    ],
)
def test_ensure_room_fails_when_compaction_cannot_help(
    query: str, window: int, budget: int
) -> None:
    """A window with no margin stays short after compaction: the decision is to stop."""
    context = Context(query, window=window, active_tool_budget=budget)
    decision = context.ensure_room()
    assert decision.decision == "compact_before_next_tool"
    assert decision.remaining_tokens < decision.required_margin
    assert context.messages[0].text == query


def test_byte_bounds_never_change_a_decision() -> None:
    """Whenever the cheap byte bound says there is room, the exact gate says continue."""
    import random

    rng = random.Random(7)
    words = ["lithium", "électrolyte", "固体電池", "sulfide", "{", "}", "42", " "]
    for _ in range(300):
        window = rng.randint(50, 3000)
        budget = rng.randint(0, 800)
        context = Context("q " * rng.randint(0, 40), window=window, active_tool_budget=budget)
        for _ in range(rng.randint(0, 6)):
            context.add_call("t", {"q": " ".join(rng.choices(words, k=rng.randint(0, 60)))})
        proven = context.has_room()
        exact = context.gate().decision
        assert not proven or exact == "continue", (window, budget, context.tokens)


def test_far_from_the_budget_nothing_is_encoded() -> None:
    """A small context in a large window passes the gate without running the tokenizer."""
    class Counting(TokenCounter):
        __slots__ = ("calls",)

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def count(self, text: str) -> int:
            self.calls += 1
            return super().count(text)

    counter = Counting()
    original = TokenCounter().count
    context = Context("solid-state batteries", window=16000, active_tool_budget=2000,
                      counter=counter)
    context.add_call("web_search", {"query": "market size"})
    assert context.has_room()
    assert counter.calls == 0
    assert context.tokens == original("solid-state batteries") + original(
        '{"tool":"web_search","args":{"query":"market size"}}'
    )
    assert counter.calls == 2


def test_replacing_the_messages_replaces_the_count() -> None:
    """Messages restored from a checkpoint are the whole context: nothing counts twice."""
    context = Context("a query of several words", window=16000, active_tool_budget=2000)
    counter = TokenCounter()
    context.messages = [Message("query", "restored query", counter.count("restored query"))]
    assert context.tokens == counter.count("restored query")


def test_the_provider_count_spares_encoding_what_it_counted() -> None:
    """calibrate: the total is the provider's, only results are encoded, compaction still exact."""
    counter = CountingCounter()
    context = Context("solid-state batteries", window=16000, active_tool_budget=2000,
                      counter=counter)
    instructions = "You are a research subagent. " * 200
    context.add_text("system", instructions)
    context.calibrate(1234)
    assert context.tokens == 1234 and counter.counted == []
    context.add_call("web_search", {"query": "market size"})
    context.add_result(_ok("web_search", items=40, words=5))
    context.add_text("assistant", "Two more searches.")
    context.calibrate(2000)
    assert [m.kind for m in context.messages if m.text in counter.counted] == ["result"]
    assert context.tokens == 2000
    assert context.calibration + sum(m.tokens for m in context.messages) == 2000
    context.add_call("web_search", {"query": "market forecast"})
    context.add_result(_ok("web_search"))
    before = context.tokens
    freed = context.compact()
    # The older result freed exactly its own cl100k count less its summary's.
    result = _ok("web_search", items=40, words=5)
    expected = TokenCounter().count(result.to_json()) - TokenCounter().count(summarize(result))
    assert freed == expected and context.tokens == before - freed
