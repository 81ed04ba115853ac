"""The service's parts without a server: run_job's cancel, ids, tokens, binds, intake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.requests import Request

import coordinator.serve as serve
from coordinator.fanout import run_job
from coordinator.jobfile.loader import load_scenario
from coordinator.serve.intake import (
    IntakeGate,
    JobRejected,
    UnsupportedMediaType,
    loaded_before,
    media_kind,
    parse_job,
)
from coordinator.serve.routes import _url
from coordinator.store.runs import new_run_id
from shared.clock import AnyioClock
from subagents.simulated.tools import SimulatedTools
from tests.coordinator.serve.conftest import SLOW


@pytest.mark.anyio
@pytest.mark.parametrize(("cancel_at", "expected"), [
    pytest.param(5.0, [("cancelled", 1), ("cancelled", 1), ("cancelled", 0), ("cancelled", 0)],
                 id="first-round"),
    pytest.param(25.0, [(None, 1), (None, 1), ("cancelled", 1), ("cancelled", 1)],
                 id="after-two-finished"),
    pytest.param(0.0, [("cancelled", 0)] * 4, id="before-start"),
])
async def test_run_job_cancel_cuts_like_a_deadline(
    cancel_at: float, expected: list[tuple[str | None, int]]
) -> None:
    """Running subagents hand up with trigger cancelled (attempt counted), queued get 0."""
    scenario = load_scenario(SLOW)
    clock = AnyioClock()
    cancel = anyio.Event()
    if cancel_at == 0.0:
        cancel.set()

    async def later() -> None:
        await anyio.sleep(cancel_at)
        cancel.set()

    async with anyio.create_task_group() as tg:
        if cancel_at:
            tg.start_soon(later)
        report = await run_job(scenario.job, SimulatedTools(scenario.tools, clock), clock=clock,
                               seed=scenario.seed, cancel=cancel)
    gaps = {g.subtask_id: g for g in report.gaps}
    got = [(gaps[s.id].trigger if s.id in gaps else None, s.attempts) for s in report.subtasks]
    assert got == expected
    assert {g.route for g in report.gaps} <= {"gap"}
    assert report.elapsed_s == pytest.approx(cancel_at if cancel_at < 40 else 40.0)


@pytest.mark.anyio
async def test_a_cancel_never_set_changes_nothing() -> None:
    """With a cancel event that is never set the report is the replay's."""
    scenario = load_scenario(SLOW)
    clock = AnyioClock()
    report = await run_job(scenario.job, SimulatedTools(scenario.tools, clock), clock=clock,
                           seed=scenario.seed, cancel=anyio.Event())
    assert report.outcome == "complete" and report.elapsed_s == pytest.approx(40.0)


def test_the_run_id_format_is_the_stores() -> None:
    """Ids the store makes pass the service's check; anything path-like does not."""
    made = {new_run_id() for _ in range(2_000)}
    assert all(serve.valid_run_id(run_id) for run_id in made)
    # Eight random hex digits: 2,000 ids in a second or two do not collide (four did).
    assert len(made) == 2_000 and all(len(run_id.rsplit("-", 1)[1]) == 8 for run_id in made)
    assert serve.valid_run_id("20261201-071257-8bec")  # the older, shorter ids stay readable
    for bad in ("", "..", "latest", "20261201-071257-8BEC", "20261201-071257-8bec/..",
                "20261201-071257-8bec\n", "../20261201-071257-8bec", "%2e%2e"):
        assert not serve.valid_run_id(bad), bad


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.4", False),
    ("example.org", False), ("localhost.example.org", False),
])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    """Only addresses this machine alone can reach count as loopback."""
    assert serve.is_loopback(host) is loopback


def test_the_token_comes_from_the_file_then_the_environment(tmp_path: Path) -> None:
    """--token-file's first line wins over FANOUT_TOKEN; blank values mean no token."""
    token_file = tmp_path / "token"
    token_file.write_text("  from-file  \nsecond line\n")
    assert serve.read_token(token_file, {"FANOUT_TOKEN": "env"}) == "from-file"
    assert serve.read_token(None, {"FANOUT_TOKEN": " env "}) == "env"
    assert serve.read_token(None, {"FANOUT_TOKEN": "  "}) is None
    assert serve.read_token(None, {}) is None
    with pytest.raises(serve.TokenError):
        serve.read_token(tmp_path / "missing", {})


