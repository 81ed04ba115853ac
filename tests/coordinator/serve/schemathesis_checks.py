"""Schemathesis checks of our own, loaded by ``test_openapi`` (the config's ``hooks``).

``positive_data_acceptance`` has to let POST /runs and POST /ask answer 422 to a
schema-valid request: what JSON Schema cannot say (a plan calling an undeclared tool, an
ask naming no tools at all, a folder the server does not serve) the server answers with
422 and the field. That allowance also hid refusals the schema *could* have said: an
empty ``"tools": ""`` or an empty ``Idempotency-Key`` refused while the document allowed
them. These checks take that back:

- a schema-valid request refused for a value it sent as the empty string is a document
  that should have said ``minLength``;
- a schema-valid request refused for a field, outside a document it sent (a problem with
  no line), is a refusal the operation's 422 declares: its description names the field
  in backticks. Without it, ``docs`` on a server that serves no folders and a reused
  ``Idempotency-Key`` were refused with 422s the document never mentioned.
"""

from __future__ import annotations

from typing import Any

import schemathesis


def _sent(case: Any, field: str) -> object:
    """What the request sent for the field a problem names (header, query or body key)."""
    headers = case.headers or {}
    if field in headers:
        return headers[field]
    query = case.query or {}
    if field in query:
        return query[field]
    body = case.body
    if isinstance(body, dict) and field in body:
        return body[field]
    return None


@schemathesis.check
def no_refusal_the_schema_could_say(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request is not refused (422) for a value it sent as ""."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    try:
        problems = response.json().get("errors", [])
    except ValueError:
        return None
    for problem in problems:
        field = str(problem.get("field"))
        if _sent(case, field) == "":
            raise AssertionError(
                f"a schema-valid request was refused for {field} = \"\": the document "
                f"should declare minLength 1 ({problem.get('message')})"
            )
    return None


def _declared_refusals(case: Any) -> str:
    """The description of the operation's 422, as the document says it."""
    responses = case.operation.definition.raw.get("responses") or {}
    return str((responses.get("422") or {}).get("description") or "")


@schemathesis.check
def refusals_are_declared(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request refused (422) for a field outside the document it sent is
    refused for a field the operation's 422 declares."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    try:
        problems = response.json().get("errors", [])
    except ValueError:
        return None
    declared = _declared_refusals(case)
    for problem in problems:
        field = str(problem.get("field"))
        if problem.get("line") is None and f"`{field}`" not in declared:
            raise AssertionError(
                f"a schema-valid request was refused (422) for `{field}`, which the "
                f"document's 422 of {case.operation.label} does not declare "
                f"({problem.get('message')})"
            )
    return None
