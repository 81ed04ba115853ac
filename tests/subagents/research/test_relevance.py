"""How a text answers a question: segments, terms and the best window, on small texts
(docs/design.md §10)."""

from __future__ import annotations

from subagents.research.relevance import (
    Terms,
    best_window,
    held_terms,
    introduces,
    refers_back,
    segments,
)


def _window(text: str, question: str, asks: str | None = None, limit: int = 800) -> str:
    start, end = best_window(text, Terms.of(question), limit=limit, asks=asks)
    return text[start:end]


def test_a_sentence_right_before_a_code_block_announces_it() -> None:
    """The last sentence of a paragraph before a code block is shown with the command
    that does what it says, though it ends with a full stop, not "the following:"."""
    text = ("Splitting a large file\n\nWhen a file is too big, you can split it into "
            "chunks and merge them back later.\n\n    $ split -b 2000m large_file\n"
            "    $ cat x* >large_file\n\nCaution: name clashes.")
    segs = segments(text)
    assert introduces(text, segs, 0)
    assert "split -b 2000m" in _window(text, "How do I split a huge file into chunks?",
                                       "way")


def test_a_sentence_before_prose_announces_nothing() -> None:
    """Prose after prose is no announcement: the window is not stretched by it."""
    text = "The cache keeps passwords.\n\nIt forgets them after a while."
    assert not introduces(text, segments(text), 0)


def test_a_value_question_gets_the_window_that_holds_a_value() -> None:
    """Two sentences hold the question's words; the one with a number is the window
    when a number is asked for."""
    text = ("A new database gets its page size set by a compile-time option. "
            + "Filler words about other matters go here. " * 12
            + "When it is made, a new database gets a page size of 4096 bytes.")
    question = "What page size does a new database get?"
    assert "4096" in _window(text, question, "value", limit=120)
    assert "4096" not in _window(text, question, None, limit=120)


def test_the_window_goes_on_with_what_follows_while_it_has_room() -> None:
    """The best sentence is shown with the sentences after it, up to the limit, never
    into the next entry of a list of terms."""
    text = ("--timeout <seconds>\n\nNumber of seconds to keep the password. It is 900 "
            "unless given. The daemon exits then.\n\n--socket <path>\n\nWhere the "
            "daemon listens.")
    shown = _window(text, "timeout seconds")
    assert "900 unless given" in shown and "The daemon exits then." in shown
    assert "--socket" not in shown


def test_the_names_of_one_option_label_its_description_together() -> None:
    """A definition list's entry with several names ("-u", "--include-untracked") is one
    segment with its description; a list of phrases is not chained into one."""
    text = ("-u\n\n--include-untracked\n\nAlso stash untracked files.\n\n"
            "The number of columns in a table\n\nThe number of terms in a clause\n\n"
            "Both are limited.")
    segs = segments(text)
    first = text[segs[0].start:segs[0].end]
    assert first.startswith("-u") and first.endswith("Also stash untracked files.")
    assert segs[0].labelled
    phrases = [text[s.start:s.end] for s in segs[1:]]
    assert phrases[0] == "The number of columns in a table"


def test_a_y_turned_i_still_matches_its_word() -> None:
    """"copy" matches "copied" and "copies"; "queries" matches "query"."""
    terms = Terms.of("copy queries")
    assert terms.present("The text is copied for each query.") == [True, True]
    assert terms.present("It copies nothing; the queries run.") == [True, True]


def test_a_window_begins_with_the_sentence_its_first_refers_back_to() -> None:
    """A window whose best sentence says "with this code" begins with the sentence that
    names the code."""
    text = ("Filler about other matters. " * 20 + "The special exit code 125 should be "
            "used when the source cannot be tested. If the script exits with this code, "
            "the current revision will be skipped.")
    shown = _window(text, "script exits skipped revision", limit=200)
    assert shown.startswith("The special exit code 125")
    assert refers_back(text, segments(text), len(segments(text)) - 1)
    assert not refers_back("One thing. Another thing.", segments("One thing. Another thing."),
                           1)


