"""The service's research: POST /ask on served folders, web.* never private, the Ask box."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.coordinator.serve.conftest import Server, start_server
from tests.loopback.web_server import LoopbackWeb, article_html, html_reply

MODEL = {
    "model": {
        "provider": "scripted", "latency_s": 0.01,
        "turns": {
            "lead": [
                {"subtasks": [{"id": "tandem", "query": "perovskite tandem efficiency",
                               "tools": ["docs.search", "docs.read"]}]},
                {"text": "Tandem cells reached 33.9 percent [1]."},
            ],
            "tandem": [
                {"calls": [{"tool": "docs.search", "args": {"query": "perovskite tandem"}}]},
                {"text": "33.9 percent (perovskite.md)."},
            ],
        },
    }
}
TOOLS = yaml.safe_dump(MODEL)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A server with two served folders of documents: papers (the first), then notes."""
    tmp = tmp_path_factory.mktemp("ask")
    papers = tmp / "papers"
    papers.mkdir()
    (papers / "perovskite.md").write_text(
        "# Perovskite tandem cells\n\nPerovskite-silicon tandem cells reached 33.9 percent.\n")
    # A name that is not UTF-8 once crash-looped the service's runs: now it is indexed.
    with open(os.fsencode(papers) + b"/tandem-r\xe9sum\xe9.md", "wb") as f:
        f.write(b"# Tandem notes\n\nOlder tandem cells reached 29 percent.\n")
    notes = tmp / "notes"
    notes.mkdir()
    (notes / "sodium.md").write_text(
        "# Sodium-ion in the cold\n\nSodium-ion cells keep 90 percent at -20 C.\n")
    srv = start_server(tmp, "--docs", str(papers), "--docs", str(notes))
    yield srv, tmp
    assert srv.stop() == 0, srv.log.read_text()


def _ask(srv: Server, body: dict[str, Any]) -> Any:
    with srv.client() as c:
        return c.post("/ask", json=body)


def test_ask_on_a_served_folder_answers_with_its_sources(served: tuple[Server, Path]) -> None:
    """POST /ask with docs "." (the served folder) runs; the report's sources name the file."""
    srv, _ = served
    r = _ask(srv, {"question": "How efficient are tandem cells?", "docs": ".",
                   "tools": yaml.safe_dump(MODEL)})
    assert r.status_code == 201, r.text
    assert r.headers["location"].endswith(r.json()["run_id"])
    run_id = r.json()["run_id"]
    srv.wait_status(run_id, "finished")
    with srv.client() as c:
        report = c.get(f"/runs/{run_id}/report").json()
        html = c.get(f"/runs/{run_id}/report", params={"format": "html"}).text
    assert report["subtasks"][0]["status"] == "complete"
    assert [(s["n"], s["path"]) for s in report["answer"]["sources"]] == [(1, "perovskite.md")]
    assert "<code>perovskite.md</code>" in html


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"docs": "/etc", "tools": TOOLS}, "docs", id="folder-not-served"),
        pytest.param({"docs": "../..", "tools": TOOLS}, "docs", id="relative-escape"),
        pytest.param({"docs": "no-such-folder", "tools": TOOLS}, "docs", id="missing"),
        pytest.param({"web": True, "tools": TOOLS}, "web", id="no-search-backend"),
        pytest.param({"search": "brave", "tools": TOOLS}, "research_tools.web.search",
                     id="no-server-key"),
    ],
)
def test_asks_the_server_cannot_serve_are_422(
    served: tuple[Server, Path], body: dict[str, Any], field: str
) -> None:
    """Folders outside --docs, the web without a backend, no tools, a key the server lacks."""
    srv, _ = served
    before = len(srv.client().get("/runs").json()["runs"])
    r = _ask(srv, {"question": "q?", **body})
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]], r.text
    assert len(srv.client().get("/runs").json()["runs"]) == before  # nothing recorded


def test_folders_the_server_does_not_serve_all_get_one_answer(
    served: tuple[Server, Path],
) -> None:
    """A missing folder, one outside, and a symlink out of the served one get the same 422,
    which echoes what the client wrote and names no path of the server's."""
    srv, tmp = served
    (tmp / "papers" / "out").symlink_to(tmp, target_is_directory=True)
    (tmp / "elsewhere").mkdir()
    answers = []
    for docs in ("no-such-folder", str(tmp / "elsewhere"), "out", str(tmp / "gone")):
        r = _ask(srv, {"question": "q?", "docs": docs, "tools": TOOLS})
        assert r.status_code == 422, r.text
        (error,) = r.json()["errors"]
        assert error["got"] == repr(docs)
        answers.append((error["field"], error["expected"]))
        assert str(tmp) not in r.text.replace(repr(docs), "")
    assert len(set(answers)) == 1


