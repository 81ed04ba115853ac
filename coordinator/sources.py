"""The answer's sources: every page, document and tool result behind the findings, numbered.

The synthesis shows the lead model each source with its number and asks it to cite
``[n]`` after each claim (docs/design.md §10); ``answer.sources`` are the sources its text cites.
A page (``web.fetch``) or a document (``docs.read``) is a source by its URL or path; a
search result (``web.search``, ``docs.search``) is one too, by the URL or path it names;
any other tool's result (simulated, MCP) is a source named by its tool and subtask; a
person's answer (docs/design.md §17) is a source titled "given by NAME, DATE". The model's own
words are never a source. Numbers follow the job's subtask order, and one URL
or path is one source however many subtasks found it (the first names it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.decision import given_by
from coordinator.report import Section, Source
from shared.envelope import PERSON, Finding

__all__ = [
    "Evidence",
    "cited_sources",
    "evidence",
    "finding_sources",
    "number_sources",
    "renumbered",
    "source_texts",
]

_NOT_SOURCES = frozenset({"model", "finish"})
_SEARCH_TOOLS = {"web.search": "url", "docs.search": "path"}
_CITE = re.compile(r"\[([^\[\]\n]{1,200})\]")
_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")


def finding_sources(finding: Finding) -> list[tuple[str, str | None, str | None, str]]:
    """``(key, url, path, title)`` of each source one finding holds."""
    return [(key, url, path, title) for key, url, path, title, *_ in _items(finding)]


_Pieces = tuple[tuple[int, int, float], ...]
_Item = tuple[str, str | None, str | None, str, Any, str, int | None, _Pieces]


def _items(finding: Finding) -> list[_Item]:
    """``(key, url, path, title, body, heading, start)`` of each source one finding holds;
    the body is what the finding says of it: a search result's snippet, a page's or
    document's text, a tool's data; the heading, a search result's section (``docs.search``
    names it ``Title › Section``); ``start``, where a passage a search found begins in its
    document, when the search says."""
    if finding.tool in _NOT_SOURCES or finding.empty:
        return []
    data: Any = finding.data
    if finding.by_person:
        # A person's answer (docs/design.md §17) is evidence of its own kind: one source per
        # subtask, cited "given by NAME, DATE", its URL (if any) where to check it.
        text = data.get("text") if isinstance(data, dict) else data
        title = given_by(finding.by, finding.at)
        return [(f"tool:{PERSON}:{finding.by}:{finding.at}", finding.url, None, title, text,
                 "", None, ())]
    if finding.url is not None or finding.path is not None:
        text = data.get("text") if isinstance(data, dict) else None
        body = text if isinstance(text, str) else data
        if finding.url is not None:
            return [(f"url:{finding.url}", finding.url, None, finding.title or finding.url, body,
                     "", None, ())]
        assert finding.path is not None
        return [(f"path:{finding.path}", None, finding.path, finding.title or finding.path, body,
                 "", None, ())]
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
            heading = item.get("heading")
            heading = heading.rsplit("›", 1)[-1].strip() if isinstance(heading, str) else ""
            start = item.get("start")
            start = start if isinstance(start, int) and not isinstance(start, bool) else None
            pieces = _pieces(item.get("pieces"), len(snippet))
            if kind == "url":
                out.append((f"url:{where}", where, None, title, snippet, heading, None, pieces))
            else:
                out.append((f"path:{where}", None, where, title, snippet, heading, start,
                            pieces))
        return out
    return [(f"tool:{finding.tool}", None, None, finding.tool, data, "", None, ())]


def _pieces(value: Any, size: int) -> _Pieces:
    """A search result's ``pieces`` (``[start, end, similarity]`` of its snippet's parts,
    docs/design.md §10) as far as they are well formed; any other value, none."""
    if not isinstance(value, list):
        return ()
    out = []
    for piece in value:
        if (isinstance(piece, list) and len(piece) == 3
                and all(isinstance(x, int) and not isinstance(x, bool) for x in piece[:2])
                and isinstance(piece[2], int | float) and not isinstance(piece[2], bool)
                and 0 <= piece[0] <= piece[1] <= size):
            out.append((piece[0], piece[1], float(piece[2])))
    return tuple(out)


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


def _parts(group: str, subtasks: set[str]) -> list[str] | None:
    """A bracket's parts (``,``/``;``), or None when it is not a citation: each part must
    be a number, a range (``2-4``) or a subtask's id (as the answer checks read it)."""
    parts = [p.strip() for p in re.split(r"[,;]", group)]
    for part in parts:
        if not (part.isdigit() or _RANGE.fullmatch(part) or part in subtasks):
            return None
    return parts


