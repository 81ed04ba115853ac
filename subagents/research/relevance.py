"""How well a piece of text answers a query: weighted terms, segments, the best window.

Both the document search (which passage, and which part of it, answers) and the
extractive answer (which sentences to quote) ask the same question of a text, so it is
answered here once:

- **Terms.** A query's content words (function words left out), each weighted by how
  rare it is: the inverse document frequency of the word among the index's passages
  when an index counted it, else a weight by length (a long word names more). A term
  matches a word of the text that begins with its stem (``cache`` matches "cached",
  "caching"; ``copy`` "copied"), as the index's porter stemmer would, roughly.
- **Segments.** A passage is cut into the units an answer quotes: sentences of prose; a
  code block, a command line or a list item whole (never cut in the middle); a short
  label line (a man page's ``--timeout <seconds>``, or an entry's several names, ``-u``
  and ``--include-untracked``) joined to the sentence it introduces. Segments are spans
  of the text: quoting one quotes the document verbatim.
- **Coverage.** The weighted share of the query's terms a span holds (0–1): what
  ``docs.search`` reports as a passage's ``match``. Whether a search answers the
  question at all is judged on one segment (:func:`answering_coverage`,
  :data:`MATCH_THRESHOLD`): the terms together, in the kind of answer asked for.
- **The best window.** The run of segments, at most :data:`WINDOW_CHARS` long, holding the
  most weight with its terms closest together (and the kind of answer asked for): a
  passage's snippet, never merely the first window with a hit. It begins with the
  sentence its first refers back to, ends with what its last announces, and goes on
  with what follows while it has room: the answer is often beside the best sentence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "MATCH_THRESHOLD",
    "NUMBER",
    "STOPWORDS",
    "WINDOW_CHARS",
    "Segment",
    "Terms",
    "answering_coverage",
    "asks_for",
    "best_window",
    "compounds",
    "content_words",
    "contradicting",
    "contradicts",
    "entry_labels",
    "held_terms",
    "introduces",
    "segments",
]

# Function words of a question: they never name a topic (FAQ headings begin "How do I").
_FUNCTION_WORDS = (
    "a about above after again against all am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers herself him himself his how i if in "
    "into is it its itself just me more most my myself no nor not now of off on once only "
    "or other our ours ourselves out over own same she should so some such than that the "
    "their theirs them themselves then there these they this those through to too under "
    "until up very was we were what when where which while who whom why will with would "
    "you your yours yourself yourselves get use using want need way make"
)
STOPWORDS = frozenset(_FUNCTION_WORDS.split())
_MAX_WORDS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
# A word, or a command-line option as written ("-x", "--onto"): an option is a term of
# its own, matched whole ("-x" is not "-xpatience"), and says more than any word.
_TOKEN = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*|\w+", re.UNICODE)
MATCH_THRESHOLD = 0.85
"""The weighted share of a query's terms that one segment a search shows (a sentence, a
command, an item, with its page's title and section heading) must hold, of the kind
the question asks for, for the search to count as answering it. Chosen on the git set
of the answers benchmark (the lowest value with no wrong answer claiming coverage
there), then checked on the other two sets (``benchmarks/README.md``): a passage that
holds the words here and there is about the topic, not yet an answer."""
WINDOW_CHARS = 800
"""The most a snippet holds (a code block longer than this is shown up to it)."""
_BLANK_LINE = re.compile(r"\n\s*\n")
_KIND_WEIGHT = 0.25  # more weight a window holding the kind of answer asked has
_CODE_FENCE = re.compile(r"^\s*(?:-{4,}|`{3,}|~{3,}|\.{4,})\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)]|<\d+>)\s+\S")
_PROMPT = re.compile(r"^\s*(?:\$|>>>|%|sqlite>|\w+@[\w.-]+[:~][^\s]*[$#])\s")
# A sentence ends at . ! ? (and a closing quote or bracket), before a space and a capital,
# a digit, an opening quote or bracket, or the end; never after a
# common abbreviation ("e.g.", "i.e.", "etc.", "vs.").
_END = re.compile(r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9`<$-]|\s*$)")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|no|fig|resp|ca)\.$", re.IGNORECASE)


_OPTION_WEIGHT = 6.0  # an option's weight: as a word in one passage of a few hundred
_SUFFIXES = ("ations", "ation", "ments", "ment", "ness", "ency", "ence", "ance", "ings",
             "ing", "ity", "ies", "ers", "ent", "ant", "ive", "er", "es", "ed", "ly", "s", "e")


def _stem(word: str) -> str:
    """The part of a word its inflections share: one common suffix off, four letters
    kept ("caching" and "cache" → "cach", "commits" → "commit", "efficient" and
    "efficiency" → "effici")."""
    if word.startswith("-"):
        return word  # an option: matched whole
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _stems(word: str) -> str:
    """The stems a word's inflections begin with, "|"-joined: its stem, and where a "y"
    turns to "i" before a suffix, both ("copy" → "copy|copi", which "copied" and
    "copies" begin with; "queries" → "queri|query")."""
    stem = _stem(word)
    if len(word) >= 4 and word.endswith("y") and word[-2] not in "aeiouy":
        return f"{stem}|{word[:-1]}i"
    if len(word) >= 6 and word.endswith(("ies", "ied")):
        return f"{word[:-3]}i|{word[:-3]}y"
    return stem


# What a question asks for, beyond its words: "how long" is answered in seconds or
# minutes, "how many" by a number. Added as terms of half a mean weight (a passage that
# states the duration answers "how long … by default", though it says neither word).
# "How long can a string be?" asks for a length (what a thing can *be*), "how long does
# it keep …" for a duration.
_CAN_BE = r"(?:can|could|may|might|must|should|will) .{0,60}\bbe\b"
_ASKS_FOR = (
    (re.compile(rf"\bhow long (?={_CAN_BE})", re.I),
     ("length", "bytes", "characters", "maximum", "limit")),
    (re.compile(rf"\bhow (?:long|much time)\b(?! {_CAN_BE})", re.I),
     ("seconds", "minutes", "hours", "days", "timeout", "expire")),
    (re.compile(r"\bhow (?:many|much|large|big)\b|\bmaximum\b|\blimit\b", re.I),
     ("number", "maximum", "limit", "default")),
)


# A word written with hyphens ("auto-increment", "credential-cache"), not an option.
_COMPOUND = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])")


def compounds(query: str) -> dict[str, list[str]]:
    """The words ``query`` writes with hyphens, each as one word ("auto-increment":
    "autoincrement", as a document may write it), with its halves (["auto",
    "increment"], the terms it is read as)."""
    return {m.group(0).lower().replace("-", ""): m.group(0).lower().split("-")
            for m in _COMPOUND.finditer(query)}


def content_words(query: str) -> list[str]:
    """The distinct words of ``query`` (at most 32), lower-cased, in order; function words
    left out when the query has others ("how do I read a CSV file": read, csv, file)."""
    words = list(dict.fromkeys(w.lower() for w in _TOKEN.findall(query)))
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:_MAX_WORDS]


def _holds(lowered: str, stem: str) -> bool:
    """Whether a word of ``lowered`` begins with ``stem``."""
    option = stem.startswith("-")
    at = lowered.find(stem)
    while at >= 0:
        before = lowered[at - 1] if at else " "
        if not (before.isalnum() or before == "_" or (option and before == "-")):
            if not option:
                return True
            after = lowered[at + len(stem)] if at + len(stem) < len(lowered) else " "
            if not (after.isalnum() or after in "_-"):
                return True
        at = lowered.find(stem, at + 1)
    return False


@dataclass(frozen=True, slots=True)
class Terms:
    """A query's terms, each with its weight (the weights sum to 1)."""

    words: tuple[str, ...]
    stems: tuple[str, ...]
    weights: tuple[float, ...]

    @classmethod
    def of(cls, query: str, frequency: Mapping[str, int] | None = None,
           total: int = 0) -> Terms:
        """The terms of ``query``; ``frequency`` (passages holding each word, out of
        ``total``) weights them by rarity, else their length does."""
        words = content_words(query)
        raw = []
        for word in words:
            if word.startswith("-"):
                raw.append(_OPTION_WEIGHT)
            elif frequency is not None and total > 0 and word in frequency:
                df = min(frequency[word], total)
                raw.append(math.log(1.0 + (total - df + 0.5) / (df + 0.5)))
            else:
                raw.append(1.0 + min(len(word), 12) / 4)
        extra: list[str] = []
        for pattern, asks in _ASKS_FOR:
            found = pattern.search(query)
            if found:
                extra += [w for w in asks if w not in words and w not in extra]
                # "long" of "how long" asks for a duration; it names no topic.
                asked = found.group(0).lower().split()[-1]
                if asked in words and asked not in asks:
                    at = words.index(asked)
                    del words[at], raw[at]
        if extra and raw:
            # Any one of them answers: together they weigh half a mean term.
            share = 0.5 * sum(raw) / len(raw)
            words = [*words, "|".join(extra)]
            raw.append(share)
        norm = sum(raw) or 1.0
        # A compound's later halves are also found in it written as one word ("increment"
        # of "auto-increment" in "AUTOINCREMENT"; "auto" begins it anyway).
        joined = {half: whole for whole, halves in compounds(query).items()
                  for half in halves[1:]}
        stems = tuple("|".join(_stems(a) for a in [*w.split("|"), *(
            [joined[w]] if w in joined else [])]) for w in words)
        return cls(tuple(words), stems, tuple(r / norm for r in raw))

    def __bool__(self) -> bool:
        return bool(self.words)

    def present(self, text: str) -> list[bool]:
        """Which terms ``text`` holds (a word beginning with the term's stem)."""
        lowered = text.lower()
        return [any(_holds(lowered, stem) for stem in stems.split("|"))
                for stems in self.stems]

    def coverage(self, text: str) -> float:
        """The weighted share of the terms ``text`` holds (0–1)."""
        return sum(w for w, hit in zip(self.weights, self.present(text), strict=True) if hit)

    def missing(self, texts: Iterable[str]) -> list[str]:
        """The terms none of ``texts`` holds, heaviest first."""
        held = [False] * len(self.words)
        for text in texts:
            held = [a or b for a, b in zip(held, self.present(text), strict=True)]
        gone = [(w, word) for w, word, h in zip(self.weights, self.words, held, strict=True)
                if not h and "|" not in word]  # what the question asks for is no word of it
        return [word for _, word in sorted(gone, key=lambda p: -p[0])]


