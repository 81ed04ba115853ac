"""A model endpoint's facts: its window and slots, read or learned; a local one; a check
before a run that it is there (DESIGN §7, "Fitting a local server")."""

from subagents.models.endpoints.facts import (
    MIN_ANSWER_TOKENS,
    SAFETY_TOKENS,
    UNSTATED_LOCAL_MAX_TOKENS,
    EndpointFacts,
    InferredFrom,
    StatedFrom,
    facts_for,
    fitted_max_tokens,
    forget_endpoints,
    read_refusal,
)
from subagents.models.endpoints.local import is_local

__all__ = [
    "MIN_ANSWER_TOKENS",
    "SAFETY_TOKENS",
    "UNSTATED_LOCAL_MAX_TOKENS",
    "EndpointFacts",
    "InferredFrom",
    "StatedFrom",
    "facts_for",
    "fitted_max_tokens",
    "forget_endpoints",
    "is_local",
    "read_refusal",
]
