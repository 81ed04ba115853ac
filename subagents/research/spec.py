"""The ``research_tools`` block of a job or tools file (docs/design.md §10)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "DEFAULT_KEY_ENV",
    "DocsSpec",
    "FetchSpec",
    "ResearchToolsSpec",
    "SearchBackendName",
    "WebSpec",
    "research_tool_names",
    "resolve_docs_folder",
]

_SPEC = ConfigDict(frozen=True, extra="forbid")

SearchBackendName = Literal["searxng", "brave", "tavily"]

DEFAULT_KEY_ENV: dict[str, str] = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}


class FetchSpec(BaseModel):
    """How ``web.fetch`` reads pages."""

    model_config = _SPEC

    timeout_s: float = Field(default=20, gt=0, description="Seconds for one whole fetch.")
    max_bytes: int = Field(
        default=5_000_000, ge=1024,
        description="Bytes read of one page; a longer page is a partial result.",
    )
    allow_private: bool = Field(
        default=False,
        description="Let web.fetch reach loopback, private, link-local and metadata "
        "addresses. Only the user's own act sets it (`--allow-private-fetch`, or "
        "`allow_private_fetch=True` in Python): a job or tools file that does is refused.",
    )
    max_redirects: int = Field(default=5, ge=0, le=20, description="Redirects followed.")


class WebSpec(BaseModel):
    """``web.search`` (when ``search`` is set) and ``web.fetch``."""

    model_config = _SPEC

    search: SearchBackendName | None = Field(
        default=None, description="The search backend: searxng (self-hosted), brave or tavily."
    )
    url: str | None = Field(
        default=None,
        description="The backend's base URL (required for searxng; brave and tavily have one).",
    )
    api_key_env: str | None = Field(
        default=None,
        description="The variable holding the key (brave: BRAVE_API_KEY, tavily: TAVILY_API_KEY).",
    )
    fetch: FetchSpec = Field(default_factory=FetchSpec)

    @model_validator(mode="after")
    def _backend_url(self) -> WebSpec:
        if self.search == "searxng" and not self.url:
            raise ValueError("search: searxng needs url: the SearXNG instance's base URL")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url: expected an http(s) URL")
        return self

    def key_env(self) -> str | None:
        """The variable the backend's key is read from (None: the backend needs none)."""
        if self.search is None or self.search == "searxng":
            return self.api_key_env
        return self.api_key_env or DEFAULT_KEY_ENV[self.search]


class DocsSpec(BaseModel):
    """``docs.search`` and ``docs.read`` over a local folder."""

    model_config = _SPEC

    path: str = Field(min_length=1, description="The folder (relative to the job file).")
    max_bytes: int = Field(
        default=20_000_000, ge=1024,
        description="The largest file indexed; larger ones are skipped and listed by "
        "`fanout index`.",
    )
    semantic: Literal["auto", "off"] = Field(
        default="auto",
        description="auto: hybrid search (bm25 and embeddings) where the semantic extra is "
        "installed, else lexical; off: lexical only.",
    )


class ResearchToolsSpec(BaseModel):
    """The built-in research tools a job may use."""

    model_config = _SPEC

    web: WebSpec | None = None
    docs: DocsSpec | None = None


def research_tool_names(spec: ResearchToolsSpec | None) -> list[str]:
    """The tools ``spec`` declares, by name."""
    if spec is None:
        return []
    names: list[str] = []
    if spec.web is not None:
        if spec.web.search is not None:
            names.append("web.search")
        names.append("web.fetch")
    if spec.docs is not None:
        names += ["docs.search", "docs.read"]
    return names


def resolve_docs_folder(path: str, base_dir: str | Path | None) -> Path:
    """The documents folder of ``research_tools.docs.path`` (relative to ``base_dir``,
    the job file's folder)."""
    folder = Path(path).expanduser()
    if not folder.is_absolute() and base_dir is not None:
        folder = Path(base_dir) / folder
    return folder.resolve()
