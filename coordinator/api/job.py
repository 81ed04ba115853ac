"""The job ``ask()`` runs, composed as a job file would be and validated by the same loader.

The question, options, subtasks, MCP servers and model block become one document that
:func:`~coordinator.jobfile.loader.load_scenario_text` validates, so a model block given
as a dict is checked exactly as a file's (a key written inline is refused too). Errors
name the field (``model.turns``, ``job.subtasks[0].plan``) in ``ask()``; the line numbers
of the composed text would mean nothing to a caller and are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from shared.errors import InputFileError, InputFileErrors
from subagents.tool import Tool

__all__ = ["ASK_SOURCE", "compose_ask_job", "model_block"]

ASK_SOURCE = "ask()"
"""The name every error of an ``ask()`` job carries where a file's would name the file."""


def model_block(model: str | Mapping[str, Any], base_url: str | None) -> dict[str, Any]:
    """``"PROVIDER[:NAME]"`` or a model block as a dict → the block (``base_url`` wins).

    Raises:
        ValueError: ``model`` is neither a string nor a mapping.
    """
    if isinstance(model, str):
        provider, _, name = model.partition(":")
        block: dict[str, Any] = {"provider": provider}
        if name:
            block["name"] = name
    elif isinstance(model, Mapping):
        block = dict(model)
    else:
        raise ValueError(
            f"model: expected 'PROVIDER:NAME' or a model block as a dict, got {model!r}"
        )
    if base_url is not None:
        block["base_url"] = base_url
    return block


def _slug(question: str) -> str:
    words = re.findall(r"[a-z0-9]+", question.lower())[:6]
    return "ask-" + ("-".join(words) or "question")


def _placeholder(tool: Tool) -> dict[str, Any]:
    # Stands in for a Python tool while the loader checks the names subtasks call; it is
    # dropped before anything runs (the Python tool is served instead).
    return {"description": tool.description, "responses": [{"empty": True}]}


def _without_lines(exc: InputFileErrors) -> InputFileErrors:
    return InputFileErrors(
        [InputFileError(ASK_SOURCE, None, e.field, e.expected, got=e.got) for e in exc.errors]
    )


def compose_ask_job(
    question: str,
    *,
    model: str | Mapping[str, Any],
    base_url: str | None,
    python_tools: Mapping[str, Tool],
    mcp_servers: Mapping[str, Mapping[str, Any]],
    subtasks: Sequence[Mapping[str, Any]] | None,
    research: Mapping[str, Any] | None = None,
    max_subtasks: int,
    concurrency: int,
    deadline_s: float | None,
    seed: int | str,
) -> tuple[Scenario, str]:
    """The scenario ``ask()`` runs and the YAML text the run store keeps for it.

    The stored text holds no Python tools (they cannot be written down): a run recorded
    from Python can be read with ``fanout report``/``trace``, and ``fanout resume``
    refuses it, naming the tools it lacks, instead of running it without them.

    Raises:
        InputFileErrors: every problem, each naming its field, in ``ask()``.
        ValueError: the question is empty or an option cannot be written as YAML.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question: expected a non-empty string, got {question!r}")
    job: dict[str, Any] = {
        "query": question,
        "max_subtasks": max_subtasks,
        "concurrency": concurrency,
    }
    if deadline_s is not None:
        job["deadline_s"] = deadline_s
    if subtasks is not None:
        job["subtasks"] = [dict(s) if isinstance(s, Mapping) else s for s in subtasks]
    doc: dict[str, Any] = {"scenario": _slug(question), "seed": seed, "job": job}
    if mcp_servers:
        doc["mcp_servers"] = {k: dict(v) for k, v in mcp_servers.items()}
    if research:
        doc["research_tools"] = dict(research)
    doc["model"] = model_block(model, base_url)
    try:
        stored = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        checked = yaml.safe_dump(
            {**doc, "tools": {n: _placeholder(t) for n, t in python_tools.items()}},
            sort_keys=False,
            allow_unicode=True,
        )
    except yaml.YAMLError as exc:
        raise ValueError(f"ask(): an option holds a value a job cannot: {exc}") from None
    try:
        scenario = load_scenario_text(checked, ASK_SOURCE)
    except InputFileErrors as exc:
        raise _without_lines(exc) from None
    scenario = scenario.model_copy(update={"tools": {}})
    return scenario, stored
