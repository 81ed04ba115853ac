"""The model-client seam: a provider-neutral transcript in, one turn out (docs/design.md §7).

Every provider (Anthropic, any OpenAI-compatible server, the scripted model of scenario
files) implements :class:`ModelClient`. A client makes exactly one HTTP request per
:meth:`ModelClient.complete` call (the SDKs are built with ``max_retries=0``); a failed
call raises :class:`ModelCallFailed`, already classified by the table of docs/design.md §7, and
fanout's one retry layer (``subagents/retry.py`` via ``execute_tool_safely``) decides
whether to call again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from shared.categories import ErrorCategory
from shared.classify import register_classifier
from shared.envelope import ToolError
from shared.errors import ToolFailure
from subagents.models.ratelimit_headers import RateReport

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
"""Why a turn ended, normalised across providers."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of the arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a turn.

    ``arguments`` is the decoded JSON object; when what the model sent is not a JSON
    object (broken JSON, a list, a string), ``arguments`` is None and ``raw_arguments``
    holds the text as sent, so the loop answers with a validation error instead of
    crashing.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the provider counted for one call (its own tokenizer)."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What one model call produced: text, tool calls (in order), why it stopped."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = "end_turn"
    usage: Usage | None = None
    model: str | None = None
    # What the answer's headers said about the endpoint's limits (live clients; docs/design.md §13).
    rate: RateReport | None = None


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user message: the subtask, or (lead agent) the question and the findings.

    ``hint``: a person's hint to a running subtask (docs/design.md §17); sent as any user
    text, it tells the scripted model a person spoke since its last turn.
    """

    text: str
    role: Literal["user"] = "user"
    hint: bool = False


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A turn the model produced, sent back verbatim on the next call."""

    turn: ModelTurn
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """The answer to one tool call: the envelope's compact JSON, ``is_error`` from isError.

    Consecutive tool results answering one assistant turn are sent together (Anthropic:
    one user message of ``tool_result`` blocks; OpenAI: one ``role: tool`` message each).
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"


TranscriptMessage = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call sends besides the client's own settings."""

    system: str
    messages: Sequence[TranscriptMessage]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int = 2048
    temperature: float = 0.0
    # Ask for a call of this tool (the lead agent's planning tool); None: the model chooses.
    force_tool: str | None = None
    # Who is asking: the subtask id, or "lead"; the scripted model picks its turns by it.
    subtask_id: str = ""


class ModelClient(Protocol):
    """One provider behind one method; each call is one attempt, never retried here."""

    provider: str
    name: str

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Send ``request``; return the turn, or raise :class:`ModelCallFailed`."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


TextSink = Callable[[str], None]
"""Told each piece of a turn's text as the model writes it, in order."""


@runtime_checkable
class StreamingClient(Protocol):
    """A client that can also hand over a turn's text as it is written (docs/design.md §8)."""

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """Send ``request`` streamed: ``on_text`` gets the text as it comes; the whole
        turn is returned at the end, as :meth:`ModelClient.complete` would return it."""
        ...


ModelFailureKind = Literal[
    "overloaded",
    "rate_limited",
    "timeout",
    "unavailable",
    "connection_reset",
    "auth",
    "forbidden",
    "quota",
    "context_length",
    "model_not_found",
    "bad_request",
]


class ModelCallFailed(ToolFailure):
    """A model call that failed, with the category docs/design.md §7's table gives it.

    The envelope's ``error_type`` is ``kind``. A ``context_length`` failure is sent as
    category ``validation`` (the request was too large) but the planner does not hand it
    back to the model: the subagent stops with trigger ``context_budget`` (docs/design.md §7).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: ModelFailureKind,
        category: ErrorCategory,
        status: int | None = None,
        retry_after_s: float | None = None,
        field: str | None = None,
        expected: str | None = None,
        rate: RateReport | None = None,
    ) -> None:
        super().__init__(message)
        self.rate = rate
        self.kind = kind
        self.category = category
        self.status = status
        self.retry_after_s = retry_after_s
        self.field = field
        self.expected = expected


def model_failure_error(exc: BaseException) -> ToolError:
    """The ToolError of a :class:`ModelCallFailed`: its category, error_type = kind.

    Only ``transient`` is retryable. A spent quota carries a rule and a limit, so the
    loop escalates it as ``threshold_breach``; a context-length failure says to retry
    with a smaller input (the planner stops with trigger ``context_budget``).
    """
    if not isinstance(exc, ModelCallFailed):  # registered for the class: cannot happen
        raise TypeError(f"not a ModelCallFailed: {exc!r}")
    details: dict[str, Any] = {}
    if exc.kind == "quota":
        details.update(rule="model_quota", limit="the account's quota or spend limit")
    if exc.kind == "context_length":
        details["next_safe_action"] = "retry_with_smaller_input"
    return ToolError.of(
        exc.category,
        exc.kind,
        exc.message,
        retryable=exc.category == "transient",
        retry_after_s=exc.retry_after_s,
        field=exc.field,
        expected=exc.expected,
        **details,
    )


# Registered here, with no SDK imported: the executor classifies a failed model call
# whichever provider raised it (the scripted model included).
register_classifier(ModelCallFailed, model_failure_error)
