"""Answers, not passages: the search reaches the passage that answers, deep in a long
document, and the extractive answer quotes its sources' sentences exactly."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.lead.extractive import extractive_answer
from coordinator.report import Answer, CoverageReport, Section, SubtaskOutcome
from shared.envelope import Finding, ToolResult
from subagents.research.docindex import DocIndex
from subagents.research.docsearch import Found
from subagents.research.relevance import Terms, contradicts, segments

QUESTION = "How long does the cache helper keep my password by default?"
# The first section shares nearly every word of the question, and answers nothing.
LEAD_SECTION = (
    "<h2>Description</h2>\n<p>The cache helper keeps your password in memory. The cache "
    "helper is a helper that keeps a password for you, so you need not type your "
    "password again while the cache helper keeps it. By default the helper keeps the "
    "password cache in memory.</p>\n"
)
FILLER = "".join(
    f"<h2>Section {i}</h2>\n<p>Paragraph {i} tells about unrelated matters of storage, "
    f"networks and daemons, of sockets and of files number {i}.</p>\n" for i in range(40))
ANSWER = ("<h2>Options</h2>\n<dl><dt>--timeout &lt;seconds&gt;</dt>\n<dd><p>Number of seconds "
          "to cache credentials (default: 900).</p></dd>\n<dt>--socket &lt;path&gt;</dt>\n"
          "<dd><p>Use path to contact a running cache daemon.</p></dd></dl>\n")


def _finding(results: list[dict[str, Any]]) -> Finding:
    return Finding.from_result(ToolResult.success("docs.search", {"results": results},
                                                  trace_id="tr_1"), {})


def _report(query: str, finding: Finding) -> CoverageReport:
    section = Section(subtask_id="question", query=query, status="complete", covered=True,
                      weight=1.0, findings=[finding])
    row = SubtaskOutcome(id="question", query=query, weight=1.0, status="complete",
                         attempts=1, rounds=1, steps=1, findings=1)
    answer = Answer(query=query, coverage=1.0, summary="", sections=[section], missing=[])
    return CoverageReport(query=query, outcome="complete", coverage=1.0, elapsed_s=0.0,
                          subtasks=[row], gaps=[], escalations=[], answer=answer)


def test_the_answer_deep_in_a_long_page_is_found_behind_a_wordier_passage(
    tmp_path: Path,
) -> None:
    """A passage sharing more of the question's words comes first in the page; the
    option that states the default, forty sections later, is in the results and in the
    extractive answer."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cache-helper.html").write_text(
        f"<html><head><title>cache-helper</title></head><body><h1>cache-helper</h1>"
        f"{LEAD_SECTION}{FILLER}{ANSWER}</body></html>")
    (docs / "other.html").write_text(
        "<html><body><h1>Other</h1><p>The store helper keeps passwords on disk.</p>"
        "</body></html>")
    index = DocIndex.for_folder(docs, tmp_path / "store")
    index.refresh()
    found = index.find(QUESTION, 8)
    snippets = [r["snippet"] for r in found.results]
    assert any("(default: 900)" in s for s in snippets), snippets
    assert sum(r["path"] == "cache-helper.html" for r in found.results) >= 2  # passages
    text, sources = extractive_answer(_report(QUESTION, _finding(found.results)))
    assert text is not None and "(default: 900)" in text
    assert [s.path for s in sources] and all(s.path for s in sources)


