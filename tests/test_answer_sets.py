"""The answer sets of benchmarks/data hold together, and against the documents where installed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.data import check_answers

SETS = sorted(check_answers.HERE.glob("answers_*.json"))


def test_there_is_a_set_for_each_corpus() -> None:
    """git, debref and sqlite each have a file of questions."""
    assert {p.stem for p in SETS} == {"answers_git", "answers_debref", "answers_sqlite"}


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in SETS])
def test_a_set_has_answered_and_unanswered_questions(path: Path) -> None:
    """At least 22 questions with an answer, 3 without, none asked twice."""
    _, questions = check_answers.load(path)
    answered = [q for q in questions if q.answer is not None]
    assert len(answered) >= 22
    assert len(questions) - len(answered) >= 3
    assert len({q.q for q in questions}) == len(questions)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in SETS])
def test_no_pattern_matches_its_own_question(path: Path) -> None:
    """A pattern that matches the question would credit an answer that only repeats it."""
    _, questions = check_answers.load(path)
    for q in questions:
        if q.answer is not None:
            assert not re.search(q.answer, q.q, re.IGNORECASE), q.where


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in SETS])
def test_every_pattern_matches_every_page_it_names(path: Path) -> None:
    """Checked against the installed Debian package; skipped where it is not installed."""
    folder, questions = check_answers.load(path)
    if not folder.is_dir():
        pytest.skip(f"{folder} is not installed")
    texts: dict[Path, str] = {}
    found = {q.where: check_answers.problems(folder, q, texts) for q in questions}
    assert {where: p for where, p in found.items() if p} == {}


def test_a_pattern_is_matched_against_text_not_markup(tmp_path: Path) -> None:
    """Tags are stripped and entities unescaped in HTML; a .txt page keeps its <placeholders>."""
    page = tmp_path / "page.html"
    page.write_text("<p>git push <code>-d</code>\n  &lt;branch&gt;</p>", encoding="utf-8")
    source = tmp_path / "page.txt"
    source.write_text("-S<string>::\n\tLook", encoding="utf-8")
    assert check_answers.page_text(page).strip() == "git push -d <branch>"
    assert check_answers.page_text(source) == "-S<string>:: Look"
