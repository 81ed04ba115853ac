"""An MCP server a job declares (``mcp_servers``), and the error of one that cannot start.

This module imports nothing from the ``mcp`` package, so loading a job file stays cheap;
:mod:`subagents.mcp.server` runs what it describes.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from shared.errors import FanoutError

SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
"""A server's name: its tools are called ``SERVER.TOOL``, so the name holds no dot."""

# A leading `python` means "the interpreter running fanout": inside a virtualenv the bare
# name may find another Python that lacks the server's package.
_PYTHON_NAMES = frozenset({"python", "python3"})


class McpServerSpec(BaseModel):
    """How to start one MCP server over stdio, and how many calls it takes at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        min_length=1,
        description=(
            "The program and its arguments, e.g. [python, -m, mcp_server_time]; a leading "
            "python runs the interpreter that runs fanout."
        ),
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables, over a minimal inherited set (PATH, HOME...).",
    )
    cwd: str | None = Field(
        default=None,
        description="The server's working directory; relative to the job file's directory.",
    )
    max_concurrent_calls: int = Field(
        default=4, ge=1, description="How many calls this server runs at once; others wait."
    )
    startup_timeout_s: float = Field(
        default=20.0, gt=0, description="Seconds for the server to start and list its tools."
    )

    def argv(self) -> list[str]:
        """The command as it is run: a leading ``python`` is the current interpreter."""
        program, *args = self.command
        if program in _PYTHON_NAMES:
            program = sys.executable
        return [program, *args]

    def display(self) -> str:
        """The command as written in the job file, quoted for a shell."""
        return shlex.join(self.command)


class McpServerError(FanoutError):
    """An MCP server a job declares cannot be used: nothing runs (exit code 2)."""

    def __init__(self, server: str, command: str, problem: str) -> None:
        self.server = server
        self.command = command
        self.problem = problem
        super().__init__(f"MCP server {server!r} ({command}): {problem}")


class McpServerStartError(McpServerError):
    """A server that cannot start: bad command, exits at once, or never finishes initialize."""