def test_binding_beyond_loopback_needs_a_token() -> None:
    """check_bind refuses 0.0.0.0 without a token and allows it with one."""
    with pytest.raises(serve.BindRefused, match="without a token"):
        serve.check_bind("0.0.0.0", None)
    serve.check_bind("0.0.0.0", "a-token")
    serve.check_bind("127.0.0.1", None)


def test_a_job_with_mcp_servers_is_refused_unless_allowed() -> None:
    """Submitted jobs may not start commands on the server unless --allow-mcp."""
    body = (Path(__file__).resolve().parents[3] / "scenarios" / "live" / "office_clocks.yaml")
    with pytest.raises(JobRejected) as refused:
        parse_job(body.read_bytes(), "yaml", allow_mcp=False)
    problem = refused.value.problems[0]
    assert problem.field == "mcp_servers" and problem.line is not None
    assert parse_job(body.read_bytes(), "yaml", allow_mcp=True).mcp_servers


def test_a_job_loaded_before_is_known_and_a_rejected_one_is_not() -> None:
    """The service parses a job on the event loop only when it was loaded before."""
    job = Path(__file__).resolve().parents[3] / "scenarios" / "deadline.yaml"
    fresh = job.read_bytes() + b"\n# submitted by test_units\n"  # text no other test sends
    assert not loaded_before(fresh, "yaml")
    first = parse_job(fresh, "yaml", allow_mcp=False)
    assert loaded_before(fresh, "yaml") and not loaded_before(fresh, "json")
    assert parse_job(fresh, "yaml", allow_mcp=False) is first  # the same frozen Scenario
    broken = b"scenario: broken\njob: [\n"
    with pytest.raises(JobRejected):
        parse_job(broken, "yaml", allow_mcp=False)
    assert not loaded_before(broken, "yaml")
    assert not loaded_before(b"\xff\xfe", "yaml")


def test_media_types() -> None:
    """YAML and JSON types (with parameters) are read; anything else is refused."""
    assert media_kind("application/yaml; charset=utf-8") == "yaml"
    assert media_kind("Application/JSON") == "json"
    for bad in (None, "", "text/plain", "multipart/form-data"):
        with pytest.raises(UnsupportedMediaType):
            media_kind(bad)


def test_the_wing_names_its_surface() -> None:
    """coordinator.serve lists what the rest of the house may use, and each name resolves."""
    assert serve.__all__
    for name in serve.__all__:
        assert hasattr(serve, name), name


@pytest.mark.anyio
async def test_a_run_starts_once_the_submissions_in_flight_are_answered() -> None:
    """A run waits while submissions are in flight and for the linger after the last."""
    gate = IntakeGate(max_wait_s=0.5, linger_s=0.01)
    started = anyio.current_time()
    await gate.quiet()  # nothing in flight, nothing lately: no wait at all
    assert anyio.current_time() == started
    gate.enter()
    gate.enter()
    waited: list[float] = []

    async def run() -> None:
        await gate.quiet()
        waited.append(anyio.current_time() - started)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.sleep(0.05)
        gate.leave()
        await anyio.sleep(0.05)
        assert not waited  # one submission is still being answered
        gate.leave()
    assert waited == [pytest.approx(0.11)]  # the last answer at 0.1 s, then the linger


@pytest.mark.anyio
async def test_a_steady_intake_delays_a_run_at_most_max_wait() -> None:
    """Submissions that never stop do not hold a run back past max_wait_s."""
    gate = IntakeGate(max_wait_s=0.5, linger_s=0.01)
    gate.enter()
    started = anyio.current_time()
    await gate.quiet()
    assert anyio.current_time() - started == pytest.approx(0.5)


@pytest.mark.parametrize(("scheme", "server", "root_path", "host"), [
    ("http", ("127.0.0.1", 8765), "", "127.0.0.1:8765"),
    ("https", ("10.0.0.5", 443), "/fanout", "runs.example.org"),
    ("http", ("::1", 80), "/a/b/", "[::1]"),
])
def test_a_runs_url_is_what_url_for_gives(
    tmp_path: Path, scheme: str, server: tuple[str, int], root_path: str, host: str
) -> None:
    """The URL a submission answers with equals Starlette's url_for of get_run."""
    app = serve.create_app(serve.ServeConfig(store=tmp_path / "runs.sqlite"))
    scope = {"type": "http", "scheme": scheme, "server": server, "root_path": root_path,
             "path": f"{root_path}/runs", "headers": [(b"host", host.encode())],
             "method": "POST", "query_string": b"", "app": app, "router": app.router}
    request = Request(scope)
    run_id = new_run_id()
    assert _url(request, run_id) == str(request.url_for("get_run", run_id=run_id))