# What kind of answer a question asks for: a value ("how many", "which port": a number
# answers) or a way ("how do I": a command, an option, a code block answers).
_ASKS_AMOUNT = re.compile(r"\bhow (?:many|much|long|large|big|old|often)\b", re.IGNORECASE)
_ASKS_VALUE = re.compile(r"\b(?:maximum|minimum|limit|port|size|number|exit code)\b",
                         re.IGNORECASE)
_ASKS_WAY = re.compile(r"\bhow (?:do|can|could|should|would) (?:i|you|we|one)\b|\bhow to\b",
                       re.IGNORECASE)
# A command, an option, a setting or a man page named in prose: "--cached",
# "$ dpkg -S", "`x`", "PRAGMA", "reportbug(1)", "init.defaultBranch=main".
_COMMANDISH = re.compile(
    r"(?<![\w-])--?[A-Za-z][\w-]*|\$ |`|\b[A-Z]{3,}\b|\w\(\d\w*\)|[\w.]+=\S")
# A number as a value: digits standing alone ("900", "60 days", "1,000,000,000", "0.5",
# "HEAD~3"), not digits inside a name ("sqlite3_limit", "utf8", "x86_64", "UTF-16").
NUMBER = re.compile(r"(?<!\w)(?<![A-Za-z_]-)\d+(?:[.,]\d+)*(?![A-Za-z_])")


