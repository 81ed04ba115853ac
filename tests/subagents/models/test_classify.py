"""The model-failure table on plain httpx errors, and ModelCallFailed as a ToolError."""

from __future__ import annotations

import httpx
import httpx2
import pytest

from shared.categories import ErrorCategory
from shared.classify import classify_exception
from subagents.models import ModelCallFailed, ModelFailureKind, classify_model_error


def _status_error(
    module: str, status: int, body: str = "", headers: dict[str, str] | None = None
) -> BaseException:
    url = "http://127.0.0.1:9/v1/chat/completions"
    if module == "httpx":
        request = httpx.Request("POST", url)
        response = httpx.Response(status, headers=headers, text=body, request=request)
        return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)
    request2 = httpx2.Request("POST", url)
    response2 = httpx2.Response(status, headers=headers, text=body, request=request2)
    return httpx2.HTTPStatusError(f"HTTP {status}", request=request2, response=response2)


@pytest.mark.parametrize("module", ["httpx", "httpx2"])
@pytest.mark.parametrize(
    ("exc_type", "kind"),
    [
        pytest.param("ReadTimeout", "timeout", id="read-timeout"),
        pytest.param("ConnectTimeout", "timeout", id="connect-timeout"),
        pytest.param("ConnectError", "unavailable", id="connect-error"),
        pytest.param("ReadError", "connection_reset", id="read-error"),
        pytest.param("RemoteProtocolError", "connection_reset", id="remote-protocol"),
    ],
)
def test_transport_errors_are_transient(module: str, exc_type: str, kind: str) -> None:
    """An httpx or httpx2 transport error is transient, with the kind the table gives."""
    client = httpx if module == "httpx" else httpx2
    exc = getattr(client, exc_type)("boom")
    failed = classify_model_error(exc, provider="openai", model="gpt-4.1")
    assert (failed.kind, failed.category) == (kind, "transient")


@pytest.mark.parametrize("module", ["httpx", "httpx2"])
@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "category", "retry_after_s"),
    [
        pytest.param(529, "", {}, "overloaded", "transient", None, id="529"),
        pytest.param(
            503, '{"error":{"message":"server overloaded"}}', {}, "overloaded", "transient", None,
            id="503-overloaded",
        ),
        pytest.param(
            429, "", {"Retry-After-Ms": "250"}, "rate_limited", "transient", 0.25, id="429-ms"
        ),
        pytest.param(
            429, "", {"retry-after": "soon"}, "rate_limited", "transient", None,
            id="429-unreadable-retry-after",
        ),
        pytest.param(
            429, '{"error":{"code":"insufficient_quota"}}', {}, "quota", "business", None,
            id="429-quota",
        ),
        pytest.param(
            400, '{"error":{"code":"context_length_exceeded"}}', {}, "context_length",
            "validation", None, id="400-context",
        ),
        pytest.param(
            503, "", {"x-should-retry": "false"}, "unavailable", "business", None,
            id="x-should-retry-false",
        ),
        pytest.param(
            400, "", {"x-should-retry": "true"}, "bad_request", "internal", None,
            id="x-should-retry-true-adds-no-retry",
        ),
        pytest.param(501, "", {}, "unavailable", "transient", None, id="other-5xx"),
        pytest.param(405, "", {}, "bad_request", "internal", None, id="other-4xx"),
        pytest.param(402, "", {}, "quota", "business", None, id="402"),
    ],
)  # fmt: skip
def test_http_status_errors_follow_the_table(
    module: str,
    status: int,
    body: str,
    headers: dict[str, str],
    kind: ModelFailureKind,
    category: ErrorCategory,
    retry_after_s: float | None,
) -> None:
    """A plain HTTPStatusError is read like an SDK's status error: status, body, headers."""
    failed = classify_model_error(
        _status_error(module, status, body, headers), provider="openai", model="gpt-4.1"
    )
    assert (failed.kind, failed.category, failed.status) == (kind, category, status)
    assert failed.retry_after_s == retry_after_s


@pytest.mark.parametrize(
    ("failed", "category", "retryable", "next_safe_action"),
    [
        pytest.param(
            ModelCallFailed("x", kind="overloaded", category="transient", retry_after_s=4),
            "transient",
            True,
            "retry_with_backoff",
            id="transient",
        ),
        pytest.param(
            ModelCallFailed("x", kind="timeout", category="transient"),
            "transient",
            True,
            "retry_with_smaller_input",
            id="timeout",
        ),
        pytest.param(
            ModelCallFailed("x", kind="rate_limited", category="business"),
            "business",
            False,
            "escalate",
            id="should-not-retry",
        ),
        pytest.param(
            ModelCallFailed("x", kind="auth", category="permission"),
            "permission",
            False,
            "stop_and_report",
            id="auth",
        ),
        pytest.param(
            ModelCallFailed("x", kind="context_length", category="validation"),
            "validation",
            False,
            "retry_with_smaller_input",
            id="context-length",
        ),
        pytest.param(
            ModelCallFailed("x", kind="bad_request", category="internal"),
            "internal",
            False,
            "escalate",
            id="bad-request",
        ),
    ],
)
def test_a_model_failure_classifies_as_its_own_category(
    failed: ModelCallFailed, category: str, retryable: bool, next_safe_action: str
) -> None:
    """classify_exception keeps the category, the kind as error_type, retries only transient."""
    error = classify_exception(failed)
    assert (error.category, error.error_type) == (category, failed.kind)
    assert error.retryable is retryable
    assert error.next_safe_action == next_safe_action
    assert error.retry_after_s == failed.retry_after_s


def test_a_missing_model_keeps_field_and_expected() -> None:
    """A model_not_found failure reaches the envelope with its field and expected."""
    failed = ModelCallFailed(
        "no such model",
        kind="model_not_found",
        category="validation",
        status=404,
        field="model.name",
        expected="a model id the provider serves (asked for 'gpt-9')",
    )
    error = classify_exception(failed)
    assert (error.field, error.expected) == (failed.field, failed.expected)


def test_a_spent_quota_carries_a_limit_for_threshold_breach() -> None:
    """Quota is business with a rule and a limit, so the loop escalates threshold_breach."""
    error = classify_exception(ModelCallFailed("spent", kind="quota", category="business"))
    assert error.category == "business"
    assert error.rule and error.limit is not None
