"""Who may use the service: a bearer token, compared in constant time (docs/design.md §8).

With a token set, every request needs ``Authorization: Bearer TOKEN``, the page and
``/openapi.json`` included. Two things a browser cannot do get their own answer:

* navigating to ``/`` sends no header: the 401 carries the page itself, which holds no
  data and shows a sign-in form; the page keeps the token in ``sessionStorage`` (gone
  when the tab closes) and sends it with every ``fetch``;
* ``EventSource`` cannot send a header: the page asks ``POST /runs/{id}/ticket`` for a
  ticket, an HMAC of the run id and an expiry under a key derived from the token, and
  opens ``/runs/{id}/events?ticket=...``. A ticket opens that run's stream only, for
  ``ticket_ttl_s``, so what lands in an access log is not the token.

Without a token (loopback only, see ``check_bind``) requests must name a loopback host,
so a web page elsewhere cannot reach the service through DNS rebinding.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from coordinator.serve.server import is_loopback

_BEARER = HTTPBearer(
    auto_error=False,
    description="The token of FANOUT_TOKEN or the first line of --token-file.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]


class Unauthorized(HTTPException):
    """401: no token, or the wrong one."""

    def __init__(self, detail: str) -> None:
        super().__init__(401, detail, headers={"WWW-Authenticate": 'Bearer realm="fanout"'})


class LoginRequired(Unauthorized):
    """401 for the page: answered with the page, which asks for the token."""


class WrongHost(HTTPException):
    """400: a token-less service reached under a name that is not loopback."""

    def __init__(self, host: str) -> None:
        super().__init__(400, f"Host {host!r} is not a loopback name; this service has no token")


def _host_name(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Authorizer:
    """The token check, as the dependencies the routers declare once each."""

    def __init__(self, token: str | None, *, ticket_ttl_s: float) -> None:
        self._token = token.encode() if token is not None else None
        self._ticket_key = (
            hmac.new(self._token, b"fanout event-stream ticket", hashlib.sha256).digest()
            if self._token is not None
            else b""
        )
        self.ticket_ttl_s = ticket_ttl_s

    @property
    def required(self) -> bool:
        """True when requests need the token."""
        return self._token is not None

    def _valid(self, credentials: HTTPAuthorizationCredentials | None) -> bool:
        if self._token is None:
            return True
        if credentials is None:
            return False
        return hmac.compare_digest(credentials.credentials.encode(), self._token)

    def _check_host(self, request: Request) -> None:
        if self._token is None:
            host = _host_name(request.headers.get("host", ""))
            if not is_loopback(host):
                raise WrongHost(host)

    async def api(self, request: Request, credentials: Credentials) -> None:
        """Every API route: the bearer token."""
        self._check_host(request)
        if not self._valid(credentials):
            raise Unauthorized("a valid bearer token is required" if credentials
                               else "missing Authorization: Bearer TOKEN")

    async def page(self, request: Request, credentials: Credentials) -> None:
        """The page: the bearer token, else the page that asks for it (still a 401)."""
        self._check_host(request)
        if not self._valid(credentials):
            raise LoginRequired("sign in with the service's token")

    async def stream(
        self,
        request: Request,
        run_id: str,
        credentials: Credentials,
        ticket: Annotated[str | None, Query(description="From POST /runs/{id}/ticket.")] = None,
    ) -> None:
        """A run's event stream: the bearer token, or a ticket for this run."""
        self._check_host(request)
        if self._valid(credentials):
            return
        if ticket is not None and self._ticket_valid(run_id, ticket):
            return
        raise Unauthorized("a valid bearer token or stream ticket is required")

    def ticket_for(self, run_id: str) -> tuple[str, int]:
        """A ticket for ``run_id``'s event stream and its lifetime in seconds."""
        expires = int(time.time() + self.ticket_ttl_s)
        return f"{expires}.{self._sign(run_id, expires)}", int(self.ticket_ttl_s)

    def _sign(self, run_id: str, expires: int) -> str:
        message = f"{run_id}\n{expires}".encode()
        return hmac.new(self._ticket_key, message, hashlib.sha256).hexdigest()

    def _ticket_valid(self, run_id: str, ticket: str) -> bool:
        if self._token is None:
            return True
        stamp, _, signature = ticket.partition(".")
        if not stamp.isdigit() or int(stamp) < time.time():
            return False
        return hmac.compare_digest(signature.encode(), self._sign(run_id, int(stamp)).encode())