# A question that asks to keep something ("undo the commit but keep the changes", "get
# the stash back without deleting it") …
_ASKS_KEEP = re.compile(
    r"\b(?:keep|keeping|preserve|preserving|retain|retaining)\b|"
    r"\bwithout\s+(?:losing|deleting|removing|discarding|destroying)\b", re.IGNORECASE)
# … is not answered by what says it loses it: "Undo commits permanently", "throw away",
# "you do not want to ever see them again". Words that name a loss in any documentation,
# never one document's commands.
_LOSS = re.compile(
    r"\b(?:permanently|irrevocabl\w*|irrecoverabl\w*|irreversibl\w*|discard\w*|"
    r"destroy\w*|throw(?:s|ing)?\s+(?:\w+\s+)?away|get\s+rid\s+of|wip(?:e|es|ed|ing)\b|"
    r"los(?:e|es|ing|t)\b|ever\s+see\s+\w+\s+again)", re.IGNORECASE)
# "will not lose", "never be discarded", "without losing": the loss itself denied ("you do
# not want to ever see them again" denies the wish, and is a loss).
_NEGATED = re.compile(r"(?:\b(?:not|never|no|without)|n't)\s+(?:\w+\s+)?$", re.IGNORECASE)


def contradicts(query: str, text: str) -> bool:
    """Whether ``text`` says it loses what ``query`` asks to keep: the question asks to
    keep, preserve or not lose something, and the text speaks of losing, discarding or
    destroying, not negated ("Undo commits permanently … you do not want to ever see
    them again" for "undo the last commit but keep the changes"). Such a sentence shares
    the question's words and is the opposite of its answer."""
    if not _ASKS_KEEP.search(query) or _LOSS.search(query):
        return False
    for found in _LOSS.finditer(text):
        if not _NEGATED.search(text, max(0, found.start() - 40), found.start()):
            return True
    return False


