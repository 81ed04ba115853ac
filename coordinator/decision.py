"""A person's decision on an escalation: the request, its resolution to an option, and
what the run does about it (docs/design.md §17).

Pure functions, no clock and no I/O: the desk (:mod:`coordinator.people`) checks a
request and makes the :class:`~coordinator.report.Decision`; the flow asks
:func:`action_for` what to do and, for ``answer``, builds the subtask's new result with
:func:`answered`. Both engines call the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from coordinator.report import Decision, DecisionChange, SubtaskStatus
from shared.envelope import PERSON, Finding
from shared.escalation import DOS, Do, Escalation, Option
from subagents.result import SubagentResult

__all__ = [
    "DEADLINE",
    "TIMEOUT",
    "Action",
    "DecisionError",
    "DecisionRequest",
    "action_for",
    "answered",
    "decide",
    "given_by",
    "parse_request",
    "pending_item",
    "person_finding",
    "resolve",
    "with_change",
]

TIMEOUT: Final = "timeout"
"""The ``by`` of a decision made because nobody decided within ``job.escalations.wait_s``."""

DEADLINE: Final = "deadline"
"""The ``by`` of a decision made because the job's deadline ended the wait first: always
``accept`` (the gap kept as it is), whatever ``on_timeout`` says (docs/design.md §17)."""

_KEYS: Final = ("escalation", "option", "do", "text", "source")
_TEXT_KINDS: Final = frozenset({"answer", "requery"})


class DecisionError(ValueError):
    """A decision request that cannot be carried out, naming the field at fault (the
    service answers 422, MCP a tool error)."""

    def __init__(self, field: str, expected: str, got: str | None = None) -> None:
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"{field}: expected {expected}" + (f", got {got}" if got else ""))


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """What a door sends: an escalation and an option by id, or by kind (``do``)."""

    escalation: str
    option: str | None = None
    do: Do | None = None
    text: str | None = None
    source: str | None = None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…"


def _string(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DecisionError(key, "a non-empty string", _shown(value))
    return value


def parse_request(data: Mapping[str, Any] | DecisionRequest) -> DecisionRequest:
    """The request in ``data`` (JSON from a door), its shape checked.

    Raises:
        DecisionError: an unknown key, a missing escalation, both or neither of option
            and do, a ``do`` that is no kind, or a field of the wrong type.
    """
    if isinstance(data, DecisionRequest):
        data = {k: getattr(data, k) for k in _KEYS}
    if not isinstance(data, Mapping):
        raise DecisionError("<request>", "a mapping with escalation and option or do",
                            _shown(data))
    for key in data:
        if key not in _KEYS:
            raise DecisionError(str(key), f"a known field (one of {', '.join(_KEYS)})")
    escalation = _string(data, "escalation")
    if escalation is None:
        raise DecisionError("escalation", "the id of a pending escalation (SUBTASK_ID:N)")
    option = _string(data, "option")
    do = data.get("do")
    if do is not None and do not in DOS:
        raise DecisionError("do", f"one of {', '.join(DOS)}", _shown(do))
    if option is not None and do is not None:
        raise DecisionError("do", "either option or do, not both", f"option {option!r} and do")
    if option is None and do is None:
        raise DecisionError("option", "an option id (o1, o2, …), or do: a kind of option")
    text = _string(data, "text")
    source = _string(data, "source")
    return DecisionRequest(escalation=escalation, option=option, do=do, text=text,
                           source=source)


def pending_item(escalation: Escalation, since_s: float) -> dict[str, Any]:
    """An offered escalation as what waits for a person: a ``decision.needed`` event's
    ``escalation`` and an item of ``GET /runs/{id}/pending`` (the desk's
    ``Desk.pending`` in :mod:`coordinator.people` builds with it), ``since_s`` the job
    time its wait began."""
    return {
        "id": escalation.id,
        "subtask_id": escalation.subtask_id,
        "errorCategory": escalation.category,
        "trigger": escalation.trigger,
        "message": escalation.message,
        "attempted_query": escalation.attempted_query,
        "options": [o.model_dump(mode="json") for o in escalation.options or []],
        "since_s": since_s,
    }


def resolve(request: DecisionRequest, escalation: Escalation) -> Option:
    """The option ``request`` chooses among ``escalation``'s (by kind: the first of it),
    its text and source checked against that kind.

    Raises:
        DecisionError: no such option, a kind the escalation does not offer, ``answer``
            without text, text or source where the kind takes none, a source that is not
            an http(s) URL.
    """
    options = escalation.options or []
    chosen: Option | None
    if request.option is not None:
        chosen = next((o for o in options if o.id == request.option), None)
        if chosen is None:
            ids = ", ".join(o.id for o in options) or "none (nothing is offered)"
            raise DecisionError("option", f"one of {ids}", _shown(request.option))
    else:
        chosen = next((o for o in options if o.do == request.do), None)
        if chosen is None:
            kinds = ", ".join(dict.fromkeys(o.do for o in options)) or "none"
            raise DecisionError("do", f"a kind this escalation offers ({kinds})",
                                _shown(request.do))
    if chosen.do == "answer" and request.text is None:
        raise DecisionError("text", "the answer's text (answer makes it a finding)")
    if request.text is not None and chosen.do not in _TEXT_KINDS:
        raise DecisionError("text", f"no text: {chosen.do} takes none (answer and requery do)")
    if request.source is not None:
        if chosen.do != "answer":
            raise DecisionError("source", f"no source: {chosen.do} takes none (answer does)")
        parts = urlsplit(request.source)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise DecisionError("source", "an http(s) URL", _shown(request.source))
    return chosen


def decide(
    escalation: Escalation,
    request: DecisionRequest,
    *,
    by: str,
    at: str | None = None,
    at_s: float | None = None,
) -> Decision:
    """The decision ``request`` makes on ``escalation``, by ``by`` at ``at``/``at_s``.

    Raises:
        DecisionError: as :func:`resolve`, or the request names another escalation.
    """
    if request.escalation != escalation.id:
        raise DecisionError("escalation", f"{escalation.id!r}", _shown(request.escalation))
    option = resolve(request, escalation)
    query = option.query
    if option.do == "requery" and request.text is not None:
        query = request.text  # the person wrote the changed query
    text = request.text if option.do == "answer" else None
    return Decision(
        subtask_id=escalation.subtask_id,
        choice=option.text,
        escalation=escalation.id,
        option=option.id,
        do=option.do,
        text=text,
        source=request.source,
        tool=option.tool,
        args=option.args,
        query=query,
        by=by,
        at=at,
        at_s=None if at_s is None else round(at_s, 9),
    )


def with_change(
    decision: Decision,
    *,
    status_before: SubtaskStatus,
    status_after: SubtaskStatus,
    coverage_before: float,
    coverage_after: float,
) -> Decision:
    """``decision`` with what carrying it out changed (the report keeps both)."""
    change = DecisionChange(
        status_before=status_before,
        status_after=status_after,
        coverage_before=coverage_before,
        coverage_after=coverage_after,
    )
    return decision.model_copy(update={"change": change})


# --- what the run does ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Action:
    """What the flow does for a decision; it switches on ``do``.

    - ``retry``: run the subtask again from its partial results;
    - ``use_tool``: continue it as a follow-up calling ``tool`` (``args`` when given)
      whose ``filled_by`` names the gap;
    - ``requery``: continue it with ``query``;
    - ``answer``: replace its result by :func:`answered` (``finding`` is the person's);
    - ``accept``: nothing now; :func:`coordinator.report.with_decisions` marks the gap;
    - ``stop``: end the run; every subtask hands up what it has (trigger ``cancelled``).
    """

    do: Do
    subtask_id: str
    escalation: str | None
    tool: str | None = None
    args: dict[str, Any] | None = None
    query: str | None = None
    finding: Finding | None = None


def action_for(decision: Decision) -> Action:
    """What the run does for ``decision``.

    Raises:
        ValueError: a decision without a kind (a handler's bare choice): nothing to do.
    """
    if decision.do is None:
        raise ValueError(f"decision for {decision.subtask_id} chose no option: nothing to do")
    return Action(
        do=decision.do,
        subtask_id=decision.subtask_id,
        escalation=decision.escalation,
        tool=decision.tool,
        args=decision.args,
        query=decision.query,
        finding=person_finding(decision) if decision.do == "answer" else None,
    )


def given_by(by: str | None, at: str | None) -> str:
    """How a person's finding is cited: ``given by NAME, 2026-12-04`` (the date of an
    ISO time), or ``given by NAME, +30s`` in a run that knows only its own time."""
    who = by or "a person"
    if not at:
        return f"given by {who}"
    when = at[:10] if len(at) >= 10 and at[4:5] == "-" and at[7:8] == "-" else at
    return f"given by {who}, {when}"


def person_finding(decision: Decision) -> Finding:
    """The finding an ``answer`` decision gives: tool ``person``, the text as data, the
    source as ``url``, who and when.

    Raises:
        ValueError: ``decision`` is no answer with text.
    """
    if decision.do != "answer" or decision.text is None:
        raise ValueError(f"decision for {decision.subtask_id} is no answer with text")
    at = decision.at
    if at is None and decision.at_s is not None:
        at = f"+{decision.at_s:g}s"
    return Finding(
        tool=PERSON,
        data={"text": decision.text},
        url=decision.source,
        title=given_by(decision.by, at),
        by=decision.by or "a person",
        at=at,
    )


def answered(result: SubagentResult, decision: Decision) -> SubagentResult:
    """``result`` once a person answered its escalation: the partial findings kept, the
    person's finding added, the gap closed (the subtask is covered by the answer)."""
    finding = person_finding(decision)
    if result.subtask_id != decision.subtask_id:
        raise ValueError(
            f"decision for {decision.subtask_id} applied to {result.subtask_id}'s result"
        )
    return result.model_copy(
        update={
            "findings": [*result.findings, finding],
            "escalation": None,
            "incomplete": False,
        }
    )
