"""Taking a job in: its media type, YAML or JSON, the problems in it (the body's size
and deadline are :mod:`coordinator.serve.refusals`'s).

A submitted job is read as ``fanout run`` reads a file (:func:`~coordinator.jobfile.
load_scenario_text`): a malformed one gets the same problems, and nothing runs or is
recorded. JSON is read as YAML, which it is a subset of, so lines mean the same; tabs
outside strings, which JSON allows and YAML does not, become spaces first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Annotated, Final, Generic, Literal, TypeVar

import anyio
from fastapi import Header, HTTPException

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.research import ResearchPolicy, check_research_policy
from coordinator.jobfile.scenario import Scenario
from coordinator.serve.refusals import ASKED, SUBMITTED, problem, quote
from coordinator.serve.schemas import InputProblem
from shared.errors import InputFileError, InputFileErrors
from subagents.models.endpoints.preflight import keyless
from subagents.models.spec import DEFAULT_KEY_ENV

BodyKind = Literal["yaml", "json"]

MEDIA_TYPES: Final[dict[str, BodyKind]] = {
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "text/x-yaml": "yaml",
    "application/json": "json",
}
_KEY = re.compile(r"[\x21-\x7e]{1,200}")  # visible ASCII, as a header value should be


class UnsupportedMediaType(HTTPException):
    """415: the body is not declared as YAML or JSON.

    Only these types are accepted, and none is a CORS-safelisted type, so a page on
    another origin cannot submit a job without the browser asking first.
    """

    def __init__(self, got: str | None) -> None:
        super().__init__(
            415,
            f"{SUBMITTED}: Content-Type: expected application/yaml or application/json, "
            f"got {quote(got) if got else '(none)'}",
        )


class JobRejected(Exception):
    """422: the job cannot run; ``problems`` says why, with lines."""

    def __init__(self, problems: Sequence[InputProblem]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the submitted job")
        self.problems = list(problems)


def media_kind(content_type: str | None) -> BodyKind:
    """YAML or JSON, from the Content-Type header (parameters such as charset ignored).

    Raises:
        UnsupportedMediaType: any other type, or none.
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    kind = MEDIA_TYPES.get(media)
    if kind is None:
        raise UnsupportedMediaType(content_type)
    return kind


# The Idempotency-Key as check_key reads it, its constraints declared so that a client (and
# schemathesis) knows an empty or over-long key is refused; check_key stays the one place
# that checks it.
IdempotencyKey = Annotated[str | None, Header(
    description="The same key with the same request returns the run it made before (a "
    "key that made a run from a different request is refused with 422): 1 to 200 visible "
    "ASCII characters.",
    json_schema_extra={"minLength": 1, "maxLength": 200, "pattern": "^[!-~]+$"},
    # One example for both doors: schemathesis's examples phase then sends one key with
    # several requests, so a reused key's declared 422 is met on every run of it.
    openapi_examples={"key": {"summary": "A key the client made for this request",
                              "value": "job-42-attempt-1"}},
)]


def check_key(key: str | None, *, file: str = SUBMITTED) -> str | None:
    """The Idempotency-Key header, if given and well formed.

    Raises:
        JobRejected: a key that is empty, too long or not visible ASCII.
    """
    if key is None:
        return None
    if _KEY.fullmatch(key) is None:
        raise JobRejected([problem("Idempotency-Key", "1 to 200 visible ASCII characters",
                                   f"{len(key)} characters", file=file)])
    return key


_ASK_FIELDS = {"--docs": "docs", "--search": "search", "FANOUT_SEARCH": "search",
               "--model": "model", "QUESTION": "question"}
_NO_TOOLS = ("tools to research with: docs (a folder the server serves), web: true (the "
             "server's search backend), search (searxng:URL, brave or tavily) or tools (a "
             "tools file's text: tools, mcp_servers, research_tools)")