def test_a_job_file_cannot_allow_private_addresses(served: tuple[Server, Path]) -> None:
    """A submitted job setting allow_private is refused (422 naming the field); one that
    does not gets a refused fetch of a loopback page."""
    srv, tmp = served
    with srv.client() as c:
        r = c.post("/runs", content=yaml.safe_dump({
            "scenario": "peek", "research_tools": {"web": {"fetch": {"allow_private": True}}},
            "job": {"query": "peek", "subtasks": [{"id": "peek", "query": "q",
                                                   "tools": ["web.fetch"]}]},
        }), headers={"content-type": "application/yaml"})
    assert r.status_code == 422, r.text
    assert "research_tools.web.fetch.allow_private" in [e["field"] for e in r.json()["errors"]]
    web = LoopbackWeb({"/secret": html_reply(article_html("internal", ["internal data " * 20]))})
    with web.serving():
        job = {
            "scenario": "peek",
            "research_tools": {"web": {"fetch": {"timeout_s": 5}}},
            "job": {"query": "peek", "subtasks": [{
                "id": "peek", "query": "read the internal page", "tools": ["web.fetch"],
                "plan": [{"call": "web.fetch",
                          "args": {"url": f"http://127.0.0.1:{web.port}/secret"}}],
            }]},
        }
        path = tmp / "peek.yaml"
        path.write_text(yaml.safe_dump(job))
        run_id = srv.submit(path, speed=1)["run_id"]
        srv.wait_status(run_id, "finished")
        asked = len(web.requests)
    with srv.client() as c:
        gaps = c.get(f"/runs/{run_id}/gaps").json()["gaps"]
    assert asked == 0
    assert (gaps[0]["subtask_id"], gaps[0]["errorCategory"]) == ("peek", "validation")
    assert "loopback address" in gaps[0]["message"] and "refused" in gaps[0]["message"]


def test_the_page_has_an_ask_box(served: tuple[Server, Path]) -> None:
    """GET / carries the Ask form next to the job form."""
    srv, _ = served
    with srv.client() as c:
        page = c.get("/").text
    assert 'id="ask-form"' in page and 'id="ask-question"' in page and 'id="job-form"' in page


def _web_model(url: str) -> str:
    return yaml.safe_dump({"model": {
        "provider": "scripted", "latency_s": 0.01,
        "turns": {
            "lead": [
                {"subtasks": [{"id": "web", "query": "sodium-ion news",
                               "tools": ["web.search", "web.fetch"]}]},
                {"text": "Sodium-ion cells reached 160 Wh/kg [1]."},
            ],
            "web": [
                {"calls": [{"tool": "web.search", "args": {"query": "sodium-ion"}}]},
                {"calls": [{"tool": "web.fetch", "args": {"url": url}}]},
                {"text": "160 Wh/kg (search result)."},
            ],
        },
    }})


@pytest.mark.process
def test_the_operators_searxng_is_trusted_and_no_other_loopback_is(
    tmp_path: Path,
) -> None:
    """`serve --search searxng:LOOPBACK` answers asks; fetching loopback and another
    loopback search endpoint named by the ask are refused."""
    from tests.loopback.web_server import SearxngServer

    hits = [{"title": "Sodium-ion at 160 Wh/kg", "url": "https://example.org/na",
             "snippet": "160 Wh/kg"}]
    searx, other = SearxngServer(hits), SearxngServer(hits)
    web = LoopbackWeb({"/internal": html_reply(article_html("internal", ["secret " * 30]))})
    with searx.serving(), other.serving(), web.serving():
        srv = start_server(tmp_path, "--search", f"searxng:{searx.origin}")
        try:
            page = f"http://127.0.0.1:{web.port}/internal"
            r = _ask(srv, {"question": "Sodium-ion news?", "web": True,
                           "tools": _web_model(page)})
            assert r.status_code == 201, r.text
            srv.wait_status(r.json()["run_id"], "finished")
            with srv.client() as c:
                report = c.get(f"/runs/{r.json()['run_id']}/report").json()
                md = c.get(f"/runs/{r.json()['run_id']}/report", params={"format": "md"}).text
            r2 = _ask(srv, {"question": "again?", "search": f"searxng:{other.origin}",
                            "tools": _web_model(page)})
            assert r2.status_code == 201, r2.text
            srv.wait_status(r2.json()["run_id"], "finished")
            with srv.client() as c:
                report2 = c.get(f"/runs/{r2.json()['run_id']}/report").json()
        finally:
            assert srv.stop() == 0, srv.log.read_text()
        searched, other_searched, fetched = len(searx.requests), len(other.requests), len(
            web.requests)
    # Two searches: search first (the subtask's own query), then the model's own call.
    assert searched == 2 and other_searched == 0 and fetched == 0
    assert report["answer"]["sources"][0]["url"] == "https://example.org/na"
    assert "<https://example.org/na>" in md
    findings = report2["answer"]["sections"][0]["findings"]
    assert all(f["tool"] != "web.search" for f in findings)  # refused: no search finding


