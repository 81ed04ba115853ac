"""Model-call failures by docs/design.md §7's table: an SDK or HTTP exception in, ModelCallFailed
out.

The anthropic and openai SDKs (built with ``max_retries=0``) raise, for one attempt::

    APIError
    ├── APIStatusError        the provider answered 4xx/5xx: .status_code, .response, .body
    └── APIConnectionError    no answer: the cause is an httpx2 transport error
        └── APITimeoutError   no answer in time

:func:`classify_model_error` reads them (and plain ``httpx``/``httpx2`` errors) as one
table, the way the anthropic SDK's ``_should_retry`` reads a response. Importing this
module registers a classifier for :class:`ModelCallFailed` with
:func:`shared.classify.register_classifier`, so the executor's
``classify_exception`` turns a failed model call into the right ``ToolError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import anthropic
import httpx
import httpx2
import openai

from shared.categories import ErrorCategory
from shared.classify import parse_retry_after
from subagents.models.base import ModelCallFailed, ModelFailureKind
from subagents.models.ratelimit_headers import read_rate_headers

# Statuses whose kind and category the status alone decides (docs/design.md §7's table).
_BY_STATUS: Mapping[int, tuple[ModelFailureKind, ErrorCategory]] = {
    408: ("timeout", "transient"),
    409: ("unavailable", "transient"),  # a lock conflict on the provider's side
    429: ("rate_limited", "transient"),
    500: ("unavailable", "transient"),
    502: ("unavailable", "transient"),
    503: ("unavailable", "transient"),
    504: ("timeout", "transient"),
    529: ("overloaded", "transient"),
    401: ("auth", "permission"),
    403: ("forbidden", "permission"),
    402: ("quota", "business"),  # Payment Required: the account has no credit left
    # 413 is the request body being too large: the one fix is a smaller context.
    413: ("context_length", "validation"),
    404: ("model_not_found", "validation"),
}

# What the providers (and the OpenAI-compatible servers: vLLM, llama.cpp, Ollama) write
# when an account's money, not its rate, has run out.
_QUOTA_WORDS = (
    "insufficient_quota",
    "exceeded your current quota",
    "spend limit",
    "spending limit",
    "billing",
    "credit balance",
)
# ... and when the prompt does not fit the model's window.
_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "prompt is too long",
    "maximum context",
    "too many tokens",
)
# ... and when a server refuses the request for its shape, whatever status it chose: a
# schema validation error on the body (llama-cpp-python answers those with a 500), a chat
# template that rejects the roles. That is fanout's bug (internal), never transient.
_SHAPE_WORDS = (
    "'loc': ('body'",
    '"loc": ["body"',
    "validation error for",
    "input should be a valid",
    "extra inputs are not permitted",
    "field required",
    "roles must alternate",
    "system role not supported",
    "jinja2.exceptions",
)
_TIMEOUTS = (anthropic.APITimeoutError, openai.APITimeoutError)
_STATUS_ERRORS = (anthropic.APIStatusError, openai.APIStatusError)
_HTTP_STATUS_ERRORS = (httpx.HTTPStatusError, httpx2.HTTPStatusError)
_TRANSPORT_TIMEOUTS = (httpx.TimeoutException, httpx2.TimeoutException)
_CONNECT_ERRORS = (httpx.ConnectError, httpx2.ConnectError, ConnectionRefusedError)
_TRANSPORT_ERRORS = (httpx.TransportError, httpx2.TransportError, OSError)

MODEL_ERRORS: tuple[type[Exception], ...] = (
    anthropic.APIStatusError,
    anthropic.APIConnectionError,
    openai.APIStatusError,
    openai.APIConnectionError,
    httpx.HTTPError,
    httpx2.HTTPError,
)
"""What a model client catches and hands to :func:`classify_model_error`."""


def classify_model_error(
    exc: BaseException,
    *,
    provider: str,
    model: str,
    secrets: Iterable[str] = (),
) -> ModelCallFailed:
    """The :class:`ModelCallFailed` docs/design.md §7's table gives ``exc``, one row per rule.

    Args:
        exc: what one attempt raised: an SDK error, or an ``httpx``/``httpx2`` error.
        provider: named in the message ("anthropic", "openai").
        model: the model id asked for (a 404 names it in ``expected``).
        secrets: strings (the API key) cut out of the message, should a server echo them.
    """
    where = f"{provider} model {model}"
    if isinstance(exc, _TIMEOUTS + _TRANSPORT_TIMEOUTS):
        return ModelCallFailed(f"{where}: no answer in time", kind="timeout", category="transient")
    status = _status(exc)
    if status is None:
        if _could_not_connect(exc):
            kind: ModelFailureKind = "unavailable"
            how = "could not connect"
        else:
            kind, how = "connection_reset", "the connection broke"
        message = _redact(f"{where}: {how} ({_cause(exc)})", secrets)
        return ModelCallFailed(message, kind=kind, category="transient")

    headers = _headers(exc)
    text = _error_text(exc)
    said = text.lower()
    category: ErrorCategory
    if status in (400, 429) and _says(said, _QUOTA_WORDS):
        kind, category = "quota", "business"
    elif status in (400, 413) and _says(said, _CONTEXT_WORDS):
        kind, category = "context_length", "validation"
    elif status >= 400 and status not in (401, 403, 404, 408, 429) and _says(said, _SHAPE_WORDS):
        kind, category = "bad_request", "internal"
    elif status in (500, 503) and "overloaded" in said:
        kind, category = "overloaded", "transient"
    elif status < 400:
        # An error event inside a streamed answer (its response began 200): the server
        # broke off what it was writing (Anthropic's `event: error`, docs/design.md §8).
        kind = "overloaded" if "overloaded" in said else (
            "rate_limited" if "rate_limit" in said else "unavailable"
        )
        category = "transient"
    elif status in _BY_STATUS:
        kind, category = _BY_STATUS[status]
    elif status >= 500:
        # Other 5xx (501, 505, a gateway's 520s): the server failed, not the request.
        kind, category = "unavailable", "transient"
    else:
        # Any other 4xx (400, 422, 405, ...): fanout built a request the API will not take.
        kind, category = "bad_request", "internal"

    message = f"{where}: HTTP {status} {kind}: {_api_message(exc, text)}"
    if category == "transient" and headers.get("x-should-retry", "").lower() == "false":
        # The provider knows this will not pass on a retry (its own SDK obeys the header
        # before the status). It is not fanout's bug (internal) nor a bad input
        # (validation): a provider-side rule refuses the call, so it is `business`,
        # escalated to a person and never retried. The kind still says what happened.
        # `x-should-retry: true` is not obeyed the other way: the table, not the header,
        # says what fanout may retry, so a header never makes a 4xx retryable.
        category = "business"
        message += " (the provider said not to retry: x-should-retry: false)"
    field = expected = None
    if kind == "model_not_found":
        field, expected = _missing(exc, said, model)
    return ModelCallFailed(
        _redact(message, secrets),
        kind=kind,
        category=category,
        status=status,
        retry_after_s=_retry_after(headers),
        field=field,
        expected=expected,
        rate=read_rate_headers(headers),
    )



def _status(exc: BaseException) -> int | None:
    if isinstance(exc, _STATUS_ERRORS):
        return exc.status_code
    if isinstance(exc, _HTTP_STATUS_ERRORS):
        return exc.response.status_code
    return None


def _headers(exc: BaseException) -> Mapping[str, str]:
    if isinstance(exc, _STATUS_ERRORS + _HTTP_STATUS_ERRORS):
        return exc.response.headers  # case-insensitive
    return {}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` (the providers' precise header) first, then ``retry-after``."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = parse_retry_after(millis)
        if seconds is not None:
            return seconds / 1000
    return parse_retry_after(headers.get("retry-after"))


def _error_text(exc: BaseException) -> str:
    """Everything the provider said: the SDK's message and the body, to search for words."""
    body: object = getattr(exc, "body", None)
    if isinstance(exc, _HTTP_STATUS_ERRORS):
        body = exc.response.text
    rendered = body if isinstance(body, str) else json.dumps(body, default=str)
    return f"{exc} {rendered}"


