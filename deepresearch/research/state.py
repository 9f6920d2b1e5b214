"""Typed state of one research run: options, sources with short ids, the evidence pool, counters.

The whole state round-trips through JSON (`to_dict`/`from_dict`) so every step can be
checkpointed in the database and a killed run resumed where it stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# Keys older versions saved that a run no longer keeps: `planning_prompt` held the whole
# planning prompt (the question, recalled facts); resuming needs only the planned queries.
RETIRED_KEYS = ("planning_prompt",)


@dataclass
class RunOptions:
    """What the user asked for: limits, lifecycle wording, backend and write switches."""

    loops: int = 2
    queries: int = 3
    results_per_query: int = 5
    fresh: str = "medium"
    lifecycle: str = "freshness"
    backend: str = "corpus"
    use_cache: bool = True
    kb_write: bool = True
    budget: float | None = None
    facts_per_source: int = 5
    max_tokens: int = 256
    reader_tokens: int = 500  # evidence the answer step's model reads, in tokens
    second_read: bool = False  # a span question: one more search for the entity the model names, a second read


@dataclass
class Source:
    """One retrieved document; `sid` is the short id prompts use instead of the long URL."""

    sid: str
    url: str
    title: str
    text: str
    query: str
    loop: int
    cache_key: str | None = None
    backend: str = ""
    rank: int = 0  # rank in the search that first found it (1 = top)
    score: float = 0.0  # that search's score
    # Indexed once on arrival: [sentence, similarity to the question, similarity to `query`].
    sentences: list[list] = field(default_factory=list)


@dataclass
class Known:
    """A fact recalled from the KB before planning (rendered for the planner and the report)."""

    id: str
    fact: str
    sources: list[str]
    category: str
    confidence: float
    age_days: float
    relevance: float = 0.0


@dataclass
class ResearchState:
    """Everything a run knows; the router reads `step` and the steps return updates."""

    run_id: str
    topic: str
    options: RunOptions
    step: str = "recall"
    loop: int = 0
    known: list[Known] = field(default_factory=list)
    recall_note: str | None = None
    pending: list[str] = field(default_factory=list)
    queries_done: list[str] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    new_sources: list[str] = field(default_factory=list)  # sids found by the current loop
    retrievals: list[list] = field(default_factory=list)  # [sid, query, rank] for every hit, repeats included
    hops: dict[str, dict[str, Any]] = field(default_factory=dict)  # hop query → {"parent": sid, "entity": …}
    bridged: list[str] = field(default_factory=list)  # sids whose names were already followed
    candidate: dict[str, Any] = field(default_factory=dict)  # the best answer candidate so far
    # The answer step's result: text (None = abstained), kind, sids it rests on, method.
    short_answer: dict[str, Any] = field(default_factory=dict)
    fact_ids: list[str] = field(default_factory=list)
    facts: list[dict[str, str]] = field(default_factory=list)  # fact, url, category of facts extracted
    loop_facts: int = 0
    reflections: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    answer: str = ""
    report: str = ""
    report_stats: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    last_search_error: str | None = None
    elapsed: float = 0.0

    def bump(self, name: str, amount: float = 1) -> None:
        """Add to a named counter (searches, cache hits, LLM seconds, facts …)."""
        self.counters[name] = self.counters.get(name, 0) + amount

    def source_by_sid(self) -> dict[str, Source]:
        """Short id → source."""
        return {s.sid: s for s in self.sources}

    def apply(self, update: dict[str, Any]) -> None:
        """Apply a step's update (field name → new value)."""
        for key, value in update.items():
            if not hasattr(self, key):
                raise AttributeError(f"ResearchState has no field {key!r}")
            setattr(self, key, value)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of the state."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResearchState:
        """Rebuild a state saved by `to_dict` (also by an older version: retired keys are dropped)."""
        data = {k: v for k, v in data.items() if k not in RETIRED_KEYS}
        data["options"] = RunOptions(**data["options"])
        data["known"] = [Known(**k) for k in data.get("known", [])]
        data["sources"] = [Source(**s) for s in data.get("sources", [])]
        return cls(**data)
