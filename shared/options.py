"""The options a person is offered for an escalation, from its category, trigger,
alternatives and the subtask's allowlist (docs/design.md §17).

Pure functions: the same escalation and allowlist give the same ids and options on
either engine, in a replay and after a restart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from shared.escalation import Do, Escalation, Option

__all__ = ["escalation_id", "offer", "options_for", "parse_escalation_id"]

# The categories (and the trigger) whose cause can be fixed outside the run: a permission
# granted, a rule waived or a limit raised, a side effect checked.
_RETRY_CATEGORIES: Final = frozenset({"permission", "business"})
_RETRY_TRIGGERS: Final = frozenset({"unknown_state"})

# An alternative names a query when it quotes one after "query", "search for" or
# "requery": `rephrase the query as "sodium-ion cost per kWh"`, `search for 'x'`.
_QUERY: Final = re.compile(
    r"""(?:\bquery(?:\s+as)?|\bsearch(?:\s+for)?|\brequery)\s*:?\s*["“'‘]([^"”'’]+)["”'’]""",
    re.IGNORECASE,
)

_ANSWER_TEXT: Final = "answer it yourself: your text becomes a finding, cited as given by you"
_ACCEPT_TEXT: Final = "accept the gap: the subtask stays as it is, marked decided"
_STOP_TEXT: Final = "stop the run now: every subtask hands up what it has"
_RETRY_TEXT: Final = "retry: the cause was fixed outside (access granted, limit raised)"


def escalation_id(subtask_id: str, n: int) -> str:
    """An escalation's id in its run: ``SUBTASK_ID:N``, N counting that subtask's
    escalations from 1."""
    if n < 1:
        raise ValueError(f"an escalation's number counts from 1, got {n}")
    return f"{subtask_id}:{n}"


def parse_escalation_id(escalation: str) -> tuple[str, int] | None:
    """``(subtask_id, n)`` of an id made by :func:`escalation_id`, or None for another
    string (a subtask id may itself hold colons: the number is after the last)."""
    subtask, colon, number = escalation.rpartition(":")
    if not colon or not subtask or not number.isdigit() or number.startswith("0"):
        return None
    return subtask, int(number)


def _names_tool(alternative: str, tool: str) -> bool:
    # A tool name holds dots and underscores: a match must not run on into a longer name.
    return re.search(rf"(?<![\w.]){re.escape(tool)}(?![\w])(?!\.\w)", alternative) is not None


def options_for(escalation: Escalation, allowlist: Sequence[str]) -> list[Option]:
    """What a person may choose for ``escalation`` of a subtask allowed ``allowlist``.

    In order: ``retry`` (category permission or business, or trigger unknown_state);
    ``use_tool`` for each alternative naming another tool of the allowlist (its text is
    the alternative's); ``requery`` for each alternative quoting a query; then
    ``answer``, ``accept`` and ``stop``, which every escalation offers. Ids are o1, o2, …
    """
    found: list[tuple[Do, str, str | None, str | None]] = []
    if escalation.category in _RETRY_CATEGORIES or escalation.trigger in _RETRY_TRIGGERS:
        # The first alternative says what to fix (request a scope, ask a rule's owner).
        fix = escalation.alternatives[0] if escalation.alternatives else None
        found.append(("retry", f"retry once this is done: {fix}" if fix else _RETRY_TEXT,
                      None, None))
    offered_tools: set[str] = set()
    for alternative in escalation.alternatives:
        for tool in allowlist:
            if tool == escalation.tool or tool in offered_tools:
                continue
            if _names_tool(alternative, tool):
                offered_tools.add(tool)
                found.append(("use_tool", alternative, tool, None))
                break
    offered_queries: set[str] = set()
    for alternative in escalation.alternatives:
        match = _QUERY.search(alternative)
        if match is not None:
            query = match.group(1).strip()
            if query and query not in offered_queries and query != escalation.attempted_query:
                offered_queries.add(query)
                found.append(("requery", alternative, None, query))
    found += [("answer", _ANSWER_TEXT, None, None), ("accept", _ACCEPT_TEXT, None, None),
              ("stop", _STOP_TEXT, None, None)]
    return [
        Option(id=f"o{i}", do=do, text=text, tool=tool, query=query)
        for i, (do, text, tool, query) in enumerate(found, start=1)
    ]


def offer(escalation: Escalation, allowlist: Sequence[str], n: int) -> Escalation:
    """``escalation`` as handed to a person: with its id (the subtask's ``n``-th
    escalation) and its options; its alternatives stay as they are."""
    return escalation.model_copy(
        update={
            "id": escalation_id(escalation.subtask_id, n),
            "options": options_for(escalation, allowlist),
        }
    )
