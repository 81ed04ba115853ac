"""Headings and titles of plain text, Markdown and reStructuredText.

A heading is a Markdown ``#`` line (in Markdown files), or a line underlined — and
perhaps overlined — by one punctuation character repeated at least as long as it
(reStructuredText sections and Markdown's setext headings). The title is the first
heading near the top, else the first line that is text: never a directive
(``.. currentmodule:: asyncio``), a comment, a field (``:orphan:``) or a blank line.
Inline markup (roles, literals, emphasis, links) is dropped from titles and headings;
the text itself is kept as written.
"""

from __future__ import annotations

import re

__all__ = ["clean_inline", "text_headings", "text_title"]

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_UNDERLINE = re.compile(r"""^([=\-~^"'`*+#<>:._!$%&,/;?@|\\])\1{2,}[ \t]*$""", re.MULTILINE)
# The same line found from the newline before it: a search that skips from one newline
# to the next (four times faster than trying ``^`` everywhere).
_UNDERLINE_LINE = re.compile(
    r"""\n(([=\-~^"'`*+#<>:._!$%&,/;?@|\\])\2{2,})[ \t]*(?=\n|\Z)""")
# A command line as documentation shows one: a prompt, a space, the command.
_PROMPT = re.compile(r"^(?:\$|%|>>>|sqlite>)\s+\S")
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_ROLE = re.compile(r":[\w:+.-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")
_LINK = re.compile(r"`([^`<]+?)(?:\s*<[^>]*>)?`_{1,2}|\[([^\]]+)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*{1,2}|_{2})(\S(?:.*?\S)?)\1")
_BACKTICK = re.compile(r"`([^`]+)`")
# Where a title is looked for: a heading this far into the text is not the title.
TITLE_REACH = 8000


def clean_inline(text: str) -> str:
    """``text`` without inline markup, whitespace collapsed (for titles and headings)."""
    if "`" in text:
        text = _ROLE.sub(r"\1", text)
        text = _LITERAL.sub(r"\1", text)
        text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
        text = _BACKTICK.sub(r"\1", text)
    elif "](" in text:
        text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    if "*" in text or "__" in text:
        text = _EMPHASIS.sub(r"\2", text)
    return " ".join(text.replace("\u00b6", "").split())


def text_headings(text: str, *, markdown: bool) -> list[tuple[int, int, str]]:
    """Every heading of ``text`` as (offset of its first line, level, heading), in order.

    Levels follow the order in which underline styles first appear, as in docutils; a
    Markdown ``#`` heading's level is its count of ``#``.
    """
    found: list[tuple[int, int, str]] = []
    styles: dict[tuple[bool, str], int] = {}
    for m in _UNDERLINE_LINE.finditer(text):
        start = m.start() + 1  # the underline's line (the pattern begins at its "\n")
        line, char = m.group(1), m.group(2)
        title_start = text.rfind("\n", 0, start - 1) + 1
        title = text[title_start:start - 1]
        stripped = title.strip()
        if not stripped or title[:1].isspace() or len(line) < len(stripped):
            continue
        if _UNDERLINE.fullmatch(title):
            continue  # the overline of a title that follows
        if _PROMPT.match(stripped):
            continue  # a command inside an AsciiDoc listing block ("-----" around it)
        over = False
        if title_start >= 2:
            over_start = text.rfind("\n", 0, title_start - 1) + 1
            over = text[over_start:title_start - 1].rstrip() == line
            if over:
                title_start = over_start
        style = (over, char)
        if markdown and not over and char in "=-":
            level = 1 if char == "=" else 2
        else:
            level = styles.setdefault(style, len(styles) + 1)
        found.append((title_start, min(level, 6), clean_inline(stripped)))
    if markdown and "#" in text:
        fenced = _fences(text)
        for m in _ATX.finditer(text):
            if not any(a <= m.start() < b for a, b in fenced):
                found.append((m.start(), len(m.group(1)), clean_inline(m.group(2))))
        found.sort()
    return [h for h in found if h[2]]


def _fences(text: str) -> list[tuple[int, int]]:
    """The spans of fenced code blocks (whose ``#`` lines are comments, not headings)."""
    spans: list[tuple[int, int]] = []
    if "```" not in text and "~~~" not in text:
        return spans
    opened = -1
    for m in _FENCE.finditer(text):
        if opened < 0:
            opened = m.start()
        else:
            spans.append((opened, m.end()))
            opened = -1
    if opened >= 0:
        spans.append((opened, len(text)))
    return spans


def text_title(text: str, headings: list[tuple[int, int, str]]) -> str:
    """The document's title: its first heading near the top, else its first line of
    text (directives, comments, fields and blank lines passed over)."""
    if headings and headings[0][0] < TITLE_REACH:
        return headings[0][2]
    in_directive = False
    for line in text[:TITLE_REACH].splitlines():
        if not line.strip():
            continue
        if line[:1].isspace() and in_directive:
            continue  # a directive's or a comment's body
        in_directive = line.startswith("..") or bool(re.match(r":[\w-]+:", line))
        if in_directive or _UNDERLINE.fullmatch(line.rstrip()):
            continue
        if _PROMPT.match(line.strip()):
            continue  # a shell prompt line is never a title ("$ man git-clone")
        heading = line.lstrip("#")  # a Markdown heading's marks
        title = clean_inline(heading.strip())
        if title:
            return title[:200]
    return ""
