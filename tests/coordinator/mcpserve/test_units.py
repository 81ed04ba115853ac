"""The door's pieces in-process: which folders a request may name, and the progress a
run's events make."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coordinator.api.run import Prepared
from coordinator.mcpserve import ArgumentRefused, DoorConfig
from coordinator.mcpserve.door import Ticket
from subagents.result import ProgressEvent


@pytest.fixture
def served(tmp_path: Path) -> DoorConfig:
    """A server of one folder with a subfolder; beside it, a folder it does not serve."""
    (tmp_path / "papers" / "sub").mkdir(parents=True)
    (tmp_path / "papers" / "note.md").write_text("# note\n")
    (tmp_path / "secret").mkdir()
    (tmp_path / "papers" / "out").symlink_to(tmp_path / "secret")
    return DoorConfig(store=str(tmp_path / "runs.sqlite"), docs=(tmp_path / "papers",))


@pytest.mark.parametrize(("asked", "inside"), [
    pytest.param(None, "papers", id="default-first"),
    pytest.param(".", "papers", id="relative-first"),
    pytest.param("sub", "papers/sub", id="relative-sub"),
])
def test_a_folder_inside_a_served_one_is_taken(served: DoorConfig, asked: str | None,
                                               inside: str) -> None:
    """The first folder by default, and folders under it, relative or absolute."""
    root = served.docs[0].parent
    assert served.served_folder(asked) == str((root / inside).resolve())
    assert served.served_folder(str(root / inside)) == str((root / inside).resolve())


@pytest.mark.parametrize("asked", [
    pytest.param("..", id="parent"),
    pytest.param("../secret", id="beside"),
    pytest.param("out", id="symlink-out"),
    pytest.param("note.md", id="a-file"),
    pytest.param("missing", id="missing"),
    pytest.param("/etc", id="absolute-elsewhere"),
    pytest.param("a\0b", id="nul"),
])
def test_anything_else_is_refused_alike_naming_docs(served: DoorConfig, asked: str) -> None:
    """Outside, through a link, a file, missing: one refusal, echoing only the request."""
    with pytest.raises(ArgumentRefused) as refused:
        served.served_folder(asked)
    said = str(refused.value)
    assert said.startswith("docs: expected a folder the server serves")
    assert str(served.docs[0]) not in said


def test_a_server_without_docs_refuses_any_folder(tmp_path: Path) -> None:
    """No --docs: no folder at all, and none by default."""
    config = DoorConfig(store=str(tmp_path / "runs.sqlite"))
    assert config.served_folder(None) is None
    with pytest.raises(ArgumentRefused, match="no docs: the server was started without"):
        config.served_folder(".")


def _state(sid: str, state: str) -> ProgressEvent:
    return ProgressEvent(sid, "state", 0.0, state=state)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_progress_grows_once_per_subtask_end_and_ignores_the_lead() -> None:
    """A notification as each subtask ends (the lead's states are not subtasks); a retried
    subtask ending again still makes the progress grow."""
    ticket = Ticket(Prepared(None, "", {}), 1.0, had_slot=True)  # type: ignore[arg-type]
    ticket.open("20260101-000000-00000000")
    for event in [_state("a", "queued"), _state("b", "queued"), _state("lead", "thinking"),
                  _state("a", "running"), _state("a", "done"), _state("lead", "done"),
                  _state("b", "escalated"), _state("b", "queued"), _state("b", "done")]:
        ticket.hear(event)
    ticket.finish()
    updates = []
    while True:
        try:
            updates.append(ticket.updates.receive_nowait())
        except anyio.EndOfStream:  # closed and drained
            break
    ticket.updates.close()
    assert [u.message for u in updates] == [
        "run 20260101-000000-00000000 started", "1/2 subtasks, coverage 0.5",
        "2/2 subtasks, coverage 0.5", "2/2 subtasks, coverage 1"]
    assert [u.progress for u in updates] == [0, 1, 2, 3]


def test_an_ask_with_nothing_to_research_says_how_to_give_it_something(tmp_path: Path) -> None:
    """No served folder, no web, no tools file: refused, naming docs and web."""
    from coordinator.mcpserve.intake import ask_job

    config = DoorConfig(store=str(tmp_path / "runs.sqlite"))
    with pytest.raises(ArgumentRefused) as refused:
        ask_job(config, "q?", docs=None, web=False, max_subtasks=6, budget=None)
    assert str(refused.value).startswith("docs: expected a server with documents")
    assert "web: true" in str(refused.value)


def test_a_jobs_relative_folder_is_resolved_under_the_first_served_one(
    served: DoorConfig,
) -> None:
    """research_tools.docs.path "sub" runs on the served folder's sub, whatever the
    server's working directory; "../secret" is refused naming the field and line."""
    from coordinator.mcpserve.intake import run_job

    job = ("scenario: docs\njob:\n  query: q\n  subtasks:\n    - {id: a, query: q, tools: "
           "[docs.search], plan: [{call: docs.search, args: {query: q}}]}\n"
           "research_tools:\n  docs: {path: %s}\n")
    scenario = run_job(served, job % "sub").scenario
    assert scenario.research_tools is not None and scenario.research_tools.docs is not None
    assert scenario.research_tools.docs.path == str((served.docs[0] / "sub").resolve())
    with pytest.raises(ArgumentRefused, match=r"job:\d+: research_tools.docs.path"):
        run_job(served, job % "../secret")


def test_a_job_over_a_mebibyte_is_refused_before_it_is_read(served: DoorConfig) -> None:
    """The size is checked first, as POST /runs checks its body."""
    from coordinator.mcpserve.intake import run_job

    with pytest.raises(ArgumentRefused, match="job: expected a job of at most 1048576 bytes"):
        run_job(served, "#" * (1 << 20) + "\n")
