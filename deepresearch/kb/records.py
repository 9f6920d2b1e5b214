"""The dataclasses the knowledge base returns: write outcomes, recall hits, history, conflicts."""

from __future__ import annotations

from dataclasses import dataclass, field

from deepresearch.facts import Fact, Hit


@dataclass
class MergeRecord:
    """One merge: the facts absorbed (ids, texts) and the fact that replaces them."""

    old_ids: list[str]
    old_texts: list[str]
    new_text: str
    kind: str
    method: str
    new_id: str | None = None


@dataclass
class AddResult:
    """Outcome of `add_facts`: new ids, reconfirmed ids, and rejected facts with reasons.

    A near duplicate merged into a stored fact lists the resulting fact in `reconfirmed` (the
    claim was known), an update of one value ("changes 2 → 3") in `added` (a new value), and the merge
    itself in `merged`; a contradiction is added and its (id, other id, reason) listed in `flagged`.
    """

    added: list[str] = field(default_factory=list)
    reconfirmed: list[str] = field(default_factory=list)
    rejected: list[tuple[Fact, str]] = field(default_factory=list)
    merged: list[MergeRecord] = field(default_factory=list)
    flagged: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class CompressResult:
    """What `kb compress` merged and flagged (nothing written when `dry_run`)."""

    facts: int
    clusters: int
    merges: list[MergeRecord] = field(default_factory=list)
    flagged: list[tuple[str, str, str]] = field(default_factory=list)  # (id, other id, reason)
    dry_run: bool = False
    seconds: float = 0.0


@dataclass
class Conflict:
    """Two active facts that contradict each other, flagged for re-verification."""

    fact_id: str
    other_id: str
    detected_at: float
    reason: str
    resolved_at: float | None


@dataclass
class Recall:
    """Hits of a recall; `degraded` is True when keyword search stood in for vectors."""

    hits: list[Hit]
    degraded: bool = False
    reason: str | None = None
    mode: str = ""
    include_expired: bool = False


@dataclass
class HistoryEvent:
    """One append-only history row of a fact."""

    seq: int
    fact_id: str
    event: str
    at: float
    old_text: str | None
    new_text: str | None
    detail: str | None
