"""Whether a model endpoint is this machine's or its network's (a local server)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_local"]


def is_local(base_url: str | None) -> bool:
    """True when ``base_url`` names this machine or a private network address."""
    host = urlsplit(base_url or "").hostname
    if host is None:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
