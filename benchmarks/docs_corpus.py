"""A documentation set the docs benchmark builds: documents of every size, and queries.

- **Topic pages** (``manual/topicN.html``): the right answer of one query each, rendered
  as a documentation page (title, sections, a navigation sidebar naming the other
  topics), with their reStructuredText source beside them (``_sources/...rst.txt``,
  directives first) — the same text under two names.
- **Distractors**: a table of contents naming every topic, and news notes that mention
  two or three topic words once each.
- **Filler** of every size, 1 KB to 1 MB (log-uniform; Markdown, text and HTML), and one
  16 MB HTML page.
- **Queries**: each topic as keywords (its two rare words) and as a question (those
  words among function words and a common one).

The words are made up (Zipf-distributed over a vocabulary), so no result depends on
what either index knows of English. Everything is seeded: the same corpus every time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Query", "make_corpus", "make_text"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Query:
    """One query as keywords and as a question, and the pages that answer it."""

    keywords: str
    question: str
    right: tuple[str, ...]


def _word(rng: random.Random, low: int = 4, high: int = 9) -> str:
    return "".join(rng.choice(_LETTERS) for _ in range(rng.randint(low, high)))


class _Words:
    """A Zipf-weighted vocabulary."""

    def __init__(self, rng: random.Random, size: int = 6000) -> None:
        self.rng = rng
        self.vocab = sorted({_word(rng, 3, 10) for _ in range(size)})
        rng.shuffle(self.vocab)
        self.weights = [1 / (rank + 1) for rank in range(len(self.vocab))]

    def sentence(self, n: int, extra: list[str] | None = None) -> str:
        words = self.rng.choices(self.vocab, self.weights, k=n)
        for word in extra or []:
            words.insert(self.rng.randrange(len(words) + 1), word)
        return " ".join(words).capitalize() + "."

    def paragraphs(self, chars: int, extra: list[str] | None = None) -> list[str]:
        out: list[str] = []
        size = 0
        while size < chars:
            paragraph = " ".join(self.sentence(self.rng.randint(8, 24)) for _ in range(4))
            out.append(paragraph)
            size += len(paragraph) + 2
        if extra:
            out[0] = self.sentence(12, extra) + " " + out[0]
        return out


def _html(title: str, sections: list[tuple[str, list[str]]], nav: list[str]) -> str:
    sidebar = "".join(f'<li><a href="../x{i}.html">{t}</a></li>' for i, t in enumerate(nav))
    body = "".join(
        f"<section><h2>{h}<a class='headerlink' href='#s{i}'>\u00b6</a></h2>"
        + "".join(f"<p>{p}</p>" for p in ps) + "</section>"
        for i, (h, ps) in enumerate(sections)
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title} &#8212; Manual"
        "</title><script>var index = {};</script></head><body>"
        f"<div class='related' role='navigation'><ul>{sidebar}</ul></div>"
        f"<div class='body' role='main'><section><h1>{title}</h1>{body}</section></div>"
        f"<div class='sphinxsidebar' role='navigation'><h3>Next topic</h3><ul>{sidebar}</ul>"
        "</div><footer class='footer'>Copyright. Found a bug?</footer></body></html>"
    )


def _rst(title: str, sections: list[tuple[str, list[str]]], module: str) -> str:
    out = [f".. currentmodule:: {module}", "", f".. _{module}-topic:", "",
           "=" * len(title), title, "=" * len(title), ""]
    for heading, paragraphs in sections:
        out += [heading, "-" * len(heading), ""]
        for paragraph in paragraphs:
            out += [paragraph.replace(module, f":mod:`{module}`", 1), ""]
    return "\n".join(out)


def make_text(path: Path, size: int, seed: int = 11) -> list[str]:
    """A plain text document of about ``size`` bytes, written a block at a time (a
    200 MB one takes a second or two): made-up paragraphs under a title. Returns its
    vocabulary, most frequent first."""
    rng = random.Random(seed)
    words = _Words(rng)
    block = "\n\n".join(words.paragraphs(1 << 20)) + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write("Large document\n==============\n\n")
        written, n = 0, 0
        while written < size:
            chunk = block.replace(". ", f" mark{n}. ", 2)  # each block a little different
            f.write(chunk[: size - written])
            written += len(chunk)
            n += 1
    return words.vocab


def make_corpus(folder: Path, *, fillers: int, topics: int = 16, big_mib: int = 16,
                seed: int = 7) -> list[Query]:
    """Write the corpus under ``folder``; its queries."""
    rng = random.Random(seed)
    words = _Words(rng)
    taken = set(words.vocab)
    rare: list[list[str]] = []
    while len(rare) < topics:
        triple = [_word(rng, 6, 10) for _ in range(3)]
        if not taken.intersection(triple) and len(set(triple)) == 3:
            taken.update(triple)
            rare.append(triple)
    titles = [f"The {a} {b} guide" for a, b, _ in rare]
    queries = []
    for i, (a, b, c) in enumerate(rare):
        sections = [(f"Using {a}", words.paragraphs(2500, [a, b, a])),
                    (f"Configuring {b}", words.paragraphs(3000, [b, c, b])),
                    ("Limits", words.paragraphs(2000, [a, c]))]
        page = folder / "manual" / f"topic{i}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(_html(titles[i], sections, titles[:i] + titles[i + 1:]))
        source = folder / "_sources" / "manual" / f"topic{i}.rst.txt"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(_rst(titles[i], sections, a))
        common = rng.choice(words.vocab[:50])
        queries.append(Query(f"{a} {b}", f"How do I use the {a} with {common} and {b}?",
                             (f"manual/topic{i}.html",)))
    (folder / "contents.html").write_text(_html("Contents", [("All topics", titles)], []))
    for j in range(40):
        mentions = [w for triple in rng.sample(rare, 3) for w in triple[:1]]
        (folder / "news").mkdir(exist_ok=True)
        (folder / "news" / f"n{j}.md").write_text(
            f"# News {j}\n\n" + "\n\n".join(words.paragraphs(1500, mentions)) + "\n")
    kinds = ("md", "txt", "html")
    for k in range(fillers):
        size = int(math.exp(rng.uniform(math.log(1_000), math.log(1_000_000))))
        kind = kinds[k % 3]
        path = folder / "filler" / f"f{k % 20}" / f"doc{k}.{kind}"
        path.parent.mkdir(parents=True, exist_ok=True)
        paragraphs = words.paragraphs(size)
        if kind == "html":
            path.write_text(_html(words.sentence(4)[:-1], [("Part", paragraphs)], titles[:5]))
        else:
            path.write_text(f"# {words.sentence(4)[:-1]}\n\n" + "\n\n".join(paragraphs) + "\n")
    if big_mib:
        big = [(f"Chapter {n}", words.paragraphs(1 << 20)) for n in range(big_mib)]
        (folder / "archive").mkdir(exist_ok=True)
        (folder / "archive" / "big.html").write_text(_html("Archive", big, []))
    return queries
