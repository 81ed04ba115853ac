"""What the providers' servers accept: server profiles and wire-safe tool names
(docs/design.md §7)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.models.compat.names import WireNames
    from subagents.models.compat.profiles import (
        PROFILE_NAMES,
        PROFILES,
        ProfileName,
        ServerProfile,
        ask_in_words,
        profile_for_owner,
        text_tool_calls,
        tools_text,
    )

__all__ = [
    "PROFILES",
    "PROFILE_NAMES",
    "ProfileName",
    "ServerProfile",
    "WireNames",
    "ask_in_words",
    "profile_for_owner",
    "text_tool_calls",
    "tools_text",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.models.compat.names": ("WireNames",),
    "subagents.models.compat.profiles": (
        "PROFILE_NAMES", "PROFILES", "ProfileName", "ServerProfile", "ask_in_words",
        "profile_for_owner", "text_tool_calls", "tools_text",
    ),
})