def _api_message(exc: BaseException, text: str) -> str:
    """The provider's own ``error.message`` (both shapes), else the SDK's text."""
    body: object = getattr(exc, "body", None)
    if isinstance(exc, _HTTP_STATUS_ERRORS):
        try:
            body = exc.response.json()
        except ValueError:
            return exc.response.text[:500] or str(exc)
    for holder in (body, body.get("error") if isinstance(body, dict) else None):
        if isinstance(holder, dict) and isinstance(holder.get("message"), str):
            return str(holder["message"])
    return str(exc) or text


def _says(text: str, words: Iterable[str]) -> bool:
    return any(word in text for word in words)


def _missing(exc: BaseException, said: str, model: str) -> tuple[str, str]:
    """A 404 names the model, or (no mention of one) the endpoint is wrong: base_url."""
    if "model" in said or model.lower() in said:
        return "model.name", f"a model id the provider serves (asked for {model!r})"
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "")) or "the endpoint"
    return "model.base_url", f"an API base URL that serves the model (got 404 for {url})"


def _could_not_connect(exc: BaseException) -> bool:
    return any(isinstance(e, _CONNECT_ERRORS) for e in _chain(exc))


def _cause(exc: BaseException) -> str:
    innermost = [e for e in _chain(exc) if isinstance(e, _TRANSPORT_ERRORS)]
    cause = innermost[-1] if innermost else exc
    return f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret cut out (a server may echo the key back)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text
