"""The address guard, for real: loopback, private, link-local and metadata are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from subagents.executor import execute_tool_safely
from subagents.research.fetch import WebFetcher
from subagents.research.guard import AddressGuard, blocked_reason, system_resolver
from subagents.research.spec import FetchSpec
from subagents.research.tools import _fetch_tool
from tests.subagents.research.conftest import Web

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        pytest.param("127.0.0.1", "a loopback address", id="loopback4"),
        pytest.param("::1", "a loopback address", id="loopback6"),
        pytest.param("10.1.2.3", "a private address", id="10/8"),
        pytest.param("172.16.0.1", "a private address", id="172.16/12"),
        pytest.param("192.168.1.1", "a private address", id="192.168/16"),
        pytest.param("169.254.169.254", "a cloud metadata address", id="aws-metadata"),
        pytest.param("fd00:ec2::254", "a cloud metadata address", id="aws-metadata6"),
        pytest.param("169.254.1.1", "a link-local address", id="link-local"),
        pytest.param("fe80::1", "a link-local address", id="link-local6"),
        pytest.param("100.64.0.1", "a shared (carrier-grade NAT) address", id="cgnat"),
        pytest.param("0.0.0.0", "an unspecified address", id="unspecified"),
        pytest.param("::ffff:127.0.0.1", "a loopback address", id="v4-mapped"),
        pytest.param("fc00::1", "a private address", id="ula"),
        pytest.param("224.0.0.1", "a multicast address", id="multicast"),
    ],
)
def test_non_public_addresses_are_refused(ip: str, reason: str) -> None:
    """Every address that reaches the machine's own networks has a reason to be refused."""
    assert blocked_reason(ip) == reason


def test_public_addresses_pass() -> None:
    """A public address has no reason to be refused."""
    assert blocked_reason("93.184.216.34") is None
    assert blocked_reason("2606:4700::1111") is None


async def test_the_system_resolver_and_guard_refuse_localhost() -> None:
    """`localhost` resolved by the system resolver is loopback: refused before any dial."""
    assert "127.0.0.1" in await system_resolver("localhost", 80)
    guard = AddressGuard()
    with pytest.raises(Exception, match="loopback"):
        await guard.vet("localhost", 80)


@pytest.fixture
async def guarded(web: Web) -> AsyncIterator[WebFetcher]:
    f = WebFetcher(FetchSpec(timeout_s=5), guard=web.guard())
    try:
        yield f
    finally:
        await f.aclose()


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/to-loopback", id="redirect-to-127.0.0.1"),
        pytest.param("/to-metadata", id="redirect-to-169.254.169.254"),
        pytest.param("/to-metadata-name", id="redirect-to-a-name-of-169.254.169.254"),
    ],
)
async def test_redirects_into_the_machines_network_are_refused(
    guarded: WebFetcher, web: Web, path: str
) -> None:
    """A public page redirecting to loopback or metadata (by IP or by name) is refused."""
    before = len(web.server.requests)
    result = await execute_tool_safely(_fetch_tool(guarded), {"url": web.url(path)}, timeout=10)
    assert (result.category, result.error_type, result.field) == (
        "validation", "blocked_address", "url")
    assert "refused" in (result.message or "")
    # Only the public page was asked; the redirect's target never was.
    assert len(web.server.requests) == before + 1


async def test_a_name_with_any_private_answer_is_refused(guarded: WebFetcher, web: Web) -> None:
    """A name that resolves to a public and a private address is refused (rebinding)."""
    result = await execute_tool_safely(
        _fetch_tool(guarded), {"url": "http://split.test/article"}, timeout=10
    )
    assert result.error_type == "blocked_address"


async def test_a_loopback_url_is_refused_without_allow_private(web: Web) -> None:
    """http://127.0.0.1:PORT is refused by the real guard, and allowed with allow_private."""
    url = f"http://127.0.0.1:{web.server.port}/article"
    refused = WebFetcher(FetchSpec())
    allowed = WebFetcher(FetchSpec(allow_private=True))
    try:
        no = await execute_tool_safely(_fetch_tool(refused), {"url": url}, timeout=10)
        yes = await execute_tool_safely(_fetch_tool(allowed), {"url": url}, timeout=10)
    finally:
        await refused.aclose()
        await allowed.aclose()
    assert no.error_type == "blocked_address" and "loopback" in (no.message or "")
    assert yes.ok and yes.data["title"] == "Sodium-ion cells pass 160 Wh/kg"