_NO_MODEL = "a model (PROVIDER:NAME) or a model block in tools; or docs or web (retrieval only)"
_WORDS = {("--model", g): _NO_MODEL for g in ("no model", "no model and no search tool")} | {
    ("--model", "scripted"): "a model block of provider scripted with turns in tools",
    ("tools", "no tools"): _NO_TOOLS}


def ask_problems(
    exc: InputFileError, file: str, *, no_tools: str = _NO_TOOLS
) -> list[InputProblem]:
    """An ask's problems (``POST /ask``) in its own fields, never in `fanout ask`'s flags;
    ``no_tools`` says what an ask with nothing to research with is missing (the server
    knows what it has)."""
    words = _WORDS | {("tools", "no tools"): no_tools}
    out = []
    for e in exc.errors if isinstance(exc, InputFileErrors) else [exc]:
        field, expected = _ASK_FIELDS.get(e.file, e.field or "<document>"), e.expected
        key = ("tools", e.got or "") if e.field == "tools" else (e.file, e.got or "")
        expected = words.get(key, expected).replace(
            "come from the command line", "are fields of the ask")
        out.append(problem(field, expected, e.got, line=e.line, file=file))
    return out


def parse_ask(
    job: bytes, tools_text: str | None, *, allow_mcp: bool, research: ResearchPolicy
) -> Scenario:
    """The job an ask composed (``POST /ask``), checked as :func:`parse_job` checks one; a
    problem on a line past the tools text the ask ran with (``tools_text``) is the
    composed job's, not the ask's: it names no line.

    Raises:
        JobRejected: every problem; nothing is recorded.
    """
    try:
        return parse_job(job, "yaml", allow_mcp=allow_mcp, research=research, file=ASKED)
    except JobRejected as exc:
        sent = tools_text.count("\n") + 1 if tools_text else 0
        raise JobRejected([p if p.line is None or p.line <= sent else problem(
            p.field, p.expected, p.got, file=ASKED) for p in exc.problems]) from None


def _problems(exc: InputFileError) -> list[InputProblem]:
    errors = exc.errors if isinstance(exc, InputFileErrors) else [exc]
    return [problem(e.field or "<document>", e.expected, e.got, line=e.line, file=e.file)
            for e in errors]


def _line_of_key(text: str, key: str) -> int | None:
    match = re.search(rf'^\s*"?{re.escape(key)}"?\s*:', text, flags=re.M)
    return None if match is None else text.count("\n", 0, match.start()) + 1


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Recent(Generic[K, V]):
    """The last ``size`` entries put, the least recently used dropped first (safe across
    threads: jobs are loaded on worker threads and looked up on the event loop)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def __contains__(self, key: K) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


_loaded_jobs: _Recent[tuple[str, BodyKind, str], Scenario] = _Recent(128)


def _load(text: str, kind: BodyKind, file: str) -> Scenario:
    """The job in ``text``, loaded once per distinct (text, media type, file): a burst of
    one job submitted many times parses it once. A Scenario is frozen, so sharing it is
    safe; the checks that depend on the server (keys, MCP) run on every submission,
    after this. Only a job that loads is kept (a rejected one is parsed again).

    Raises:
        JobRejected: the problems in it, with their lines.
    """
    key = (text, kind, file)
    if (hit := _loaded_jobs.get(key)) is not None:
        return hit
    yaml_text = text
    if kind == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise JobRejected([problem("<document>", "a JSON document", exc.msg,
                                       line=exc.lineno)]) from None
        except RecursionError:
            raise JobRejected([problem("<document>", "a JSON document nested less deeply",
                                       "too many nested levels")]) from None
        yaml_text = text.replace("\t", " ")  # valid JSON holds tabs only between tokens
    try:
        scenario = load_scenario_text(yaml_text, file)
    except InputFileError as exc:
        raise JobRejected(_problems(exc)) from None
    except RecursionError:
        raise JobRejected([problem("<document>", "a document nested less deeply",
                                   "too many nested levels")]) from None
    _loaded_jobs.put(key, scenario)
    return scenario


# Bodies larger than this are hashed every time: the memo holds at most 8 MiB of them.
_DIGEST_BODY_MAX: Final = 64 << 10
_digests: _Recent[tuple[bytes, float], str] = _Recent(128)


def request_digest(body: bytes, speed: float) -> str:
    """What an Idempotency-Key is bound to: the body and the options of the request.

    Kept for the last few distinct requests, as :func:`_load` keeps their jobs: hashing a
    job file of some kilobytes lets go of the GIL (hashlib does above 2 KiB), and taking
    it back from the store writer's thread cost the event loop ~0.15 ms a submission in
    a burst of one job; the dictionary lookup holds it.
    """
    key = (body, speed)
    if (hit := _digests.get(key)) is not None:
        return hit
    digest = hashlib.sha256(body + f"\n--speed={speed!r}".encode()).hexdigest()
    if len(body) <= _DIGEST_BODY_MAX:
        _digests.put(key, digest)
    return digest


def loaded_before(body: bytes, kind: BodyKind, file: str = SUBMITTED) -> bool:
    """Whether ``body`` (as ``kind``) was loaded already, so that :func:`parse_job` costs
    a dictionary lookup and the server's own checks: cheap enough for the event loop.

    A job not seen before is parsed on a worker thread (a large YAML document takes a
    while). A burst of one job, fifty submissions at once, would otherwise queue fifty
    thread hops behind each other for what is a lookup: 80–90 ms each, measured.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return (text, kind, file) in _loaded_jobs


