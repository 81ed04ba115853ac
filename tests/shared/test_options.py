"""An escalation's id and options (docs/design.md §17): what a person is offered."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.escalation import Escalation
from shared.options import escalation_id, offer, options_for, parse_escalation_id


def _esc(**fields: object) -> Escalation:
    base: dict[str, object] = {
        "subtask_id": "patents",
        "category": "permission",
        "trigger": "permission_denied",
        "message": "role analyst lacks patents:read",
        "attempted_query": "solid-state battery patents",
        "tool": "patent_db",
        "alternatives": [
            "request patents:read for role analyst (needed by patent_db)",
            "try web_search, also on this subtask's allowlist",
        ],
    }
    base.update(fields)
    return Escalation.model_validate(base)


def test_permission_escalation_offers_retry_another_tool_and_the_three_always() -> None:
    """A permission gap offers retry, the allowlisted tool an alternative names, then
    answer, accept and stop, numbered o1…"""
    options = options_for(_esc(), ["patent_db", "web_search"])
    assert [(o.id, o.do) for o in options] == [
        ("o1", "retry"), ("o2", "use_tool"), ("o3", "answer"), ("o4", "accept"), ("o5", "stop")
    ]
    assert options[1].tool == "web_search"
    assert options[1].text == "try web_search, also on this subtask's allowlist"
    assert "request patents:read" in options[0].text


@pytest.mark.parametrize(
    ("category", "trigger", "retry"),
    [
        pytest.param("permission", "permission_denied", True, id="permission"),
        pytest.param("business", "business_rule", True, id="business"),
        pytest.param("transient", "unknown_state", True, id="unknown-state"),
        pytest.param("transient", "retries_exhausted", False, id="transient"),
        pytest.param("validation", "no_progress", False, id="validation"),
        pytest.param(None, "step_budget", False, id="no-category"),
    ],
)
def test_retry_is_offered_where_the_cause_can_be_fixed_outside(
    category: str | None, trigger: str, retry: bool
) -> None:
    """retry appears for permission, business and unknown_state, and nowhere else."""
    options = options_for(_esc(category=category, trigger=trigger, alternatives=[]), [])
    assert ("retry" in [o.do for o in options]) is retry
    assert [o.do for o in options][-3:] == ["answer", "accept", "stop"]


def test_a_tool_outside_the_allowlist_or_the_failed_one_is_not_offered() -> None:
    """use_tool names only another tool of the allowlist, never the tool that failed."""
    esc = _esc(alternatives=["add web.fetch to subtask 'patents''s tools allowlist",
                             "call patent_db with a smaller request"])
    assert "use_tool" not in [o.do for o in options_for(esc, ["patent_db"])]


def test_a_tool_name_must_match_whole() -> None:
    """An allowlisted ``web`` is not offered for an alternative naming ``web.search``."""
    esc = _esc(alternatives=["try web.search instead"])
    assert [o.tool for o in options_for(esc, ["web"]) if o.do == "use_tool"] == []
    assert [o.tool for o in options_for(esc, ["web.search"]) if o.do == "use_tool"] == [
        "web.search"]


def test_an_alternative_quoting_a_query_is_a_requery() -> None:
    """An alternative that quotes a query offers requery with that query."""
    esc = _esc(category="transient", trigger="no_match",
               alternatives=['rephrase the query as "sodium-ion cell cost per kWh"'])
    [requery] = [o for o in options_for(esc, []) if o.do == "requery"]
    assert requery.query == "sodium-ion cell cost per kWh"
    assert requery.text == esc.alternatives[0]


def test_offer_gives_an_id_and_options_and_keeps_the_alternatives() -> None:
    """An offered escalation has SUBTASK_ID:N and options; its alternatives stay."""
    esc = _esc()
    offered = offer(esc, ["patent_db", "web_search"], 2)
    assert offered.id == "patents:2"
    assert offered.alternatives == esc.alternatives
    wire = offered.to_wire()
    assert wire["id"] == "patents:2"
    assert wire["options"][1] == {"id": "o2", "do": "use_tool", "tool": "web_search",
                                  "text": "try web_search, also on this subtask's allowlist"}


def test_an_escalation_nobody_was_asked_about_serialises_as_before() -> None:
    """Without an offer, neither id nor options is on the wire (replays stay identical)."""
    wire = _esc().to_wire()
    assert "id" not in wire and "options" not in wire


@given(st.text(min_size=1).filter(lambda s: s.strip() == s), st.integers(1, 10**6))
def test_escalation_ids_parse_back(subtask: str, n: int) -> None:
    """Any subtask id (colons included) and number round-trip through the id."""
    assert parse_escalation_id(escalation_id(subtask, n)) == (subtask, n)


@pytest.mark.parametrize("text", ["patents", "patents:", ":1", "patents:01", "a:x"])
def test_strings_that_are_not_escalation_ids(text: str) -> None:
    """A string without a positive number after its last colon is no escalation id."""
    assert parse_escalation_id(text) is None


def test_numbers_count_from_one() -> None:
    """An escalation numbered 0 is a programming error."""
    with pytest.raises(ValueError, match="from 1"):
        escalation_id("a", 0)


_TOOLS = st.sampled_from(["db", "web_search", "web.fetch", "docs.read", "patent_db"])


@given(
    category=st.sampled_from([None, "transient", "validation", "business", "permission",
                              "internal"]),
    trigger=st.sampled_from(["permission_denied", "unknown_state", "retries_exhausted",
                             "no_match", "step_budget"]),
    failed=st.one_of(st.none(), _TOOLS),
    allowlist=st.lists(_TOOLS, unique=True, max_size=4),
    alternatives=st.lists(
        st.one_of(st.text(max_size=30), _TOOLS.map(lambda t: f"try {t} instead"),
                  st.text(alphabet="abc xyz", min_size=1, max_size=12).map(
                      lambda q: f'search for "{q}"')),
        max_size=4),
)
def test_options_hold_their_rules_for_any_escalation(
    category: str | None, trigger: str, failed: str | None, allowlist: list[str],
    alternatives: list[str],
) -> None:
    """Ids run o1…oN; answer, accept, stop close every list; a use_tool names another
    allowlisted tool, once; each option's text is non-empty."""
    esc = _esc(category=category, trigger=trigger, tool=failed, alternatives=alternatives)
    options = options_for(esc, allowlist)
    assert [o.id for o in options] == [f"o{i}" for i in range(1, len(options) + 1)]
    assert [o.do for o in options][-3:] == ["answer", "accept", "stop"]
    tools = [o.tool for o in options if o.do == "use_tool"]
    assert len(tools) == len(set(tools))
    assert all(t in allowlist and t != failed for t in tools)
    assert all(o.query for o in options if o.do == "requery")
    assert all(o.text for o in options)
    assert options_for(esc, allowlist) == options  # the same escalation, the same options
