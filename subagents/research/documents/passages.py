"""A document's text cut into passages, and what a search shows of one.

A passage is a few hundred words: it ends at the next heading, else at a paragraph break
past :data:`TARGET` characters, and never runs past :data:`MAX` (a paragraph longer than
that — a one-line file — is cut at a line break or a space, else mid-word). A section
shorter than :data:`MIN` joins the next one, so a heading alone is never a passage.
Passages are slices of the text, end to end: joined they are the text, so a document is
read back by offset from them. Each keeps the path of headings it lies under.

Also here: a document's *signature* that tells two names for the same text (a
reStructuredText source and the page rendered from it) from two documents — sketches of
its beginning's word triples and of its headings (:func:`same_text` says how they are
compared) — and the *snippet* of a passage for a query (the window of words with the most
query words in it, computed from the passage — never by the index over a whole
document).
"""

from __future__ import annotations

import re
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, and_, mul

__all__ = [
    "MAX",
    "MIN",
    "TARGET",
    "Passage",
    "PassageSplitter",
    "same_text",
    "signature",
    "snippet",
]

TARGET = 1200  # characters: where a passage starts looking for a paragraph break
MAX = 2400  # characters: the most one passage holds
MIN = 300  # characters: a shorter section joins the next one
_SKETCH = 64  # hashes in a signature
_SIGNED = 6000  # characters of a document its signature reads
# Words of four letters or more (in UTF-8 bytes: any non-ASCII byte counts as a letter);
# the short ones are the most common words and most markup (``:func:``, ``:ref:``).
_WORD = re.compile(rb"[a-z\x80-\xff]{4,}")
_SNIPPET_WORDS = 40
_TOKEN_EDGE = re.compile(r"^\W+|\W+$")


@dataclass(frozen=True, slots=True)
class Passage:
    """A slice of a document's text: where it starts, the headings it lies under."""

    start: int
    heading: str
    text: str


class PassageSplitter:
    """Cuts a text into passages, in pieces: a long file is fed a block at a time (each
    ending at a paragraph break), the headings' path carried from one to the next."""

    def __init__(self) -> None:
        self.offset = 0  # where the next block starts in the whole text
        self._path: list[tuple[int, str]] = []

    def _enter(self, level: int, heading: str) -> None:
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, heading))

    def _heading(self) -> str:
        return " › ".join(text for _, text in self._path)[:400]

    def feed(self, text: str, headings: Sequence[tuple[int, int, str]]) -> Iterator[Passage]:
        """The passages of the next block of text; ``headings`` are (offset in this
        block, level, heading), in order."""
        n = len(text)
        pos = 0
        hi = 0
        count = len(headings)
        while pos < n:
            while hi < count and headings[hi][0] <= pos:
                self._enter(headings[hi][1], headings[hi][2])
                hi += 1
            heading = self._heading()
            end_max = min(n, pos + MAX)
            nxt = hi
            while nxt < count and headings[nxt][0] <= pos + MIN:
                nxt += 1  # a short section: joins this passage
            if nxt < count and headings[nxt][0] <= end_max:
                end = headings[nxt][0]
            elif end_max == n:
                end = n
            else:
                end = _break(text, pos, end_max)
            inner = [h[2] for h in headings[hi:nxt] if h[0] < end]
            if inner:
                heading = " · ".join([heading, *inner]) if heading else " · ".join(inner)
            yield Passage(self.offset + pos, heading[:600], text[pos:end])
            pos = end
        self.offset += n


def _break(text: str, pos: int, end_max: int) -> int:
    """Where a passage from ``pos`` ends when no heading ends it: a paragraph break past
    the target, else before it, else a line break, a space, or ``end_max`` itself."""
    target = pos + TARGET
    at = text.find("\n\n", target, end_max)
    if at >= 0:
        return at + 2
    at = text.rfind("\n\n", pos + MIN, target)
    if at >= 0:
        return at + 2
    at = text.find("\n", target, end_max)
    if at >= 0:
        return at + 1
    at = text.rfind(" ", pos + MIN, end_max)
    if at >= 0:
        return at + 1
    return end_max


