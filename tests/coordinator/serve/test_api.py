"""Every row of docs/design.md §8's table against a real ``fanout serve`` over loopback HTTP."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from coordinator.cli import main
from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from tests.coordinator.serve.conftest import ROOT, SLOW, TOKEN, Server

DEMO = ROOT / "scenarios" / "research_demo.yaml"


def raw_get(server: Server, path: str, token: str | None = TOKEN) -> int:
    """GET ``path`` byte for byte (no client-side normalisation of ``..``); the status."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        return conn.getresponse().status
    finally:
        conn.close()


def stream_status(client: httpx.Client, path: str) -> int:
    """The status of a streamed GET, without reading the stream."""
    with client.stream("GET", path) as r:
        return r.status_code


def run_count(server: Server) -> int:
    with server.client() as c:
        return len(c.get("/runs").json()["runs"])


def test_openapi_document_lists_every_route(server: Server) -> None:
    """/openapi.json describes each docs/design.md §8 route, with the bearer scheme and the
    models."""
    with server.client() as c:
        doc = c.get("/openapi.json").json()
    paths = doc["paths"]
    assert {"/runs", "/runs/{run_id}", "/runs/{run_id}/events", "/runs/{run_id}/report",
            "/runs/{run_id}/gaps", "/runs/{run_id}/cancel"} <= set(paths)
    assert set(paths["/runs"]) == {"get", "post"}
    assert "HTTPBearer" in doc["components"]["securitySchemes"]
    assert {"RunCreated", "RunDetail", "InputProblems"} <= set(doc["components"]["schemas"])
    assert "text/event-stream" in paths["/runs/{run_id}/events"]["get"]["responses"]["200"][
        "content"]


@pytest.mark.parametrize("token", [
    pytest.param(None, id="none"),
    pytest.param("wrong-token", id="wrong"),
    pytest.param(TOKEN[:-1], id="prefix"),
    pytest.param(TOKEN, id="right"),
])
def test_every_route_needs_the_token(server: Server, token: str | None) -> None:
    """Without the right bearer token every route is 401 (the page too); with it, not."""
    run_id = server.submit(SLOW, speed=1000)["run_id"]
    with server.client(token=token) as c:
        answers = {
            "runs": c.get("/runs").status_code,
            "run": c.get(f"/runs/{run_id}").status_code,
            "gaps": c.get(f"/runs/{run_id}/gaps").status_code,
            "report": c.get(f"/runs/{run_id}/report").status_code,
            "events": stream_status(c, f"/runs/{run_id}/events"),
            "ticket": c.post(f"/runs/{run_id}/ticket").status_code,
            "openapi": c.get("/openapi.json").status_code,
            "page": c.get("/").status_code,
            "submit": c.post("/runs", content=b"x: 1",
                             headers={"Content-Type": "application/yaml"}).status_code,
            "unknown run": c.get("/runs/20990101-000000-abcd").status_code,
        }
    if token == TOKEN:
        assert answers["unknown run"] == 404 and answers["submit"] == 422
        assert all(code < 400 or code == 409 for k, code in answers.items()
                   if k not in ("unknown run", "submit")), answers
    else:
        assert set(answers.values()) == {401}, answers


def test_the_page_without_a_token_asks_for_it(server: Server) -> None:
    """A browser's first visit gets a 401 whose body is the page with its sign-in form."""
    with server.client(token=None) as c:
        r = c.get("/")
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert 'id="login-form"' in r.text and "<script>" in r.text
    assert "script-src 'sha256-" in r.headers["content-security-policy"]
    for cdn in ("http://", "https://", "<link rel=\"stylesheet\"", "src=\""):
        assert cdn not in r.text


