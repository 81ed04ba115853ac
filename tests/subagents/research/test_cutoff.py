"""Work that can be cut off: a search past its timeout is interrupted and holds nothing.

The slow search is made slow for real: its statement is a recursive query that never
ends unless SQLite interrupts it, run on the connection the index gave the call. So
nothing here waits for a query to be slow enough: without the interrupt the test hangs
(and pytest-timeout fails it).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from subagents.executor import execute_tool_safely
from subagents.research import docsearch
from subagents.research.docindex import DocIndex
from subagents.research.spec import ResearchToolsSpec
from subagents.research.tools import open_research_tools

pytestmark = pytest.mark.anyio

ENDLESS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"


class Endless:
    """A stand-in for docsearch.search whose statement ends only when interrupted."""

    def __init__(self) -> None:
        self.began = threading.Event()
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self.real = docsearch.search

    def __call__(self, conn: sqlite3.Connection, query: str, limit: int,
                 dense: Any = None) -> Any:
        if query != "endless":
            return self.real(conn, query, limit, dense)
        self.began.set()
        try:
            return conn.execute(ENDLESS).fetchone()
        except BaseException as exc:  # recorded: the test asserts what stopped it
            self.error = exc
            raise
        finally:
            self.ended.set()


@pytest.fixture
def endless(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endless]:
    stub = Endless()
    monkeypatch.setattr(docsearch, "search", stub)
    yield stub


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "papers"
    folder.mkdir()
    for i in range(30):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nvanadium{i} flow batteries.\n")
    return folder


def _spec(folder: Path) -> ResearchToolsSpec:
    return ResearchToolsSpec.model_validate({"docs": {"path": str(folder)}})


async def test_a_search_past_its_timeout_is_interrupted_and_holds_nothing(
    folder: Path, tmp_path: Path, endless: Endless
) -> None:
    """The executor's timeout interrupts the statement (its thread ends); the next search,
    a read and a refresh then run at once."""
    async with open_research_tools(_spec(folder), store_dir=tmp_path / "store") as tools:
        result = await execute_tool_safely(tools.tools["docs.search"], {"query": "endless"},
                                           timeout=0.5)
        assert (result.category, result.error_type) == ("transient", "timeout"), result
        assert await anyio.to_thread.run_sync(endless.ended.wait, 30)
        assert isinstance(endless.error, sqlite3.OperationalError)
        assert "interrupt" in str(endless.error)
        found = await execute_tool_safely(tools.tools["docs.search"],
                                          {"query": "vanadium7"}, timeout=10)
        assert found.ok and found.data["results"][0]["path"] == "n7.md"
        read = await execute_tool_safely(tools.tools["docs.read"], {"path": "n3.md"},
                                         timeout=10)
        assert read.ok
    (folder / "n0.md").write_text("# Changed\n\nnow about zinc.\n")
    index = DocIndex.for_folder(folder, tmp_path / "store")
    stats = await anyio.to_thread.run_sync(index.refresh)  # the writer is not blocked
    assert stats.updated == 1
    index.close()


async def test_a_slow_search_never_stalls_the_event_loop_or_other_calls(
    folder: Path, tmp_path: Path, endless: Endless
) -> None:
    """While a search is stuck in SQLite, the loop runs, other searches and reads finish,
    and closing the tools does not wait for it."""
    async with open_research_tools(_spec(folder), store_dir=tmp_path / "store") as tools:
        search = tools.tools["docs.search"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(execute_tool_safely, search, {"query": "endless"},
                                            timeout=None))
            await anyio.to_thread.run_sync(endless.began.wait, 30)
            for i in range(5):
                other = await execute_tool_safely(search, {"query": f"vanadium{i}"},
                                                  timeout=10)
                assert other.ok and other.data["results"][0]["path"] == f"n{i}.md"
            read = await execute_tool_safely(tools.tools["docs.read"], {"path": "n1.md"},
                                             timeout=10)
            assert read.ok
            assert not endless.ended.is_set()  # still running, all along
            tg.cancel_scope.cancel()  # a cancelled run: the statement is interrupted
    assert await anyio.to_thread.run_sync(endless.ended.wait, 30)


def test_a_stopped_refresh_ends_early_and_keeps_what_it_wrote(
    folder: Path, tmp_path: Path
) -> None:
    """A refresh whose stop event is set returns at once; the next one finishes it."""
    index = DocIndex.for_folder(folder, tmp_path / "store")
    stop = threading.Event()
    stop.set()
    early = index.refresh(stop)
    assert early.added == 0
    assert index.is_stale()
    assert index.refresh().added == 30
    index.close()