def asks_for(query: str) -> str | None:
    """``"value"`` (a number answers it), ``"way"`` (a command or code answers it) or
    None: what kind of answer the question asks for."""
    if _ASKS_AMOUNT.search(query):
        return "value"
    if _ASKS_WAY.search(query):
        return "way"  # "how can I limit …": a way, though it names a limit
    if _ASKS_VALUE.search(query):
        return "value"
    return None


def answering_coverage(terms: Terms, text: str, context: str = "",
                       asks: str | None = None) -> float:
    """The most of ``terms`` one segment of ``text`` holds (with ``context``: its title
    and heading) among the segments that are the kind of answer ``asks`` wants (a number
    in it, or a command, for "value" and "way"; a segment announcing a command counts
    as holding it). The terms of a question found together, in what would answer it."""
    segs = segments(text)
    around = terms.present(context)
    best = 0.0
    for i, hits in enumerate(held_terms(terms, text, segs)):
        if asks is not None and not _of_kind(text, segs, i, asks):
            continue
        best = max(best, sum(w for w, h, c in zip(terms.weights, hits, around, strict=True)
                             if h or c))
    return best


# A section number a heading begins with ("9.7.8. Mounting …", "2.2 Date and Time"): no
# value of the text.
_SECTION_NUMBER = re.compile(r"^\s*(?:\d+\.)*\d+\.?\s")