def test_an_ask_whose_lead_is_still_planning_has_no_gaps_and_no_coverage_yet(
    tmp_path: Path,
) -> None:
    """What GET /runs/{id}/gaps, GET /runs/{id} and the report read of a running ask with
    no plan yet: no gaps, coverage 0 (it was a ZeroDivisionError, a 500 on every Ask)."""
    import yaml

    from coordinator.jobfile.ask import build_ask_job
    from coordinator.serve.records import coverage_so_far, gaps_so_far, report_of, scenario_of
    from coordinator.store.runs import RunStore

    tools = yaml.safe_dump({"tools": {"lookup": {"params": {"q": {"type": "string"}},
                                                 "responses": [{"ok": {"a": 1}}]}},
                            "model": {"provider": "scripted", "turns": {"lead": [{"text": "-"}]}}})
    _, text, file = build_ask_job("q?", None, tools_text=tools,
                                  tools_name="POST /ask")
    store = RunStore(tmp_path / "runs.sqlite")
    recorder = store.create_run(job="ask", query="q?", file=file, spec_text=text, seed="0",
                                speed=1.0)
    row = store.get(recorder.run_id)
    assert row.status == "running"
    scenario = scenario_of(store, row)
    assert scenario is not None and scenario.job.subtasks == []
    assert gaps_so_far(store, row, scenario) == []
    assert coverage_so_far(store, row, scenario) == 0.0
    assert report_of(store, row, scenario).coverage == 0.0
    recorder.close()
    store.close()


def test_building_the_app_leaves_the_interpreter_as_it_was(tmp_path: Path) -> None:
    """gc.freeze() and the 1 ms switch interval are process-wide, so only run_server (the
    process that is the server) sets them: an embedder's create_app changes neither."""
    import gc
    import sys

    before = (sys.getswitchinterval(), gc.get_freeze_count())
    app = serve.create_app(serve.ServeConfig(store=tmp_path / "runs.sqlite"))
    assert (sys.getswitchinterval(), gc.get_freeze_count()) == before
    app.state.manager.store.close()


def test_the_refusal_check_fails_a_422_the_document_does_not_declare() -> None:
    """refusals_are_declared (test_openapi's schemathesis runs it) fails a schema-valid
    request refused for a field the 422's description does not name, passes one it names."""
    from types import SimpleNamespace

    from tests.coordinator.serve import schemathesis_checks as checks

    def case(description: str) -> Any:
        raw = {"responses": {"422": {"description": description}}}
        generation = SimpleNamespace(mode=SimpleNamespace(is_positive=True))
        return SimpleNamespace(meta=SimpleNamespace(generation=generation), label="POST /ask",
                               operation=SimpleNamespace(definition=SimpleNamespace(raw=raw),
                                                         label="POST /ask"))

    refused = SimpleNamespace(status_code=422, json=lambda: {"errors": [
        {"line": None, "field": "docs", "message": "POST /ask: docs: expected no docs"}]})
    assert checks.refusals_are_declared(None, refused, case("refused for `docs` ...")) is None
    with pytest.raises(AssertionError, match="does not declare"):
        checks.refusals_are_declared(None, refused, case("refused for `web` only"))


@pytest.mark.parametrize(("value", "shown"), [
    pytest.param("docs", "'docs'", id="short"),
    pytest.param(b"hello", "'hello'", id="bytes-as-text"),
    pytest.param("it's\n\\", "'it\\'s\\n\\\\'", id="escaped"),
    pytest.param("x" * 81, "'" + "x" * 80 + "…' (81 characters)", id="clipped"),
    pytest.param("\x00" * 30, "'" + "\\x00" * 20 + "…' (30 characters)", id="clipped-escapes"),
    pytest.param({"a": [1]}, '{"a": [1]}', id="json"),
])
def test_a_value_is_shown_quoted_escaped_and_short(value: object, shown: str) -> None:
    """quote() shows at most 80 characters of a value, escaped, then … and its length."""
    from coordinator.serve.refusals import quote

    assert quote(value) == shown