def test_a_search_that_finds_only_unrelated_passages_says_it_does_not_match(
    tmp_path: Path,
) -> None:
    """Passages that hold none of the question's heavy words: found, not matched, the
    missing words named."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Speeds\n\nThe transfer speed is limited by the network.\n")
    index = DocIndex.for_folder(docs, tmp_path / "store")
    index.refresh()
    found = index.find("How do I tune the flux capacitor speed?", 5)
    assert found.results and found.match["matched"] is False
    assert {"flux", "capacitor"} <= set(found.match["missing"])


_WORDS = st.sampled_from([
    "cache", "helper", "password", "seconds", "default", "daemon", "socket", "store",
    "memory", "keeps", "timeout", "the", "a", "of", "to", "in", "is", "it",
])
_SENTENCE = st.lists(_WORDS, min_size=2, max_size=12).map(
    lambda ws: " ".join(ws).capitalize() + ".")
_CODE = st.lists(st.sampled_from(["$ git push", "$ git config a b", "x = 1"]), min_size=1,
                 max_size=3).map(lambda ls: "\n".join("    " + ln for ln in ls))
_BLOCK = st.one_of(st.lists(_SENTENCE, min_size=1, max_size=4).map(" ".join), _CODE)
_TEXT = st.lists(_BLOCK, min_size=1, max_size=6).map("\n\n".join)


def _norm(text: str) -> str:
    return " ".join(text.split())


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=4), query=st.lists(_WORDS, min_size=1,
                                                                     max_size=5))
def test_every_line_of_the_extractive_answer_is_quoted_from_its_source(
    texts: list[str], query: list[str],
) -> None:
    """Each line, without its citation and code fences, is its cited source's text,
    verbatim apart from whitespace."""
    results = [{"path": f"d{i}.md", "title": f"D{i}", "snippet": t}
               for i, t in enumerate(texts)]
    text, sources = extractive_answer(_report(" ".join(query), _finding(results)))
    if text is None:
        return
    by_n = {s.n: texts[int(s.path[1:-3])] for s in sources if s.path}
    for n, part in _quotes(text):
        assert _norm(part) in _norm(by_n[n]), (part, by_n[n])


def _quotes(text: str) -> list[tuple[int, str]]:
    """Each quote of an extractive answer with the source it cites: a line ``… [n]``, a
    label ``… [n]:`` and the fenced code after it, or fenced code closed by ````` [n]``."""
    out: list[tuple[int, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        label = re.fullmatch(r"(.*) \[(\d+)\]:", line)
        if label or line == "```":
            if label:
                out.append((int(label.group(2)), label.group(1)))
                i += 1  # the opening fence
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            cited = label.group(2) if label else re.fullmatch(r"``` \[(\d+)\]", lines[j])
            n = int(cited if isinstance(cited, str) else cited.group(1))  # type: ignore[union-attr]
            out.append((n, "\n".join(lines[i + 1:j])))
            i = j + 1
            continue
        plain = re.fullmatch(r"(.*) \[(\d+)\]", line)
        assert plain is not None, line
        out.append((int(plain.group(2)), plain.group(1)))
        i += 1
    return out


def test_segments_keep_code_blocks_and_labels_whole() -> None:
    """A code block is one segment; a label line joins the sentence it introduces; every
    segment is a span of the text."""
    text = ("Undo a commit and redo\n\n    $ git commit ...\n    $ git reset --soft HEAD^\n\n"
            "--timeout <seconds>\n\nNumber of seconds to cache credentials (default: 900). "
            "Another sentence.")
    segs = segments(text)
    kinds = [s.kind for s in segs]
    assert kinds == ["code", "sentence", "sentence"]
    assert text[segs[0].start:segs[0].end].endswith("git reset --soft HEAD^")
    assert text[segs[1].start:segs[1].end].startswith("--timeout <seconds>")
    assert Terms.of("how long is the timeout").coverage(text[segs[1].start:segs[1].end]) == 1.0


def _found(tmp_path: Path, pages: dict[str, str], question: str) -> Found:
    """What a lexical search of ``pages``, indexed under ``tmp_path``, finds for
    ``question`` (something, at least)."""
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    for name, text in pages.items():
        (docs / name).write_text(text)
    index = DocIndex.for_folder(docs, tmp_path / "store", semantic="off")
    index.refresh()
    found = index.find(question, 5)
    index.close()
    assert found.results
    return found


def _judged(tmp_path: Path, pages: dict[str, str], question: str) -> dict[str, Any]:
    return _found(tmp_path, pages, question).match


def test_words_scattered_over_a_passage_do_not_answer(tmp_path: Path) -> None:
    """A passage holding every word of the question, each in another sentence, is about
    the topic: the search does not claim to answer."""
    match = _judged(tmp_path, {"a.md": (
        "# Notes\n\nThe sync tool copies trees. A daemon can run it in the background. "
        "It may listen for changes. Every port is a number.\n")},
        "Which port does the sync daemon listen on?")
    assert match["matched"] is False and match["asks"] == "value"


