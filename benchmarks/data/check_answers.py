"""Checks the answer sets (answers_*.json) against the installed Debian documentation.

For every question with an answer: the pattern compiles, matches the text of each of
its paths (HTML tags stripped by a regular expression, entities unescaped, whitespace
collapsed; a .txt file is only collapsed) and does not match the question itself.
A question the documents do not answer has ``"answer": null`` and no paths.
``--spread`` also counts the other files of the folder the pattern matches, to see
how specific it is. A set whose folder is not installed is skipped and said so.

    python benchmarks/data/check_answers.py [--spread] [answers_git.json ...]

Exit status: 0 all good, 1 a question failed, 2 a file is malformed.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

HERE = Path(__file__).resolve().parent
TAG = re.compile(r"<[^>]+>")
SPACE = re.compile(r"\s+")
SET_KEYS = {"corpus", "source", "folder", "questions"}
QUESTION_KEYS = {"q", "answer", "paths", "note"}


class Malformed(Exception):
    """An answers file that does not have the documented shape."""


@dataclass(frozen=True)
class Question:
    """One question of a set, as read from its file."""

    where: str
    q: str
    answer: str | None
    paths: tuple[str, ...]


def page_text(path: Path) -> str:
    """The text a pattern is matched against: tags stripped for HTML, spaces collapsed."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in {".html", ".htm"}:
        raw = html.unescape(TAG.sub(" ", raw))
    return SPACE.sub(" ", raw)


def load(path: Path) -> tuple[Path, list[Question]]:
    """The folder and questions of one answers file, or Malformed naming the field."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise Malformed(f"{path.name}: line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(doc, dict) or set(doc) != SET_KEYS:
        raise Malformed(f"{path.name}: the top level needs exactly the keys {sorted(SET_KEYS)}")
    if not isinstance(doc["questions"], list):
        raise Malformed(f"{path.name}: questions: not a list")
    questions = []
    for i, item in enumerate(doc["questions"]):
        where = f"{path.name}: questions[{i}]"
        if not isinstance(item, dict) or set(item) != QUESTION_KEYS:
            raise Malformed(f"{where}: needs exactly the keys {sorted(QUESTION_KEYS)}")
        answer, paths = item["answer"], item["paths"]
        if not isinstance(item["q"], str) or not isinstance(item["note"], str):
            raise Malformed(f"{where}: q and note: strings")
        if answer is not None and not isinstance(answer, str):
            raise Malformed(f"{where}: answer: a string or null")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise Malformed(f"{where}: paths: a list of strings")
        if (answer is None) != (not paths):
            raise Malformed(f"{where}: paths: empty exactly when answer is null")
        if answer is not None:
            try:
                re.compile(answer, re.IGNORECASE)
            except re.error as exc:
                raise Malformed(f"{where}: answer: {exc}") from exc
        questions.append(Question(where, item["q"], answer, tuple(paths)))
    return Path(doc["folder"]), questions


def problems(folder: Path, question: Question, texts: dict[Path, str]) -> list[str]:
    """What is wrong with one question, empty when nothing is."""
    if question.answer is None:
        return []
    pattern = re.compile(question.answer, re.IGNORECASE)
    found = []
    if pattern.search(question.q):
        found.append("the pattern matches the question itself")
    for rel in question.paths:
        path = folder / rel
        if not path.is_file():
            found.append(f"{rel}: no such file")
            continue
        if path not in texts:
            texts[path] = page_text(path)
        if not pattern.search(texts[path]):
            found.append(f"{rel}: the pattern does not match")
    return found


def spread(folder: Path, question: Question, texts: dict[Path, str]) -> list[str]:
    """The other documents of the folder the question's pattern matches."""
    assert question.answer is not None
    pattern = re.compile(question.answer, re.IGNORECASE)
    hits = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in {".html", ".txt"} or not path.is_file():
            continue
        rel = str(path.relative_to(folder))
        if rel in question.paths:
            continue
        if path not in texts:
            texts[path] = page_text(path)
        if pattern.search(texts[path]):
            hits.append(rel)
    return hits


def main(argv: list[str] | None = None) -> int:
    """Check the given answers files (all of this folder's by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--spread", action="store_true", help="count other matching files")
    args = parser.parse_args(argv)
    console = Console()
    files = args.files or sorted(HERE.glob("answers_*.json"))
    failed = False
    for file in files:
        try:
            folder, questions = load(file)
        except (Malformed, OSError) as exc:
            console.print(f"[red]{escape(str(exc))}[/red]")
            return 2
        if not folder.is_dir():
            console.print(f"{file.name}: skipped, {folder} is not installed")
            continue
        texts: dict[Path, str] = {}
        answered = sum(q.answer is not None for q in questions)
        console.print(f"{file.name}: {answered} answered, {len(questions) - answered} unanswered")
        for question in questions:
            for problem in problems(folder, question, texts):
                failed = True
                said = escape(f"{question.q!r}: {problem}")
                console.print(f"  [red]{escape(question.where)}[/red] {said}")
            if args.spread and question.answer is not None:
                others = spread(folder, question, texts)
                console.print(escape(f"  {question.where}: {len(others)} other files {others[:4]}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
