"""Typed state of one research run: options, sources with short ids, the evidence pool, counters.

The whole state round-trips through JSON (`to_dict`/`from_dict`) so every step can be
checkpointed in the database and a killed run resumed where it stopped; the JSON keeps the
shape older versions saved (a sentence as a list, no candidate as {}), so their runs resume.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from deepresearch.config import Config

# Keys older versions saved that a run no longer keeps: `planning_prompt` held the whole
# planning prompt (the question, recalled facts); resuming needs only the planned queries.
RETIRED_KEYS = ("planning_prompt",)


def _value(config: Config, key: str) -> Any:
    """The value of a dotted key ("research.max_loops") in a config."""
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _configured(key: str) -> Any:
    """A run option whose default is the config's default for `key` (the config is the one place
    defaults live); `RunOptions.from_config` reads the same key from a workspace's config."""
    return field(default=_value(Config(), key), metadata={"config": key})


@dataclass
class RunOptions:
    """What the user asked for: limits, lifecycle wording, backend and write switches."""

    loops: int = _configured("research.max_loops")
    queries: int = _configured("research.queries_per_loop")
    results_per_query: int = _configured("search.results_per_query")
    fresh: str = _configured("kb.freshness")
    lifecycle: str = _configured("kb.lifecycle_mode")
    backend: str = _configured("search.backend")
    use_cache: bool = _configured("search.cache.enabled")
    kb_write: bool = _configured("research.kb_write")
    budget: float | None = _configured("research.budget_seconds")
    facts_per_source: int = _configured("research.facts_per_source")
    max_tokens: int = _configured("research.max_tokens")
    reader_tokens: int = _configured("research.reader_tokens")  # evidence the answer step's model reads, in tokens
    reader_min_confidence: float = _configured("research.reader_min_confidence")  # an unsure reading abstains
    # A span question: a hop search for the entity the model names, and a second read.
    second_read: bool = _configured("research.second_read")
    # A multi-hop span question read one hop at a time, split by its wording (research/parts.py).
    read_parts: bool = _configured("research.read_parts")
    # Each rewritten part searched, its best passages read first by the next part.
    search_parts: bool = _configured("research.search_parts")

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> RunOptions:
        """Run options from a config, with the given (non-None) overrides."""
        values = {f.name: _value(config, f.metadata["config"]) for f in fields(cls)}
        return cls(**{**values, **{k: v for k, v in overrides.items() if v is not None}})


@dataclass(frozen=True)
class Sentence:
    """One sentence of a passage, indexed on arrival: its similarity to the question and to the
    query that found the passage. Saved in a checkpoint as `[text, to_question, to_query]`."""

    text: str
    to_question: float
    to_query: float

    def to_json(self) -> list[Any]:
        """The checkpoint form (the list older versions saved)."""
        return [self.text, self.to_question, self.to_query]

    @classmethod
    def from_json(cls, data: list[Any]) -> Sentence:
        """A sentence from its checkpoint form."""
        text, to_question, to_query = data
        return cls(str(text), float(to_question), float(to_query))


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
    sentences: list[Sentence] = field(default_factory=list)  # indexed once, by the rank step


@dataclass
class Candidate:
    """One possible answer (answer.py scores them): the span, its score, the sentence and passage that state it."""

    text: str
    score: float
    sentence: str
    sid: str
    support: list[str] = field(default_factory=list)  # sids of every passage that names it
    kind: str = ""  # the question type it answers (yesno, choice, person, date, …)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (kept in the run state)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        """A candidate from `to_dict` (or an older checkpoint's dict, whose yes/no had no score or sentence)."""
        known = {f.name for f in fields(cls)}
        return cls(**{"score": 0.0, "sentence": "", **{k: v for k, v in data.items() if k in known}})


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
    candidate: Candidate | None = None  # the best answer candidate so far
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

    def source_by_sid(self) -> dict[str, Source]:
        """Short id → source."""
        return {s.sid: s for s in self.sources}

    def apply(self, update: dict[str, Any], counts: dict[str, float] | None = None) -> None:
        """Apply a step's update (field name → new value) and add the counts it tallied."""
        for key, value in update.items():
            if not hasattr(self, key):
                raise AttributeError(f"ResearchState has no field {key!r}")
            setattr(self, key, value)
        for name, amount in (counts or {}).items():
            self.counters[name] = self.counters.get(name, 0) + amount

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of the state (the shape older versions saved)."""
        data = dataclasses.asdict(self)
        for saved, source in zip(data["sources"], self.sources, strict=True):
            saved["sentences"] = [s.to_json() for s in source.sentences]
        data["candidate"] = data["candidate"] or {}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResearchState:
        """Rebuild a state saved by `to_dict` (also by an older version: retired keys are dropped)."""
        data = {k: v for k, v in data.items() if k not in RETIRED_KEYS}
        data["options"] = RunOptions(**data["options"])
        data["known"] = [Known(**k) for k in data.get("known", [])]
        data["sources"] = [
            Source(**{**s, "sentences": [Sentence.from_json(x) for x in s.get("sentences", [])]})
            for s in data.get("sources", [])
        ]
        data["candidate"] = Candidate.from_dict(data["candidate"]) if data.get("candidate") else None
        return cls(**data)
