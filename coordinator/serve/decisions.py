"""A person decides through the service (docs/design.md §17): what waits, decisions, plan
reviews, and requests to running subtasks.

The routes answer from the run's desk (:mod:`coordinator.serve.desks`), which lives on
the server that executes the run while it runs. Each body is checked before the run is
looked at, with the same parse the desk uses (``parse_request``, ``parse_review``), so a
malformed body is 422 naming its field whatever the run is doing; then a run that has
ended, has no person attached, or where what was named does not wait is 409. Handlers
run on uvicorn's event loop, the runs' loop too, so they call the desk directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response

from coordinator.decision import DecisionError, DecisionRequest, parse_request
from coordinator.people import Desk, NotWaiting
from coordinator.plan_review import PlanEditError, PlanReview, parse_review
from coordinator.report import Decision
from coordinator.serve.auth import Authorizer
from coordinator.serve.desks import NOTHING_WAITS, wants_a_person
from coordinator.serve.manager import RunManager
from coordinator.serve.refusals import problem, quote
from coordinator.serve.routes import Known
from coordinator.serve.schemas import (
    DECISION_BODY,
    DECISION_REFUSED,
    PLAN_BODY,
    PLAN_REFUSED,
    REQUEST_BODY,
    REQUEST_REFUSED,
    InputProblems,
    Pending,
    Problem,
    RequestMade,
    RunStatus,
)
from coordinator.store.runs import RunRow

__all__ = ["BadBody", "people_router"]

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": Problem}}
_NOT_JSON: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "The body is not a JSON document."}}
_CONFLICT = "Nothing of that kind waits: the run has ended, runs on no person's desk (its job " \
    "sets neither `escalations` nor `review_plan`, or another server or door runs it), " \
    "or the escalation was decided already, timed out, or never was."


class BadBody(Exception):
    """A body that is not a JSON document (400)."""

    def __init__(self, door: str, why: str) -> None:
        super().__init__(f"{door}: the body is not a JSON document: {why}")


def _refused(door: str, exc: DecisionError) -> JSONResponse:
    """422: one problem naming the field ``exc`` names."""
    body = InputProblems(errors=[problem(exc.field, exc.expected, exc.got, file=door)])
    return JSONResponse(body.model_dump(), status_code=422)


def _conflict(row: RunRow, detail: str) -> JSONResponse:
    return JSONResponse(RunStatus(status=row.status, detail=detail).model_dump(),
                        status_code=409)


async def _json(request: Request, door: str) -> Any:
    raw = await request.body()  # BodyLimit already holds it to the size and the deadline
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadBody(door, str(exc)) from None


def _no_nulls(data: Any) -> None:
    """A null where a field's value goes is refused (the document says what it takes)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if value is None:
                raise DecisionError(str(key), "a value, not null")


def parse_decision(data: Any) -> DecisionRequest:
    """A ``POST /runs/{id}/decisions`` body, its shape checked.

    Raises:
        DecisionError: as :func:`coordinator.decision.parse_request`, or a null value.
    """
    _no_nulls(data)
    return parse_request(data)


def parse_plan_review(data: Any) -> Any:
    """A ``POST /runs/{id}/plan`` body as :meth:`Desk.review` takes it: ``"approve"``,
    ``"reject"`` or ``{"edit": {...}}`` (its shape checked).

    Raises:
        PlanEditError: anything else, naming the field.
    """
    if not isinstance(data, dict):
        raise PlanEditError("<body>", 'a JSON object: {"verdict": ...} or {"edit": {...}}',
                            quote(data))
    keys = set(data)
    if keys == {"verdict"}:
        if data["verdict"] not in ("approve", "reject"):
            raise PlanEditError("verdict", "approve or reject (an edit is sent as edit)",
                                quote(data["verdict"]))
        return data["verdict"]
    if keys == {"edit"}:
        parse_review(data)  # the edit's shape, checked before the run is looked at
        return data
    unknown = sorted(keys - {"verdict", "edit"})
    if unknown:
        raise PlanEditError(unknown[0], "a known field (verdict or edit)")
    raise PlanEditError("verdict", "either verdict or edit, not both" if keys else
                        "verdict: approve or reject, or edit: {remove, change, add}")


def parse_person_request(data: Any) -> tuple[bool, str | None]:
    """A ``POST /runs/{id}/subtasks/{sid}/request`` body: ``(stop, hint)``.

    Raises:
        DecisionError: not exactly one of ``stop: true`` and a non-empty ``hint``.
    """
    if not isinstance(data, dict):
        raise DecisionError("<body>", 'a JSON object: {"stop": true} or {"hint": "..."}',
                            quote(data))
    for key in data:
        if key not in ("stop", "hint"):
            raise DecisionError(str(key), "a known field (stop or hint)")
    if "stop" in data and "hint" in data:
        raise DecisionError("stop", "exactly one of stop: true, hint")
    if "stop" in data:
        if data["stop"] is not True:
            raise DecisionError("stop", "true (a hint is sent as hint)", quote(data["stop"]))
        return True, None
    hint = data.get("hint")
    if hint is None:
        raise DecisionError("stop", "exactly one of stop: true, hint")
    if not isinstance(hint, str) or not hint.strip():
        raise DecisionError("hint", "a non-empty string", quote(hint))
    return False, hint