def test_a_value_question_is_answered_only_by_a_sentence_with_a_value(tmp_path: Path) -> None:
    """"Which port" is answered by a sentence that names the port, not by one that holds
    the question's words and no number."""
    vague = {"a.md": "# Sync daemon\n\nThe sync daemon listens on a port the administrator "
                     "chooses.\n"}
    assert _judged(tmp_path / "1", vague, "Which port does the sync daemon listen on?")[
        "matched"] is False
    stated = {"a.md": "# Sync daemon\n\nThe sync daemon listens on port 8730 by default.\n"}
    assert _judged(tmp_path / "2", stated, "Which port does the sync daemon listen on?")[
        "matched"] is True


def test_a_how_to_question_is_answered_by_a_command_announced(tmp_path: Path) -> None:
    """"How do I" is answered by a sentence that announces the command after it; the
    extractive answer quotes the command with it."""
    page = ("# Limiting download bandwidth\n\nTo limit the download bandwidth of APT, "
            "configure it as the following.\n\n    APT::Acquire::http::Dl-Limit \"800\";\n\n"
            "Other settings are described elsewhere in this manual.\n")
    question = "How can I limit the download bandwidth of APT?"
    found = _found(tmp_path, {"apt.md": page}, question)
    assert found.match["matched"] is True and found.match["asks"] == "way"
    assert "Dl-Limit" in found.results[0]["snippet"]
    text, _ = extractive_answer(_report(question, _finding(found.results)))
    assert text is not None and 'Dl-Limit "800";' in text


# A manual's examples: the one that keeps the work shares fewer of the question's words
# than the one that throws it away ("the last three commits", "keep working").
UNDO_PAGE = (
    "<html><head><title>tool-reset</title></head><body><h1>tool-reset</h1>"
    "<h2>Examples</h2><dl>"
    "<dt>Undo an add</dt><dd><pre>$ tool add a.c\n$ tool reset</pre>"
    "<p>You revert the index changes for this file. Your changes in the working tree "
    "remain there.</p></dd>"
    "<dt>Undo a commit and redo</dt><dd><pre>$ tool commit ...\n$ tool reset --soft HEAD^"
    "</pre><p>This is most often done when what you just committed is incomplete. It "
    "leaves the working tree as it was before the reset.</p></dd>"
    "<dt>Undo commits permanently</dt><dd><pre>$ tool commit ...\n$ tool reset --hard "
    "HEAD~3</pre><p>The last three commits were bad and you do not want to ever see them "
    "again. Switch to another branch and keep working.</p></dd></dl></body></html>")
UNDO_QUESTION = "How do I undo the last commit but keep the changes?"


def test_a_sentence_that_loses_what_the_question_keeps_contradicts_it() -> None:
    """"Keep the changes" is contradicted by "permanently", "throw away", not by a loss
    that is negated, and a question that asks for the loss is contradicted by nothing."""
    assert contradicts(UNDO_QUESTION, "Undo commits permanently\n\n    $ tool reset --hard")
    assert contradicts("How do I preserve my settings?", "This throws them away.")
    assert not contradicts(UNDO_QUESTION, "This will not lose your changes.")
    assert not contradicts(UNDO_QUESTION, "It leaves the working tree as it was.")
    assert not contradicts("How do I delete a branch permanently?", "It is lost for good.")


def test_the_answer_never_leads_with_what_destroys_what_the_user_keeps(tmp_path: Path) -> None:
    """"Undo the last commit but keep the changes": the example that undoes commits
    permanently shares more words with the question, and is neither the snippet shown
    for the page nor any line of the extractive answer; the one that keeps them is."""
    found = _found(tmp_path, {"tool-reset.html": UNDO_PAGE}, UNDO_QUESTION)
    assert "--hard" not in found.results[0]["snippet"], found.results[0]["snippet"]
    text, _ = extractive_answer(_report(UNDO_QUESTION, _finding(found.results)))
    assert text is not None and "reset --soft HEAD^" in text, text
    assert "--hard" not in text and "permanently" not in text, text


