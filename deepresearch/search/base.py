"""What a search backend implements, and the registry backends register in.

Backends (`corpus`, `zim`, `searxng`) import only this module, never the facade
(`deepresearch.search.backends`) that picks one of them, so no import runs in a circle.
Built-ins, extensions and test fakes register the same way: `@register_backend("name")`,
undone with `BACKENDS.unregister(name)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from deepresearch.errors import SearchError
from deepresearch.registry import Registry

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
BACKENDS: Registry[BackendFactory] = Registry("search backend", "search.backend", SearchError, ", or --backend")


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Register a backend factory `factory(workspace) -> SearchBackend` under `name` (`search.backend`)."""
    return BACKENDS.register(name)