def _declared(srv: Server, path: str) -> dict[str, Any]:
    """The POST operation at ``path`` in the document the server publishes."""
    with srv.client() as c:
        doc: dict[str, Any] = c.get("/openapi.json").json()
    operation: dict[str, Any] = doc["paths"][path]["post"]
    operation["components"] = doc["components"]
    return operation


def _string(schema: dict[str, Any]) -> dict[str, Any]:
    """The constraints on a string: the schema's own and its string branch's (anyOf)."""
    strings = [b for b in schema.get("anyOf", []) if b.get("type") == "string"]
    branch: dict[str, Any] = strings[0] if strings else {}
    return {**schema, **branch}


def test_an_empty_string_is_refused_by_the_schema_that_the_server_publishes(
    served: tuple[Server, Path],
) -> None:
    """docs, search, model and tools of POST /ask, and the Idempotency-Key of POST /runs
    and POST /ask, declare minLength 1, and the server refuses "" with 422 (schemathesis
    found "" schema-valid but refused)."""
    srv, _ = served
    ask = _declared(srv, "/ask")
    fields = ask["components"]["schemas"]["AskRequest"]["properties"]
    for name in ("docs", "search", "model", "tools"):
        assert _string(fields[name]).get("minLength") == 1, (name, fields[name])
    for path in ("/runs", "/ask"):
        (key,) = [p for p in _declared(srv, path)["parameters"]
                  if p["name"].lower() == "idempotency-key"]
        schema = _string(key["schema"])
        assert (schema.get("minLength"), schema.get("maxLength")) == (1, 200), (path, key)
    assert _ask(srv, {"question": "q?", "tools": ""}).status_code == 422
    with srv.client() as c:
        r = c.post("/runs", content=DATA_JOB, headers={
            "Content-Type": "application/yaml", "Idempotency-Key": ""})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "Idempotency-Key"


DATA_JOB = yaml.safe_dump({
    "scenario": "tiny", "job": {"query": "q", "subtasks": [
        {"id": "a", "query": "a", "tools": ["t"], "plan": [{"call": "t", "args": {}}]}]},
    "tools": {"t": {"params": {}, "responses": [{"ok": 1}]}}}).encode()