def _of_kind(text: str, segs: list[Segment], i: int, asks: str) -> bool:
    """Whether segment ``i`` is the kind of answer ``asks`` wants: a number in it (a
    section's number aside) for "value", a command or code for "way" (a sentence
    announcing a command counts as holding it)."""
    seg = segs[i]
    piece = text[seg.start:seg.end]
    announced = text[segs[i + 1].start:segs[i + 1].end] if introduces(text, segs, i) else ""
    if asks == "value":
        return NUMBER.search(_SECTION_NUMBER.sub("", piece) + announced) is not None
    if asks == "way":
        return seg.kind == "code" or bool(announced) or _COMMANDISH.search(piece) is not None
    return True


@dataclass(frozen=True, slots=True)
class Segment:
    """A unit an answer quotes: ``text[start:end]`` of a passage, and what it is."""

    start: int
    end: int
    kind: str  # "sentence" | "code" | "item" | "label"
    labelled: bool = False  # it begins with a label line that introduces it


def _is_code_line(line: str) -> bool:
    return bool(line.strip()) and (line.startswith(("  ", "\t")) or bool(_PROMPT.match(line)))


def segments(text: str) -> list[Segment]:
    """The segments of ``text``, in order: code blocks and list items whole, prose as
    sentences, a short label line joined to the sentence after it."""
    out: list[Segment] = []
    lines = text.split("\n")
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    i = 0
    n = len(lines)
    label: int | None = None  # where a pending label line starts
    chained = 0  # label lines since it (the names of one entry)
    label_end = 0  # where its last line ends
    listing = False  # after a paragraph ending with a colon, until a paragraph of prose
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _CODE_FENCE.match(line):
            j = i + 1
            while j < n and not _CODE_FENCE.match(lines[j]):
                j += 1
            end = offsets[j] + len(lines[j]) if j < n else len(text)
            out.append(Segment(offsets[i], end, "code"))
            label, listing = None, False
            i = j + 1
            continue
        if _is_code_line(line):
            j = i + 1
            while j < n and (_is_code_line(lines[j]) or (
                    not lines[j].strip() and j + 1 < n and _is_code_line(lines[j + 1]))):
                j += 1
            start = label if label is not None else offsets[i]
            out.append(Segment(start, offsets[j - 1] + len(lines[j - 1]), "code",
                               label is not None))
            label, listing = None, False
            i = j
            continue
        # A paragraph of prose: up to a blank line, a fence or a code line.
        j = i + 1
        while j < n and lines[j].strip() and not _CODE_FENCE.match(lines[j]) \
                and not _is_code_line(lines[j]) and not _LIST_ITEM.match(lines[j]):
            j += 1
        para_start = offsets[i]
        para_end = offsets[j - 1] + len(lines[j - 1])
        para = text[para_start:para_end]
        # A short line is a label or, after a colon, an item; one ending with a colon
        # is a sentence announcing what follows ("… is used to set an upper bound on:"),
        # and so is one ending "the following" without it ("For example, try the
        # following" before a session): no entry's name. (AsciiDoc's "-S<string>::" is a
        # label).
        tail = para.rstrip()
        short = j == i + 1 and len(para.strip()) <= 80 and (
            not tail.endswith((".", "!", "?", ":")) or tail.endswith("::")) and \
            not _FOLLOWING.search(tail)
        if _LIST_ITEM.match(line) or (short and listing):
            # "… an upper bound on:" then "The number of columns in a table", "… in an
            # index": short lines after a colon are its list (a page's <li> without a
            # bullet), not labels of entries: what follows them is still the same entry.
            start = label if label is not None else para_start
            out.append(Segment(start, para_end, "item", label is not None))
            label = None
        elif short:
            if label is not None and not (chained < _CHAIN and _term_like(para)
                                          and _term_like(text[label:para_start])):
                out.append(Segment(label, label_end, "label"))
                label = None
            if label is None:
                label, chained = para_start, 1  # joined to what follows
            else:
                chained += 1  # "-u", "--include-untracked": one entry's names
            label_end = para_end
        else:
            listing = tail.endswith(":")
            first = True
            for s, e in _sentences(para):
                labelled = first and label is not None
                start = label if labelled and label is not None else para_start + s
                out.append(Segment(start, para_start + e, "sentence", labelled))
                first = False
            label = None
        i = j
    if label is not None:
        out.append(Segment(label, label_end, "label"))
    return out


