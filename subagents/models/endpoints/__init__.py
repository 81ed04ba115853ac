"""A model endpoint's facts: its window and slots, read or learned; a local one; a check
before a run that it is there (docs/design.md §7, "Fitting a local server")."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
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

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.models.endpoints.facts": (
        "MIN_ANSWER_TOKENS", "SAFETY_TOKENS", "UNSTATED_LOCAL_MAX_TOKENS", "EndpointFacts",
        "InferredFrom", "StatedFrom", "facts_for", "fitted_max_tokens", "forget_endpoints",
        "read_refusal",
    ),
    "subagents.models.endpoints.local": ("is_local",),
})
