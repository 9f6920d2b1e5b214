"""Search backends: one small abstract class and a registry.

Built-ins (`corpus`, `zim`, `searxng`) register through `register_backend`, the same seam an
extension would use; their modules import lazily so optional dependencies stay optional.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from deepresearch.errors import SearchError

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace


@dataclass
class SearchResult:
    """One hit: `text` is the passage to read, `snippet` a short excerpt for display."""

    title: str
    url: str
    snippet: str
    text: str
    score: float
    backend: str = ""

    def to_dict(self) -> dict[str, object]:
        """Plain dict (the JSON form stored in the search cache)."""
        return {
            "title": self.title,
            "url": self.url,
            "snippet": self.snippet,
            "text": self.text,
            "score": self.score,
            "backend": self.backend,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SearchResult:
        """Inverse of `to_dict` (unknown keys are ignored)."""
        return cls(
            title=str(data.get("title", "")),
            url=str(data.get("url", "")),
            snippet=str(data.get("snippet", "")),
            text=str(data.get("text", "")),
            score=float(data.get("score", 0.0) or 0.0),  # type: ignore[arg-type]
            backend=str(data.get("backend", "")),
        )


class SearchBackend(ABC):
    """Answers a query with up to `count` results. `io_bound` backends may run concurrently."""

    name: str = ""
    io_bound: bool = False

    @abstractmethod
    def search(self, query: str, count: int) -> list[SearchResult]:
        """The best `count` results for `query` ([] when nothing matches)."""


BackendFactory = Callable[["Workspace"], SearchBackend]
BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Register a backend factory `factory(workspace) -> SearchBackend` under `name`."""

    def decorator(factory: BackendFactory) -> BackendFactory:
        BACKENDS[name] = factory
        return factory

    return decorator


def get_backend(name: str, ws: Workspace) -> SearchBackend:
    """The backend `name` configured from the workspace; unknown or misconfigured → SearchError."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise SearchError(
            f"unknown search backend {name!r} — choose one of {', '.join(sorted(BACKENDS))}"
            " (search.backend in your config, or --backend)"
        )
    return factory(ws)


class CorpusBackend(SearchBackend):
    """The local corpus in the workspace database (offline)."""

    name = "corpus"
    io_bound = False

    def __init__(self, corpus: object, mode: str = "hybrid"):
        self.corpus = corpus
        self.mode = mode

    def search(self, query: str, count: int) -> list[SearchResult]:
        """Hybrid (or configured mode) search over the ingested documents."""
        return self.corpus.search(query, count, mode=self.mode)  # type: ignore[attr-defined,no-any-return]


@register_backend("corpus")
def _corpus(ws: Workspace) -> SearchBackend:
    from deepresearch.search.corpus import Corpus

    return CorpusBackend(Corpus.from_workspace(ws), ws.config.search.corpus.mode)


@register_backend("zim")
def _zim(ws: Workspace) -> SearchBackend:
    from deepresearch.search.zim import ZimBackend

    return ZimBackend(ws.config.search.zim.files)


@register_backend("searxng")
def _searxng(ws: Workspace) -> SearchBackend:
    from deepresearch.search.searxng import SearxngBackend

    cfg = ws.config.search.searxng
    return SearxngBackend(
        cfg.base_url, timeout=cfg.timeout, max_retries=cfg.max_retries, backoff_seconds=cfg.backoff_seconds
    )
