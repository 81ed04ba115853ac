"""One file of the folder read for the index: its kind judged by content, its text cut
into passages, within limits.

- A file over ``max_bytes`` is not read at all (:class:`NotIndexed`, saying so).
- The kind comes from the bytes: ``%PDF-`` is a PDF whatever the name; NUL bytes, or
  many control characters in bytes that are not UTF-8, are binary (an image named
  ``.md`` is refused, not indexed as garbage); the name decides only between HTML and
  the plain kinds of text.
- Plain text is read in blocks (each cut at a paragraph break), so memory follows the
  block, not the file; HTML and PDF are read whole (up to ``max_bytes``).

Nothing here keeps state between calls: the same file gives the same text every time.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from subagents.research.documents.html import html_text
from subagents.research.documents.passages import Passage, PassageSplitter, signature
from subagents.research.documents.text import text_headings, text_title

__all__ = ["DEFAULT_MAX_BYTES", "Document", "NotIndexed", "read_file", "sniff"]

DEFAULT_MAX_BYTES = 20_000_000
BLOCK = 1 << 22  # bytes of plain text read at a time
_HEAD = 8192
_MARKDOWN = (b".md", b".markdown")
_HTML = (b".html", b".htm")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""",
                           re.IGNORECASE)
_CONTROL = frozenset(range(0, 9)) | frozenset(range(14, 32)) | {127}


class NotIndexed(Exception):
    """A file the index leaves out, and why (too large, binary, unreadable)."""


def _nothing() -> None:
    """Nothing to close (the document was read whole)."""


@dataclass(frozen=True)
class Document:
    """A file read for the index: its title, kind, signature, and its passages (a lazy
    iterator for plain text: read while the index writes)."""

    title: str
    kind: str
    signature: bytes
    passages: Iterator[Passage]
    close: Callable[[], None] = _nothing  # what a reader that drops the passages calls


def sniff(head: bytes, name: bytes) -> str:
    """``pdf``, ``html``, ``markdown`` or ``text`` from a file's first bytes and its name.

    Raises:
        NotIndexed: the bytes are binary, or a ``.pdf`` is not a PDF.
    """
    if head.startswith(b"%PDF-"):
        return "pdf"
    lower = name.lower()
    if lower.endswith(b".pdf"):
        raise NotIndexed("not a PDF (it does not begin with %PDF-)")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        pass  # UTF-16 text: its NUL bytes are half of each character
    elif b"\x00" in head:
        raise NotIndexed("binary content (NUL bytes)")
    else:
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            control = sum(1 for byte in head if byte in _CONTROL)
            if control > len(head) // 100:
                raise NotIndexed("binary content (not text in any encoding)") from None
    if lower.endswith(_HTML):
        return "html"
    return "markdown" if lower.endswith(_MARKDOWN) else "text"


def read_file(
    path: bytes,
    *,
    size: int,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stopped: Callable[[], bool] = lambda: False,
) -> Document:
    """The document at ``path`` (a file of ``size`` bytes), read for the index.

    Raises:
        NotIndexed: the file is over ``max_bytes``, binary, or unreadable as its kind.
        OSError: the file cannot be opened or read.
    """
    if size > max_bytes:
        raise NotIndexed(f"larger than docs.max_bytes ({size:,} > {max_bytes:,} bytes)")
    f = open(path, "rb")  # noqa: SIM115 - plain text hands it to its passages' iterator
    handed = False
    try:
        head = f.read(_HEAD)
        kind = sniff(head, os.path.basename(path))
        if kind in ("text", "markdown"):
            document = _plain(f, head, kind, stopped)
            handed = True
            return document
        data = head + f.read(max_bytes + 1 - len(head))
    finally:
        if not handed:
            f.close()
    if len(data) > max_bytes:
        raise NotIndexed(f"larger than docs.max_bytes (over {max_bytes:,} bytes)")
    if kind == "pdf":
        from subagents.research.extract import extract_pdf

        try:
            pdf = extract_pdf(data)
        except ValueError as exc:
            raise NotIndexed(str(exc)) from None
        text = _normalise(pdf.text)
        return Document(pdf.title, kind, signature(text), PassageSplitter().feed(text, ()))
    page = html_text(data, _page_encoding(data))
    return Document(page.title, kind, signature(page.text, page.headings),
                    PassageSplitter().feed(page.text, page.headings))


def _page_encoding(data: bytes) -> str:
    """A page's encoding: its BOM, its ``<meta charset>``, else UTF-8 when it is valid,
    else what charset-normalizer reads in it."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    meta = _META_CHARSET.search(data, 0, 4096)
    if meta is not None:
        try:
            return codecs.lookup(meta.group(1).decode("ascii")).name
        except LookupError:
            pass
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        import charset_normalizer

        best = charset_normalizer.from_bytes(data[:1 << 20]).best()
        return best.encoding if best is not None else "latin-1"


def _decoder(head: bytes) -> codecs.IncrementalDecoder:
    """A decoder for the file whose first bytes are ``head``: its BOM, else UTF-8, else
    the encoding charset-normalizer reads in them (bad bytes replaced either way)."""
    if head.startswith(codecs.BOM_UTF8):
        return codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return codecs.getincrementaldecoder("utf-16")(errors="replace")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return codecs.getincrementaldecoder("utf-8")(errors="replace")
    except UnicodeDecodeError:
        import charset_normalizer  # only for the bytes that are not UTF-8

        best = charset_normalizer.from_bytes(head).best()
        encoding = best.encoding if best is not None else "latin-1"
        return codecs.getincrementaldecoder(encoding)(errors="replace")


def _plain(f: BinaryIO, head: bytes, kind: str, stopped: Callable[[], bool]) -> Document:
    """Plain text, Markdown or reStructuredText, read a block at a time (the caller closes
    ``f`` if this raises; else its passages' iterator does, once read or dropped)."""
    chunks = _chunks(f, _decoder(head), head + f.read(BLOCK - len(head)))
    first = next(chunks, "")
    markdown = kind == "markdown"
    headings = text_headings(first, markdown=markdown)

    def passages() -> Iterator[Passage]:
        try:
            splitter = PassageSplitter()
            yield from splitter.feed(first, headings)
            for chunk in chunks:
                if stopped():
                    return
                yield from splitter.feed(chunk, text_headings(chunk, markdown=markdown))
        finally:
            f.close()

    return Document(text_title(first, headings), kind, signature(first, headings), passages(),
                    f.close)


def _chunks(f: BinaryIO, decoder: codecs.IncrementalDecoder, data: bytes) -> Iterator[str]:
    """The file's text in blocks, each ending at a paragraph break where it can."""
    carry = ""
    while True:
        final = not data
        text = carry + decoder.decode(data, final=final)
        hold = ""
        if not final and text.endswith("\r"):
            text, hold = text[:-1], "\r"  # the first half of a \r\n
        text = _normalise(text)
        if final:
            if text:
                yield text
            return
        cut = _cut(text)
        yield text[:cut]
        carry = text[cut:] + hold
        data = f.read(BLOCK)


def _cut(text: str) -> int:
    """Where a block of text ends: after its last paragraph break, else line break, else
    space, else its end (a block is never cut inside a paragraph that fits in it)."""
    for mark in ("\n\n", "\n", " "):
        at = text.rfind(mark, len(text) // 2)
        if at >= 0:
            return at + len(mark)
    return len(text)


def _normalise(text: str) -> str:
    """Line ends as ``\\n`` (passages split on blank lines)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
