"""What a model endpoint says about itself: its context window and its slots (docs/design.md §7).

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

A window the server **stated** (the table above, or a refusal naming it) is
authoritative: no request is sent that cannot fit it. A window fanout **inferred** from
an answer (a turn cut short: prompt plus what was written) is only a hint for
``max_tokens``: it rests on the server's ``usage``, which some servers get wrong (a
proxy's estimate, cached prompt tokens left out), so it is never below what the server
was seen to hold, and it never stops a request: the server's own refusal decides.

Token counts: fanout counts with cl100k; the server counts with its own tokenizer. The
ratio between the two is learned from every answer's ``usage`` and from refusals (the
largest seen, so an estimate errs on the safe side).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "MIN_ANSWER_TOKENS",
    "EndpointFacts",
    "InferredFrom",
    "StatedFrom",
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


StatedFrom = Literal["max_model_len", "props", "ollama", "refusal"]
"""Where a window the server stated was read: its model list (vLLM), ``/props``
(llama.cpp), ``/api/show`` (Ollama), or a refusal naming it."""

InferredFrom = Literal["cut"]
"""How a window was inferred: a turn cut short of its ``max_tokens`` (prompt + written)."""


@dataclass
class EndpointFacts:
    """What is known of one endpoint: its window, its slots, its tokens per cl100k token."""

    window: int | None = None
    """The window the server stated: authoritative (a request that cannot fit it is not
    sent; the subagent's context and the lead's findings are fitted to it)."""
    window_from: StatedFrom | None = None
    """Where the stated window was read."""
    inferred_window: int | None = None
    """A window inferred from answers, never stated: a hint for ``max_tokens`` only, never
    below :attr:`held`, never a reason not to send a request."""
    inferred_from: InferredFrom | None = None
    """How the inferred window was inferred."""
    held: int = 0
    """The most tokens the server was seen to hold in one answered request: its prompt
    (the server's count or fanout's estimate, the larger) plus what it wrote."""
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

    def learn_window(self, window: int, source: StatedFrom) -> None:
        """Keep ``window``, which the server stated (of two stated, the smaller wins)."""
        if window > 0 and (self.window is None or window < self.window):
            self.window, self.window_from = window, source

    def observe(self, estimate: int, actual: int) -> None:
        """The server counted ``actual`` tokens where fanout estimated ``estimate``."""
        if estimate > 0 and actual > 0:
            self.ratio = max(self.ratio, actual / estimate)

    def tokens(self, estimate: int) -> int:
        """``estimate`` (cl100k) in the server's tokens, rounded up."""
        return math.ceil(estimate * self.ratio)

    def accepted(self, prompt: int, written: int) -> None:
        """The server answered a prompt of ``prompt`` tokens with ``written``: its window
        holds at least that much, and an inferred window is raised to it."""
        self.held = max(self.held, prompt + max(written, 0))
        if self.inferred_window is not None and self.inferred_window < self.held:
            self.inferred_window = self.held

    def learn_from_cut(self, asked: int, prompt: int, written: int) -> None:
        """A turn cut at ``written`` tokens when ``asked`` were allowed: the server may have
        cut it at the end of its window (llama-cpp-python does so silently), which would
        then be ``prompt + written`` tokens: an inferred window, no lower than
        :attr:`held` (a wrong ``usage`` or a proxy's own cut must not shrink it)."""
        if 0 < written < asked and prompt > 0:
            self.accepted(prompt, written)
            window = self.held  # prompt + written, or more where more was held before
            if self.inferred_window is None or window < self.inferred_window:
                self.inferred_window, self.inferred_from = window, "cut"

    def room(self, prompt_estimate: int) -> int | None:
        """Output tokens the stated window leaves beside a prompt of ``prompt_estimate``
        (None: no window stated)."""
        if self.window is None:
            return None
        return self.window - self.tokens(prompt_estimate) - SAFETY_TOKENS

    def hinted_max_tokens(self, max_tokens: int, prompt_estimate: int) -> int:
        """``max_tokens`` as the inferred window hints it beside a prompt of
        ``prompt_estimate``: cut to the room the hint leaves, but never below
        :data:`MIN_ANSWER_TOKENS`; a prompt that leaves less than that has outgrown the
        hint (the hint was wrong, or the server's refusal will say so), and goes as asked."""
        if self.inferred_window is None:
            return max_tokens
        room = self.inferred_window - self.tokens(prompt_estimate) - SAFETY_TOKENS
        return room if MIN_ANSWER_TOKENS <= room < max_tokens else max_tokens

    def snapshot(self) -> dict[str, Any]:
        """The facts as plain data (for a trace or a figure)."""
        return {
            "window": self.window,
            "window_from": self.window_from,
            "inferred_window": self.inferred_window,
            "inferred_from": self.inferred_from,
            "held": self.held,
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
