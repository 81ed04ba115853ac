"""The address guard: web tools never reach the machine's own network unless allowed.

Every connection the web tools open goes through :class:`GuardedBackend`, an httpcore
network backend that resolves the host itself, refuses the connection when any address
it resolves to is loopback, private, link-local, multicast, reserved, unspecified,
shared (CGNAT) or a cloud metadata address, and then dials the vetted address — so a
redirect, a second DNS answer (rebinding) or a proxy cannot slip past the check: it is
made where the socket is opened, for every hop. ``allow_private=True`` turns it off.

The resolver and the dialler are seams: tests resolve made-up host names to public
addresses and dial them on loopback, so the guard runs for real against a loopback web.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
import httpcore
import httpx

from subagents.research.errors import invalid

__all__ = [
    "AddressGuard",
    "Dialler",
    "GuardedBackend",
    "Resolver",
    "blocked_reason",
    "guarded_transport",
    "system_resolver",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port)`` → the IP addresses it resolves to."""

Dialler = Callable[[str, int], tuple[str, int]]
"""Where to dial a vetted ``(ip, port)``: the identity in production."""

# Cloud metadata services answer on these (AWS, GCP, Azure, Oracle, Alibaba, AWS IPv6).
_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200",
                                      "fd00:ec2::254")
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")


def blocked_reason(ip: str) -> str | None:
    """Why ``ip`` must not be reached from a guarded tool, or None when it may."""
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped or address.sixtofour
        if mapped is not None:
            return blocked_reason(str(mapped))
    if address in _METADATA:
        return "a cloud metadata address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_private or address.is_reserved or not address.is_global:
        return "a private address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system resolver (every family)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class AddressGuard:
    """Decides which addresses a tool may connect to, and resolves hosts for it."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        dial: Dialler | None = None,
        tool: str = "web.fetch",
        field: str = "url",
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver or system_resolver
        self.dial = dial or (lambda ip, port: (ip, port))
        self.tool = tool
        # The argument a refusal names: web.fetch's url; web.search's query (its backend's
        # address is no argument of the call).
        self.field = field

    async def vet(self, host: str, port: int) -> str:
        """The address to connect to for ``host``; raises a validation failure naming the
        URL when the host does not resolve or resolves to a refused address."""
        literal = _literal_ip(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = await self.resolver(host, port)
            except OSError as exc:  # socket.gaierror: the name does not resolve
                raise invalid(
                    self.tool,
                    self.field,
                    "a URL whose host resolves",
                    f"host {host!r} does not resolve ({exc.strerror or exc})",
                    "unresolvable_host",
                ) from None
            if not addresses:
                raise invalid(
                    self.tool, self.field, "a URL whose host resolves",
                    f"host {host!r} does not resolve", "unresolvable_host",
                )
        if not self.allow_private:
            for address in addresses:
                reason = blocked_reason(address)
                if reason is not None:
                    # Every answer must be public: a name that also resolves to a private
                    # address could be dialled there on the next connection.
                    raise invalid(
                        self.tool,
                        self.field,
                        "a public http(s) URL (loopback, private, link-local and metadata "
                        "addresses are refused)",
                        f"host {host!r} is {reason} ({address}); refused",
                        "blocked_address",
                    )
        return addresses[0]


def _literal_ip(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that vets every host before it dials."""

    def __init__(self, guard: AddressGuard) -> None:
        self.guard = guard
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve and vet ``host``, then connect to the vetted address."""
        address = await self.guard.vet(host, port)
        ip, dial_port = self.guard.dial(address, port)
        return await self.inner.connect_tcp(
            ip, dial_port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: a web tool has no business with local sockets."""
        raise httpcore.ConnectError("web tools do not connect to local sockets")

    async def sleep(self, seconds: float) -> None:
        """Sleep on the event loop."""
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport with its connection pool dialling through the guard."""

    def __init__(self, guard: AddressGuard) -> None:
        super().__init__(trust_env=False)
        # httpx does not take a network backend; the pool it builds is replaced by the
        # same pool over the guarded backend (TLS still verifies the host's name: the
        # pool starts TLS with the URL's host, whatever address was dialled).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            http1=True,
            http2=False,
            network_backend=GuardedBackend(guard),
        )


def guarded_transport(guard: AddressGuard) -> httpx.AsyncBaseTransport:
    """An httpx transport whose every connection the guard vetted first."""
    return _GuardedTransport(guard)
