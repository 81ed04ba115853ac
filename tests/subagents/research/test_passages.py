"""Documents read for the index: HTML text, titles and headings, passages, signatures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.research.documents.html import html_text
from subagents.research.documents.passages import (
    MAX,
    MIN,
    Passage,
    PassageSplitter,
    same_text,
    signature,
    sketches,
    snippet,
)
from subagents.research.documents.text import text_headings, text_title

SPHINX_PAGE = b"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>Queues &#8212; Python 3.11 documentation</title>
<script>var x = "<h1>not a heading</h1>";</script><style>h1 {color: red}</style></head>
<body><div class="related" role="navigation"><ul><li><a href="x.html">Streams</a></li></ul></div>
<div class="sphinxsidebar" role="navigation"><div class="sphinxsidebarwrapper">
<h3>Previous topic</h3><p><a href="prev.html">Subprocesses</a></p>
<div><h3>Next topic</h3><p>Exceptions</p></div></div></div>
<div class="body" role="main">
<section id="queues"><h1>Queues<a class="headerlink" href="#queues" title="Link">\xc2\xb6</a></h1>
<p><strong>Source code:</strong> <a href="q.py">Lib/asyncio/queues.py</a></p>
<!-- a comment <p>hidden</p> -->
<p>asyncio queues are designed to be similar to classes of the
   <a class="reference" href="queue.html"><code class="docutils"><span class="pre">queue</span>
   </code></a> module &amp; friends.</p>
<section id="queue"><h2>Queue<a class="headerlink" href="#queue">\xc2\xb6</a></h2>
<pre>async def worker(q):
    await q.get()</pre>
<p>A first in, first out (FIFO) queue.<br>Second line.</p></section></section></div>
<footer class="footer">&copy; Copyright 2001. Found a bug?</footer></body></html>"""


def test_a_sphinx_page_reads_as_its_text_without_navigation() -> None:
    """Scripts, sidebars, related links and footers go; ¶ marks go; headings are found;
    the title is the page's h1 (its <title> adds the site's name)."""
    page = html_text(SPHINX_PAGE)
    assert page.title == "Queues"
    for gone in ("not a heading", "color", "Previous topic", "Subprocesses", "Streams",
                 "Copyright", "hidden", "\u00b6"):
        assert gone not in page.text, gone
    assert "module & friends." in page.text and "similar to classes of the queue module" in (
        page.text)
    # <pre> keeps its lines and spaces, each line indented by four: it reads as code.
    assert "\n\n    async def worker(q):\n        await q.get()\n\n" in page.text
    assert "FIFO) queue.\nSecond line." in page.text
    assert [(level, text) for _, level, text in page.headings] == [(1, "Queues"), (2, "Queue")]
    for offset, _, text in page.headings:
        assert page.text[offset:offset + len(text)] == text
    assert html_text(SPHINX_PAGE) == page  # nothing kept between calls


def test_a_page_in_another_encoding_is_decoded() -> None:
    """A Latin-1 page reads as its characters; a UTF-16 one too."""
    markup = "<html><head><title>Café crème</title></head><body><p>déjà vu</p></body></html>"
    assert html_text(markup.encode("latin-1"), "latin-1").text.endswith("déjà vu")
    assert html_text(markup.encode("utf-16"), "utf-16").title == "Café crème"


def test_a_table_row_reads_as_one_paragraph_its_cells_side_by_side() -> None:
    """A row's cells stay together ("u  remount all … read-only" is one fact); rows are
    paragraphs apart."""
    markup = (b"<html><body><table><tr><th>key</th><th>action</th></tr>"
              b"<tr><td>s</td><td>sync all mounted filesystems</td></tr>"
              b"<tr><td>u</td><td>remount all mounted filesystems read-only</td></tr>"
              b"</table></body></html>")
    assert html_text(markup).text.split("\n\n") == [
        "key action", "s sync all mounted filesystems",
        "u remount all mounted filesystems read-only"]


def test_a_paragraph_larger_than_a_chunk_reads_as_its_words() -> None:
    """A paragraph over a megabyte (collapsed a piece at a time) reads as its words one
    space apart, as a short one does, with the paragraphs around it."""
    words = [f"w{i}" for i in range(300_000)]
    spaced = "".join(f"{w}{'   ' if i % 7 else chr(10)}" for i, w in enumerate(words))
    markup = f"<html><body><p>first</p><div>{spaced}</div><p>last  <br> line</p></body></html>"
    assert html_text(markup.encode()).text.split("\n\n") == [
        "first", " ".join(words), "last\nline"]


@pytest.mark.parametrize(
    ("text", "title"),
    [
        pytest.param(".. currentmodule:: asyncio\n\n.. _asyncio-queues:\n\n======\nQueues\n"
                     "======\n\nText.\n", "Queues", id="rst-directives-first"),
        pytest.param(":mod:`ast` --- Abstract Syntax Trees\n=================================="
                     "==\n\n.. module:: ast\n", "ast --- Abstract Syntax Trees", id="rst-role"),
        pytest.param(".. note::\n\n   indented body\n\nPlain first line\nmore\n",
                     "Plain first line", id="no-heading"),
        pytest.param("```\n# not a heading\n```\n# Real **title**\n\ntext\n", "Real title",
                     id="markdown"),
    ],
)
def test_titles_never_come_from_a_directive(text: str, title: str) -> None:
    """The title is the first heading near the top, else the first line of text."""
    markdown = "```" in text
    assert text_title(text, text_headings(text, markdown=markdown)) == title