@pytest.mark.parametrize("media", ["application/yaml", "application/json"])
def test_submit_gives_201_the_run_and_its_location(server: Server, media: str) -> None:
    """POST /runs (YAML or JSON) answers 201 {run_id, status, url} with Location = url."""
    import yaml

    text = SLOW.read_text()
    body = json.dumps(yaml.safe_load(text), indent="\t") if media.endswith("json") else text
    with server.client() as c:
        r = c.post("/runs", params={"speed": 1000}, content=body.encode(),
                   headers={"Content-Type": f"{media}; charset=utf-8"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert set(created) == {"run_id", "status", "url"}
    assert created["status"] in ("running", "queued")
    assert r.headers["location"] == created["url"]
    assert created["url"].endswith(f"/runs/{created['run_id']}")
    server.wait_status(created["run_id"], "finished")


def test_a_body_over_one_mib_is_413_and_nothing_is_recorded(server: Server) -> None:
    """Declared or streamed (chunked), a body past 1 MiB is refused with 413."""
    before = run_count(server)
    big = b"# " + b"x" * (1 << 20) + b"\n"
    with server.client() as c:
        declared = c.post("/runs", content=big, headers={"Content-Type": "application/yaml"})
        chunked = c.post("/runs", content=iter([big[:600_000], big[600_000:]]),
                         headers={"Content-Type": "application/yaml"})
    assert declared.status_code == 413 and chunked.status_code == 413
    assert "detail" in declared.json()
    assert run_count(server) == before


# A run id of the store's shape that no run has: the 413 comes before any route is found.
NO_RUN = "20261201-000000-00000000"
_MIB = 1 << 20


def _counted(total: int, sent: list[int]) -> Any:
    """``total`` bytes of spaces (a JSON and YAML prefix), 64 KiB at a time, counting in
    ``sent`` what the client handed to the socket."""
    chunk = b" " * 65536
    for _ in range(total // len(chunk)):
        sent[0] += len(chunk)
        yield chunk


@pytest.mark.parametrize(("method", "path"), [
    pytest.param("POST", "/ask", id="ask"),
    pytest.param("POST", "/runs", id="runs"),
    pytest.param("POST", f"/runs/{NO_RUN}/cancel", id="cancel"),
    pytest.param("POST", f"/runs/{NO_RUN}/ticket", id="ticket"),
    pytest.param("GET", "/runs", id="list"),
])
def test_every_route_refuses_a_declared_body_over_the_limit_unread(
    server: Server, method: str, path: str
) -> None:
    """A Content-Length over 1 MiB is 413 {"detail"} naming the route, on every route and
    before any of the body is read: the server closes, so a 64 MiB body is never all sent."""
    sent = [0]
    with server.client() as c:
        r = c.request(method, path, content=_counted(64 * _MIB, sent), headers={
            "Content-Type": "application/json", "Content-Length": str(64 * _MIB)})
    assert r.status_code == 413, r.text
    assert r.json()["detail"].startswith(f"{method} {path}: the body may be at most 1,048,576")
    assert r.headers["connection"] == "close"
    assert sent[0] < 32 * _MIB, sent  # what loopback buffers took, not the body


@pytest.mark.parametrize("path", ["/ask", "/runs"])
def test_a_chunked_body_is_read_no_further_than_the_limit(server: Server, path: str) -> None:
    """A body of unknown length (chunked) is refused with 413 once 1 MiB of it has come:
    the server reads no further and closes, so most of a 64 MiB body is never sent; small
    answer, nothing recorded."""
    before = run_count(server)
    sent = [0]
    with server.client() as c:
        r = c.post(path, content=_counted(64 * _MIB, sent),
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["detail"] == (f"POST {path}: the body may be at most 1,048,576 bytes "
                                  "(1 MiB): it was read no further than that")
    assert len(r.content) < 200 and sent[0] < 32 * _MIB, sent
    assert run_count(server) == before


def test_a_reused_idempotency_key_is_a_declared_422_on_both_doors(server: Server) -> None:
    """A key that made a run, sent with another request, is 422 naming the door it came
    to; the document declares that 422 (the IETF httpapi Idempotency-Key draft's answer)
    on POST /runs and POST /ask alike."""
    key = {"Idempotency-Key": "reused-across-doors"}
    first = server.submit(SLOW, speed=1000, **key)
    with server.client() as c:
        runs = c.post("/runs", params={"speed": 999}, content=SLOW.read_bytes(),
                      headers={"Content-Type": "application/yaml", **key})
        ask = c.post("/ask", json={"question": "q?", "search": "searxng:http://127.0.0.1:9"},
                     headers=key)
        doc = c.get("/openapi.json").json()
    for door, r in (("POST /runs", runs), ("POST /ask", ask)):
        assert r.status_code == 422, r.text
        (error,) = r.json()["errors"]
        assert error["field"] == "Idempotency-Key"
        assert error["message"].startswith(f"{door}: Idempotency-Key: expected a new key")
        assert first["run_id"] in error["got"]
    for path in ("/runs", "/ask"):
        declared = doc["paths"][path]["post"]["responses"]["422"]["description"]
        assert "`Idempotency-Key`" in declared and "IETF" in declared, declared
    server.wait_status(first["run_id"], "finished")


def test_a_malformed_job_is_422_with_the_line_and_nothing_is_recorded(server: Server) -> None:
    """A job with a wrong value gets errors[{line, field, expected, got}]; no run is made."""
    bad = SLOW.read_text().replace("concurrency: 2", "concurrency: two")
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "concurrency:" in text)
    before = run_count(server)
    with server.client() as c:
        r = c.post("/runs", content=bad.encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert errors[0]["line"] == line
    assert errors[0]["field"] == "job.concurrency"
    assert errors[0]["expected"] and errors[0]["got"] == "'two'"
    assert {"line", "field", "expected", "got"} <= set(errors[0])
    assert run_count(server) == before


@pytest.mark.parametrize(("media", "body", "line"), [
    pytest.param("application/json", b'{"scenario": "x",\n "job": }', 2, id="bad-json"),
    pytest.param("application/yaml", b"scenario: x\njob: [unclosed\n", 2, id="bad-yaml"),
    pytest.param("application/yaml", b"scenario: \xff\n", 1, id="not-utf8"),
])
def test_unreadable_bodies_are_422_with_a_line(
    server: Server, media: str, body: bytes, line: int
) -> None:
    """Bodies that are not JSON, YAML or UTF-8 are 422 problems with their line."""
    with server.client() as c:
        r = c.post("/runs", content=body, headers={"Content-Type": media})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["line"] == line


def test_other_media_types_are_415(server: Server) -> None:
    """text/plain (what a cross-site form could send) and no type at all are refused."""
    with server.client() as c:
        for media in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"Content-Type": media} if media else {}
            r = c.post("/runs", content=SLOW.read_bytes(), headers=headers)
            assert r.status_code == 415, media


@pytest.mark.parametrize("path", [
    pytest.param("/runs/20990101-000000-abcd", id="unknown"),
    pytest.param("/runs/nope", id="not-an-id"),
    pytest.param("/runs/..", id="dotdot"),
    pytest.param("/runs/%2e%2e", id="encoded-dotdot"),
    pytest.param("/runs/../etc/passwd", id="traversal"),
    pytest.param("/runs/..%2F..%2Fetc%2Fpasswd", id="encoded-slashes"),
    pytest.param("/runs/..%2F..%2Fetc%2Fpasswd/report", id="encoded-slashes-report"),
    pytest.param("/runs/20990101-000000-abcd%2F..%2Fx/gaps", id="id-then-slash"),
    pytest.param("/runs/%00/events", id="nul"),
    pytest.param("/runs/20990101-000000-ABCD", id="uppercase"),
])
def test_anything_but_a_run_id_is_404(server: Server, path: str) -> None:
    """Unknown ids, traversal and encoded slashes are 404; nothing reaches the file system."""
    assert raw_get(server, path) == 404


def test_an_idempotency_key_returns_the_run_it_made(server: Server) -> None:
    """The same key and body give the same run once; the same key with another body is 422."""
    before = run_count(server)
    key = {"Idempotency-Key": "job-42-attempt"}
    first = server.submit(SLOW, speed=1000, **key)
    again = server.submit(SLOW, speed=1000, **key)
    assert again["run_id"] == first["run_id"] and again["url"] == first["url"]
    assert run_count(server) == before + 1
    with server.client() as c:
        other = c.post("/runs", params={"speed": 1000}, content=SLOW.read_bytes() + b"\n# v2\n",
                       headers={"Content-Type": "application/yaml", **key})
        bad_key = c.post("/runs", content=SLOW.read_bytes(),
                         headers={"Content-Type": "application/yaml", "Idempotency-Key": "k" * 300})
    assert other.status_code == 422
    assert other.json()["errors"][0]["field"] == "Idempotency-Key"
    assert bad_key.status_code == 422
    server.wait_status(first["run_id"], "finished")
    # After the run ended (and the key is only in the store), the key still answers.
    assert server.submit(SLOW, speed=1000, **key)["run_id"] == first["run_id"]


def test_a_run_shows_progress_and_coverage_so_far(server: Server) -> None:
    """GET /runs/{id}: the row plus progress counts and coverage_so_far, live then final."""
    with server.slots_held(2):  # the run waits for a slot until the test has looked
        run_id = server.submit(SLOW, speed=1000)["run_id"]
        with server.client() as c:
            live = c.get(f"/runs/{run_id}").json()
    assert live["status"] == "queued"
    assert live["progress"] == {"queued": 4, "running": 0, "done": 0, "escalated": 0}
    assert live["coverage_so_far"] == 0.0
    assert [s["id"] for s in live["subtasks"]] == ["first", "second", "third", "fourth"]
    done = server.wait_status(run_id, "finished")
    assert done["progress"] == {"queued": 0, "running": 0, "done": 4, "escalated": 0}
    assert done["coverage_so_far"] == 1.0 and done["outcome"] == "complete"
    with server.client() as c:
        listed = c.get("/runs").json()["runs"]
    row = next(r for r in listed if r["id"] == run_id)
    assert {"id", "job", "file", "started", "finished", "status", "outcome", "coverage",
            "elapsed_s", "sessions"} <= set(row)


def test_the_report_is_409_while_running_then_json_md_and_html(server: Server) -> None:
    """While running (or queued): 409 with the status; after: the report in each format."""
    with server.slots_held(2) as held, server.client() as c:
        running = c.get(f"/runs/{held[0]}/report")
        run_id = server.submit(SLOW, speed=1000)["run_id"]
        queued = c.get(f"/runs/{run_id}/report")
    assert (running.status_code, running.json()) == (409, {"status": "running"})
    assert (queued.status_code, queued.json()) == (409, {"status": "queued"})
    with server.client() as c:
        server.wait_status(run_id, "finished")
        as_json = c.get(f"/runs/{run_id}/report")
        as_md = c.get(f"/runs/{run_id}/report", params={"format": "md"})
        as_html = c.get(f"/runs/{run_id}/report", params={"format": "html"})
        wrong = c.get(f"/runs/{run_id}/report", params={"format": "pdf"})
    assert as_json.json()["outcome"] == "complete"
    assert as_md.headers["content-type"].startswith("text/markdown")
    assert "# A slow job for the service tests" in as_md.text
    assert as_html.headers["content-type"].startswith("text/html")
    assert "<svg" in as_html.text and "default-src 'none'" in as_html.headers[
        "content-security-policy"]
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "query.format"


def test_the_report_equals_fanout_replay_of_the_same_file(server: Server) -> None:
    """The flagship scenario run by the service at speed 200: replay's statuses and gaps."""
    run_id = server.submit(DEMO, speed=200)["run_id"]
    server.wait_status(run_id, "finished", timeout=60)
    with server.client() as c:
        served = c.get(f"/runs/{run_id}/report").json()
        gaps = c.get(f"/runs/{run_id}/gaps").json()
    clean = replay(load_scenario(DEMO)).report

    def shape(report: dict[str, Any]) -> dict[str, Any]:
        return {
            "outcome": report["outcome"], "coverage": report["coverage"],
            "subtasks": [(s["id"], s["status"], s["attempts"], s["rounds"], s["findings"])
                         for s in report["subtasks"]],
            "gaps": [(g["subtask_id"], g["errorCategory"], g["trigger"], g["route"],
                      len(g["partial_results"])) for g in report["gaps"]],
            "escalations": [e["subtask_id"] for e in report["escalations"]],
        }

    assert shape(served) == shape(clean)
    assert gaps["status"] == "finished" and gaps["gaps"] == served["gaps"]


@pytest.mark.parametrize("name", ["model_corrects_validation", "model_provider_failures"])
def test_a_model_planned_job_runs_as_replay_runs_it(server: Server, name: str) -> None:
    """A job whose subtasks a (scripted) model plans: the service's report is replay's."""
    path = ROOT / "scenarios" / f"{name}.yaml"
    run_id = server.submit(path, speed=100)["run_id"]
    server.wait_status(run_id, "finished")
    with server.client() as c:
        served = c.get(f"/runs/{run_id}/report").json()
    clean = replay(load_scenario(path)).report
    for report in (served, clean):
        report["subtasks"] = [(s["id"], s["status"], s["attempts"]) for s in report["subtasks"]]
        report["gaps"] = [(g["subtask_id"], g["trigger"], g["route"]) for g in report["gaps"]]
    assert (served["outcome"], served["subtasks"], served["gaps"]) == (
        clean["outcome"], clean["subtasks"], clean["gaps"])


def test_a_key_in_the_job_file_is_refused_and_not_echoed(server: Server) -> None:
    """A job holding an API key inline is 422 (as `fanout run` exits 2); the key is not
    in the answer and nothing is recorded."""
    secret = "sk-ant-api03-" + "A1b2C3d4" * 8
    job = SLOW.read_text() + f"model:\n  provider: anthropic\n  api_key: {secret}\n"
    before = run_count(server)
    with server.client() as c:
        r = c.post("/runs", content=job.encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422
    assert secret not in r.text and "A1b2C3d4" not in r.text
    assert any(e["field"].startswith("model") for e in r.json()["errors"])
    assert run_count(server) == before


def test_a_model_job_whose_key_the_server_lacks_is_refused(server: Server) -> None:
    """A live-model job naming a key variable the server does not have is 422, not a run
    that fails later."""
    job = SLOW.read_text() + "model:\n  provider: openai\n  api_key_env: FANOUT_TEST_NO_SUCH_KEY\n"
    with server.client() as c:
        r = c.post("/runs", content=job.encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422, r.text
    problem = r.json()["errors"][0]
    assert problem["field"] == "model.api_key_env" and "FANOUT_TEST_NO_SUCH_KEY" in problem["got"]


def test_the_cli_reads_a_served_run(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    """fanout runs, report, gaps and trace read what the service recorded."""
    run_id = server.submit(SLOW, speed=1000)["run_id"]
    server.wait_status(run_id, "finished")

    def fanout(*args: str) -> str:
        capsys.readouterr()
        assert main([*args, "--store", str(server.store)]) == 0
        return capsys.readouterr().out

    listed = json.loads(fanout("runs", "--json"))
    assert any(r["id"] == run_id and r["status"] == "finished" for r in listed)
    assert json.loads(fanout("report", run_id, "--format", "json"))["outcome"] == "complete"
    assert json.loads(fanout("gaps", run_id, "--json")) == []
    assert len(fanout("trace", run_id, "--json").splitlines()) == 4


def test_runs_past_the_capacity_wait_queued(open_server: Server) -> None:
    """With --max-runs 1 a second run is queued (report 409 queued), then runs after."""
    first = open_server.submit(SLOW, speed=20)
    second = open_server.submit(SLOW, speed=1000)
    assert first["status"] == "running" and second["status"] == "queued"
    with open_server.client() as c:
        detail = c.get(f"/runs/{second['run_id']}").json()
        report = c.get(f"/runs/{second['run_id']}/report")
    assert detail["status"] == "queued"
    assert detail["progress"] == {"queued": 4, "running": 0, "done": 0, "escalated": 0}
    assert report.status_code == 409 and report.json() == {"status": "queued"}
    open_server.wait_status(second["run_id"], "finished")
    with open_server.client() as c:
        firsts = c.get(f"/runs/{first['run_id']}").json()
    assert firsts["status"] == "finished"


def test_a_tokenless_server_answers_loopback_names_only(open_server: Server) -> None:
    """Without a token, a Host that is not loopback (DNS rebinding) is refused with 400."""
    with open_server.client() as c:
        assert c.get("/runs").status_code == 200
        assert c.get("/runs", headers={"Host": "evil.example:8765"}).status_code == 400
        assert c.get("/", headers={"Host": "localhost"}).status_code == 200


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(("--host", "0.0.0.0"), "without a token", id="open-bind"),
    pytest.param(("--host", "example.org"), "without a token", id="host-name"),
    pytest.param(("--token-file", "/nonexistent/token"), "cannot read", id="no-token-file"),
    pytest.param(("--max-runs", "0"), "--max-runs", id="no-capacity"),
])
def test_serve_refuses_to_start_unsafely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...], message: str,
) -> None:
    """A non-loopback bind without a token (or a bad setting) exits 2 before listening."""
    monkeypatch.delenv("FANOUT_TOKEN", raising=False)
    code = main(["serve", "--port", "0", "--store", str(tmp_path / "s.sqlite"), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_a_token_file_with_an_empty_first_line_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--token-file whose first line is blank is exit 2, not an open server."""
    token_file = tmp_path / "token"
    token_file.write_text("\nsecret\n")
    code = main(["serve", "--token-file", str(token_file), "--port", "0",
                 "--store", str(tmp_path / "s.sqlite")])
    assert code == 2 and "holds no token" in capsys.readouterr().err


def test_other_errors_have_one_json_shape(server: Server) -> None:
    """Errors other than job problems are {"detail": ...} JSON with the right status."""
    with server.client() as c:
        missing = c.get("/runs/20990101-000000-abcd")
        bad_speed = c.post("/runs", params={"speed": -1}, content=SLOW.read_bytes(),
                           headers={"Content-Type": "application/yaml"})
    assert missing.json() == {"detail": "no such run"}
    assert bad_speed.status_code == 422
    assert bad_speed.json()["errors"][0]["field"] == "query.speed"


@pytest.mark.parametrize(("params", "headers", "status", "field"), [
    pytest.param("speed=1000", {}, 201, None, id="plain"),
    pytest.param("speed=1e3", {}, 201, None, id="exponent-declared"),
    pytest.param("speed=0", {}, 422, "query.speed", id="zero"),
    pytest.param("speed=10000.5", {}, 422, "query.speed", id="over"),
    pytest.param("speed=nan", {}, 422, "query.speed", id="nan"),
    pytest.param("speed=1&speed=x", {}, 422, "query.speed", id="two-speeds"),
    pytest.param("speed=1000&extra=1", {}, 201, None, id="other-parameter"),
    pytest.param("speed=1000", {"Idempotency-Key": ""}, 422, "Idempotency-Key", id="empty-key"),
    pytest.param("speed=1000", {"Authorization": "Basic abc"}, 401, None, id="basic-auth"),
    pytest.param("speed=1000", {"Authorization": f"bearer {TOKEN}"}, 201, None, id="lower"),
])
def test_plain_and_declared_submissions_answer_alike(
    server: Server, params: str, headers: dict[str, str], status: int, field: str | None
) -> None:
    """POST /runs answers every variant of query and headers as its declaration says,
    whether the plain path or FastAPI's reads it."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    sent = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/yaml"} | headers
    try:
        conn.request("POST", f"/runs?{params}", body=SLOW.read_bytes(), headers=sent)
        answer = conn.getresponse()
        body = json.loads(answer.read())
    finally:
        conn.close()
    assert answer.status == status, body
    if status == 201:
        assert answer.getheader("location") == body["url"]
        server.wait_status(body["run_id"], "finished")
    if field is not None:
        assert body["errors"][0]["field"] == field
