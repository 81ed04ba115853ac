"""Text from a run as HTML for the report: escaped, a link only for an http(s) URL, and a
finding's data as a person reads it (a search result as its title, where and snippet; a
dict as "key: value"), never raw JSON but past a depth.

Every string comes from tools, pages and models: it goes through :func:`esc`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from html import escape
from typing import Any

from coordinator.decision import given_by

__all__ = ["compact", "cut", "data_html", "esc", "finding_html", "link", "linked", "pill"]

MAX_TEXT = 280  # characters of one finding value before it is cut
MAX_ITEMS = 12  # list items shown per finding before "… n more"


def esc(value: object) -> str:
    """``value`` as text escaped for HTML content and attribute values alike."""
    return escape(str(value), quote=True)


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, "…" marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compact(value: object) -> str:
    """``value`` as one line of JSON, cut (what a tooltip shows of a call's arguments)."""
    return cut(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def pill(text: object, kind: object = "") -> str:
    """A small label, styled by ``kind`` (an error category, a route)."""
    return f'<span class="pill {esc(kind)}">{esc(text)}</span>'


def data_html(data: object, depth: int = 0) -> str:
    """A finding's data, compactly: lists as bullets, dicts as key: value, long JSON cut."""
    if isinstance(data, dict):
        if not data:
            return "<em>{}</em>"
        items = [f'<li><span class="k">{esc(k)}:</span> {_value_html(v, depth)}</li>'
                 for k, v in list(data.items())[:MAX_ITEMS]]
        return f"<ul>{''.join(items)}{_more(len(data))}</ul>"
    if isinstance(data, list):
        if not data:
            return "<em>no items</em>"
        items = [f"<li>{_value_html(v, depth)}</li>" for v in data[:MAX_ITEMS]]
        return f"<ul>{''.join(items)}{_more(len(data))}</ul>"
    return esc(cut(str(data)))


def link(url: object, text: str | None = None) -> str | None:
    """A link to ``url`` if it is an http(s) URL (never ``javascript:`` or ``data:``),
    escaped and opening outside the report; None for anything else."""
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return None
    return (f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer nofollow">'
            f"{esc(text if text is not None else cut(url))}</a>")


_TEXT_KEYS = ("snippet", "text", "summary", "description", "content")
_MAX_DEPTH = 3  # nesting shown as text; deeper than this, compact JSON


def _inline(value: Mapping[str, Any], depth: int) -> str:
    """A dict as words on one line: "key: value · key: value" (nested values shortened)."""
    parts = [f'<span class="k">{esc(k)}:</span> {_value_html(v, depth + 1)}'
             for k, v in list(value.items())[:MAX_ITEMS]]
    more = f" · … {len(value) - MAX_ITEMS} more" if len(value) > MAX_ITEMS else ""
    return " · ".join(parts) + more


def _hit_html(value: Mapping[str, Any], depth: int) -> str | None:
    """A search result or a page (a dict with a ``url`` or a ``path``) as a person reads
    it: its title (a link for an http(s) URL; a path beside it), its snippet, then the
    rest in words; None for any other dict."""
    url, path = value.get("url"), value.get("path")
    if not (isinstance(url, str) and url) and not (isinstance(path, str) and path):
        return None
    title = str(value.get("title") or url or path)
    head = link(url, cut(title)) if isinstance(url, str) else None
    if head is None:
        where = url or path
        head = f"<b>{esc(cut(title))}</b>"
        if where != title:
            head += f" <code>{esc(cut(str(where)))}</code>"
    heading = value.get("heading")
    if isinstance(heading, str) and heading and heading != title:
        head += f" · {esc(cut(heading))}"
    key = next((k for k in _TEXT_KEYS if isinstance(value.get(k), str) and value[k].strip()),
               None)
    body = f'<div class="snippet">{esc(cut(str(value[key])))}</div>' if key else ""
    rest = {k: v for k, v in value.items()
            if k not in ("url", "path", "title", "heading", key)}
    more = f'<div class="more">{_inline(rest, depth)}</div>' if rest else ""
    return f'<div class="hit">{head}{body}{more}</div>'


def _value_html(value: object, depth: int) -> str:
    """One value of a finding as readable text: a search result as a titled link and its
    snippet, a dict as "key: value", a list as items; compact JSON only past a depth."""
    if isinstance(value, dict) and value:
        hit = _hit_html(value, depth)
        if hit is not None:
            return hit
    if isinstance(value, dict | list) and value:
        if depth < 1 and (isinstance(value, list) or len(value) <= MAX_ITEMS):
            return data_html(value, depth + 1)
        if depth >= _MAX_DEPTH:
            return f"<code>{esc(compact(value))}</code>"
        if isinstance(value, dict):
            return _inline(value, depth)
        if all(not isinstance(v, dict | list) for v in value):
            shown = ", ".join(link(v) or esc(cut(str(v))) for v in value[:MAX_ITEMS])
            more = f", … {len(value) - MAX_ITEMS} more" if len(value) > MAX_ITEMS else ""
            return shown + more
        items = [f"<li>{_value_html(v, depth + 1)}</li>" for v in value[:MAX_ITEMS]]
        return f"<ul>{''.join(items)}{_more(len(value))}</ul>"
    if isinstance(value, dict | list):
        return "<em>none</em>"
    return link(value) or esc(cut(str(value)))


def _more(n: int) -> str:
    """The last item of a list cut at MAX_ITEMS: how many more there were."""
    return f'<li class="note">… {n - MAX_ITEMS} more</li>' if n > MAX_ITEMS else ""


def finding_html(f: Mapping[str, Any]) -> str:
    """One finding: its tool, its flags (empty, partial), where it was read, its data."""
    flags = ""
    if f.get("empty"):
        flags += " " + pill("empty: no matches")
    if f.get("complete") is False:
        flags += " " + pill("partial data", "gap")
    body = "" if f.get("empty") and not f.get("data") else data_html(f.get("data"))
    args = f.get("args")
    tip = f' title="{esc(compact(args))}"' if args else ""
    # The page or document the finding was read from: a link where it is on the web.
    where = f.get("url") or f.get("path")
    source = ""
    if where:
        source = " " + (link(where, str(f.get("title") or where))
                        or f"<code>{esc(where)}</code>")
    return (f'<div class="finding"><span class="tool"{tip}>{esc(f.get("tool"))}</span>{flags}'
            f"{source}{body}</div>")


def person_html(f: Mapping[str, Any]) -> str:
    """A finding a person gave: "given by NAME, DATE", the text, its source as a link."""
    data = f.get("data")
    text = data.get("text") if isinstance(data, Mapping) else data
    url = f.get("url")
    source = ""
    if url:
        source = " " + (link(url, str(url)) or f"<code>{esc(url)}</code>")
    return (f'<div class="finding person"><span class="tool">'
            f"{esc(given_by(f.get('by'), f.get('at')))}</span>{source}"
            f"<p>{esc(str(text))}</p></div>")


_URL_IN_TEXT = re.compile(r"https?://[^\s<>\"'\])]+[^\s<>\"'\]).,;:!?]", re.IGNORECASE)


def linked(text: str) -> str:
    """Escaped text whose http(s) URLs are links (escaped, opening outside the report)."""
    out, at = [], 0
    for m in _URL_IN_TEXT.finditer(text):
        out.append(esc(text[at:m.start()]))
        out.append(link(m.group()) or esc(m.group()))
        at = m.end()
    out.append(esc(text[at:]))
    return "".join(out)
