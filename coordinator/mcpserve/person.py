"""The MCP client as the run's person (docs/design.md §17): escalations asked with
``elicitation/create``, or listed for the ``decide`` tool.

A client that declared the ``elicitation`` capability (form mode) is asked about each
escalation that waits on a run it started, while its ``ask`` or ``run_job`` call waits
for that run: one ``elicitation/create`` per escalation, related to that call (so it
travels on the call's own stream over streamable HTTP), with the escalation's options as
an enum (``decision``: ``"o2: try web_search …"``) and optional ``text`` and ``source``
fields (``answer`` takes the fact and its URL; ``requery`` a changed query in ``text``).
What the person does:

- ``accept``: the chosen option decides the escalation, ``by`` the client's name (its
  ``initialize`` clientInfo). A choice the desk refuses (``answer`` without text) is asked
  again with the refusal, naming the field, at most :data:`ASKS` times in all.
- ``decline``: an explicit no to deciding. The run should not wait on someone who said
  they will not answer: the escalation is decided ``accept`` (the gap stays, marked
  decided), by the client.
- ``cancel`` (dismissed, no choice): nothing is decided; the escalation waits on, for the
  ``decide`` tool or the job's ``escalations.on_timeout``; it is not asked again in that
  call.

The lead's plan, when the job sets ``review_plan``, is asked the same way
(:mod:`~coordinator.mcpserve.plan`: approve, reject, or edit as a text field holding
the edited subtasks), or reviewed with the ``review_plan`` tool.

A decision made elsewhere meanwhile (the ``decide`` tool, a timeout) withdraws the
question (its request is cancelled). A call that stops waiting (``wait_s``) stops asking;
what still waits is listed by ``get_report`` and decided with ``decide``, as for a client
that cannot elicit.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Final

import anyio
from mcp.server.session import ServerSession
from mcp.types import ElicitRequestedSchema

from coordinator.decision import DecisionError
from coordinator.mcpserve.plan import ask_plan, plan_text
from coordinator.people import DECISION_MADE, DECISION_NEEDED, Desk, NotWaiting
from shared.escalation import Escalation

__all__ = [
    "ASKS",
    "ask_person",
    "can_elicit",
    "client_name",
    "elicitation_message",
    "elicitation_schema",
    "pending_text",
    "request_of",
]

log = logging.getLogger("fanout.mcp")

ASKS: Final = 3
"""How many times one call asks about one escalation whose answer the desk refused."""
UNNAMED: Final = "mcp client"
"""``by`` for a client that gave no name."""
PLAN: Final = "plan"
"""What :func:`ask_person` asks about when the lead's plan waits (no escalation's id:
those are ``SUBTASK:N``)."""


def can_elicit(session: ServerSession) -> bool:
    """Whether the client declared ``elicitation`` with form mode (a bare
    ``elicitation: {}`` is form mode, as before modes existed) and this call's channel
    can carry a request to it (a 2026-07-28 connection has no back-channel: its client
    decides with the ``decide`` tool)."""
    caps = session.client_capabilities
    if caps is None or caps.elicitation is None or not session.can_send_request:
        return False
    return caps.elicitation.form is not None or caps.elicitation.url is None


def client_name(session: ServerSession) -> str:
    """Who decides through this session: the name in the client's clientInfo."""
    params = session.client_params
    name = params.client_info.name if params is not None else None
    return name.strip() if isinstance(name, str) and name.strip() else UNNAMED


def _label(option_id: str, text: str) -> str:
    return f"{option_id}: {text}"


def elicitation_schema(escalation: Escalation) -> ElicitRequestedSchema:
    """The form: ``decision`` (the options, as an enum of ``"ID: text"``), ``text`` and
    ``source`` (both optional)."""
    options = escalation.options or []
    return {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "What should the run do?",
                "enum": [_label(o.id, o.text) for o in options],
            },
            "text": {
                "type": "string",
                "title": "Your answer, or the changed query",
                "description": "For 'answer it yourself': the fact, which becomes a finding "
                               "cited as given by you. For a changed query: the query. "
                               "Leave empty otherwise.",
            },
            "source": {
                "type": "string",
                "format": "uri",
                "title": "Source URL of your answer (optional)",
            },
        },
        "required": ["decision"],
    }


def elicitation_message(escalation: Escalation, run_id: str | None, note: str = "") -> str:
    """What the person reads: which run and subtask, what failed, what it tried."""
    category = escalation.category or "unknown"
    lines = [
        f"{note}Run {run_id or '(starting)'}: subtask {escalation.subtask_id} cannot go on "
        f"without a decision ({category}, {escalation.trigger}).",
        escalation.message,
        f"It tried: {escalation.attempted_query}",
    ]
    if escalation.partial_results:
        lines.append(f"It has {len(escalation.partial_results)} partial result(s) so far.")
    return "\n".join(lines)


