"""``web.fetch``: one page off the web, as readable text with its title and final URL.

Redirects are followed by hand (each hop checked: scheme, count, and — through the
guarded transport — the address), the body is read up to ``max_bytes`` (more is an ok
result with ``complete: false``, docs/design.md §10), and the text is extracted in a worker
thread: HTML's main text, a PDF's pages, plain text decoded whatever its charset. A
binary body (an image, an archive) is refused as a ``validation`` failure naming the URL:
the model should fetch something else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
import httpx

from subagents.research.errors import http_failure, invalid, timed_out, unreachable
from subagents.research.extract import (
    Extracted,
    decode,
    extract_html,
    extract_pdf,
    kind_of,
    title_of_text,
)
from subagents.research.guard import AddressGuard, guarded_transport
from subagents.research.spec import FetchSpec
from subagents.tool import ToolOutput

__all__ = ["USER_AGENT", "WebFetcher", "check_url"]

TOOL = "web.fetch"
USER_AGENT = "fanout-research/0.1 (+https://github.com/; a research agent's page fetcher)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 65536
_ACCEPT = "text/html,application/pdf,text/*;q=0.9,*/*;q=0.5"


def check_url(url: str, tool: str = TOOL) -> httpx.URL:
    """``url`` as an http(s) URL with a host, or a validation failure naming ``url``."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise invalid(tool, "url", "an http(s) URL", f"{url!r} is not a URL ({exc})",
                      "invalid_url") from None
    if parsed.scheme not in ("http", "https"):
        raise invalid(
            tool, "url", "an http(s) URL",
            f"scheme {parsed.scheme or '(none)'!r} is not fetched (only http and https)",
            "unsupported_scheme",
        )
    if not parsed.host:
        raise invalid(tool, "url", "an http(s) URL with a host", f"{url!r} has no host",
                      "invalid_url")
    return parsed


class WebFetcher:
    """Fetches pages for ``web.fetch`` over one shared, guarded httpx client."""

    def __init__(
        self,
        spec: FetchSpec,
        *,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.spec = spec
        guard = guard or AddressGuard(allow_private=spec.allow_private)
        self.client = httpx.AsyncClient(
            transport=transport or guarded_transport(guard),
            follow_redirects=False,
            timeout=httpx.Timeout(spec.timeout_s),
            headers={"User-Agent": USER_AGENT, "Accept": _ACCEPT},
            # No proxy from the environment: a proxy would dial for us, past the guard.
            trust_env=False,
        )

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()

    async def fetch(self, url: str) -> ToolOutput:
        """The page at ``url``: ``{url, final_url, title, text, content_type, fetched_at,
        truncated}``; failures raise classified research tool errors."""
        target = check_url(url)
        try:
            with anyio.fail_after(self.spec.timeout_s):
                return await self._fetch(url, target)
        except TimeoutError:
            raise timed_out(TOOL, url, self.spec.timeout_s) from None

    async def _fetch(self, url: str, target: httpx.URL) -> ToolOutput:
        hops = 0
        while True:
            try:
                response = await self.client.send(
                    self.client.build_request("GET", target), stream=True
                )
            except httpx.TimeoutException:
                raise timed_out(TOOL, str(target), self.spec.timeout_s) from None
            except httpx.TransportError as exc:
                raise unreachable(TOOL, str(target), f"{type(exc).__name__}: {exc}") from None
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    hops += 1
                    if hops > self.spec.max_redirects:
                        raise invalid(
                            TOOL, "url", f"a URL that arrives within {self.spec.max_redirects} "
                            "redirects", f"{url} redirects more than {self.spec.max_redirects} "
                            "times", "too_many_redirects",
                        )
                    target = check_url(str(target.join(location)))
                    continue
                if response.status_code >= 400 or response.status_code < 200:
                    raise http_failure(
                        TOOL, response.status_code, str(target),
                        retry_after=response.headers.get("retry-after"),
                    )
                body, truncated = await self._read(response)
            finally:
                await response.aclose()
            return await self._page(url, target, response, body, truncated)

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        """The body, decoded from its transfer encoding, up to ``max_bytes`` (and whether
        there was more). Counting decoded bytes also stops a compression bomb early."""
        limit = self.spec.max_bytes
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes(_CHUNK):
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    break
        except httpx.TimeoutException:
            raise timed_out(TOOL, str(response.url), self.spec.timeout_s) from None
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise unreachable(TOOL, str(response.url), f"{type(exc).__name__}: {exc}") from None
        body = b"".join(parts)
        return body[:limit], size > limit

    async def _page(
        self, url: str, final: httpx.URL, response: httpx.Response, body: bytes, truncated: bool
    ) -> ToolOutput:
        ctype = response.headers.get("content-type", "")
        kind = kind_of(ctype, final.path, body[:4096])
        if kind is None:
            raise invalid(
                TOOL, "url", "a page of HTML, text or PDF",
                f"{final} is {ctype.split(';')[0] or 'binary data'}, not a readable page",
                "unreadable_content",
            )
        extracted = await anyio.to_thread.run_sync(
            _extract, kind, body, ctype, str(final), truncated
        )
        data: dict[str, Any] = {
            "url": url,
            "final_url": str(final),
            "title": extracted.title,
            "text": extracted.text,
            "content_type": ctype.split(";", 1)[0].strip() or kind,
            "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "truncated": truncated,
        }
        return ToolOutput(data=data, empty=not extracted.text.strip(), complete=not truncated)


def _extract(kind: str, body: bytes, ctype: str, url: str, truncated: bool) -> Extracted:
    if kind == "pdf":
        try:
            return extract_pdf(body)
        except ValueError:
            if truncated:
                # A cut PDF cannot be parsed: say so in the (partial) result.
                return Extracted(title="", text="")
            raise invalid(
                TOOL, "url", "a readable PDF", f"{url} is not a readable PDF", "unreadable_content"
            ) from None
    text = decode(body, ctype)
    if kind == "html":
        return extract_html(text, url)
    return Extracted(title=title_of_text(text), text=text)
