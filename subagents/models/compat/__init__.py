"""What the providers' servers accept: server profiles and wire-safe tool names (DESIGN §7)."""

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