def test_an_option_is_held_only_where_it_is_the_subject() -> None:
    """The question's option counts in its own entry and in prose, not in another
    option's entry nor as an alternative of a usage line."""
    text = ("SYNOPSIS\n\n    tool pick [-n] [-x] [--ff]\n\nWith the -x option, a line is added.\n\n"
            "-r\n\nNow the default is not to do -x.\n\n-x\n\nAppend a line.\n\n"
            "Only without conflicts.")
    terms = Terms.of("What does -x do?")
    segs = segments(text)
    x = terms.words.index("-x")
    said = {text[s.start:s.end].split("\n")[0]: hits[x]
            for s, hits in zip(segs, held_terms(terms, text, segs), strict=True)}
    assert said == {"SYNOPSIS": False, "With the -x option, a line is added.": True,
                    "-r": False, "-x": True, "Only without conflicts.": False}


def test_short_lines_after_a_colon_are_its_list_not_labels() -> None:
    """A page's list without bullets ("… an upper bound on:" then short lines) is a list
    of items: the window goes through it to the value after it, and an AsciiDoc label
    ("-S<string>::") is still a label."""
    text = ("Maximum Number Of Columns\n\nThe MAX_COLUMN parameter sets an upper bound "
            "on:\n\nThe number of columns in a table\n\nThe number of columns in an index"
            "\n\nThe number of values in an INSERT statement\n\nThe default setting for "
            "MAX_COLUMN is 2000.\n\nMaximum Depth Of Triggers\n\nIt is 1000.")
    segs = segments(text)
    assert [s.kind for s in segs[1:4]] == ["item", "item", "item"]
    shown = _window(text, "What is the maximum number of columns a table can have?",
                    "value")
    assert "is 2000." in shown and "Triggers" not in shown
    label = "-S<string>::\n\nLook for differences in the number of a string."
    assert segments(label)[0].labelled


def test_a_sentence_that_goes_on_with_then_refers_back() -> None:
    """"SQLite will then manage …" goes on from the sentence before it; "then" further in
    ("… and then returns") does not make a sentence refer back."""
    text = ("The constant SQLITE_TRANSIENT makes a private copy. SQLite will then manage "
            "the lifetime of its private copy.")
    assert refers_back(text, segments(text), 1)
    other = "The copy is made. The routine copies the text and then returns."
    assert not refers_back(other, segments(other), 1)


def test_how_long_a_thing_can_be_asks_for_a_length_not_a_duration() -> None:
    """"How long can a string be?" is answered by a length ("the maximum number of
    bytes"), "how long does it keep …" by a duration; both ask for a value."""
    from subagents.research.relevance import asks_for

    length = Terms.of("How long can a string or BLOB value be?")
    assert length.words[-1] == "length|bytes|characters|maximum|limit"
    assert "long" not in length.words
    duration = Terms.of("How long does the cache keep my password?")
    assert duration.words[-1] == "seconds|minutes|hours|days|timeout|expire"
    assert asks_for("How long can a string be?") == asks_for("How long is it kept?") == "value"


def test_a_hyphenated_word_is_also_held_written_as_one() -> None:
    """"auto-increment" is read as its halves, and its later half is found in the word the
    documents write ("AUTOINCREMENT"); the search seeks that word too."""
    from subagents.research.docsearch import query_words
    from subagents.research.relevance import compounds

    question = "How do I make a column auto-increment?"
    assert compounds(question) == {"autoincrement": ["auto", "increment"]}
    assert "autoincrement" in query_words(question)
    terms = Terms.of(question)
    assert terms.coverage("The AUTOINCREMENT keyword on a column.") == 1.0
    assert terms.coverage("The auto-increment of a column.") == 1.0
    assert compounds("use --no-ff or -x") == {}  # options are no compounds


def test_a_line_ending_the_following_announces_and_names_no_entry() -> None:
    """"For example, try the following" before a session is no label of an entry (a
    window would stop before it): it announces the commands, and the window that holds
    the sentence before goes on through it to them."""
    text = ("Undeleting open files\n\nEven if you deleted a file, a program that still has "
            "it open keeps its contents.\n\nFor example, try the following\n\n"
            "    $ less bar\n    $ rm bar\n    $ cat /proc/4775/fd/4\n")
    segs = segments(text)
    line = next(s for s in segs if text[s.start:s.end] == "For example, try the following")
    assert line.kind == "sentence" and not line.labelled
    assert introduces(text, segs, segs.index(line))
    assert "/proc/4775/fd/4" in _window(text, "deleted file program still open contents")