@pytest.mark.parametrize("body", [
    pytest.param(b"{not json", id="bad-syntax"),
    pytest.param(b"s5\xfft\xfe{6t-}", id="not-utf-8"),
])
def test_a_body_that_is_not_json_is_a_declared_400(
    served: tuple[Server, Path], body: bytes
) -> None:
    """POST /ask with a body that is no JSON document: 400 {"detail"}, and 400 is in the
    document (it answered an undeclared 400 for bytes, 422 for bad syntax)."""
    srv, _ = served
    assert "400" in _declared(srv, "/ask")["responses"]
    with srv.client() as c:
        r = c.post("/ask", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert list(r.json()) == ["detail"]


@pytest.mark.parametrize(("body", "field"), [
    # No model at all is a retrieval-only ask (201); a scripted one needs its turns.
    pytest.param({"docs": ".", "model": "scripted"}, "model", id="scripted-without-turns"),
    pytest.param({"docs": ".", "model": "nobody:x"}, "model", id="unknown-provider"),
    pytest.param({"docs": ".", "search": "altavista", "model": "scripted"}, "search",
                 id="unknown-search"),
    pytest.param({"question": " ", "docs": ".", "model": "scripted"}, "question",
                 id="blank-question"),
])
def test_an_asks_problems_name_its_own_fields_not_cli_flags(
    served: tuple[Server, Path], body: dict[str, Any], field: str
) -> None:
    """A refused ask names the field of POST /ask it is about and never a `fanout ask`
    flag (--docs, --tools, --model): the page and API clients have no flags."""
    srv, _ = served
    r = _ask(srv, {"question": "q?", **body})
    assert r.status_code == 422, r.text
    problems = r.json()["errors"]
    assert field in [p["field"] for p in problems], problems
    for p in problems:
        assert "--" not in p["field"] + p["expected"] + p["message"], p
        assert p["message"].startswith("POST /ask"), p


@pytest.mark.parametrize("body", [
    pytest.param({}, id="question-only"),
    pytest.param({"tools": TOOLS}, id="with-a-model"),
])
def test_an_ask_without_docs_reads_the_servers_first_folder(
    served: tuple[Server, Path], body: dict[str, Any]
) -> None:
    """The question alone (the README's first curl: retrieval only on a server without a
    model) or with a model: the run reads the first served folder; the run is recorded as
    an ask, in the list and in its report, not as POST /runs."""
    srv, _ = served
    r = _ask(srv, {"question": "How efficient are tandem cells?", **body})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    srv.wait_status(run_id, "finished")
    with srv.client() as c:
        report = c.get(f"/runs/{run_id}/report").json()
        md = c.get(f"/runs/{run_id}/report", params={"format": "md"}).text
        (row,) = [row for row in c.get("/runs").json()["runs"] if row["id"] == run_id]
    assert "perovskite.md" in [s["path"] for s in report["answer"]["sources"]]
    assert (row["file"], row["job"]) == ("POST /ask", "ask-how-efficient-are-tandem-cells")
    assert "POST /ask" in md and "POST /runs" not in md


def test_another_served_folder_is_named_relative_to_the_first(
    served: tuple[Server, Path],
) -> None:
    """docs "../notes" reads the second --docs folder; a folder not served is refused with
    the served ones listed as a client names them, and no path of the server's."""
    srv, tmp = served
    r = _ask(srv, {"question": "How do sodium-ion cells do in the cold?", "docs": "../notes"})
    assert r.status_code == 201, r.text
    srv.wait_status(r.json()["run_id"], "finished")
    with srv.client() as c:
        report = c.get(f"/runs/{r.json()['run_id']}/report").json()
    assert [s["path"] for s in report["answer"]["sources"]] == ["sodium.md"]
    refused = _ask(srv, {"question": "q?", "docs": "elsewhere"})
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["errors"]
    assert error["field"] == "docs" and "('.', '../notes')" in error["expected"], error
    assert error["message"].startswith("POST /ask: docs: expected a folder the server serves")
    assert str(tmp) not in refused.text


def test_a_server_without_folders_says_so_naming_post_ask(server: Server) -> None:
    """On a server started without --docs: docs is refused as POST /ask's (it read "POST
    /runs:"), and an ask with nothing to research with is told the server has no folders."""
    docs = _ask(server, {"question": "q?", "docs": "."})
    assert docs.status_code == 422, docs.text
    (error,) = docs.json()["errors"]
    assert (error["field"], error["got"]) == ("docs", "'.'")
    assert error["message"].startswith("POST /ask: docs: expected no docs: this server serves "
                                       "no folders"), error
    nothing = _ask(server, {"question": "q?", "model": "scripted"})
    assert nothing.status_code == 422, nothing.text
    (error,) = nothing.json()["errors"]
    assert (error["field"], error["got"]) == ("tools", "no tools")
    assert "this server serves no folders" in error["expected"], error


@pytest.mark.parametrize(("body", "field", "expected", "got"), [
    pytest.param({"question": 5}, "question", "a string", "5", id="not-a-string"),
    pytest.param({}, "question", "a value: the field is required", None, id="missing"),
    pytest.param({"question": "q?", "max_subtasks": 0}, "max_subtasks",
                 "a number of at least 1", "0", id="too-small"),
    pytest.param({"question": "q?", "web": "maybe"}, "web", "true or false", "'maybe'",
                 id="not-a-boolean"),
])
def test_a_malformed_ask_reads_as_a_sentence_naming_post_ask(
    served: tuple[Server, Path], body: dict[str, Any], field: str, expected: str,
    got: str | None,
) -> None:
    """A request the schema refuses: the ask's own field, what was expected in words (not
    pydantic's "Input should be ..." after "expected"), what came, under POST /ask."""
    srv, _ = served
    r = _ask(srv, body)
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert (error["field"], error["expected"], error["got"]) == (field, expected, got)
    assert error["message"] == f"POST /ask: {field}: expected {expected}" + (
        "" if got is None else f", got {got}")


def test_a_text_body_is_shown_as_text(served: tuple[Server, Path]) -> None:
    """A text/plain body is decoded, not shown as Python bytes (b'hello')."""
    srv, _ = served
    with srv.client() as c:
        r = c.post("/ask", content=b"hello", headers={"Content-Type": "text/plain"})
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert (error["field"], error["got"]) == ("<body>", "'hello'")
    assert "application/json" in error["expected"]


def test_a_long_value_is_echoed_as_a_short_escaped_prefix(served: tuple[Server, Path]) -> None:
    """An unknown field of 900,000 characters (under the body limit): the 422 shows 80
    characters of it, escaped, an ellipsis and its length, once each in got and message;
    the answer stays small (it echoed the value twice: 10 MB for 5 MB)."""
    srv, _ = served
    r = _ask(srv, {"question": "q?", "junk": "\x00" + "x" * 899_999})
    assert r.status_code == 422, r.text
    assert len(r.content) < 2_000
    (error,) = r.json()["errors"]
    shown = "'\\x00" + "x" * 76 + "…' (900,000 characters)"
    assert (error["field"], error["got"]) == ("junk", shown)
    assert error["expected"].startswith("no such field: the fields are question, docs, web")
    assert error["message"].endswith(f", got {shown}")
