"""What a provider says about its limits: the rate-limit headers of any answer, parsed.

OpenAI (and most OpenAI-compatible gateways) send ``x-ratelimit-limit|remaining|reset-
requests|tokens``, with resets as Go-style durations (``1s``, ``6m0s``, ``20ms``);
Anthropic sends ``anthropic-ratelimit-requests|tokens|input-tokens|output-tokens-
limit|remaining|reset``, with resets as RFC 3339 instants. Both send ``retry-after``
(seconds) on a 429, OpenAI also ``retry-after-ms``. :func:`read_rate_headers` reads them
all into one :class:`RateReport`; what a provider does not send stays None.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from shared.classify import parse_retry_after

Dimension = Literal["requests", "tokens", "input_tokens", "output_tokens"]
"""What a limit counts: requests, all tokens, input tokens or output tokens (per minute)."""


@dataclass(frozen=True, slots=True)
class DimensionReport:
    """One dimension as the provider reported it: limit, what is left, seconds to reset."""

    limit: float | None = None
    remaining: float | None = None
    reset_s: float | None = None


@dataclass(frozen=True, slots=True)
class RateReport:
    """Everything an answer's headers said about the endpoint's limits."""

    dimensions: Mapping[Dimension, DimensionReport]
    retry_after_s: float | None = None

    @property
    def empty(self) -> bool:
        """True when the answer said nothing about limits."""
        return not self.dimensions and self.retry_after_s is None


_OPENAI: Mapping[Dimension, str] = {"requests": "requests", "tokens": "tokens"}
_ANTHROPIC: Mapping[Dimension, str] = {
    "requests": "requests",
    "tokens": "tokens",
    "input_tokens": "input-tokens",
    "output_tokens": "output-tokens",
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_reset(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds until a reset: a Go duration (``6m0s``), plain seconds, or an RFC 3339 instant.

    An instant in the past is 0; what is not any of these is None (ignored, not an error:
    a header is advice, and a gateway may send anything).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if instant.tzinfo is None:
        return None
    return max(0.0, instant.timestamp() - now())


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def read_rate_headers(
    headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> RateReport:
    """The limits an answer's headers state (``headers`` must look names up case-blind).

    httpx's ``Headers`` (what both SDKs hand back) is case-insensitive; a plain dict
    should hold lower-case names.
    """
    dims: dict[Dimension, DimensionReport] = {}
    for dim, name in _OPENAI.items():
        report = DimensionReport(
            limit=_number(headers.get(f"x-ratelimit-limit-{name}")),
            remaining=_number(headers.get(f"x-ratelimit-remaining-{name}")),
            reset_s=parse_reset(headers.get(f"x-ratelimit-reset-{name}"), now=now),
        )
        if report != DimensionReport():
            dims[dim] = report
    for dim, name in _ANTHROPIC.items():
        report = DimensionReport(
            limit=_number(headers.get(f"anthropic-ratelimit-{name}-limit")),
            remaining=_number(headers.get(f"anthropic-ratelimit-{name}-remaining")),
            reset_s=parse_reset(headers.get(f"anthropic-ratelimit-{name}-reset"), now=now),
        )
        if report != DimensionReport():
            dims[dim] = report
    retry_after = None
    millis = parse_retry_after(headers.get("retry-after-ms"))
    if millis is not None:
        retry_after = millis / 1000
    else:
        retry_after = parse_retry_after(headers.get("retry-after"))
    return RateReport(dimensions=dims, retry_after_s=retry_after)
