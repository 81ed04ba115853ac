"""The ``model`` block of job and scenario files (docs/design.md §7), and scripted turns."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from subagents.models.base import StopReason
from subagents.models.compat.profiles import ProfileName
from subagents.retry import RetryPolicy

_SPEC = ConfigDict(frozen=True, extra="forbid")

Provider = Literal["anthropic", "openai", "scripted"]

DEFAULT_KEY_ENV: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
}
DEFAULT_NAME: dict[str, str] = {
    "anthropic": "claude-sonnet-4-6",  # 4-5 warns as deprecated in the SDK
    "openai": "gpt-4.1",
    "scripted": "scripted",
}

ScriptedError = Literal[
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


class ScriptedCall(BaseModel):
    """One tool call of a scripted turn; ``args`` may be a string (not a JSON object)."""

    model_config = _SPEC

    tool: str = Field(min_length=1)
    args: dict[str, Any] | str = Field(default_factory=dict)


class PlannedSubtask(BaseModel):
    """One subtask of a lead agent's plan, as its planning tool returns it."""

    model_config = _SPEC

    id: str
    query: str
    weight: float = 1.0
    tools: list[str] = Field(default_factory=list)


class ScriptedTurn(BaseModel):
    """One scripted model call: tool calls, text, a failure, or (lead) a plan."""

    model_config = _SPEC

    calls: list[ScriptedCall] | None = None
    text: str | None = None
    stop: StopReason | None = None
    error: ScriptedError | None = None
    retry_after_s: float | None = Field(default=None, ge=0)
    message: str | None = None
    subtasks: list[dict[str, Any]] | None = None
    # The lead's follow-up plan (docs/design.md §11): the input of plan_followups.
    followups: list[dict[str, Any]] | None = None
    usage: dict[str, int] | None = None
    latency_s: float | None = Field(
        default=None,
        ge=0,
        description="This call's own latency (a recording's); else model.latency_s.",
    )
    hinted: ScriptedTurn | None = Field(
        default=None,
        description="The turn taken instead when a person's hint came since the last turn "
        "(docs/design.md §17): what the model does once told.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ScriptedTurn:
        kinds = [
            k for k in ("calls", "error", "subtasks", "followups") if getattr(self, k) is not None
        ]
        if len(kinds) > 1:
            raise ValueError(
                f"a turn is one of calls, text, error, subtasks or followups, not {kinds}"
            )
        if self.error is not None and self.text is not None:
            raise ValueError("a turn with error has no text")
        if self.hinted is not None and self.hinted.hinted is not None:
            raise ValueError("a hinted turn has no hinted turn of its own")
        return self


class ModelLimits(BaseModel):
    """What the provider allows this endpoint (docs/design.md §13); unset means no limit stated.

    The limiter of the endpoint also tightens them from what the provider reports
    (``retry-after``, ``x-ratelimit-*``, ``anthropic-ratelimit-*``), never loosens them.
    """

    model_config = _SPEC

    concurrency: int | None = Field(
        default=None, ge=1, description="At most this many model calls in flight at once."
    )
    requests_per_minute: float | None = Field(
        default=None, gt=0, description="Requests per minute, spaced evenly (60/rpm s apart)."
    )
    input_tokens_per_minute: float | None = Field(
        default=None, gt=0, description="Input (prompt) tokens per minute."
    )
    output_tokens_per_minute: float | None = Field(
        default=None, gt=0, description="Output (completion) tokens per minute."
    )


class ModelSpec(BaseModel):
    """Which model plans the subtasks without a plan, and how its calls are bounded."""

    model_config = _SPEC

    provider: Provider
    name: str | None = Field(default=None, min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int = Field(default=2048, gt=0)
    temperature: float = Field(default=0.0, ge=0, le=2)
    timeout_s: float = Field(default=120.0, gt=0)
    # provider: openai only: what the server accepts (subagents/models/compat/profiles.py).
    profile: ProfileName = "auto"
    retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(
            max_attempts=4, initial_backoff_s=1.0, multiplier=2.0, max_backoff_s=30.0
        )
    )
    limits: ModelLimits | None = Field(
        default=None,
        description="The endpoint's limits, shared by every subagent and the lead "
        "(docs/design.md §13).",
    )
    # provider: scripted only.
    latency_s: float = Field(default=0.0, ge=0)
    turns: dict[str, list[ScriptedTurn]] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        # A URL without its scheme ("127.0.0.1:8080/v1") used to fail as a missing key.
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"expected an http(s) URL of the API, e.g. http://127.0.0.1:8080/v1, "
                    f"got {value!r}"
                )
        return value

    @model_validator(mode="after")
    def _profile_for_openai(self) -> ModelSpec:
        if self.profile != "auto" and self.provider != "openai":
            raise ValueError(
                f"profile {self.profile!r} applies to provider openai only "
                "(OpenAI-compatible servers); leave it out"
            )
        return self

    @property
    def model_name(self) -> str:
        """The model id sent to the provider (a per-provider default when unset)."""
        return self.name or DEFAULT_NAME[self.provider]

    @property
    def key_env(self) -> str | None:
        """The environment variable holding the key (None for the scripted model)."""
        if self.provider == "scripted":
            return None
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]
