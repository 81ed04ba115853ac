"""The answer's sources: every page, document and tool result behind the findings, numbered.

The synthesis shows the lead model each source with its number and asks it to cite
``[n]`` after each claim (DESIGN §10); ``answer.sources`` are the sources its text cites.
A page (``web.fetch``) or a document (``docs.read``) is a source by its URL or path; a
search result (``web.search``, ``docs.search``) is one too, by the URL or path it names;
any other tool's result (simulated, MCP) is a source named by its tool and subtask. The
model's own words are never a source. Numbers follow the job's subtask order, and one URL
or path is one source however many subtasks found it (the first names it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.report import Section, Source
from shared.envelope import Finding

__all__ = [
    "Evidence",
    "cited_sources",
    "evidence",
    "finding_sources",
    "number_sources",
    "source_texts",
]

_NOT_SOURCES = frozenset({"model", "finish"})
_SEARCH_TOOLS = {"web.search": "url", "docs.search": "path"}
_CITE = re.compile(r"\[([^\[\]\n]{1,200})\]")


def finding_sources(finding: Finding) -> list[tuple[str, str | None, str | None, str]]:
    """``(key, url, path, title)`` of each source one finding holds."""
    return [(key, url, path, title) for key, url, path, title, _, _ in _items(finding)]


_Item = tuple[str, str | None, str | None, str, Any, int | None]


def _items(finding: Finding) -> list[_Item]:
    """``(key, url, path, title, body, start)`` of each source one finding holds; the
    body is what the finding says of it: a search result's snippet, a page's or
    document's text, a tool's data; ``start``: where a passage found by a search begins
    in its document, when the search says."""
    if finding.tool in _NOT_SOURCES or finding.empty:
        return []
    data: Any = finding.data
    if finding.url is not None or finding.path is not None:
        text = data.get("text") if isinstance(data, dict) else None
        body = text if isinstance(text, str) else data
        if finding.url is not None:
            return [(f"url:{finding.url}", finding.url, None, finding.title or finding.url, body,
                     None)]
        assert finding.path is not None
        return [(f"path:{finding.path}", None, finding.path, finding.title or finding.path, body,
                 None)]
    kind = _SEARCH_TOOLS.get(finding.tool)
    if kind is not None and isinstance(data, dict) and isinstance(data.get("results"), list):
        out: list[_Item] = []
        for item in data["results"]:
            where = item.get(kind) if isinstance(item, dict) else None
            if not isinstance(where, str) or not where:
                continue
            title = item.get("title")
            title = title if isinstance(title, str) and title else where
            snippet = item.get("snippet")
            snippet = snippet if isinstance(snippet, str) else ""
            start = item.get("start")
            start = start if isinstance(start, int) and not isinstance(start, bool) else None
            if kind == "url":
                out.append((f"url:{where}", where, None, title, snippet, None))
            else:
                out.append((f"path:{where}", None, where, title, snippet, start))
        return out
    return [(f"tool:{finding.tool}", None, None, finding.tool, data, None)]


def _headings(finding: Finding) -> list[str]:
    """The heading of each result of a search's finding, in :func:`_items`' order."""
    data: Any = finding.data
    if finding.tool not in _SEARCH_TOOLS or not isinstance(data, dict):
        return []
    kind = _SEARCH_TOOLS[finding.tool]
    results = data.get("results")
    out = []
    for item in results if isinstance(results, list) else []:
        where = item.get(kind) if isinstance(item, dict) else None
        if isinstance(where, str) and where:
            heading = item.get("heading")
            out.append(heading if isinstance(heading, str) else "")
    return out


def number_sources(sections: Sequence[Section]) -> tuple[list[Source], dict[int, list[int]]]:
    """Every source of the findings, numbered from 1; and, per finding (by ``id()``), the
    numbers of its sources (for the prompt)."""
    numbered: dict[tuple[str, str], Source] = {}
    per_finding: dict[int, list[int]] = {}
    for section in sections:
        for finding in section.findings:
            numbers: list[int] = []
            for key, url, path, title in finding_sources(finding):
                # A tool's result is a source per subtask; a URL or path is one source.
                scoped = (section.subtask_id, key) if key.startswith("tool:") else ("", key)
                source = numbered.get(scoped)
                if source is None:
                    source = Source(
                        n=len(numbered) + 1, url=url, path=path, title=title,
                        subtask=section.subtask_id, tool=finding.tool,
                    )
                    numbered[scoped] = source
                if source.n not in numbers:
                    numbers.append(source.n)
            per_finding[id(finding)] = numbers
    return list(numbered.values()), per_finding


def cited_sources(text: str, sources: Iterable[Source], subtask_ids: Sequence[str]) -> list[Source]:
    """The sources ``text`` cites: ``[n]`` (also ``[1, 3]``, ``[2-4]``), or a subtask's id in
    brackets (``[market]``: every source of that subtask), in number order."""
    every = list(sources)
    numbers: set[int] = set()
    subtasks = set(subtask_ids)
    for group in _CITE.findall(text):
        for part in re.split(r"[,;]", group):
            part = part.strip()
            span = re.fullmatch(r"(\d+)\s*[-–]\s*(\d+)", part)
            if span:
                low, high = int(span.group(1)), int(span.group(2))
                if 0 < low <= high and high - low <= 50:
                    numbers.update(range(low, high + 1))
            elif part.isdigit():
                numbers.add(int(part))
            elif part in subtasks:
                numbers.update(s.n for s in every if s.subtask == part)
    return [s for s in every if s.n in numbers]


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one finding says of one numbered source: its snippet, text or data."""

    n: int
    subtask_id: str
    tool: str
    title: str
    body: Any  # a search result's snippet, a page's or document's text, a tool's data
    document: bool  # a page or document read whole (web.fetch, docs.read), not a snippet
    start: int | None = None  # where a search's passage begins in its document
    heading: str = ""  # the headings a search's passage lies under


def evidence(sections: Sequence[Section]) -> list[Evidence]:
    """Every piece of evidence of the findings with its source's number (as
    :func:`number_sources` numbers them), in subtask and finding order."""
    numbered: dict[tuple[str, str], int] = {}
    out: list[Evidence] = []
    for section in sections:
        for finding in section.findings:
            document = finding.url is not None or finding.path is not None
            headings = _headings(finding)
            for i, (key, _url, _path, title, body, start) in enumerate(_items(finding)):
                scoped = (section.subtask_id, key) if key.startswith("tool:") else ("", key)
                n = numbered.setdefault(scoped, len(numbered) + 1)
                heading = headings[i] if i < len(headings) else ""
                out.append(Evidence(n, section.subtask_id, finding.tool, title, body, document,
                                    start, heading))
    return out


def source_texts(sections: Sequence[Section]) -> dict[int, list[str]]:
    """Per source number, the texts its findings hold: a search result's title and
    snippet, a page's or document's title and text, a tool's data as JSON. What the
    answer's numbers are checked against (DESIGN §7, check 4)."""
    texts: dict[int, list[str]] = {}
    for item in evidence(sections):
        body = item.body
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
        texts.setdefault(item.n, []).append(f"{item.title}\n{text}")
    return texts
