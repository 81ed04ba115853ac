"""A loopback web for the research tools: pages, redirects, failures, and search APIs.

:class:`LoopbackWeb` serves ``GET`` routes from a table (a reply, or a function of the
request), so a test makes the web it needs: articles with boilerplate, redirect chains,
429 with ``Retry-After``, 403/404/410, slow and oversize pages, binary files, a PDF, a
page in another charset. :class:`SearxngServer`, :class:`BraveServer` and
:class:`TavilyServer` speak those services' real JSON wire formats (as documented by
each: SearXNG's ``/search?format=json``, Brave's ``/res/v1/web/search`` with
``X-Subscription-Token``, Tavily's ``POST /search`` with a bearer key).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback._server import LoopbackServer, RecordedRequest, Reply

Route = Reply | Callable[[RecordedRequest], Reply]

BOILERPLATE_NAV = "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(12))


def article_html(title: str, paragraphs: list[str], *, extra_head: str = "") -> str:
    """An article page wrapped in navigation, a cookie banner, a sidebar and a footer."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>{extra_head}"
        "</head><body>"
        f"<header><nav><ul>{BOILERPLATE_NAV}</ul></nav></header>"
        "<div class='cookie'>We use cookies to improve your experience. Accept all cookies.</div>"
        "<aside><h3>Trending</h3><ul><li>Ten gadgets you need</li><li>Celebrity news</li></ul>"
        "</aside>"
        f"<main><article><h1>{title}</h1>{body}</article></main>"
        "<footer>Copyright 2026 Example Media. All rights reserved. Terms. Privacy.</footer>"
        "</body></html>"
    )


def html_reply(markup: str, *, charset: str | None = "utf-8", status: int = 200) -> Reply:
    """An HTML page (``charset`` None: the header does not say)."""
    ctype = "text/html" + (f"; charset={charset}" if charset else "")
    return Reply(status, markup.encode(charset or "utf-8"), headers={"content-type": ctype})


def make_pdf(lines: list[str], title: str | None = None) -> bytes:
    """A one-page PDF whose text is ``lines`` (Helvetica), written by hand, xref and all."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
    for line in lines:
        ops += [f"({esc(line)}) Tj", "T*"]
    ops.append("ET")
    stream = zlib.compress("\n".join(ops).encode("latin-1"))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream
        + b"\nendstream",
    ]
    if title is not None:
        objects.append(f"<< /Title ({esc(title)}) >>".encode("latin-1"))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, info, xref,
    )
    return bytes(out)


class LoopbackWeb(LoopbackServer):
    """Serves ``GET`` routes from :attr:`routes` (path without query → reply)."""

    def __init__(self, routes: Mapping[str, Route] | None = None) -> None:
        super().__init__()
        self.routes: dict[str, Route] = dict(routes or {})

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            route = self.routes.get(request.path.split("?")[0])
        if request.method != "GET" or route is None:
            return Reply(404, b"<html><title>Not found</title></html>",
                         headers={"content-type": "text/html"})
        return route(request) if callable(route) else route


def _query(request: RecordedRequest) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(request.path).query).items()}


class SearxngServer(LoopbackServer):
    """SearXNG's JSON API: ``GET /search?q=…&format=json``; 403 without ``format=json``."""

    def __init__(self, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.results = results or []

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued(request) if callable(queued) else queued
        if request.method != "GET" or urlsplit(request.path).path != "/search":
            return Reply(404, "Not Found", headers={"content-type": "text/html"})
        query = _query(request)
        if query.get("format") != "json":
            return Reply(403, "Forbidden", headers={"content-type": "text/html"})
        return Reply(200, {
            "query": query.get("q", ""),
            "number_of_results": len(self.results),
            "results": [
                {"url": r["url"], "title": r["title"], "content": r["snippet"],
                 "engine": "duckduckgo", "engines": ["duckduckgo"], "score": 1.0,
                 "category": "general", "positions": [i + 1]}
                for i, r in enumerate(self.results)
            ],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": [],
        })


class BraveServer(LoopbackServer):
    """Brave Search's ``GET /res/v1/web/search`` with ``X-Subscription-Token``."""

    def __init__(self, key: str, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.key = key
        self.results = results or []

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued(request) if callable(queued) else queued
        if request.method != "GET" or urlsplit(request.path).path != "/res/v1/web/search":
            return Reply(404, {"type": "ErrorResponse", "error": {"status": 404}})
        if request.headers.get("x-subscription-token") != self.key:
            return Reply(401, {"type": "ErrorResponse", "error": {
                "code": "SUBSCRIPTION_TOKEN_INVALID", "status": 401,
                "detail": "The provided subscription token is invalid."}})
        query = _query(request)
        count = int(query.get("count", "20"))
        return Reply(200, {
            "type": "search",
            "query": {"original": query.get("q", ""), "more_results_available": False},
            "web": {"type": "search", "family_friendly": True, "results": [
                {"type": "search_result", "title": r["title"], "url": r["url"],
                 "description": f"<strong>{r['snippet']}</strong>", "language": "en",
                 "profile": {"name": "Example"}}
                for r in self.results[:count]
            ]},
        })


class TavilyServer(LoopbackServer):
    """Tavily's ``POST /search`` with ``Authorization: Bearer tvly-…``."""

    path = "/search"

    def __init__(self, key: str, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__(api_key=key)
        self.results = results or []

    def unauthorized(self, request: RecordedRequest) -> Reply:
        return Reply(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})

    def default_reply(self, request: RecordedRequest) -> Reply:
        body = request.json()
        limit = int(body.get("max_results", 5))
        return Reply(200, {
            "query": body.get("query", ""), "follow_up_questions": None, "answer": None,
            "images": [],
            "results": [
                {"title": r["title"], "url": r["url"], "content": r["snippet"],
                 "score": 0.9 - i / 100, "raw_content": None}
                for i, r in enumerate(self.results[:limit])
            ],
            "response_time": 0.42,
        })
