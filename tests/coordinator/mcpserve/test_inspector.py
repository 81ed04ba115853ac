"""`fanout mcp` with a client no one here wrote: the MCP Inspector's command line.

``.ci/run`` installs it (``npm install --prefix .ci/inspector``, the version pinned in
``.ci/inspector/package.json``). Under CI (``CI`` set) a missing inspector fails the test,
as a missing chromium does; elsewhere it is skipped with how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.coordinator.mcpserve.conftest import (
    ROOT,
    TOKEN,
    environ,
    make_papers,
    mcp_command,
    start_http,
)

# The inspector (Node) and `fanout mcp` run as processes of their own (tests/tiers.py).
pytestmark = pytest.mark.process

INSPECTOR = ROOT / ".ci" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def inspector() -> str:
    """The installed inspector; a failure under CI, a skip elsewhere."""
    if INSPECTOR.exists() and shutil.which("node") is not None:
        return str(INSPECTOR)
    reason = ("the MCP Inspector is not installed: npm install --prefix .ci/inspector "
              "(.ci/run does)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _inspect(tmp: Path, *args: str) -> dict[str, Any]:
    """One inspector command; its JSON output."""
    # The inspector keeps a catalog of servers in the home folder unless told otherwise.
    env = environ(tmp) | {"MCP_CATALOG_PATH": str(tmp / "catalog.json")}
    # Its connect timeout is 15 s by default: a loaded machine's `fanout mcp` took longer
    # to start (the imports, the docs folder indexed), so allow the test's own limit.
    done = subprocess.run([inspector(), "--cli", "--connect-timeout", "100000", *args],
                          env=env, cwd=tmp,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_the_inspector_lists_the_tools_and_calls_ask_over_stdio(tmp_path: Path) -> None:
    """tools/list shows the seven tools with their schemas; tools/call ask answers with a
    cited retrieval-only answer in its structured content."""
    server = mcp_command(tmp_path, "--docs", str(make_papers(tmp_path)))
    listed = _inspect(tmp_path, *server, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"ask", "run_job", "get_report", "list_runs", "cancel_run",
                     "decide", "review_plan"}
    assert "question" in tools["ask"]["inputSchema"]["properties"]
    assert "sources" in tools["ask"]["outputSchema"]["properties"]
    called = _inspect(tmp_path, *server, "--method", "tools/call", "--tool-name", "ask",
                      "--tool-arg", "question=How efficient are tandem cells?")
    assert called["isError"] is False
    data = called["structuredContent"]
    assert data["status"] == "finished" and data["answer_kind"] == "extractive"
    assert "perovskite.md" in {s["path"] for s in data["sources"]}
    assert "Sources:" in called["content"][0]["text"]


def test_the_inspector_reaches_the_http_server_with_the_token(tmp_path: Path) -> None:
    """Over streamable HTTP with the bearer token, the inspector lists the tools."""
    inspector()  # before the server starts: nothing to stop when it is missing
    server = start_http(tmp_path)
    try:
        listed = _inspect(tmp_path, "--transport", "http", "--server-url", server.url,
                          "--header", f"Authorization: Bearer {TOKEN}",
                          "--method", "tools/list")
    finally:
        assert server.stop() == 0, "".join(server.log)
    assert {t["name"] for t in listed["tools"]} == {"ask", "run_job", "get_report",
                                                     "list_runs", "cancel_run", "decide",
                                                     "review_plan"}