OPTION_QUESTION = "What does tool pick -x do?"
# The synopsis lists -x and the -r entry mentions it: neither says what -x does.
OPTION_PAGE = (
    "<html><head><title>tool-pick(1)</title></head><body><h1>tool-pick(1)</h1>\n"
    "<h2>SYNOPSIS</h2>\n<pre>tool pick [--edit] [-n] [-x] [--ff] &lt;commit&gt;</pre>\n"
    "<h2>OPTIONS</h2>\n<dl>"
    "<dt>-r</dt>\n<dd><p>It used to be that the tool pick command defaulted to do -x "
    "described above, and -r was to disable it. Now the default is not to do -x so this "
    "option is a no-op.</p></dd>\n"
    "<dt>-x</dt>\n<dd><p>When recording the commit, append a line that says (picked from "
    "commit ...) to the original message.</p></dd>\n"
    "</dl></body></html>\n")


def test_an_option_is_answered_by_its_own_entry_not_a_mention(tmp_path: Path) -> None:
    """"What does -x do?": the synopsis's "[-x]" and the -r entry's "not to do -x" hold
    the option's name, not what it does; the answer quotes -x's own entry, and a page
    with only the mentions does not claim to answer."""
    found = _found(tmp_path, {"tool-pick.html": OPTION_PAGE}, OPTION_QUESTION)
    text, _ = extractive_answer(_report(OPTION_QUESTION, _finding(found.results)))
    assert text is not None and "picked from commit" in text, text
    assert "no-op" not in text, text
    assert found.match["matched"] is True
    mentions = OPTION_PAGE.replace(
        "<dt>-x</dt>\n<dd><p>When recording the commit, append a line that says (picked "
        "from commit ...) to the original message.</p></dd>\n", "")
    assert _judged(tmp_path / "2", {"tool-pick.html": mentions}, OPTION_QUESTION)[
        "matched"] is False


def test_digits_inside_a_name_are_no_value(tmp_path: Path) -> None:
    """A value question is not answered by "UTF-16" or "sqlite3_limit()": a value is a
    number standing alone, as "1,000,000,000" is."""
    question = "What is the maximum length of a string value?"
    names = {"a.md": "# Strings\n\nThe maximum length of a UTF-16 string value is set with "
                     "sqlite3_limit() on x86_64.\n"}
    assert _judged(tmp_path / "1", names, question)["matched"] is False
    stated = {"a.md": "# Strings\n\nThe maximum length of a string value is 1,000,000,000 "
                      "bytes.\n"}
    assert _judged(tmp_path / "2", stated, question)["matched"] is True


LIMITS_PAGE = (
    "<html><head><title>Limits</title></head><body><h1>Limits</h1><ul>\n"
    "<li><p><b>Maximum Number Of Columns</b></p>\n<p>The MAX_COLUMN parameter sets an "
    "upper bound on:</p><ul><li>The number of columns in a table</li><li>The number of "
    "columns in an index</li></ul>\n<p>The default setting for MAX_COLUMN is 2000. Most "
    "designers never need more than a hundred of them.</p></li>\n"
    "<li><p><b>Maximum Length Of A String</b></p>\n<p>The maximum number of bytes in a "
    "string is set by MAX_LENGTH, by default a billion.</p></li></ul></body></html>\n")


def test_a_sentence_is_about_what_its_entry_is_named(tmp_path: Path) -> None:
    """"The default setting … is 2000." names no word of "maximum number of columns";
    its entry's label does, and the answer quotes it."""
    question = "What is the maximum number of columns a table can have?"
    found = _found(tmp_path, {"limits.html": LIMITS_PAGE}, question)
    text, _ = extractive_answer(_report(question, _finding(found.results)))
    assert text is not None and "is 2000." in text, text


def test_one_long_document_fills_the_places_no_other_document_takes(tmp_path: Path) -> None:
    """At most three passages of a document while others can be shown; when only one
    document matches (a manual's long chapter), its next best passages fill the places
    asked for instead of leaving them empty."""
    chapter = "".join(
        f"<h2>Pinning {i}</h2>\n<p>{'Filler words about other matters. ' * 30}</p>\n"
        f"<p>Pin priority {i} applies to the release chosen with apt.</p>\n"
        for i in range(8))
    found = _found(tmp_path, {"apt.html": f"<html><body><h1>APT</h1>{chapter}</body></html>"},
                   "Which pin priority does apt give to the chosen release?")
    assert len(found.results) == 5
    assert {r["path"] for r in found.results} == {"apt.html"}
    assert len({r["start"] for r in found.results}) == 5  # five passages, none twice


