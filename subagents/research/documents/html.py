"""An HTML document's text for the index: fast, whole, with its headings, no boilerplate.

``web.fetch`` reads a page through trafilatura, which finds an article's main text and
costs tens of milliseconds a page; indexing a documentation set of a thousand pages that
way took a minute. Here a page is read structurally instead, as bytes (tags are ASCII
in every encoding a page can be stored in but UTF-16, which is re-encoded first; only
the text found is decoded): inline tags go by one regular expression, then one loop
over the tags left keeps the text, marks paragraph breaks and headings, and skips what
is never content — the head, scripts and styles, forms, and navigation (``<nav>``,
``role="navigation"``, sidebars, breadcrumbs, related links, footers: in a rendered
documentation page they name *other* pages, and a passage of them would match those
pages' titles). Sphinx's ``¶`` permalinks go. Nothing is kept between calls.
"""

from __future__ import annotations

import codecs
import html as html_lib
import re
from dataclasses import dataclass

__all__ = ["HtmlText", "html_text"]

# The marks the text carries while it is built; the page's own copies are removed first.
_PARA, _LINE, _OPEN, _CLOSE, _KEEP = b"\x00", b"\x01", b"\x02", b"\x03", b"\x04"

# Lower-case inline tags, dropped in C before the loop (upper-case ones the loop ignores),
# and the end tags of list items, paragraphs and cells: the next start tag breaks the
# text anyway, and they were a third of the tags the loop saw. The names are factored by
# their first letters (a, abbr, acronym; b, bdi, bdo, big; …): the engine tries each
# alternative in turn at every "<", and a flat list of 34 names took a third longer.
_INLINE = re.compile(
    rb"<(?:/?(?:a(?:bbr|cronym)?|b(?:d[io]|ig)?|c(?:ite|ode)|d(?:ata|el|fn)|em|font|"
    rb"i(?:mg|ns)?|kbd|label|mark|q|s(?:amp|mall|pan|trike|trong|u[bp])?|t(?:ime|t)|u|"
    rb"var|wbr)\b[^>]*|/(?:li|p|d[dt]|t[dh])\s*)>"
)
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9]*)([^>]*)>|<!--|<[!?][^>]*>")
_TITLE = re.compile(rb"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<[^>]*>")
# heading, block, line break, skipped with its content, code (skipped to its end tag),
# a table cell (a space: a row is one paragraph, its cells side by side, as a reader
# sees it — "u  remount all mounted filesystems read-only" is one fact, not two)
_H, _B, _N, _S, _C, _T = 1, 2, 3, 4, 5, 6
_KIND: dict[bytes, int] = {}
for _kind, _names in (
    (_H, "h1 h2 h3 h4 h5 h6"),
    (_B, "address article aside blockquote body caption center dd details div dl dt "
         "fieldset figcaption figure footer header html li main ol p pre section summary "
         "table tbody tfoot thead tr ul"),
    (_N, "br hr"),
    (_T, "td th"),
    (_C, "script style noscript template svg math textarea"),
    (_S, "head nav form button select option iframe object embed canvas audio video map "
         "dialog"),
):
    for _name in _names.split():
        _KIND[_name.encode()] = _KIND[_name.upper().encode()] = _kind
# Navigation, by its role, class or id, on the elements that hold it.
_CONTAINERS = frozenset(
    n.encode() for name in ("div", "section", "aside", "header", "footer", "ul", "ol", "table")
    for n in (name, name.upper())
)
_ATTR = re.compile(rb"""\b(?:class|id|role)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""",
                   re.IGNORECASE)
_NAV_HINT = re.compile(
    rb"nav|side|relat|foot|crumb|menu|banner|contentinfo|search|complement|skip|header|"
    rb"cookie"
)
_NAVIGATION = frozenset(n.encode() for n in (
    "navigation", "banner", "contentinfo", "search", "complementary", "menu", "sidebar",
    "sphinxsidebar", "sphinxsidebarwrapper", "related", "footer", "breadcrumb",
    "breadcrumbs", "navbar", "nav", "menu-wrapper", "mobile-nav", "skip-link",
    "site-header", "site-footer", "cookie-banner", "cookies",
))
_INDENT = _KEEP * 4  # before each line of a code block
_MARKED = re.compile("\x02([1-6])([^\x02\x03]*)\x03")
_CHUNK = 1 << 20
_SPACE = re.compile(rb"\s+")
_NAMED: dict[bytes, re.Pattern[bytes]] = {}
_ENDS: dict[bytes, re.Pattern[bytes]] = {}


