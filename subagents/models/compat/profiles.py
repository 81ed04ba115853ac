"""Server profiles: what an OpenAI-compatible server accepts and how it bends the format.

Every OpenAI-compatible server bends the wire format somewhere (docs/design.md §7, "Real
servers: profiles"). A :class:`ServerProfile` says what fanout may send to a server and
what it reads back leniently:

==============  ============  ==========  ===========  ============  =================
profile         content null  system      named        text tool     chosen by ``auto``
                beside calls  role        tool_choice  calls parsed  when
==============  ============  ==========  ===========  ============  =================
``openai``      sent          sent        sent         never         api.openai.com
``vllm``        sent          sent        sent         yes           ``owned_by: vllm``
``llama-cpp-    ``""``        folded      sent         yes           ``owned_by: me``
python``
``llama.cpp``   ``""``        sent        in words     yes           ``owned_by: llamacpp``
``ollama``      ``""``        sent        in words     yes           ``owned_by: library``
``lmstudio``    ``""``        sent        in words     yes           ``owned_by`` organization_owner
``compatible``  ``""``        sent        in words     yes           anything else
``strict``      ``""``        folded      in words     yes           after a shape refusal
==============  ============  ==========  ===========  ============  =================

What is always normalised on the way back, whatever the profile: ``content`` null or
missing, tool-call ids missing, empty or repeated (fanout mints its own), ``arguments``
sent as an object, ``finish_reason`` ``stop``/null/other beside tool calls, no ``usage``.

"In words": instead of a ``tool_choice`` naming a function (refused by some servers and
ignored by others), the request says which tool to call in its last user message; the
caller checks the answer as always. Text tool calls are the formats llama.cpp and vLLM
document for models without native tool calling: Hermes ``<tool_call>{...}</tool_call>``
and a bare JSON ``{"name": ..., "arguments": {...}}`` naming a tool of the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

ProfileName = Literal[
    "auto",
    "openai",
    "vllm",
    "llama-cpp-python",
    "llama.cpp",
    "ollama",
    "lmstudio",
    "compatible",
    "strict",
]
PROFILE_NAMES: Final[tuple[str, ...]] = get_args(ProfileName)


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """What one kind of server accepts (send side) and may write as text (read side)."""

    name: str
    null_content: bool = False
    """``content: null`` beside tool calls is accepted (else ``""`` is sent)."""
    system_role: bool = True
    """The chat template knows the system role (else it is folded into the first user
    message)."""
    named_tool_choice: bool = False
    """A ``tool_choice`` naming a function is honoured (else the request asks in words)."""
    text_tool_calls: bool = True
    """Tool calls the model wrote as text are read as calls (never for official APIs)."""
    tools_in_prompt: bool = False
    """The chat template does not render ``tools``: the instructions describe them and
    how to call one in text (Hermes tags), so the model knows they exist."""
    stream_usage: bool = True
    """A streamed request may ask for usage in its last chunk (``stream_options:
    {include_usage: true}``); else none is asked, and a stream without usage is taken as
    it is (docs/design.md §8)."""


PROFILES: Final[dict[str, ServerProfile]] = {
    "openai": ServerProfile(
        "openai", null_content=True, named_tool_choice=True, text_tool_calls=False
    ),
    "vllm": ServerProfile("vllm", null_content=True, named_tool_choice=True),
    # llama-cpp-python's schema refuses `content: null`; it honours a named tool_choice
    # (a grammar constrains the answer to that tool's arguments). Its chat formats for
    # most models (gemma, llama-2, ...) render neither the system role (dropped without a
    # word) nor `tools`: both go into the first user message.
    "llama-cpp-python": ServerProfile(
        "llama-cpp-python",
        system_role=False,
        named_tool_choice=True,
        tools_in_prompt=True,
        stream_usage=False,  # its request schema has no stream_options
    ),
    "llama.cpp": ServerProfile("llama.cpp"),
    "ollama": ServerProfile("ollama"),
    "lmstudio": ServerProfile("lmstudio"),
    "compatible": ServerProfile("compatible"),
    "strict": ServerProfile("strict", system_role=False, stream_usage=False),
}

# What `GET /v1/models` says in `owned_by` on the servers we know of.
_OWNERS: Final[dict[str, str]] = {
    "vllm": "vllm",
    "llamacpp": "llama.cpp",
    "llama.cpp": "llama.cpp",
    "me": "llama-cpp-python",
    "library": "ollama",
    "ollama": "ollama",
    "organization_owner": "lmstudio",
    "openai": "openai",
    "system": "openai",
}


def profile_for_owner(owned_by: str | None) -> ServerProfile:
    """The profile of a server whose model list says ``owned_by`` (None: unknown)."""
    return PROFILES[_OWNERS.get((owned_by or "").lower(), "compatible")]


def tools_text(tools: Sequence[Any]) -> str:
    """The tools described in words, with the format to call one in text."""
    lines = [
        "You can call these tools. To call one, answer with only "
        '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>',
    ]
    for tool in tools:
        schema = json.dumps(tool.input_schema, separators=(",", ":"), ensure_ascii=False)
        lines.append(f"- {tool.name}: {tool.description} Arguments (JSON Schema): {schema}")
    return "\n".join(lines)


def ask_in_words(tool: str) -> str:
    """The line a request without a named ``tool_choice`` ends its last user message with."""
    return f"\n\nAnswer now with one call of the tool `{tool}` (not with text)."


_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"^```(?:json|tool_call|tool_code)?\s*(.*?)\s*```$", re.S)


@dataclass(frozen=True, slots=True)
class TextCall:
    """A tool call the model wrote as text: its name, and its arguments as sent."""

    name: str
    arguments: object


def text_tool_calls(text: str, offered: Iterable[str]) -> list[TextCall]:
    """The tool calls written in ``text``, or ``[]`` when it is an answer, not a call.

    Hermes tags are calls whatever they name (an invented name then goes back to the
    model as a validation error). A bare JSON object (or list of them), alone in the
    text or in one code fence, is a call only when it names a tool of the request, so an
    answer that happens to be JSON is never run as a call.
    """
    names = set(offered)
    tagged = _HERMES.findall(text) if "<tool_call>" in text else []
    if tagged:
        return [c for body in tagged for c in _decode(body, names, require_known=False)]
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if not stripped.startswith(("{", "[")):
        return []
    return _decode(stripped, names, require_known=True)


def _decode(body: str, names: set[str], *, require_known: bool) -> list[TextCall]:
    try:
        value = json.loads(body)
    except ValueError:
        return []
    items: Sequence[Any] = value if isinstance(value, list) else [value]
    calls: list[TextCall] = []
    for item in items:
        if not isinstance(item, dict):
            return []
        name = item.get("name")
        if not isinstance(name, str) or not name:
            function = item.get("function")
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                item, name = function, function["name"]
            else:
                return []
        if require_known and name not in names:
            return []
        arguments = item.get("arguments", item.get("parameters", {}))
        calls.append(TextCall(name, arguments))
    return calls