def request_of(escalation: Escalation, content: dict[str, Any] | None) -> dict[str, Any]:
    """The decision request an accepted form makes.

    Raises:
        DecisionError: no ``decision``, or one that names no option of the escalation.
    """
    content = content or {}
    chosen = content.get("decision")
    options = escalation.options or []
    ids = {o.id for o in options}
    option = chosen.split(":", 1)[0].strip() if isinstance(chosen, str) else None
    if option not in ids:
        raise DecisionError("decision", "one of the offered choices",
                            repr(chosen) if chosen is not None else None)
    request: dict[str, Any] = {"escalation": escalation.id, "option": option}
    for key in ("text", "source"):
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            request[key] = value.strip()
    return request


def _waiting(desk: Desk, escalation_id: str) -> Escalation | None:
    return next((e for e in desk.waiting() if e.id == escalation_id), None)


async def _ask_one(desk: Desk, session: ServerSession, related: Any, by: str,
                   run_id: str | None, escalation_id: str, scope: anyio.CancelScope) -> None:
    note = ""
    with scope:
        for _ in range(ASKS):
            escalation = _waiting(desk, escalation_id)
            if escalation is None:
                return
            try:
                result = await session.elicit_form(
                    elicitation_message(escalation, run_id, note),
                    elicitation_schema(escalation), related_request_id=related)
            except Exception as exc:  # the client's error, or no channel back: it waits on
                log.info("could not ask about escalation %s: %s", escalation_id, exc)
                return
            if result.action == "cancel":
                return
            try:
                if result.action == "decline":
                    desk.decide({"escalation": escalation_id, "do": "accept"}, by=by)
                else:
                    desk.decide(request_of(escalation, result.content), by=by)
                return
            except NotWaiting:
                return  # decided meanwhile
            except DecisionError as exc:
                note = f"That could not be done ({exc}). Please choose again.\n\n"


async def ask_person(desk: Desk, session: ServerSession, related_request_id: Any, *,
                     by: str, run_id: str | None = None) -> None:
    """Ask the client about each escalation that waits on ``desk``, now and from now on,
    until cancelled (the call that started the run stops waiting)."""
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    asking: dict[str, anyio.CancelScope] = {}

    def hear(event: str, data: dict[str, Any]) -> None:
        if event == DECISION_NEEDED and "escalation" in data:
            send.send_nowait(str(data["escalation"]["id"]))
        elif event == DECISION_NEEDED and "plan" in data:
            send.send_nowait(PLAN)
        elif event == DECISION_MADE:
            if "decision" in data:
                scope = asking.get(str(data["decision"].get("escalation")))
            else:
                scope = asking.pop(PLAN, None) if "plan_review" in data else None
            if scope is not None:
                scope.cancel()  # decided elsewhere: the question is withdrawn

    stop = desk.listen(hear)
    try:
        pending = desk.pending()
        for item in pending["escalations"]:
            send.send_nowait(str(item["id"]))
        if pending["plan"] is not None:
            send.send_nowait(PLAN)
        async with anyio.create_task_group() as tg, receive:
            async for escalation_id in receive:
                if escalation_id in asking:
                    continue
                scope = asking[escalation_id] = anyio.CancelScope()
                if escalation_id == PLAN:
                    tg.start_soon(ask_plan, desk, session, related_request_id, by, run_id,
                                  scope)
                    continue
                tg.start_soon(_ask_one, desk, session, related_request_id, by, run_id,
                              escalation_id, scope)
    finally:
        stop()
        send.close()


def pending_text(run_id: str, pending: dict[str, Any]) -> str:
    """What waits on a run, in Markdown, with the ``decide`` (or ``review_plan``) call
    that takes each."""
    items = pending.get("escalations") or []
    plan = plan_text(run_id, pending.get("plan"))
    if not items:
        return plan
    lines = [plan, ""] if plan else []
    lines += ["## Waiting for a decision", ""]
    for item in items:
        lines.append(f"- **{item['id']}** (subtask {item['subtask_id']}, "
                     f"{item['errorCategory'] or 'unknown'}, {item['trigger']}): "
                     f"{item['message']}")
        lines += [f"  - {o['id']}: {o['text']}" for o in item["options"]]
    first = items[0]
    lines += ["", f"Decide with decide(run_id=\"{run_id}\", escalation=\"{first['id']}\", "
              "option=\"o1\") (or do=\"retry\", do=\"answer\" with text=\"...\", ...)."]
    return "\n".join(lines)
