"""Hostile files in a documents folder: each indexed, or skipped and listed, never a crash.

The corpus: a file name that is not UTF-8, a one-line HTML file over the size limit (the
limit made small, so the file stays small), a 200 MB text file (sparse: it costs no
disk, and is never read), a binary named ``.md``, an image named ``.html``, a ``.pdf``
that is not one — and two refreshes of one folder at once.
"""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import pytest

from subagents.executor import execute_tool_safely
from subagents.research.docindex import DocIndex
from subagents.research.spec import ResearchToolsSpec
from subagents.research.tools import open_research_tools

pytestmark = pytest.mark.anyio

LIMIT = 1_000_000  # the test's docs.max_bytes


def _corpus(folder: Path) -> dict[str, str]:
    """The hostile folder; what each file is, by its shown name."""
    folder.mkdir()
    (folder / "good.md").write_text("# Sodium cells\n\nSodium-ion cells keep 90% at -20 °C.\n")
    raw = os.fsencode(folder) + b"/caf\xe9-notes.md"  # Latin-1 bytes: not UTF-8
    with open(raw, "wb") as f:
        f.write(b"# Caf\xc3\xa9 notes\n\nThe espresso machine descales weekly.\n")
    one_line = "<html><head><title>Huge</title></head><body>" + (
        "<p>minified paragraph text</p>" * (2 * LIMIT // 30)) + "</body></html>"
    (folder / "huge.html").write_text(one_line)  # one line, twice the limit
    with open(folder / "giant.txt", "wb") as f:
        f.truncate(200_000_000)  # sparse: 200 MB that take no disk
    rng = random.Random(3)
    (folder / "binary.md").write_bytes(bytes(rng.randrange(256) for _ in range(300_000)))
    (folder / "image.html").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    (folder / "fake.pdf").write_bytes(b"# not a PDF at all\n")
    return {
        "good.md": "indexed", "caf\\xe9-notes.md": "indexed",
        "huge.html": "larger than docs.max_bytes", "giant.txt": "larger than docs.max_bytes",
        "binary.md": "binary content", "image.html": "binary content",
        "fake.pdf": "not a PDF",
    }


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "hostile"
    return folder, _corpus(folder)


def test_each_hostile_file_is_indexed_or_skipped_with_its_reason(
    hostile: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """The refresh lists every file it leaves out and why; the rest is searchable, the
    non-UTF-8 name shown escaped, and everything it reports is writable as JSON."""
    folder, expected = hostile
    index = DocIndex.for_folder(folder, tmp_path / "store", max_bytes=LIMIT)
    stats = index.refresh()
    skipped = dict(stats.skipped)
    for name, outcome in expected.items():
        if outcome == "indexed":
            assert name not in skipped, name
        else:
            assert outcome in skipped[name], (name, skipped.get(name))
    assert stats.documents == 2
    json.dumps(stats.to_json(), ensure_ascii=False).encode("utf-8")  # no lone surrogate
    found = index.search("espresso descales", 3)
    assert found[0]["path"] == "caf\\xe9-notes.md" and found[0]["title"] == "Café notes"
    again = index.refresh()  # skipped files stay listed, and are not read again
    assert dict(again.skipped) == skipped and again.unchanged == len(expected)
    index.close()


async def test_docs_read_serves_escaped_names_and_refuses_skipped_files(
    hostile: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """docs.read takes the escaped name search showed; a skipped file is a validation
    failure naming path and saying why; no message carries the folder's path."""
    folder, _ = hostile
    spec = ResearchToolsSpec.model_validate(
        {"docs": {"path": str(folder), "max_bytes": LIMIT}})
    async with open_research_tools(spec, store_dir=tmp_path / "store") as tools:
        read = tools.tools["docs.read"]
        ok = await execute_tool_safely(read, {"path": "caf\\xe9-notes.md"}, timeout=10)
        assert ok.ok and "descales weekly" in ok.data["text"], ok
        for path in ("huge.html", "giant.txt", "binary.md", "image.html"):
            refused = await execute_tool_safely(read, {"path": path}, timeout=10)
            assert (refused.category, refused.field) == ("validation", "path"), refused
            assert str(tmp_path) not in refused.to_json()


def test_an_update_only_refresh_does_not_grow_the_index(tmp_path: Path) -> None:
    """Touching every file re-indexes each; the index file stays its size (a few pages of
    slack), however often it happens."""
    folder = tmp_path / "notes"
    folder.mkdir()
    rng = random.Random(5)
    words = [f"w{i}" for i in range(3000)]
    for i in range(60):
        text = "\n\n".join(" ".join(rng.choices(words, k=120)) for _ in range(20))
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n{text}\n")
    index = DocIndex.for_folder(folder, tmp_path / "store")
    first = index.refresh()
    for round_ in range(3):
        for path in folder.iterdir():
            os.utime(path, ns=(10**18 + round_, 10**18 + round_))
        again = index.refresh()
        assert again.updated == 60 and again.documents == 60
        assert again.size_bytes <= first.size_bytes * 1.02, (round_, again.size_bytes,
                                                             first.size_bytes)
    index.close()


def test_two_refreshes_at_once_have_one_writer(tmp_path: Path) -> None:
    """Two refreshes of one folder at once (two indexes, as two processes have) both
    finish without "database is locked"; every document is indexed once."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(200):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"cobalt{i} nickel " * 300)
    results: list[object] = []

    def refresh() -> None:
        index = DocIndex.for_folder(folder, tmp_path / "store")
        try:
            results.append(index.refresh())
        except Exception as exc:  # the failure is the test's finding
            results.append(exc)
        finally:
            index.close()

    threads = [threading.Thread(target=refresh) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(not isinstance(r, Exception) for r in results) and len(results) == 2, results
    index = DocIndex.for_folder(folder, tmp_path / "store")
    assert sum(r.added for r in results) == 200  # type: ignore[attr-defined]
    assert index.search("cobalt7", 1)[0]["path"] == "n7.md"
    index.close()


async def test_reads_page_through_a_document_with_one_length(tmp_path: Path) -> None:
    """Every window of a long document gives the same length; next_start chains to the
    end and the windows join into the text; reading twice gives the same windows."""
    folder = tmp_path / "long"
    folder.mkdir()
    text = "".join(f"Paragraph {i} about storage and cells.\n\n" for i in range(3000))
    (folder / "long.txt").write_text(text)
    spec = ResearchToolsSpec.model_validate({"docs": {"path": str(folder)}})
    async with open_research_tools(spec, store_dir=tmp_path / "store") as tools:
        read = tools.tools["docs.read"]
        for _ in range(2):
            parts, lengths, start = [], set(), 0
            while start is not None:
                result = await execute_tool_safely(read, {"path": "long.txt", "start": start},
                                                   timeout=10)
                assert result.ok, result
                parts.append(result.data["text"])
                lengths.add(result.data["length"])
                start = result.data["next_start"]
            assert "".join(parts) == text and lengths == {len(text)}
        last = await execute_tool_safely(read, {"path": "long.txt", "start": len(text)},
                                         timeout=10)
        assert last.ok and last.data["text"] == "" and last.data["next_start"] is None
