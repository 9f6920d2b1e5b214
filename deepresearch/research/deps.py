"""What the research steps depend on, and the `Deps` bundle.

Model, embedder, backend and cache are the base types of their layers; the knowledge base
and the connection are structural (Protocols): steps use only the few operations listed, so
a test plugs in fakes through the same seams as the real parts (`wiring.build_deps`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

if TYPE_CHECKING:
    from deepresearch.facts import Fact
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel
    from deepresearch.search.backends import SearchBackend
    from deepresearch.search.cache import SearchCache


class KnowledgeBaseLike(Protocol):
    """The knowledge base operations a run uses: recall, store, fact lookup, open conflicts."""

    def query(
        self, text: str, *, top_k: int | None = ..., mode: str | None = ..., freshness: str | None = ...
    ) -> Any: ...

    def add_facts(self, facts: list[Fact]) -> Any: ...

    def get(self, fact_id: str) -> Fact: ...

    def conflicts(self, fact_ids: Iterable[str] | None = None, include_resolved: bool = False) -> list[Any]: ...


class ConnectionLike(Protocol):
    """A DB-API connection (the workspace DB: cache ↔ fact links)."""

    def execute(self, sql: str, parameters: Any = ...) -> Any: ...


def _no_progress(event: str, **info: Any) -> None:
    return None


def _never() -> bool:
    return False


@dataclass
class Deps:
    """Everything the steps use. `model_steps` names the steps that may call the model."""

    kb: KnowledgeBaseLike | None
    model: ChatModel | None
    embedder: Embedder
    backend: SearchBackend
    cache: SearchCache | None
    conn: ConnectionLike
    extract: Callable[..., Any]
    age_tag: Callable[[float], str]
    freshness_days: dict[str, float] = field(default_factory=dict)
    cover_similarity: float = 0.75
    model_steps: tuple[str, ...] = ("answer",)
    clock: Callable[[], float] = time.perf_counter
    progress: Callable[..., None] = _no_progress
    over_budget: Callable[[], bool] = _never
    after_step: Callable[[str], None] = lambda step: None

    def model_for(self, step: str) -> ChatModel | None:
        """The model if `step` may use it (listed in `model_steps`, budget left), else None."""
        if self.model is None or step not in self.model_steps or self.over_budget():
            return None
        return self.model