def test_rst_heading_levels_follow_their_underlines() -> None:
    """Overlined and underlined styles get levels in order of first appearance."""
    text = "=====\nTitle\n=====\n\nA\n-\n\nSection\n-------\n\nSub\n~~~\n\nOther\n-----\n"
    assert [(lv, h) for _, lv, h in text_headings(text, markdown=False)] == [
        (1, "Title"), (2, "Section"), (3, "Sub"), (2, "Other")]


_PARAGRAPH = st.text(st.sampled_from("abcdefghij  "), min_size=1, max_size=3000)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _PARAGRAPH), min_size=1, max_size=12),
       st.integers(1, 4))
def test_passages_are_the_text_end_to_end(sections: list[tuple[bool, str]], pieces: int) -> None:
    """Joined, the passages are the text, however it is fed; none passes MAX; a heading
    starts a passage unless its section before was too short."""
    text, headings = "", []
    for n, (is_heading, body) in enumerate(sections):
        if is_heading:
            headings.append((len(text), 1 + n % 3, f"Heading {n}"))
            text += f"Heading {n}\n\n"
        text += body + "\n\n"
    whole = list(PassageSplitter().feed(text, headings))
    assert "".join(p.text for p in whole) == text
    assert all(len(p.text) <= MAX for p in whole)
    assert [p.start for p in whole] == [sum(len(q.text) for q in whole[:i])
                                        for i in range(len(whole))]
    starts = {p.start for p in whole}
    for offset, _, _ in headings:
        before = max((s for s in starts if s <= offset), default=0)
        assert offset in starts or offset - before <= MIN
    # Fed in blocks (cut at paragraph breaks), the passages still make the text.
    splitter, at = PassageSplitter(), 0
    fed: list[Passage] = []
    inner = {text.find("\n\n", len(text) * k // pieces) + 2 for k in range(1, pieces)} - {1}
    cuts = [*sorted(inner), len(text)]
    for cut in cuts:
        block = text[at:cut]
        marks = [(o - at, lv, h) for o, lv, h in headings if at <= o < cut]
        fed += splitter.feed(block, marks)
        at = cut
    assert "".join(p.text for p in fed) == text


def test_a_one_line_document_is_cut_into_bounded_passages() -> None:
    """A file with no line breaks (minified, or no spaces at all) still makes passages."""
    for text in ("word " * 5000, "x" * 10_000):
        passages = list(PassageSplitter().feed(text, []))
        assert "".join(p.text for p in passages) == text
        assert max(len(p.text) for p in passages) <= MAX and len(passages) > 3


def test_passages_keep_the_path_of_headings_they_lie_under() -> None:
    """A passage's heading is its section's path (h1 › h2), a later h2 replacing an earlier."""
    body = "text " * 100 + "\n\n"
    parts = ["Guide\n\n", body, "Install\n\n", body, "Usage\n\n", body]
    text = "".join(parts)
    marks = [(0, 1, "Guide"), (len(parts[0]) + len(body), 2, "Install"),
             (len(text) - len(body) - len("Usage\n\n"), 2, "Usage")]
    headings = [p.heading for p in PassageSplitter().feed(text, marks)]
    assert headings == ["Guide", "Guide › Install", "Guide › Usage"]


def _manual_page(topic: str, words: list[str]) -> tuple[str, str]:
    """The same page as a reStructuredText source and as the text rendered from it."""
    sections = [(f"{topic.title()} {w}", " ".join(f"{w}{i} of the {topic} module" for i in
                                                   range(60))) for w in words]
    rst = f".. module:: {topic}\n\n{topic}\n{'=' * len(topic)}\n\n" + "".join(
        f"{h}\n{'-' * len(h)}\n\n:func:`{topic}.x` {b}\n\n" for h, b in sections)
    page = f"{topic}\n\n" + "".join(f"{h}\n\n{topic}.x() {b}\n\n" for h, b in sections)
    return rst, page


def test_a_source_and_its_rendered_page_are_the_same_text() -> None:
    """Signatures say a page and its source are one text, and two pages are two."""
    rst, page = _manual_page("zipfile", ["open", "read", "write", "extract"])
    other_rst, other = _manual_page("tarfile", ["open", "add", "list", "extract"])

    def sig(text: str) -> bytes:
        return signature(text, text_headings(text, markdown=False))

    page_marks = [(page.find(h), 2, h) for h in ("Zipfile Open", "Zipfile Read",
                                                  "Zipfile Write", "Zipfile Extract")]
    page_sig = sketches(signature(page, page_marks))
    assert same_text(sketches(sig(rst)), page_sig)
    assert not same_text(sketches(sig(other_rst)), page_sig)
    assert not same_text(sketches(sig(rst)), sketches(sig(other_rst)))
    assert not same_text(page_sig, sketches(signature(other, [])))


def test_a_snippet_is_the_window_with_the_query_words() -> None:
    """The snippet is cut around the words searched for, marked as cut."""
    text = " ".join(["filler"] * 200 + ["queues", "hold", "items", "in", "FIFO", "order"]
                    + ["filler"] * 200)
    cut = snippet(text, ["queue", "fifo"])
    assert "queues hold items in FIFO order" in cut
    assert cut.startswith("… ") and cut.endswith(" …") and len(cut.split()) <= 42
