"""Text out of what a source returns: HTML (main text), PDF, Markdown or plain text.

Shared by ``web.fetch`` (bytes off the wire) and the document index (files on disk), so
a page and a saved copy of it read the same. HTML goes through trafilatura, which keeps
the article and drops navigation, footers and cookie banners; PDF through pypdf; bytes
of unknown encoding through charset-normalizer. Everything here is pure — the same bytes
give the same text, however often they are read — and CPU-bound: callers run it in a
worker thread.
"""

from __future__ import annotations

import html as html_lib
import io
import logging
import re
from dataclasses import dataclass

__all__ = ["Extracted", "decode", "extract_html", "extract_pdf", "kind_of", "title_of_text"]

_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)

# trafilatura and pypdf log every odd page at WARNING; a tool result says what matters.
logging.getLogger("trafilatura").setLevel(logging.ERROR)
logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's title and readable text."""

    title: str
    text: str


def kind_of(content_type: str, name: str = "", head: bytes = b"") -> str | None:
    """``html``, ``pdf``, ``text`` or None (binary) from a type, a file name and the bytes."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    lower = name.lower()
    if head.startswith(b"%PDF-") or ctype == "application/pdf" or lower.endswith(".pdf"):
        return "pdf"
    if ctype in ("text/html", "application/xhtml+xml") or lower.endswith((".html", ".htm")):
        return "html"
    if ctype.startswith("text/") or ctype in (
        "application/json", "application/xml", "application/ld+json", "application/rss+xml",
        "application/atom+xml", "application/x-yaml", "application/yaml",
    ):
        return "text"
    if lower.endswith((".md", ".markdown", ".txt", ".rst", ".text")):
        return "text"
    if not ctype or ctype == "application/octet-stream":
        # No useful type: text if the bytes read as text, else binary.
        sample = head[:4096]
        if b"\x00" in sample:
            return None
        if re.search(rb"<html|<!doctype html", sample, re.IGNORECASE):
            return "html"
        return "text" if sample else None
    return None


def decode(data: bytes, content_type: str = "") -> str:
    """Bytes as text: the declared charset, a ``<meta charset>``, else detected."""
    declared = re.search(r"charset=([A-Za-z0-9_.:-]+)", content_type, re.IGNORECASE)
    meta = _CHARSET.search(data[:4096])
    for name in (declared.group(1) if declared else None,
                 meta.group(1).decode("ascii") if meta else None):
        if name:
            try:
                return data.decode(name)
            except (LookupError, UnicodeDecodeError):
                pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import charset_normalizer  # only for the bytes that are neither declared nor UTF-8

        best = charset_normalizer.from_bytes(data).best()
        return str(best) if best is not None else data.decode("utf-8", errors="replace")


def extract_html(markup: str, url: str | None = None) -> Extracted:
    """An HTML page's title and main text (boilerplate dropped)."""
    import trafilatura  # about 0.3 s to import: only for jobs that read pages

    match = _TITLE.search(markup)
    title = _clean(html_lib.unescape(_TAGS.sub("", match.group(1)))) if match else ""
    # No deduplicate=True: trafilatura then drops text it has seen before *in this
    # process* (a process-wide cache), so the same page read twice lost text each time.
    text = trafilatura.extract(
        markup, url=url, include_comments=False, include_tables=True, deduplicate=False
    )
    if not text:
        # Too short or too odd for the extractor: the page's visible text, tags dropped.
        body = re.sub(r"(?is)<(script|style|noscript)[^>]*>.*?</\1\s*>", " ", markup)
        text = _clean(html_lib.unescape(_TAGS.sub(" ", body)))
    if not title:
        metadata = trafilatura.extract_metadata(markup)
        title = (metadata.title or "") if metadata is not None else ""
    return Extracted(title=title, text=text.strip())


def extract_pdf(data: bytes) -> Extracted:
    """A PDF's title (its metadata, else its first line) and the text of every page.

    Raises:
        ValueError: the bytes are not a readable PDF.
    """
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
    except Exception as exc:  # pypdf raises many types for a damaged file
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    title = _clean(str(meta.title)) if meta is not None and meta.title else ""
    return Extracted(title=title or title_of_text(text), text=text)


def title_of_text(text: str) -> str:
    """A plain, Markdown or reStructuredText text's title: its first heading near the
    top, else its first line of text (never a directive such as ``.. currentmodule::``)."""
    from subagents.research.documents.text import TITLE_REACH, text_headings, text_title

    head = text[:TITLE_REACH]
    return text_title(head, text_headings(head, markdown=True))[:200]


def _clean(text: str) -> str:
    return " ".join(text.split())