# What announces the lines after it: "… the following", "… as follows".
_ANNOUNCES = r"the\s+following|as\s+follows"
# A line announcing what follows without a colon ("For example, try the following").
_FOLLOWING = re.compile(rf"\b(?:{_ANNOUNCES})\s*$", re.IGNORECASE)
_CHAIN = 4  # label lines that name one entry, at most
_TERM = re.compile(r"\S+(?:\s+\S+){0,2}")


def _term_like(lines: str) -> bool:
    """Whether each line of ``lines`` is a term, not a phrase: at most three words and
    forty characters ("-u", "--include-untracked", "init.defaultBranch"). The names of
    one entry of a definition list are such lines, one after another; a list's items
    or a table's rows are longer."""
    return all(len(ln) <= 40 and _TERM.fullmatch(ln.strip()) is not None
               for ln in lines.split("\n") if ln.strip())


def _sentences(para: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of a paragraph (whitespace trimmed)."""
    spans = []
    start = 0
    for m in _END.finditer(para):
        if _ABBREV.search(para, 0, m.start() + 1):
            continue
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(para)))
    out = []
    for s, e in spans:
        piece = para[s:e]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            out.append((s + lead, s + lead + len(stripped)))
    return out


def best_window(
    text: str, terms: Terms, *, limit: int = WINDOW_CHARS, heading: str = "",
    asks: str | None = None, query: str = "",
) -> tuple[int, int]:
    """``(start, end)`` of the run of segments of ``text`` that best answers ``terms``:
    the most weight (terms the heading already holds count half; a window holding the
    kind of answer ``asks`` wants, a number or a command, weighs :data:`_KIND_WEIGHT`
    more), then the terms closest together, then the earliest; at most
    ``limit`` characters, whole segments only (one segment longer than that is cut at a
    line or word end). A segment that :func:`contradicts` ``query`` counts nothing."""
    segs = segments(text)
    if not segs:
        return 0, 0
    in_heading = terms.present(heading) if heading else [False] * len(terms.words)
    weights = [w * (0.5 if h else 1.0) for w, h in zip(terms.weights, in_heading,
                                                        strict=True)]
    hits = held_terms(terms, text, segs)
    against = contradicting(query, text, segs)
    hits = [[False] * len(weights) if a else h for a, h in zip(against, hits, strict=True)]
    kinds = [asks is not None and _of_kind(text, segs, k, asks) for k in range(len(segs))]
    best: tuple[float, float, int] | None = None
    best_span = (segs[0].start, segs[0].end)
    for i in range(len(segs)):
        held = [False] * len(weights)
        kind = False
        for j in range(i, len(segs)):
            if j > i and (segs[j].end - segs[i].start > limit or _opens(text, segs[j])):
                break  # too long, or the next item of a list of terms begins
            held = [a or b for a, b in zip(held, hits[j], strict=True)]
            kind = kind or kinds[j]
            value = sum(w for w, h in zip(weights, held, strict=True) if h)
            if kind:
                value *= 1.0 + _KIND_WEIGHT
            if value <= 0:
                continue
            length = segs[j].end - segs[i].start
            key = (value, -length / max(1, limit), -i)
            if best is None or key > best:
                best, best_span = key, (segs[i].start, segs[j].end)
            # One more segment only pays if it adds weight: a window longer than needed
            # is kept from winning by the length term.
    start, end = best_span
    if end - start > limit:
        return start, _cut(text, start, start + limit)
    # A window that begins "If the script exits with this code, …" begins with the
    # sentence it refers back to.
    first = next((k for k, s in enumerate(segs) if s.start == start), None)
    while first is not None and refers_back(text, segs, first) and \
            end - segs[first - 1].start <= limit + limit // 2:
        first -= 1
        start = segs[first].start
    # A window that ends announcing a command or a list ends with it: the sentence "you
    # should configure APT as the following." answers only with what follows (up to
    # half a window more).
    last = next((k for k, s in enumerate(segs) if s.end == end), None)
    while last is not None and introduces(text, segs, last) and \
            segs[last + 1].end - start <= limit + limit // 2:
        last += 1
        end = segs[last].end
    # What follows in the same entry, while the window has room: what a passage says
    # next most often completes it (the command after the sentence, the value after the
    # name).
    while last is not None and last + 1 < len(segs) and not _opens(text, segs[last + 1]) \
            and segs[last + 1].end - start <= limit:
        last += 1
        end = segs[last].end
    return start, end


# A sentence that announces what follows it ("… as the following:", "… by the
# following.", "For example:"): the command or list after it is its answer.
_INTRODUCER = re.compile(
    rf"(?::|\b(?:{_ANNOUNCES}|like\s+this|for\s+example)\s*[.:]?)\s*$", re.IGNORECASE)


def introduces(text: str, segs: list[Segment], i: int) -> bool:
    """Whether segment ``i`` announces the one after it: a sentence ending "as the
    following." or ":" before a code block, a list or a command line; or the last
    sentence of a paragraph right before a code block, which shows what it says ("…
    then the following mounts it." — "you can split it into chunks and merge them back
    later." followed by the commands that do it)."""
    if i + 1 >= len(segs) or segs[i].kind == "code":
        return False
    after = segs[i + 1]
    if after.kind not in ("code", "item") and not after.labelled:
        return False
    if _INTRODUCER.search(text[segs[i].start:segs[i].end]):
        return True
    # A code block of its own (not an item's label with its code) right after prose.
    return after.kind == "code" and not after.labelled and segs[i].kind == "sentence"


# A sentence that refers back to the one before it: it begins with a pronoun or a
# connective ("It …", "This option …", "Otherwise, …"), names "this code", "these
# files" within its first words, or goes on from it ("SQLite will then manage …").
_REFERS_BACK = re.compile(
    r"\W*(?:(?:this|these|those|that|such|it|its|they|their|them|otherwise|instead|"
    r"then|however|here|there)\b|(?:\S+\s+){1,5}(?:this|these|those|such)\s+\w|"
    r"(?:\S+\s+){1,3}then\s+\w)",
    re.IGNORECASE)


def refers_back(text: str, segs: list[Segment], i: int) -> bool:
    """Whether sentence ``i`` refers back to the sentence before it in its paragraph
    ("If the script exits with this code, …" after "The special exit code 125 …"): it
    says nothing without it."""
    if i == 0 or segs[i].kind != "sentence" or segs[i].labelled:
        return False
    prev = segs[i - 1]
    return prev.kind == "sentence" and _BLANK_LINE.search(text, prev.end, segs[i].start) \
        is None and _REFERS_BACK.match(text, segs[i].start) is not None


def contradicting(query: str, text: str, segs: list[Segment]) -> list[bool]:
    """Per segment of ``text``: whether it :func:`contradicts` ``query``, or belongs to an
    entry (a label or labelled segment and what follows it, up to the next) of which one
    segment does: "Undo commits permanently" and its command, or "Undo a commit, making
    it a topic branch" whose command "rewinds the branch to get rid of those commits"."""
    against = [bool(query) and contradicts(query, text[s.start:s.end]) for s in segs]
    if not any(against):
        return against
    # Where the entry of segment k began (0: before the first, the page's own).
    entries = [0 if e is None else e for e in _entries(text, segs)]
    lost = {entries[k] for k in range(len(segs)) if against[k] and _opens(text, segs[entries[k]])}
    return [a or entries[k] in lost for k, a in enumerate(against)]


_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def _entries(text: str, segs: list[Segment]) -> list[int | None]:
    """Per segment: the index of the segment opening the entry it belongs to (a label, or
    a labelled segment, and what follows it up to the next), None before the first."""
    entry: int | None = None
    out: list[int | None] = []
    for k, seg in enumerate(segs):
        if _opens(text, seg):
            entry = k
        out.append(entry)
    return out


def _label(text: str, seg: Segment) -> str:
    """The label lines an entry begins with ("-u", "--include-untracked")."""
    names: list[str] = []
    for line in text[seg.start:seg.end].split("\n"):
        if not line.strip():
            continue
        if len(names) == _CHAIN or not _term_like(line):
            break
        names.append(line)
    return "\n".join(names) or text[seg.start:seg.end].split("\n", 1)[0][:80]


_GRAMMAR = "[|("  # what an option follows in a synopsis: "[-x]", "(--continue | --skip)"


def _listed(lowered: str, option: str) -> bool:
    """Whether every mention of ``option`` in ``lowered`` is an alternative of a usage
    line ("[-x]", "| --skip"), not prose about it (true when there is none)."""
    at = lowered.find(option)
    while at >= 0:
        before = lowered[:at].rstrip()[-1:]
        after = lowered[at + len(option):at + len(option) + 1]
        if not (after.isalnum() or after in "_-") and (not before or before not in _GRAMMAR):
            return False
        at = lowered.find(option, at + 1)
    return True


def entry_labels(text: str, segs: list[Segment]) -> list[str]:
    """Per segment: the label lines of the entry it belongs to ("Maximum Number Of
    Columns", "-x"), "" before the first entry: what the entry is about, as a heading
    says what its section is about."""
    labels: dict[int, str] = {}
    out = []
    for entry in _entries(text, segs):
        if entry is None:
            out.append("")
            continue
        if entry not in labels:
            labels[entry] = _label(text, segs[entry])
        out.append(labels[entry])
    return out


def held_terms(terms: Terms, text: str, segs: list[Segment]) -> list[list[bool]]:
    """Per segment of ``text``: which of ``terms`` it holds, an option of the question
    counted only where it is the subject. In the entry of another option (a definition
    list's "-r: … the default is not to do -x …"), a mention of the question's option
    ("-x") says what that other option does, not what ``-x`` does: it is not held there.
    An entry with no option in its label, or the option's own entry, holds it as said."""
    hits = [terms.present(text[s.start:s.end]) for s in segs]
    options = [k for k, word in enumerate(terms.words) if word.startswith("-")]
    if not options:
        return hits
    for k, seg in enumerate(segs):
        lowered = text[seg.start:seg.end].lower()
        for o in options:
            if hits[k][o] and all(_listed(lowered, stem) for stem in terms.stems[o].split("|")):
                hits[k][o] = False  # "[-n] [-x] [--ff]": a synopsis lists it, says nothing
    for k, label in enumerate(entry_labels(text, segs)):
        if not any(hits[k][o] for o in options):
            continue
        label = label.lower()
        if not _OPTION.search(label):
            continue  # none, or an entry named by words ("Undo a commit"): it counts
        for o in options:
            if hits[k][o] and not any(_holds(label, stem) for stem in terms.stems[o].split("|")):
                hits[k][o] = False
    return hits


def _opens(text: str, seg: Segment) -> bool:
    """Whether a segment begins a new item: a label line ("Undo commits permanently",
    "--timeout <seconds>") and what it introduces. A window never runs into one: the end
    of the item before it is no part of its answer."""
    return seg.kind == "label" or seg.labelled


def _cut(text: str, start: int, end: int) -> int:
    """Where to end a span that must stop by ``end``: a line end, else a word end."""
    at = text.rfind("\n", start, end)
    if at > start + (end - start) // 2:
        return at
    at = text.rfind(" ", start, end)
    return at if at > start else end
