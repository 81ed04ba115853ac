"""`fanout mcp` as a client meets it: a real server process, reached through the official
MCP client over stdio or streamable HTTP, with local documents and a scripted model (no
network, no key)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "mcp-door-test-token"
SCRIPTED_TOOLS = """\
# The lead plans two subtasks: one reads the folder, one's model is refused (a gap).
model:
  provider: scripted
  latency_s: 0.01
  turns:
    lead:
      - subtasks:
          - {id: tandem, query: "perovskite tandem efficiency", tools: [docs.search, docs.read]}
          - {id: prices, query: "tandem module prices", tools: [docs.search]}
      - text: "Perovskite-silicon tandem cells reached 33.9 percent [1]."
    tandem:
      - calls: [{tool: docs.read, args: {path: perovskite.md}}]
      - text: "33.9 percent in the lab (perovskite.md)."
    prices:
      - error: auth
        message: "the key was revoked"
"""
# One subtask ends at once, the other waits an hour: cancelled between the two, the run
# keeps the first's findings and a gap for the second.
HALF_DONE_JOB = """\
scenario: mcp-half-done
seed: 1
job:
  query: "one quick subtask, one stuck"
  concurrency: 2
  defaults: {tool_timeout_s: 7200}
  subtasks:
    - {id: quick, query: "the quick one", tools: [fast], plan: [{call: fast, args: {}}]}
    - {id: stuck, query: "the stuck one", tools: [slow], plan: [{call: slow, args: {}}]}
tools:
  fast: {latency_s: 0.01, responses: [{ok: {results: ["found at once"]}}]}
  slow: {latency_s: 3600, responses: [{ok: {results: ["found an hour later"]}}]}
"""
QUICK_JOB = """\
scenario: mcp-quick
seed: 1
job:
  query: "two quick subtasks"
  subtasks:
    - {id: one, query: "the first", tools: [fast], plan: [{call: fast, args: {}}]}
    - {id: two, query: "the second", tools: [fast], plan: [{call: fast, args: {}}]}
tools:
  fast: {latency_s: 0.5, responses: [{ok: {results: ["found"]}}]}
"""


@pytest.fixture
def anyio_backend() -> str:
    """Real time on asyncio: the server is another process, on the wall's clock."""
    return "asyncio"


def make_papers(tmp: Path) -> Path:
    """A folder of two documents to serve."""
    papers = tmp / "papers"
    papers.mkdir(exist_ok=True)
    (papers / "perovskite.md").write_text(
        "# Perovskite tandem cells\n\nPerovskite-silicon tandem cells reached 33.9 percent "
        "efficiency in the lab.\n")
    (papers / "sodium.md").write_text("# Sodium-ion\n\nSodium-ion cells cost less.\n")
    return papers


def environ(tmp: Path) -> dict[str, str]:
    """The server's environment: no model key, no search backend, no token of the machine."""
    dropped = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "FANOUT_SEARCH",
               "FANOUT_TOKEN", "FANOUT_STORE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}


def mcp_command(tmp: Path, *extra: str) -> list[str]:
    """``fanout mcp`` on the test's own store."""
    return [sys.executable, "-m", "coordinator.cli", "mcp", "--store",
            str(tmp / "runs.sqlite"), *extra]


@asynccontextmanager
async def over_stdio(tmp: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """A client session with ``fanout mcp`` started over stdio, as Claude Desktop starts it."""
    command = mcp_command(tmp, *extra)
    params = StdioServerParameters(command=command[0], args=command[1:], env=environ(tmp),
                                   cwd=str(tmp))
    # The server's stderr goes to a file the SDK writes from its own thread; opening it is
    # a local file's open, once per session.
    with open(tmp / "stdio-stderr.log", "w", encoding="utf-8") as errlog:  # noqa: ASYNC230
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
            read, write
        ) as session:
            await session.initialize()
            yield session


@dataclass
class HttpServer:
    """``fanout mcp --http`` in a process of its own."""

    proc: subprocess.Popen[str]
    url: str
    log: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=10)
        if self.reader is not None:
            self.reader.join(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def start_http(tmp: Path, *extra: str, token: str | None = TOKEN,
               host: str = "127.0.0.1") -> HttpServer:
    """Start ``fanout mcp --http HOST:0`` and wait for the line naming its URL."""
    env = environ(tmp) | ({"FANOUT_TOKEN": token} if token else {})
    proc = subprocess.Popen(mcp_command(tmp, "--http", f"{host}:0", *extra), env=env,
                            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:  # ends when the process does; pytest's timeout bounds it
        lines.append(line)
        if "streamable HTTP on " in line:
            url = line.split("streamable HTTP on ", 1)[1].split()[0]
            # Keep reading, so the server never blocks on a full pipe.
            reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()),
                                      daemon=True)
            reader.start()
            return HttpServer(proc, url, lines, reader)
    proc.wait(timeout=30)
    proc.stderr.close()
    raise AssertionError(f"fanout mcp --http did not start: {''.join(lines)}")


@asynccontextmanager
async def over_http(url: str, token: str | None = TOKEN) -> AsyncIterator[ClientSession]:
    """A client session with a running ``fanout mcp --http``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    """The text of a tool result's first content block."""
    return str(result.content[0].text)
