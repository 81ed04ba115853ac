"""What a model endpoint says about itself: its context window and its slots (DESIGN §7).

A local server's window is small and rarely stated, so it is **learned, never assumed**:

==================  =========================================  ==========================
server              where the window is read                   slots
==================  =========================================  ==========================
vLLM                ``GET /v1/models``: ``max_model_len``      (not stated)
llama.cpp           ``GET /props``: ``n_ctx``                  ``total_slots``
Ollama              ``POST /api/show``: ``num_ctx`` (else      (not stated)
                    Ollama's default, 2,048) and the model's
                    ``context_length``, the smaller
llama-cpp-python    its first refusal that names it            1 (one model, one request)
anything else       its first refusal that names it            (not stated)
==================  =========================================  ==========================

"This model's maximum context length is N tokens" is the wording of OpenAI, vLLM and
llama-cpp-python; llama.cpp says "exceeds the available context size (N tokens)". Both
are read, with the prompt's token count where the refusal gives it. The facts are kept
per endpoint (base URL and model) for the life of the process, so every job and every
subagent of a ``fanout serve`` shares what one of them learned.

Token counts: fanout counts with cl100k; the server counts with its own tokenizer. The
ratio between the two is learned from every answer's ``usage`` and from refusals (the
largest seen, so an estimate errs on the safe side).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "MIN_ANSWER_TOKENS",
    "EndpointFacts",
    "facts_for",
    "fitted_max_tokens",
    "forget_endpoints",
    "read_refusal",
]

MIN_ANSWER_TOKENS: Final = 64
"""The fewest output tokens worth sending a request for: below it, the prompt is cut."""

SAFETY_TOKENS: Final = 32
"""Kept free of the window beside the estimate (chat template tokens the estimate misses)."""

_WINDOW: Final = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"available context size \((\d+) tokens?\)", re.I),
    re.compile(r"context window of (\d+)", re.I),
    re.compile(r"context length of (\d+)", re.I),
)
_PROMPT: Final = (
    re.compile(r"\((\d+) in the messages", re.I),
    re.compile(r"messages resulted in (\d+) tokens", re.I),
    re.compile(r"\((\d+) in your prompt", re.I),
    re.compile(r"request \((\d+) tokens?\) exceeds", re.I),
    re.compile(r"Requested tokens \((\d+)\)", re.I),
)


@dataclass
class EndpointFacts:
    """What is known of one endpoint: its window, its slots, its tokens per cl100k token."""

    window: int | None = None
    window_from: str | None = None
    """Where the window was read: ``max_model_len``, ``props``, ``ollama``, ``refusal``."""
    slots: int | None = None
    server: str | None = None
    """What the server said it is (``owned_by``), when it said."""
    probed: bool = False
    local: bool = False
    """A server on this machine or its network (its output budget is bounded until its
    window is known)."""
    ratio: float = 1.0
    refusals: int = field(default=0)
    """Requests this endpoint refused for their length (the first teaches the window)."""

    def learn_window(self, window: int, source: str) -> None:
        """Keep ``window`` (a refusal's word wins over a guess; the smaller wins)."""
        if window > 0 and (self.window is None or window < self.window):
            self.window, self.window_from = window, source

    def observe(self, estimate: int, actual: int) -> None:
        """The server counted ``actual`` tokens where fanout estimated ``estimate``."""
        if estimate > 0 and actual > 0:
            self.ratio = max(self.ratio, actual / estimate)

    def tokens(self, estimate: int) -> int:
        """``estimate`` (cl100k) in the server's tokens, rounded up."""
        return math.ceil(estimate * self.ratio)

    def learn_from_cut(self, asked: int, prompt: int, written: int) -> None:
        """A turn cut at ``written`` tokens when ``asked`` were allowed: the server cut it at
        the end of its window (llama-cpp-python does so silently), which is then
        ``prompt + written`` tokens."""
        if 0 < written < asked and prompt > 0:
            self.learn_window(prompt + written, "cut")

    def room(self, prompt_estimate: int) -> int | None:
        """Output tokens left beside a prompt of ``prompt_estimate`` (None: no window)."""
        if self.window is None:
            return None
        return self.window - self.tokens(prompt_estimate) - SAFETY_TOKENS

    def snapshot(self) -> dict[str, Any]:
        """The facts as plain data (for a trace or a figure)."""
        return {
            "window": self.window,
            "window_from": self.window_from,
            "slots": self.slots,
            "server": self.server,
            "ratio": round(self.ratio, 3),
            "refusals": self.refusals,
        }


_FACTS: dict[tuple[str, str], EndpointFacts] = {}


def facts_for(base_url: str, model: str) -> EndpointFacts:
    """The process's facts of one endpoint (made empty on first use)."""
    key = (base_url.rstrip("/"), model)
    facts = _FACTS.get(key)
    if facts is None:
        facts = _FACTS[key] = EndpointFacts()
    return facts


def forget_endpoints() -> None:
    """Forget every endpoint's facts (tests that start servers anew on one port)."""
    _FACTS.clear()


def read_refusal(message: str) -> tuple[int | None, int | None]:
    """The window and the prompt's tokens a length refusal names (None where it does not)."""
    window = next((int(m.group(1)) for p in _WINDOW if (m := p.search(message))), None)
    prompt = next((int(m.group(1)) for p in _PROMPT if (m := p.search(message))), None)
    return window, prompt


UNSTATED_LOCAL_MAX_TOKENS: Final = 512
"""The output budget of a call to a local server whose window is not known yet: a
quarter of 2,048 tokens, the smallest default window of the local servers we know. It
bounds what a call may write, not what it may send: nothing is cut or refused for it."""


def fitted_max_tokens(max_tokens: int, window: int | None, *, local: bool = False) -> int:
    """The output budget of one call on a window: at most a quarter of it.

    A quarter leaves three quarters for the prompt (instructions, tools, findings);
    ``model.max_tokens`` lower than that stays as it is. No window known: unchanged, or
    at most :data:`UNSTATED_LOCAL_MAX_TOKENS` on a ``local`` server (one that states no
    window and runs on a CPU: an answer it writes to the end of its window costs minutes).
    """
    if window is None:
        return min(max_tokens, UNSTATED_LOCAL_MAX_TOKENS) if local else max_tokens
    return max(MIN_ANSWER_TOKENS, min(max_tokens, window // 4))