def test_a_where_question_is_answered_by_the_path(tmp_path: Path) -> None:
    """"Where does … save …?" is answered by the sentence that names the file: of
    thirteen sentences that hold the question's words alike, it is quoted though it
    comes last (eight lines are quoted at most)."""
    question = "Where does the store helper save my passwords?"
    alike = " ".join(f"The store helper saves passwords on day {k}." for k in range(12))
    page = (f"# store helper\n\n{alike} The store helper saves passwords to "
            "~/.helper-credentials.\n")
    found = _found(tmp_path, {"store.md": page}, question)
    text, _ = extractive_answer(_report(question, _finding(found.results)))
    assert text is not None and "~/.helper-credentials" in text, text


def test_a_sentence_nearer_in_meaning_is_quoted() -> None:
    """With embeddings, a search result says how near each piece of its snippet is to the
    query (``pieces``): of nine sentences that hold the question's words alike, the one
    in the nearest piece is quoted though it comes last; malformed pieces are ignored,
    not trusted."""
    question = "How do I get my stashed changes back without deleting the stash?"
    alike = [f"The stash keeps changes on day {k}." for k in range(8)]
    last = "The stash keeps changes until they are applied."
    snippet = " ".join([*alike, last])
    cut = snippet.index(last)
    result = {"path": "stash.html", "title": "git-stash", "heading": "COMMANDS",
              "snippet": snippet, "start": 0}
    near = [[0, cut - 1, 0.41], [cut, len(snippet), 0.78]]
    text, _ = extractive_answer(_report(question, _finding([{**result, "pieces": near}])))
    assert text is not None and last in text, text
    bad: list[Any] = [[cut, 10_000, 0.9], ["a", 3, 0.9], [cut, 2, 0.9], [cut, cut + 9, True],
                      "x", [cut, len(snippet)]]
    text, _ = extractive_answer(_report(question, _finding([{**result, "pieces": bad}])))
    assert text is not None and last not in text, text


