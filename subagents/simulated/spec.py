"""The scenario format's simulated tools: parameters, latency, scripted responses."""

from __future__ import annotations

import re
import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.clock import MAX_SECONDS
from subagents.schema import params_to_schema

_SPEC = ConfigDict(frozen=True, extra="forbid")

SimErrorKind = Literal[
    "timeout",
    "unavailable",
    "connection_reset",
    "rate_limited",
    "validation",
    "business",
    "permission",
    "crash",
]


class ParamSpec(BaseModel):
    """One parameter: JSON-Schema-like (type, required, enum, minimum, maximum, pattern)."""

    model_config = _SPEC

    type: Literal["string", "integer", "number", "boolean", "array", "object"] | None = None
    required: bool = True
    enum: list[Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    description: str | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        # A bad pattern is the scenario author's mistake: report it when the file loads,
        # not as a crash on the first call that reaches the tool.
        if pattern is not None:
            try:
                with warnings.catch_warnings():
                    # "Possible set difference" and the like: syntax whose meaning Python
                    # is about to change is refused now, not warned about at every call.
                    warnings.simplefilter("error")
                    re.compile(pattern)
            except (re.error, Warning) as exc:
                raise ValueError(f"a valid regular expression ({exc})") from None
        return pattern


class ResponseSpec(BaseModel):
    """One scripted response: exactly one of ``ok``, ``empty``, ``partial``, ``error``."""

    model_config = _SPEC

    ok: Any = None
    empty: bool | None = None
    partial: Any = None
    error: SimErrorKind | None = None
    message: str | None = None
    field: str | None = None
    expected: str | None = None
    rule: str | None = None
    limit: Any = None
    requested: Any = None
    retry_after_s: float | None = Field(default=None, ge=0, le=MAX_SECONDS)
    scope: str | None = None
    latency_s: float | None = Field(
        default=None,
        ge=0,
        le=MAX_SECONDS,
        description="This attempt's own latency (a recording's, as seen); else the tool's.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ResponseSpec:
        kinds = [k for k in ("ok", "empty", "partial", "error") if k in self.model_fields_set]
        if len(kinds) != 1:
            raise ValueError("a response has exactly one of ok, empty, partial, error")
        if self.empty is False:
            raise ValueError("empty must be true (use ok: for data)")
        return self

    @property
    def kind(self) -> Literal["ok", "empty", "partial", "error"]:
        """Which of the four kinds this response is."""
        for k in ("ok", "empty", "partial", "error"):
            if k in self.model_fields_set:
                return k
        raise AssertionError("validated to have exactly one kind")  # pragma: no cover


class WhenRule(BaseModel):
    """Responses for calls whose arguments match (equality on the listed keys)."""

    model_config = _SPEC

    match: dict[str, Any]
    responses: list[ResponseSpec] = Field(min_length=1)


class SimToolSpec(BaseModel):
    """A simulated tool: schema, side effects, latency and per-attempt responses."""

    model_config = _SPEC

    description: str = ""
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    side_effects: bool = False
    idempotent: bool | None = None
    search: bool = Field(
        default=False,
        description=(
            "A search: a model-planned subtask that may call it starts by calling it with "
            "its own query (job.search_first; it needs a string parameter `query`)."
        ),
    )
    latency_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    responses: list[ResponseSpec] = Field(min_length=1)
    when: list[WhenRule] = Field(default_factory=list)
    by_subtask: dict[str, list[ResponseSpec]] = Field(
        default_factory=dict,
        description=(
            "Per subtask id, its own responses in order (how a recorded run is replayed); "
            "they come before when rules and responses."
        ),
    )

    @model_validator(mode="after")
    def _search_takes_a_query(self) -> SimToolSpec:
        if self.search and (
            "query" not in self.params or self.params["query"].type != "string"
        ):
            raise ValueError("a tool with search: true needs a string parameter `query`")
        return self

    @property
    def is_idempotent(self) -> bool:
        """Idempotent defaults to true, or to false when the tool has side effects."""
        return (not self.side_effects) if self.idempotent is None else self.idempotent

    def json_schema(self) -> dict[str, Any]:
        """The parameter schema as JSON Schema."""
        params = {
            name: p.model_dump(exclude_none=True, exclude={"description"})
            for name, p in self.params.items()
        }
        return params_to_schema(params)
