"""The job ``ask()`` runs (DESIGN §14): the Python API's side of the one ask-job builder
of :mod:`coordinator.jobfile.ask` (its ``PROVIDER:NAME`` parser, its job options, its
slug and its retrieval-only job), with errors that name ``ask()``'s own arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from coordinator.jobfile.ask import (
    ask_slug,
    check_base_url,
    job_options,
    parse_model_flag,
    retrieval_job,
    search_tools,
)
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from shared.errors import InputFileError, InputFileErrors
from subagents.tool import Tool

__all__ = ["ASK_SOURCE", "compose_ask_job", "model_block"]

ASK_SOURCE = "ask()"
"""The name every error of an ``ask()`` job carries where a file's would name the file."""


def model_block(model: str | Mapping[str, Any], base_url: str | None) -> dict[str, Any]:
    """``ask(model=)``: ``"PROVIDER[:NAME]"`` or a model block as a dict → the block
    (``base_url`` wins). A string is parsed as ``--model`` is, its errors naming
    ``model.provider`` or ``model.name``.

    Raises:
        InputFileError: an unknown provider, a ``PROVIDER:`` without its name, or a
            ``base_url`` that is not an http(s) URL.
        ValueError: ``model`` is neither a string nor a mapping.
    """
    if isinstance(model, str):
        provider, name = parse_model_flag(model, ASK_SOURCE, "model.")
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
        block["base_url"] = check_base_url(base_url, ASK_SOURCE)
    return block


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
    model: str | Mapping[str, Any] | None,
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
    refuses it, naming the tools it lacks, instead of running it without them. Errors
    name the field in ``ask()``: the composed text's line numbers would mean nothing to
    a caller and are dropped.

    Raises:
        InputFileErrors: every problem, each naming its field, in ``ask()``.
        ValueError: the question is empty or an option cannot be written as YAML.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question: expected a non-empty string, got {question!r}")
    job = job_options(question, max_subtasks, concurrency, deadline_s)
    if subtasks is not None:
        job["subtasks"] = [dict(s) if isinstance(s, Mapping) else s for s in subtasks]
    doc: dict[str, Any] = {"scenario": ask_slug(question), "seed": seed, "job": job}
    if mcp_servers:
        doc["mcp_servers"] = {k: dict(v) for k, v in mcp_servers.items()}
    if research:
        doc["research_tools"] = dict(research)
    if model is None and subtasks is None:
        _retrieval_only(job, question, research or {}, base_url)
    elif model is not None:
        try:
            doc["model"] = model_block(model, base_url)
        except InputFileError as exc:
            raise InputFileErrors([exc]) from None
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


def _retrieval_only(
    job: dict[str, Any], question: str, research: Mapping[str, Any], base_url: str | None
) -> None:
    """``ask()`` without a model (DESIGN §7), as ``fanout ask`` without ``--model``: the
    question is one subtask that runs its searches (``"docs:DIR"``, ``"web"``), and the
    answer is built from the best passages, cited.

    Raises:
        InputFileErrors: no search to run, or a ``base_url`` without a model.
    """
    if base_url is not None:
        raise InputFileErrors([InputFileError(ASK_SOURCE, None, "model", "a model for base_url")])
    searches = search_tools(dict(research), None)
    if not searches:
        raise InputFileErrors([InputFileError(
            ASK_SOURCE, None, "model",
            "a model (\"PROVIDER:NAME\" or a model block); or, for a retrieval-only answer "
            "without one, a \"docs:DIR\" or \"web\" tool", got="no model and no search tool")])
    retrieval_job(job, question, searches)