def people_router(manager: RunManager, auth: Authorizer) -> APIRouter:
    """``/runs/{id}/pending``, ``/decisions``, ``/plan``, ``/subtasks/{sid}/request``."""
    router = APIRouter(prefix="/runs", tags=["people"], dependencies=[Depends(auth.api)],
                       responses={401: {"model": Problem}})
    by = manager.config.decider()

    def desk_of(row: RunRow) -> Desk | None:
        live = manager.live.get(row.id)
        return None if live is None else live.desk

    def no_desk(row: RunRow) -> JSONResponse:
        if row.status not in ("queued", "running"):
            return _conflict(row, f"run {row.id} is {row.status}: nothing waits any more")
        live = manager.live.get(row.id)
        if live is not None and wants_a_person(live.scenario):
            # Admitted here, its desk comes as it starts executing (on Temporal, once its
            # workflow has started): nothing of it can wait or run before then.
            return _conflict(row, f"run {row.id} has not started yet: nothing of it waits "
                             "or runs")
        return _conflict(row, f"run {row.id} has no person's desk here: its job sets neither "
                         "escalations nor review_plan, or it runs elsewhere")

    async def carried_out(
        request: Request, row: RunRow, door: str, parse: Callable[[Any], Any],
        act: Callable[[Desk, Any], Any],
    ) -> Response:
        """A person's call on the run's desk: the body parsed first (422 naming the
        field), then the desk (409 without one, or when nothing named waits), then
        ``act`` (a refused choice: 422); 200 with what it made."""
        try:
            parsed = parse(await _json(request, door))
        except DecisionError as exc:
            return _refused(door, exc)
        desk = desk_of(row)
        if desk is None:
            return no_desk(row)
        try:
            made = act(desk, parsed)
        except DecisionError as exc:
            return _refused(door, exc)
        except NotWaiting as exc:
            return _conflict(row, str(exc))
        return JSONResponse(made)

    @router.get("/{run_id}/pending", response_model=Pending, responses=_NOT_FOUND,
                summary="What waits for a person: escalations and the plan")
    async def get_pending(row: Known) -> Response:
        desk = desk_of(row)
        return JSONResponse(NOTHING_WAITS if desk is None else desk.pending())

    @router.post(
        "/{run_id}/decisions", response_model=Decision,
        openapi_extra={"requestBody": DECISION_BODY},
        responses={409: {"model": RunStatus, "description": _CONFLICT},
                   422: {"model": InputProblems, "description": DECISION_REFUSED},
                   **_NOT_JSON, **_NOT_FOUND},
        summary="Decide a waiting escalation (200: the decision, as the report keeps it)",
    )
    async def decide_escalation(request: Request, row: Known) -> Response:
        return await carried_out(
            request, row, f"POST /runs/{row.id}/decisions", parse_decision,
            lambda desk, parsed: desk.decide(parsed, by).model_dump(mode="json"))

    @router.post(
        "/{run_id}/plan", response_model=PlanReview,
        openapi_extra={"requestBody": PLAN_BODY},
        responses={409: {"model": RunStatus, "description": _CONFLICT},
                   422: {"model": InputProblems, "description": PLAN_REFUSED},
                   **_NOT_JSON, **_NOT_FOUND},
        summary="Review the waiting plan: approve, edit or reject it",
    )
    async def review_plan(request: Request, row: Known) -> Response:
        # (A PlanEditError, the edit being no valid plan, is a DecisionError: 422.)
        return await carried_out(request, row, f"POST /runs/{row.id}/plan", parse_plan_review,
                                 lambda desk, verdict: desk.review(verdict, by).model_dump(
                                     mode="json"))

    @router.post(
        "/{run_id}/subtasks/{subtask_id}/request", response_model=RequestMade,
        openapi_extra={"requestBody": REQUEST_BODY},
        responses={409: {"model": RunStatus, "description": "The subtask is not running "
                         "(or the run has no person's desk here, or has "
                         "ended), or a hint has no model to read it (the subtask follows a "
                         "scripted plan)."},
                   422: {"model": InputProblems, "description": REQUEST_REFUSED},
                   **_NOT_JSON, **_NOT_FOUND},
        summary="Ask a running subtask to stop and hand up what it has, or give it a hint",
    )
    async def request_subtask(
        request: Request, row: Known,
        subtask_id: Annotated[str, Path(min_length=1, max_length=200)],
    ) -> Response:
        return await carried_out(
            request, row, f"POST /runs/{row.id}/subtasks/{{sid}}/request", parse_person_request,
            lambda desk, asked: desk.request(subtask_id, by=by, stop=asked[0],
                                             hint=asked[1]).to_wire())

    return router