def _check_research(
    scenario: Scenario, text: str, environ: Mapping[str, str], policy: ResearchPolicy
) -> None:
    """A submitted job's research tools: served folders only; the server's own search key."""
    spec = scenario.research_tools
    if spec is None:
        return
    line = _line_of_key(text, "research_tools")
    if spec.docs is not None:
        # The folder is checked against the served ones as the file names it (no line
        # lookup in a file that is not on disk: the research_tools key's line instead).
        problems = check_research_policy(scenario.model_copy(update={"source": ""}), policy)
        if problems:
            raise JobRejected([problem(p.field, p.expected, p.got, line=line) for p in problems])
    web = spec.web
    if web is not None and web.search in ("brave", "tavily"):
        from subagents.research.spec import DEFAULT_KEY_ENV as SEARCH_KEYS

        default = SEARCH_KEYS[web.search]
        if web.api_key_env not in (None, default):
            # As for the model's key: a job may not name another of the server's variables.
            raise JobRejected([problem(
                "research_tools.web.api_key_env",
                f"the backend's own key variable ({default}): a job submitted to the "
                "service names no other", web.api_key_env, line=line,
            )])
        if not environ.get(default, "").strip():
            raise JobRejected([problem(
                "research_tools.web.search",
                f"a backend whose key the server has ({default} is not set here)",
                web.search, line=line,
            )])