@dataclass(frozen=True, slots=True)
class HtmlText:
    """A page's title, its text (paragraphs apart), and its headings as (offset in the
    text, level 1–6, heading)."""

    title: str
    text: str
    headings: tuple[tuple[int, int, str], ...]


def html_text(data: bytes, encoding: str = "utf-8") -> HtmlText:
    """The readable text of the page ``data`` (in ``encoding``), headings found.

    The title is the page's first heading when its ``<title>`` begins with it (a
    documentation page's ``<title>`` adds the site's name), else its ``<title>``, else
    its first heading.
    """
    if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")):
        data, encoding = data.decode(encoding, "replace").encode(), "utf-8"
    for mark in (_PARA, _LINE, _OPEN, _CLOSE, _KEEP):
        if mark in data:
            data = data.replace(mark, b"")
    match = _TITLE.search(data, 0, 500_000)
    head_title = ""
    if match:
        head_title = _clean(html_lib.unescape(_ANY_TAG.sub(
            "", match.group(1).decode(encoding, "replace"))))
    marked = _paragraphs(_blocks(_INLINE.sub(b"", data)))
    text = html_lib.unescape(marked.decode(encoding, "replace"))
    if "\u00b6" in text:
        text = text.replace("\u00b6", "")
    return _headings(text, head_title)


def _blocks(markup: bytes) -> bytes:
    """The text between the tags, with paragraph, line and heading marks; what is
    never content skipped."""
    parts: list[bytes] = []
    add = parts.append
    kinds = _KIND
    last = pre = 0
    pre_first = False
    tags = _TAG.finditer(markup)
    while True:
        for m in tags:
            start = m.start()
            if start < last:
                # Inside a part skipped whole (an SVG diagram is thousands of tags):
                # the search starts again after it.
                tags = _TAG.finditer(markup, last)
                break
            closing, name, attrs = m.groups()
            if start > last:
                segment = markup[last:start]
                if pre:
                    # A code block's lines keep their spaces and are indented by four: what
                    # the index, docs.read and an answer show of it reads as code.
                    if pre_first:
                        segment = segment.lstrip(b"\r\n")
                        pre_first = False
                    if closing and name in (b"pre", b"PRE"):
                        segment = segment.rstrip(b"\r\n \t")
                    segment = _INDENT + segment.replace(b"\n", _LINE + _INDENT).replace(
                        b" ", _KEEP)
                add(segment)
            last = m.end()
            if name is None:
                if markup.startswith(b"<!--", start):
                    end = markup.find(b"-->", start + 4)
                    last = len(markup) if end < 0 else end + 3
                continue  # a comment, a declaration or a processing instruction
            kind = kinds.get(name) or kinds.get(name.lower())
            if kind is None:
                continue  # an inline tag the first pass left (upper case)
            if kind == _B:
                if attrs and not closing and name in _CONTAINERS and _boilerplate(attrs):
                    last = _end_of(markup, name, last)
                    continue
                if name == b"pre" or name == b"PRE":
                    pre = max(0, pre + (-1 if closing else 1))
                    pre_first = not closing
                add(_PARA)
            elif kind == _H:
                add(_CLOSE + _PARA if closing else _PARA + _OPEN + name[1:2])
            elif kind == _N:
                add(_LINE)
            elif kind == _T:
                if not closing:
                    add(b" ")
            elif closing:
                continue
            elif kind == _C:
                last = _closed(markup, name, last)
            elif not attrs.endswith(b"/"):
                last = _end_of(markup, name, last)
        else:
            break  # every tag read
    add(markup[last:])
    return b"".join(parts)


def _boilerplate(attrs: bytes) -> bool:
    """Whether a tag's attributes mark it as navigation (its class, id or role)."""
    if _NAV_HINT.search(attrs.lower()) is None:
        return False  # most tags: one quick search
    for match in _ATTR.finditer(attrs):
        value = match.group(1) or match.group(2) or match.group(3) or b""
        if not _NAVIGATION.isdisjoint(value.lower().split()):
            return True
    return False


