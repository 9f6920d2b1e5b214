"""What the research steps depend on: the `Deps` bundle and the `RunContext` of one run.

Model, embedder, backend and cache are the base types of their layers; the knowledge base
and the connection are structural (Protocols): steps use only the few operations listed, so
a test plugs in fakes through the same seams as the real parts (`wiring.build_deps`).

`Deps` is what any run may use and a caller may reuse for the next run. `RunContext` is what
belongs to one run: its time budget, its progress line, and the tally its steps count into
(searches, cache hits, model calls and seconds) — the loop adds the tally to the state's
counters, so a step never writes the state it reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from deepresearch.config import Config

if TYPE_CHECKING:
    from deepresearch.facts import Fact
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel
    from deepresearch.search.backends import SearchBackend
    from deepresearch.search.cache import SearchCache

Progress = Callable[..., None]
_DEFAULT = Config()  # a Deps built without these settings runs the product the config describes


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
    freshness_days: dict[str, float] = field(default_factory=lambda: dict(_DEFAULT.kb.freshness_days))
    cover_similarity: float = _DEFAULT.research.kb_cover_similarity
    model_steps: tuple[str, ...] = tuple(_DEFAULT.research.model_steps)
    clock: Callable[[], float] = time.perf_counter
    after_step: Callable[[str], None] = lambda step: None
    categorizer: Any = None  # the one `extract` uses (None: its default); the `check` model step wraps it


@dataclass(frozen=True)
class Budget:
    """A run's time budget: `seconds` (None = none) against the time spent before this process
    resumed it plus the time since `started` on `clock`."""

    seconds: float | None = None
    clock: Callable[[], float] = time.perf_counter
    started: float = 0.0
    spent_before: float = 0.0

    def elapsed(self) -> float:
        """Seconds the run has taken so far, across resumes."""
        return self.spent_before + self.clock() - self.started

    def spent(self) -> bool:
        """True once the run has used its budget."""
        return self.seconds is not None and self.elapsed() >= self.seconds


class Tally:
    """Counters a step adds to; the loop takes them (`drain`) into the state after the step."""

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}

    def bump(self, name: str, amount: float = 1) -> None:
        """Add to a named counter (searches, cache hits, LLM seconds, facts …)."""
        self.counts[name] = self.counts.get(name, 0) + amount

    def drain(self) -> dict[str, float]:
        """The counts so far, leaving the tally empty."""
        counts, self.counts = self.counts, {}
        return counts


@dataclass(frozen=True)
class RunContext:
    """What one run gives its steps besides the state: the model gate, the budget, the progress
    line and the tally. `model` is the run's (timed) model; `model_for` says when a step may use it."""

    model: ChatModel | None
    model_steps: tuple[str, ...]  # the Deps' (research.model_steps)
    budget: Budget
    progress: Progress
    tally: Tally = field(default_factory=Tally)

    @property
    def clock(self) -> Callable[[], float]:
        """The run's clock (the budget's)."""
        return self.budget.clock

    def model_for(self, step: str) -> ChatModel | None:
        """The model if `step` may use it (listed in `model_steps`, budget left), else None."""
        if self.model is None or step not in self.model_steps or self.budget.spent():
            return None
        return self.model

    def bump(self, name: str, amount: float = 1) -> None:
        """Count into the run's tally."""
        self.tally.bump(name, amount)