def parse_job(
    body: bytes,
    kind: BodyKind,
    *,
    allow_mcp: bool,
    environ: Mapping[str, str] = os.environ,
    research: ResearchPolicy | None = None,
    file: str = SUBMITTED,
) -> Scenario:
    """The job in ``body``, validated as ``fanout run`` validates a file.

    ``research`` is what the server lets research tools do: documents only under the
    folders it serves, a search key only from its own environment.

    Raises:
        JobRejected: every problem, with its line; nothing is recorded.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise JobRejected([problem("<document>", "UTF-8 text",
                                   f"a byte that is not UTF-8 at offset {exc.start}",
                                   line=line)]) from None
    scenario = _load(text, kind, file)
    model = scenario.model
    if model is not None and model.provider != "scripted" and (
        model.base_url is not None or model.key_env != DEFAULT_KEY_ENV[model.provider]
    ):
        # The key is the server's: a submitted job may not send it (or, naming another
        # variable, any of the server's secrets) to a URL of the job's choosing. Checked
        # first, so a job cannot probe which variables the server has either.
        default = DEFAULT_KEY_ENV[model.provider]
        other_key = model.key_env != default
        raise JobRejected([problem(
            "model.api_key_env" if other_key else "model.base_url",
            f"the provider's own key variable ({default}) and endpoint: a job submitted "
            "to the service names neither another variable nor a base_url",
            str(model.key_env) if other_key else str(model.base_url),
            line=_line_of_key(text, "model"),
        )])
    if (
        model is not None
        and (variable := model.key_env)
        and not environ.get(variable, "").strip()
        and not keyless(model, environ)  # a local server (serve --base-url): no key
    ):
        # As `fanout run` does before recording: the key is the server's, from its
        # environment; a job naming a variable the server lacks cannot run.
        raise JobRejected([problem(
            "model.api_key_env",
            f"a variable set in the server's environment (the {model.provider} key is "
            "read from there, never from the file)",
            f"{variable}, which the server does not have",
            line=_line_of_key(text, "model"),
        )])
    _check_research(scenario, text, environ, research or ResearchPolicy(docs_roots=()))
    if scenario.mcp_servers and not allow_mcp:
        raise JobRejected([problem(
            "mcp_servers",
            "no mcp_servers: the service does not start commands from submitted jobs "
            "(start it with --allow-mcp to let it)",
            ", ".join(sorted(scenario.mcp_servers)),
            line=_line_of_key(text, "mcp_servers"),
        )])
    return scenario


# How long a run's start may wait for the submissions being answered (see IntakeGate);
# past it the run starts anyway, so a steady stream of submissions delays none for long.
INTAKE_WAIT_S: Final = 0.5
# How long no submission must have been in flight before a run starts: a burst's later
# connections are still being read when its first answers go out.
INTAKE_LINGER_S: Final = 0.01


class IntakeGate:
    """The submissions being answered, and a wait until there are none.

    Runs execute on the event loop that answers submissions and write through the same
    store writer; the first steps of a run started mid-burst (its lead, its subagents'
    first states, at ``speed=1000`` dozens of events) took the loop for 20–35 ms at a
    time and put transactions of events ahead of the burst's submissions. Decision: a run
    starts once no submission has been in flight for ``linger_s`` (at most ``max_wait_s``
    after it was admitted). A submission is answered only once it is committed, as
    before; the run it made is ``running`` (or ``queued``) in the store and the API alike
    from that moment, and its first event follows a few milliseconds later.
    """

    def __init__(self, *, max_wait_s: float = INTAKE_WAIT_S,
                 linger_s: float = INTAKE_LINGER_S) -> None:
        self.max_wait_s = max_wait_s
        self.linger_s = linger_s
        self.busy = 0  # submissions between their request and the end of their answer
        self._left_at = float("-inf")
        self._quiet: anyio.Event | None = None

    def enter(self) -> None:
        """A submission arrived."""
        self.busy += 1

    def leave(self) -> None:
        """A submission's answer has gone out (or it failed)."""
        self.busy -= 1
        self._left_at = anyio.current_time()
        if self.busy == 0 and self._quiet is not None:
            self._quiet.set()
            self._quiet = None

    async def quiet(self) -> None:
        """Return once no submission has been in flight for ``linger_s`` (at once when
        none was lately), or after ``max_wait_s`` whatever the intake."""
        if not self.busy and anyio.current_time() >= self._left_at + self.linger_s:
            return
        with anyio.move_on_after(self.max_wait_s):
            while True:
                if self.busy:
                    if self._quiet is None:
                        self._quiet = anyio.Event()
                    await self._quiet.wait()
                elif (rest := self._left_at + self.linger_s - anyio.current_time()) > 0:
                    await anyio.sleep(rest)
                else:
                    return