def _shown(numbers: Sequence[int]) -> str:
    """Citation numbers as a reader reads them: ``1, 2``, a run of three or more ``3–5``."""
    out: list[str] = []
    run: list[int] = []
    for n in [*sorted(set(numbers)), None]:
        if n is not None and run and n == run[-1] + 1:
            run.append(n)
            continue
        if len(run) >= 3:
            out.append(f"{run[0]}–{run[-1]}")
        else:
            out.extend(str(r) for r in run)
        run = [] if n is None else [n]
    return ", ".join(out)


def renumbered(
    text: str, sources: Sequence[Source], subtask_ids: Sequence[str]
) -> tuple[str, list[Source], dict[int, int]]:
    """``text`` as a reader reads it: its citations renumbered 1, 2, … over the sources it
    cites, in the order it first cites them, so the list under it has no holes; the cited
    sources with those numbers; and each run-wide number's new one.

    The model was shown every source of the run, numbered over all of them; an answer
    cites some, and a list of [1], [2], [4] read as a missing [3]. A subtask's id in
    brackets (``[market]``, as scripted leads write) becomes the numbers of that
    subtask's sources, and is dropped when the subtask has none (an empty answer is no
    source). A number that names no source of the run stays as written, so the
    citation check still finds it; a bracket that is not a citation (``[sic]``) stays.
    """
    known = {s.n: s for s in sources}
    subtasks = set(subtask_ids)
    new: dict[int, int] = {}

    def renumber(m: re.Match[str]) -> str:
        parts = _parts(m.group(2), subtasks)
        if parts is None:
            return m.group()
        cited: list[int] = []
        kept: list[str] = []
        for part in parts:
            span = _RANGE.fullmatch(part)
            if part.isdigit():
                numbers = [int(part)]
            elif span is not None:
                low, high = int(span.group(1)), int(span.group(2))
                if not 0 < low <= high or high - low > 50:
                    kept.append(part)  # the check fails it whole: left for it to find
                    continue
                numbers = list(range(low, high + 1))
                kept += [str(n) for n in (low, high) if n not in known]
            else:
                numbers = [s.n for s in sources if s.subtask == part]
            for n in numbers:
                if n in known:
                    cited.append(new.setdefault(n, len(new) + 1))
                elif part.isdigit():
                    kept.append(part)
        shown = ", ".join(x for x in (_shown(cited), ", ".join(dict.fromkeys(kept))) if x)
        return f"{m.group(1)}[{shown}]" if shown else ""

    rewritten = re.sub(r"([ \t]*)\[([^\[\]\n]{1,200})\]", renumber, text)
    listed = sorted(
        (known[old].model_copy(update={"n": n}) for old, n in new.items()), key=lambda s: s.n
    )
    return rewritten, listed, new


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one finding says of one numbered source: its snippet, text or data."""

    n: int
    subtask_id: str
    tool: str
    title: str
    body: Any  # a search result's snippet, a page's or document's text, a tool's data
    document: bool  # a page or document read whole (web.fetch, docs.read), not a snippet
    heading: str = ""  # a search result's section, as its snippet may begin with it
    start: int | None = None  # where a search's passage begins in its document
    # Where the snippet's parts sit in it and how near each is in meaning to the query
    # (``(start, end, similarity)``), when the search had embeddings.
    pieces: tuple[tuple[int, int, float], ...] = ()


def evidence(sections: Sequence[Section]) -> list[Evidence]:
    """Every piece of evidence of the findings with its source's number (as
    :func:`number_sources` numbers them), in subtask and finding order."""
    numbered: dict[tuple[str, str], int] = {}
    out: list[Evidence] = []
    for section in sections:
        for finding in section.findings:
            document = finding.url is not None or finding.path is not None
            for key, _url, _path, title, body, heading, start, pieces in _items(finding):
                scoped = (section.subtask_id, key) if key.startswith("tool:") else ("", key)
                n = numbered.setdefault(scoped, len(numbered) + 1)
                out.append(Evidence(n, section.subtask_id, finding.tool, title, body, document,
                                    heading, start, pieces))
    return out


def source_texts(sections: Sequence[Section]) -> dict[int, list[str]]:
    """Per source number, the texts its findings hold: a search result's title and
    snippet, a page's or document's title and text, a tool's data as JSON. What the
    answer's numbers are checked against (docs/design.md §7, check 4)."""
    texts: dict[int, list[str]] = {}
    for item in evidence(sections):
        body = item.body
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
        texts.setdefault(item.n, []).append(f"{item.title}\n{text}")
    return texts
