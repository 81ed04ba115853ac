"""What ``ask(tools=[...])`` accepts, sorted into Python tools and MCP servers (docs/design.md §14).

A tool is a Python function (sync or async: its type hints become the schema, its
docstring the description), a :class:`~subagents.tool.Tool`, an MCP server spec
``{"mcp": {"command": [...]}}`` (optionally ``"name"`` beside ``"mcp"``: its tools are
called ``NAME.TOOL``), or one of the strings ``"web"`` and ``"docs:DIR"`` for the
built-in research tools. Every string goes through :func:`research_tools`: it becomes the
job's ``research_tools`` block, opened and recorded like a job file's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.mcp.spec import SERVER_NAME_PATTERN
from subagents.tool import Tool

__all__ = ["ToolLike", "ToolSet", "research_tools", "sort_tools"]

ToolLike = Callable[..., Any] | Tool | str | Mapping[str, Any]
"""One entry of ``tools=``: a function, a Tool, ``"web"``, ``"docs:DIR"`` or an MCP spec."""

_EXPECTED = "a function, a Tool, 'web', 'docs:DIR' or {'mcp': {'command': [...]}}"


@dataclass
class ToolSet:
    """``tools=`` sorted: Python tools by name, and MCP server blocks by server name."""

    tools: dict[str, Tool] = field(default_factory=dict)
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The built-in research tools (docs/design.md §10) as a job's `research_tools` block.
    research: dict[str, Any] = field(default_factory=dict)


def research_tools(spec: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``research_tools`` block a string names (docs/design.md §10).

    ``"web"`` searches with ``FANOUT_SEARCH`` (``searxng:URL``, ``brave`` or ``tavily``),
    ``"web:BACKEND"`` with the one named (``"web:searxng:http://127.0.0.1:8888"``);
    ``"docs:DIR"`` searches and reads the documents of folder DIR (indexed first).

    Raises:
        ValueError: the string names no research tool, or ``"web"`` has no backend.
    """
    import os

    from coordinator.jobfile.ask import parse_search_flag
    from shared.errors import InputFileError

    kind, colon, rest = spec.partition(":")
    if kind == "docs" and colon and rest:
        return {"docs": {"path": str(Path(rest).expanduser().resolve())}}
    if kind == "web":
        backend = rest if colon else (environ if environ is not None else os.environ).get(
            "FANOUT_SEARCH", ""
        )
        if not backend:
            raise ValueError(
                "tools: 'web' needs a search backend: set FANOUT_SEARCH (searxng:URL, brave "
                "or tavily), or write 'web:searxng:URL', 'web:brave' or 'web:tavily'"
            )
        try:
            return {"web": parse_search_flag(backend, option="tools")}
        except InputFileError as exc:
            raise ValueError(f"tools: {spec!r}: expected {exc.expected}") from None
    raise ValueError(f"tools: expected {_EXPECTED}, got {spec!r}")


def _server_name(index: int, entry: Mapping[str, Any], block: Mapping[str, Any]) -> str:
    """The server's name: ``name`` beside ``mcp``, else the command's program name."""
    name = entry.get("name")
    if name is None:
        command = block.get("command")
        program = command[0] if isinstance(command, list) and command else ""
        # "mcp-server-time" → "mcp-server-time"; "/usr/bin/x.py" → "x"; for a leading
        # python, the module after -m or the script.
        if isinstance(command, list) and Path(str(program)).name.startswith("python"):
            rest = [str(a) for a in command[1:]]
            if "-m" in rest and rest.index("-m") + 1 < len(rest):
                program = rest[rest.index("-m") + 1]
            elif rest:
                program = rest[0]
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(str(program)).stem)
        name = name or f"server{index}"
    if not isinstance(name, str) or not re.match(SERVER_NAME_PATTERN, name):
        raise ValueError(
            f"tools[{index}].name: expected a server name of letters, digits, _ and - "
            f"(its tools are NAME.TOOL), got {name!r}"
        )
    return name


def sort_tools(tools: Iterable[ToolLike]) -> ToolSet:
    """Sort ``tools=`` into Python tools and MCP server blocks.

    Raises:
        ValueError: an entry of no known kind, a duplicate name, or ``"web"`` /
            ``"docs:DIR"`` while the research tools are not available.
        TypeError: a function whose signature cannot be described (``*args``).
    """
    out = ToolSet()
    if isinstance(tools, str | Mapping) or callable(tools):
        # ask(tools=search) instead of tools=[search]: a mistake worth naming.
        raise ValueError(f"tools: expected a list of tools, got {tools!r}")
    for index, entry in enumerate(tools):
        found: list[Tool] = []
        if isinstance(entry, Tool):
            found = [entry]
        elif isinstance(entry, str):
            research = research_tools(entry)
            clash = set(research) & set(out.research)
            if clash:
                raise ValueError(f"tools[{index}]: a second {clash.pop()!r} research tool")
            out.research.update(research)
        elif isinstance(entry, Mapping):
            block = entry.get("mcp")
            if not isinstance(block, Mapping) or set(entry) - {"mcp", "name"}:
                raise ValueError(
                    f"tools[{index}]: expected {{'mcp': {{'command': [...]}}}} "
                    f"(and optionally 'name'), got {dict(entry)!r}"
                )
            name = _server_name(index, entry, block)
            if name in out.mcp_servers:
                raise ValueError(f"tools[{index}]: a second MCP server named {name!r}")
            out.mcp_servers[name] = dict(block)
        elif callable(entry):
            found = [Tool.from_function(entry)]
        else:
            raise ValueError(f"tools[{index}]: expected {_EXPECTED}, got {entry!r}")
        for tool in found:
            if tool.name in out.tools:
                raise ValueError(f"tools[{index}]: a second tool named {tool.name!r}")
            out.tools[tool.name] = tool
    return out