def signature(text: str, headings: Sequence[tuple[int, int, str]] = ()) -> bytes:
    """The document's signature: bottom-k sketches of the word triples (shingles) of its
    beginning and of its headings.

    Triples, not words: two pages of one manual share most of their words, but few
    runs of three; a source and its rendered page share most runs. Headings: a source
    and its page have the same ones, whatever their markup. Hashes are CRC-32 (stable
    across processes, as the index needs).
    """
    crc = zlib.crc32
    hashes = list(map(crc, _WORD.findall(text[:_SIGNED].lower().encode())))
    # (a * K1 + b * K2 + c) & 0xFFFFFFFF of each triple, by maps in C (a comprehension
    # over the triples was a tenth of the time indexing took).
    mixed = map(add, map(add, map(mul, hashes, repeat(0x9E3779B1)),
                         map(mul, hashes[1:], repeat(0x85EBCA77))), hashes[2:])
    triples = set(map(and_, mixed, repeat(0xFFFFFFFF)))
    heads = {crc(b" ".join(_WORD.findall(h.lower().encode()))) for _, _, h in headings}
    sketch = sorted(triples)[:_SKETCH]  # sorting a thousand ints in C beats heapq here
    return array("I", [len(sketch), *sketch, *sorted(heads)[:_SKETCH]]).tobytes()


Sketches = tuple[frozenset[int], frozenset[int]]
"""A signature read back: its triples' and its headings' sketches."""


def sketches(signature: bytes) -> Sketches:
    """The two sketches of a stored signature (read once, compared many times)."""
    values = array("I", signature)
    if not values:
        return frozenset(), frozenset()
    n = values[0]
    return frozenset(values[1:1 + n]), frozenset(values[1 + n:])


def _jaccard(left: frozenset[int], right: frozenset[int]) -> float:
    """The Jaccard similarity of two sets, as their bottom-k sketches estimate it: the
    share of the union's k smallest hashes found in both (set operations, in C)."""
    if not left or not right:
        return 0.0
    union = sorted(left | right)[:_SKETCH]
    return len(left.intersection(right, union)) / len(union)


def same_text(a: Sketches, b: Sketches) -> bool:
    """Whether two signatures are of the same text under two names.

    Measured on Debian's Python documentation (a page, and its reStructuredText source
    beside it): a source and its page share at least a third of their triples, or most
    headings and a tenth of their triples, or nearly all of eight headings or more (463
    of the 496 pairs; most others are tables of contents, whose source is only
    directives); two different pages never did.
    """
    (ta, ha), (tb, hb) = a, b
    triples = _jaccard(ta, tb)
    if triples >= 0.35:
        return True
    heads = _jaccard(ha, hb)
    return (triples >= 0.1 and heads >= 0.5) or (heads >= 0.8 and min(len(ha), len(hb)) >= 8)


def _stem(word: str) -> str:
    """The part of a query word that its inflections share (a crude stem)."""
    return word if len(word) <= 4 else word[:max(4, len(word) - 3)]


def snippet(text: str, words: Sequence[str]) -> str:
    """The window of about forty words of ``text`` holding the most of ``words``."""
    tokens = text.split()
    if len(tokens) <= _SNIPPET_WORDS:
        return " ".join(tokens)
    stems = tuple({_stem(w.lower()) for w in words})
    hits = [1 if _TOKEN_EDGE.sub("", t.lower()).startswith(stems) else 0 for t in tokens]
    best, best_at = -1, 0
    window = sum(hits[:_SNIPPET_WORDS])
    for i in range(len(tokens) - _SNIPPET_WORDS + 1):
        if i:
            window += hits[i + _SNIPPET_WORDS - 1] - hits[i - 1]
        if window > best:
            best, best_at = window, i
    if best > 0 and best_at > 0 and hits[best_at] == 0:
        # Start at the window's first hit, a few words of context before it.
        first = next(j for j in range(best_at, best_at + _SNIPPET_WORDS) if hits[j])
        best_at = max(0, min(first - 5, len(tokens) - _SNIPPET_WORDS))
    chosen = " ".join(tokens[best_at:best_at + _SNIPPET_WORDS])
    before = "… " if best_at else ""
    after = " …" if best_at + _SNIPPET_WORDS < len(tokens) else ""
    return f"{before}{chosen}{after}"
