"""`fanout index` and `fanout ask --docs` on a hostile folder; private fetches only by flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.coordinator.cli.test_ask_research import DOCS_TOOLS, _cli

# The CLI, as a subprocess.
pytestmark = [pytest.mark.timeout(300), pytest.mark.process]


def _hostile(tmp_path: Path) -> Path:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "perovskite.md").write_text(
        "# Perovskite tandem cells\n\nPerovskite-silicon tandem cells reached 33.9 percent.\n")
    with open(os.fsencode(papers) + b"/r\xe9sum\xe9.md", "wb") as f:  # not UTF-8
        f.write(b"# R\xc3\xa9sum\xc3\xa9\n\nTandem notes.\n")
    (papers / "blob.md").write_bytes(b"\x00\x01\x02binary" * 1000)
    with open(papers / "giant.txt", "wb") as f:
        f.truncate(50_000_000)  # sparse, over --max-bytes
    return papers


def test_index_lists_what_it_skipped_and_why(tmp_path: Path) -> None:
    """For people and for programs: the skipped files, each with its reason; a name that is
    not UTF-8 shown escaped; no traceback."""
    papers = _hostile(tmp_path)
    done = _cli(tmp_path, "index", str(papers), "--max-bytes", "20000000")
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "not indexed: blob.md: binary content" in out
    assert "not indexed: giant.txt: larger than docs.max_bytes" in out
    assert "Traceback" not in done.stderr
    again = _cli(tmp_path, "index", str(papers), "--json")
    assert again.returncode == 0, again.stderr
    stats = json.loads(again.stdout)
    assert stats["unchanged"] == 4 and stats["documents"] == 2
    assert {s["path"] for s in stats["skipped"]} == {"blob.md", "giant.txt"}
    assert "r\\xe9sum\\xe9.md" not in {s["path"] for s in stats["skipped"]}


def test_ask_on_a_folder_with_a_non_utf8_name_runs(tmp_path: Path) -> None:
    """--docs over a folder holding a name that is not UTF-8 indexes it and answers."""
    papers = _hostile(tmp_path)
    (tmp_path / "tools.yaml").write_text(DOCS_TOOLS)
    done = _cli(tmp_path, "ask", "How efficient are tandem cells?", "--tools", "tools.yaml",
                "--docs", str(papers), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["answer"]["sources"][0]["path"] == "perovskite.md"


def test_two_index_commands_at_once_both_finish(tmp_path: Path) -> None:
    """Two `fanout index` of one folder at once: one writes, the other waits; no
    "database is locked"."""
    papers = tmp_path / "papers"
    papers.mkdir()
    for i in range(400):
        (papers / f"n{i}.md").write_text(f"# Note {i}\n\n" + "cobalt nickel iron " * 400)
    env = {**os.environ, "FANOUT_STORE": str(tmp_path / "runs.sqlite")}
    procs = [subprocess.Popen([sys.executable, "-m", "coordinator.cli", "index", str(papers),
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    added = sorted(json.loads(out)["added"] for out, _ in outs)
    assert added == [0, 400]


@pytest.mark.parametrize("command", ["run", "ask"])
def test_a_file_cannot_allow_private_fetches(tmp_path: Path, command: str) -> None:
    """A job or tools file setting allow_private: exit 2 naming the file, line and field."""
    body = ("research_tools:\n  web:\n    fetch:\n      allow_private: true\n")
    if command == "run":
        (tmp_path / "job.yaml").write_text(
            "scenario: peek\n" + body + "job:\n  query: q\n  subtasks:\n    - id: a\n"
            "      query: q\n      tools: [web.fetch]\n"
            "      plan: [{call: web.fetch, args: {url: 'http://127.0.0.1/'}}]\n")
        done = _cli(tmp_path, "run", "job.yaml")
        where = "job.yaml:5"
    else:
        (tmp_path / "tools.yaml").write_text(body)
        done = _cli(tmp_path, "ask", "q?", "--tools", "tools.yaml")  # retrieval only
        where = "tools.yaml:4"
    assert done.returncode == 2, done.stdout + done.stderr
    err = " ".join(done.stderr.split())
    assert where in err and "research_tools.web.fetch.allow_private" in err
    assert "--allow-private-fetch" in err and "Traceback" not in done.stderr