@settings(max_examples=200, deadline=None)
@given(text=_TEXT)
def test_the_pieces_of_a_passage_cover_its_segments_in_order(text: str) -> None:
    """What is embedded of a passage: every segment in exactly one piece, in order, each
    piece at most PIECE_CHARS long unless it is one segment."""
    from subagents.research.docwriter import PIECE_CHARS, pieces

    spans = pieces(text)
    assert spans and all(0 <= s < e <= len(text) or (s, e) == (0, len(text))
                         for s, e in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    segs = segments(text)
    for seg in segs:
        holding = [sp for sp in spans if sp[0] <= seg.start and seg.end <= sp[1]]
        assert len(holding) == 1, (seg, spans)
    for s, e in spans:
        inside = [seg for seg in segs if s <= seg.start and seg.end <= e]
        assert e - s <= PIECE_CHARS or len(inside) <= 1


def test_a_hyphenated_word_is_found_written_as_one(tmp_path: Path) -> None:
    """"auto-increment" is sought as the documents write it, "AUTOINCREMENT": the page
    about it is found and quoted, where the halves apart ("auto_vacuum … incremental",
    a metadata line "auto increment: 0") held the question's words and claimed it."""
    question = "How do I make a column auto-increment in SQLite?"
    pages = {
        "autoinc.html": "<h1>SQLite Autoincrement</h1><p>A column declared INTEGER PRIMARY "
                        "KEY is filled automatically with an unused integer. The AUTOINCREMENT "
                        "keyword changes the algorithm that chooses it.</p>",
        "pragma.html": "<h1>Pragma statements</h1><p>PRAGMA auto_vacuum sets the auto-vacuum "
                       "mode of a SQLite column store: 0, 1 or incremental.</p>",
        "metadata.html": "<h1>Column metadata in SQLite</h1><p>The outputs for a column:</p>"
                         "<pre>  not null: 0\n  primary key: 1\n  auto increment: 0</pre>",
    }
    found = _found(tmp_path, pages, question)
    assert found.results[0]["path"] == "autoinc.html", found.results
    text, _ = extractive_answer(_report(question, _finding(found.results)))
    assert text is not None and "declared INTEGER PRIMARY KEY" in text, text


def _dense(tmp_path: Path, pages: dict[str, str], near: str,
           measure: Any = None) -> tuple[Any, Any]:
    """A lexical index of ``pages`` and a hand-made semantic similarity: every passage of
    ``near`` at 0.9, every other between 0.1 and 0.3 (one piece a passage)."""
    import sqlite3

    import numpy as np

    from subagents.research.docsearch import Dense

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    index = DocIndex.for_folder(docs, tmp_path / "store", semantic="off")
    index.refresh()
    index.close()
    conn = sqlite3.connect(index.db_path)
    rows = conn.execute("SELECT p.id, length(t.body), f.path FROM passages p JOIN files f "
                        "ON f.id = p.file JOIN passage_text t ON t.rowid = p.id "
                        "ORDER BY p.id").fetchall()
    dense = Dense(np.array([r[0] for r in rows]), np.zeros(len(rows), dtype=np.int64),
                  np.array([r[1] for r in rows]),
                  np.array([0.9 if r[2] == near else 0.1 + 0.2 * ((r[0] * 7919) % 101) / 100
                            for r in rows], dtype=np.float32),
                  measure=measure)
    return conn, dense


def test_the_passage_nearest_in_meaning_is_shown(tmp_path: Path) -> None:
    """A passage far nearer in meaning than any other, which the words rank after sixty
    others (the fusion's two lexical orders bury it), is shown: last, whole."""
    from subagents.research.docsearch import search

    question = "How do I choose the name of the first branch when I create a new repository?"
    # Sixty pages that hold the question's words in other senses, among words of their
    # own (pages alike would be one text under several names): the words rank them
    # first, and the page that answers after them.
    rng = random.Random(7)
    said = ["choose", "name", "first", "branch", "create", "new", "repository"]
    letters = "bcdfghjklmnpqrstvwxz"

    def other() -> str:  # a word of its own (letters only: the signature reads words)
        return "".join(rng.choice(letters) for _ in range(7))

    wordy = {f"manual-{i}.md": f"# Manual {other()}\n\n" + " ".join(
                 f"{word} {other()} {other()}" for word in said * 2) + ".\n"
             for i in range(60)}
    pages = {**wordy, "init.md": "# git-init\n\n--initial-branch=<branch-name>: Use the "
                                 "specified name for the initial branch.\n"}
    conn, dense = _dense(tmp_path, pages, "init.md")
    try:
        lexical = [r["path"] for r in search(conn, question, 8).results]
        found = search(conn, question, 8, dense).results
    finally:
        conn.close()
    assert "init.md" not in lexical  # what the words alone show
    assert len(found) == 8 and found[-1]["path"] == "init.md", found
    assert "--initial-branch=<branch-name>" in found[-1]["snippet"]
    assert all(r["path"].startswith("manual-") for r in found[:7])


def test_the_first_results_sentences_are_weighed_one_by_one(tmp_path: Path) -> None:
    """With the model at hand, each sentence the first result shows is embedded at query
    time: its own similarity joins the pieces', the extractive answer quotes the nearest
    sentence of alike ones, and no other result is embedded again."""
    from subagents.research.docsearch import search

    question = "How do I make the binding keep its own copy of the text?"
    alike = " ".join(f"The binding keeps the text on call {k}." for k in range(8))
    answer = "Pass the transient constant and the binding copies the text at once."
    pages = {"bind.md": f"# Binding text\n\n{alike} {answer}\n",
             "other.md": "# Other binding\n\nThe binding keeps its text elsewhere.\n"}
    calls: list[list[str]] = []

    def measure(texts: list[str]) -> Any:
        import numpy as np

        calls.append(texts)
        return np.array([0.95 if "transient" in t else 0.3 for t in texts])

    conn, dense = _dense(tmp_path, pages, "bind.md", measure)
    try:
        found = search(conn, question, 5, dense).results
    finally:
        conn.close()
    top = found[0]
    assert top["path"] == "bind.md" and len(calls) == 1
    assert all(t.startswith("Binding text") for t in calls[0])  # with the page's title
    spans = [(s, e, sim) for s, e, sim in top["pieces"] if sim == 0.95]
    assert [top["snippet"][s:e] for s, e, _ in spans] == [answer]
    assert top["similarity"] == 0.95
    text, _ = extractive_answer(_report(question, _finding(found)))
    assert text is not None and answer in text, text