def _end_of(markup: bytes, name: bytes, pos: int) -> int:
    """Where the element ``name`` opened just before ``pos`` ends (its nested namesakes
    counted); the end of the markup when it is never closed."""
    key = name.lower()
    pattern = _NAMED.get(key)
    if pattern is None:
        pattern = _NAMED[key] = re.compile(rb"<(/?)" + key + rb"\b[^>]*>", re.IGNORECASE)
    depth = 1
    for m in pattern.finditer(markup, pos):
        if m.group(1):
            depth -= 1
            if depth == 0:
                return m.end()
        elif not m.group(0).endswith(b"/>"):
            depth += 1
    return len(markup)


def _closed(markup: bytes, name: bytes, pos: int) -> int:
    """Where the script, style or other code element opened before ``pos`` ends (its
    content is not markup: nothing in it opens another)."""
    key = name.lower()
    pattern = _ENDS.get(key)
    if pattern is None:
        pattern = _ENDS[key] = re.compile(rb"</" + key + rb"\s*>", re.IGNORECASE)
    m = pattern.search(markup, pos)
    return len(markup) if m is None else m.end()


def _paragraphs(text: bytes) -> bytes:
    """Whitespace collapsed, line breaks kept, paragraphs one blank line apart — in C
    as far as it goes: the text split at its paragraph marks, each paragraph's
    whitespace collapsed by ``split``/``join`` (a regular expression over a mark that
    occurs on every line of a code block took ten times as long; ``replace`` passes over
    the whole text, until no run of marks was left, twice as long as this)."""
    out: list[bytes] = []
    add = out.append
    for part in text.split(_PARA):
        part = b" ".join(part.split()) if len(part) <= _CHUNK else _collapse(part)
        if _LINE in part:
            part = part.replace(b" " + _LINE, _LINE).replace(_LINE + b" ", _LINE)
            while _LINE + _LINE in part:
                part = part.replace(_LINE + _LINE, _LINE)
            part = part.strip(_LINE)
        if part:
            add(part)
    text = b"\n\n".join(out)
    if _LINE in text:
        text = text.replace(_LINE, b"\n")
    return text.replace(_KEEP, b" ") if _KEEP in text else text


def _collapse(text: bytes) -> bytes:
    """Runs of whitespace as one space, ends trimmed, a megabyte at a time (``split``
    makes an object per word: a 16 MB page at once took 400 MB)."""
    if len(text) <= _CHUNK:
        return b" ".join(text.split())
    out = []
    start = 0
    while start < len(text):
        # Cut in a run of whitespace (its ends are trimmed, the pieces joined by one).
        gap = _SPACE.search(text, start + _CHUNK)
        end = len(text) if gap is None else gap.end()
        piece = b" ".join(text[start:end].split())
        if piece:
            out.append(piece)
        start = end
    return b" ".join(out)


def _headings(marked: str, head_title: str) -> HtmlText:
    """The text without its heading marks, and where each heading is in it."""
    if "\x02" not in marked:
        return HtmlText(head_title, marked.replace("\x03", ""), ())
    out: list[str] = []
    headings: list[tuple[int, int, str]] = []
    size = 0
    last = 0
    for m in _MARKED.finditer(marked):
        before = marked[last:m.start()]
        heading = m.group(2).strip()
        if "\n" in heading:  # a block inside a heading (broken markup)
            heading = " ".join(heading.split())
        out += (before, heading)
        size += len(before)
        if heading:
            headings.append((size, int(m.group(1)), heading))
        size += len(heading)
        last = m.end()
    out.append(marked[last:])
    text = "".join(out)
    if "\x02" in text or "\x03" in text:  # a heading left open by broken markup
        text = text.replace("\x02", "").replace("\x03", "")
    first = headings[0][2] if headings else ""
    title = first if first and (not head_title or head_title.startswith(first)) else head_title
    return HtmlText(title, text, tuple(headings))


def _clean(text: str) -> str:
    return " ".join(text.replace("\u00b6", "").split())
