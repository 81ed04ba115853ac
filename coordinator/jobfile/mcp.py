"""Jobs with real tools: start a job's MCP servers, check its calls, list their tools.

A job file's ``mcp_servers`` are started once per run and shared by every subagent
(:func:`job_servers`); before any subagent runs, every ``SERVER.TOOL`` the job calls or
allows must be a tool that server lists, else the job is refused like any bad input
file. The run serves the MCP tools next to the job's simulated tools (one
:func:`~subagents.toolsource.combine`), so one job may mix them. :func:`list_job_tools`
is what ``fanout tools`` shows.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from coordinator.jobfile.errors import suggest
from coordinator.jobfile.scenario import Scenario
from coordinator.jobfile.yamlpos import FieldPath, format_path
from shared.errors import InputFileError, InputFileErrors
from subagents.mcp.tools import McpToolSource, open_mcp_tools, tool_flags
from subagents.spec import CallStep

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

__all__ = [
    "ServerListing",
    "ToolListing",
    "job_servers",
    "list_job_tools",
    "tools_view",
]


@asynccontextmanager
async def job_servers(scenario: Scenario) -> AsyncIterator[McpToolSource | None]:
    """The scenario's MCP servers, started and checked; None when it declares none.

    Raises:
        McpServerStartError: a server cannot start.
        InputFileErrors: the job calls or allows a tool its server does not offer.
    """
    if not scenario.mcp_servers:
        yield None
        return
    base = Path(scenario.source).parent if scenario.source else None
    async with open_mcp_tools(scenario.mcp_servers, base_dir=base) as mcp:
        check_server_tools(scenario, mcp)
        yield mcp


def check_server_tools(scenario: Scenario, mcp: McpToolSource) -> None:
    """Refuse a job that names a ``SERVER.TOOL`` its running server does not list.

    Raises:
        InputFileErrors: one problem per unknown name, with the file's lines.
    """
    where: list[tuple[FieldPath, str]] = []
    for index, sub in enumerate(scenario.job.subtasks):
        path: FieldPath = ("job", "subtasks", index)
        where += [((*path, "tools", n), name) for n, name in enumerate(sub.tools)]
        where += [
            ((*path, "plan", n, "call"), step.call)
            for n, step in enumerate(sub.plan)
            if isinstance(step, CallStep)
        ]
    problems: list[InputFileError] = []
    for field_path, name in where:
        server, dot, _tool = name.partition(".")
        if not dot or server not in mcp.servers or name in mcp.tools:
            continue
        offered = sorted(t for t in mcp.tools if t.startswith(f"{server}."))
        close = suggest(name, offered)
        if close is not None:
            hint = f" (did you mean {close!r}?)"
        else:
            hint = f" ({', '.join(offered)})" if offered else " (it lists none)"
        problems.append(
            InputFileError(
                scenario.source or scenario.scenario,
                scenario.line_of(field_path),
                format_path(field_path),
                f"a tool MCP server {server!r} offers{hint}",
                got=repr(name),
            )
        )
    if problems:
        raise InputFileErrors(problems)



class ToolListing(BaseModel):
    """One tool a server offers, as ``fanout tools --json`` shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tool: str
    description: str
    input_schema: dict[str, Any]
    side_effects: bool
    idempotent: bool


class ServerListing(BaseModel):
    """One server of a job: its command, what it says it is, and its tools."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: str
    command: list[str]
    server_name: str | None
    server_version: str | None
    tools: list[ToolListing]


async def list_job_tools(scenario: Scenario) -> list[ServerListing]:
    """Start the job's servers, list their tools, stop them.

    Raises:
        McpServerStartError: a server cannot start.
    """
    if not scenario.mcp_servers:
        return []
    base = Path(scenario.source).parent if scenario.source else None
    listings: list[ServerListing] = []
    async with open_mcp_tools(scenario.mcp_servers, base_dir=base) as mcp:
        for name, server in mcp.servers.items():
            tools = []
            for tool in server.tools:
                side_effects, idempotent = tool_flags(tool)
                tools.append(
                    ToolListing(
                        name=f"{name}.{tool.name}",
                        tool=tool.name,
                        description=tool.description or tool.title or "",
                        input_schema=dict(tool.input_schema),
                        side_effects=side_effects,
                        idempotent=idempotent,
                    )
                )
            info = server.server_info
            listings.append(
                ServerListing(
                    server=name,
                    command=list(server.spec.command),
                    server_name=info.name if info else None,
                    server_version=info.version if info else None,
                    tools=tools,
                )
            )
    return listings


def _first_sentence(text: str, limit: int = 80) -> str:
    text = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parameters(schema: Mapping[str, Any]) -> Text:
    """A schema's parameters: name (``*`` if required) and type, its description below."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return Text("(none)", style="dim")
    required = set(schema.get("required") or ())
    text = Text()
    for i, (name, prop) in enumerate(props.items()):
        prop = prop if isinstance(prop, Mapping) else {}
        if i:
            text.append("\n")
        text.append(str(name), style="bold")
        text.append("*" if name in required else "", style="red")
        kind = prop.get("type") or ("enum" if "enum" in prop else "any")
        text.append(f" {kind if isinstance(kind, str) else '|'.join(map(str, kind))}")
        if "default" in prop:
            text.append(f" = {prop['default']!r}", style="dim")
        description = prop.get("description")
        if isinstance(description, str) and description.strip():
            text.append(f"\n  {_first_sentence(description)}", style="dim")
    return text


def tools_view(listings: list[ServerListing]) -> RenderableType:
    """A table per server: each tool, its parameters (``*`` = required) and its effects."""
    parts: list[RenderableType] = []
    for listing in listings:
        who = " ".join(p for p in (listing.server_name, listing.server_version) if p)
        table = Table(
            title=f"[bold]{listing.server}[/]  {who}  [dim]{' '.join(listing.command)}[/]",
            title_justify="left",
            show_lines=True,
        )
        table.add_column("tool", style="cyan", ratio=2)
        table.add_column("parameters (* required)", ratio=3)
        table.add_column("effects", no_wrap=True)
        for tool in listing.tools:
            effects = (
                "read-only"
                if not tool.side_effects
                else "writes, idempotent" if tool.idempotent else "writes"
            )
            name = Text(tool.name, style="bold cyan")
            if tool.description:
                name.append(f"\n{_first_sentence(tool.description, 120)}", style="default")
            table.add_row(name, _parameters(tool.input_schema), effects)
        parts.append(table)
    return Group(*parts)
