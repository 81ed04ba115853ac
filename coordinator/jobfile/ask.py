"""The job ``fanout ask`` runs: a question, the tools of a tools file, a model.

A tools file declares ``tools`` (simulated), ``mcp_servers`` and optionally a ``model``
block; the question and the job's options come from the command line. The file is
validated as written (every error names its own line), then the question is added and
``--model`` / ``--base-url`` replace the file's model. The composed job is kept as YAML
text, so the run store can resume it and ``--record`` can replay it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.jobfile.yamlpos import parse_yaml
from shared.errors import InputFileError, InputFileErrors
from subagents.models.spend import TokenBudget

DEFAULT_TOOLS = Path(__file__).with_name("research_tools.yaml")
_ALLOWED = ("tools", "mcp_servers", "model")
_PROVIDERS = ("anthropic", "openai", "scripted")


def _slug(question: str) -> str:
    words = re.findall(r"[a-z0-9]+", question.lower())[:6]
    return "ask-" + ("-".join(words) or "question")


def parse_model_flag(value: str) -> tuple[str, str | None]:
    """``PROVIDER[:NAME]`` → (provider, name).

    Raises:
        InputFileError: an unknown provider (named as the ``--model`` option).
    """
    provider, _, name = value.partition(":")
    if provider not in _PROVIDERS:
        raise InputFileError(
            "--model",
            None,
            "provider",
            f"one of {', '.join(_PROVIDERS)} (PROVIDER:NAME)",
            got=repr(provider),
        )
    return provider, name or None


def build_ask_job(
    question: str,
    tools_file: str | Path | None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    max_subtasks: int = 6,
    concurrency: int = 4,
    deadline_s: float | None = None,
    budget: TokenBudget | None = None,
) -> tuple[Scenario, str, str]:
    """The scenario to run, its YAML text (for the store) and the file it names.

    Raises:
        InputFileErrors: the tools file is malformed, holds keys a tools file cannot, or
            no model is given at all.
    """
    path = Path(tools_file) if tools_file is not None else DEFAULT_TOOLS
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFileErrors(
            [InputFileError(file, None, "<file>", "a readable tools file", got=str(exc))]
        ) from None
    if not question.strip():
        raise InputFileErrors([InputFileError("QUESTION", None, "question", "a question")])
    parsed = parse_yaml(text, file)
    data = parsed.data if isinstance(parsed.data, dict) else {}
    problems = [
        InputFileError(
            file,
            parsed.line_of((key,)),
            str(key),
            "only tools, mcp_servers and model in a tools file (the question and the job's "
            "options come from the command line)",
        )
        for key in data
        if key not in _ALLOWED
    ]
    if problems:
        raise InputFileErrors(problems)
    job: dict[str, Any] = {
        "query": question,
        "max_subtasks": max_subtasks,
        "concurrency": concurrency,
    }
    if deadline_s is not None:
        job["deadline_s"] = deadline_s
    if budget is not None:
        job["budget"] = budget.model_dump(exclude_defaults=True)
    provider, name = parse_model_flag(model) if model else (None, None)
    extra: dict[str, Any] = {"scenario": _slug(question), "job": job}
    if "model" not in data and provider is not None:
        extra["model"] = {"provider": provider}
    # Appended after the file's own lines: an error in the file keeps its line number.
    appended = yaml.safe_dump(extra, sort_keys=False)
    composed_text = text.rstrip("\n") + "\n" + appended
    if model is None and "model" not in data:
        raise InputFileErrors(
            [
                InputFileError(
                    "--model",
                    None,
                    "model",
                    "--model PROVIDER:NAME, or a model block in the tools file",
                    got="no model",
                )
            ]
        )
    scenario = load_scenario_text(composed_text, file)
    if model is None and base_url is None:
        return scenario, composed_text, file
    block = dict(data.get("model") or extra.get("model") or {})
    if provider is not None and provider != block.get("provider"):
        # Another provider: nothing of the old block applies but its budgets.
        block = {k: v for k, v in block.items() if k in ("max_tokens", "timeout_s", "retry")}
        block["provider"] = provider
    if name is not None:
        block["name"] = name
    if base_url is not None:
        block["base_url"] = base_url
    final = {**data, **extra, "model": block}
    final_text = yaml.safe_dump(final, sort_keys=False, allow_unicode=True)
    return load_scenario_text(final_text, file), final_text, file
