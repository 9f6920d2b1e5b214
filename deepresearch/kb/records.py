"""The dataclasses the knowledge base returns (write outcomes, recall hits, history, conflicts),
and the history and conflict rows (tables fact_history and fact_conflicts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepresearch.errors import NotFound
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


def log_event(
    conn: Any,
    fact_id: str,
    event: str,
    at: float,
    old_text: str | None,
    new_text: str | None,
    detail: str | None,
) -> None:
    """Append one history row."""
    conn.execute(
        "insert into fact_history (fact_id, event, at, old_text, new_text, detail) values (?,?,?,?,?,?)",
        (fact_id, event, at, old_text, new_text, detail),
    )


def flag(conn: Any, fact_id: str, other_id: str, reason: str, now: float) -> None:
    """Record that two facts contradict each other (both stay active)."""
    conn.execute(
        "insert or ignore into fact_conflicts (fact_id, other_id, detected_at, reason) values (?,?,?,?)",
        (fact_id, other_id, now, reason),
    )


def history(conn: Any, fact_id: str) -> list[HistoryEvent]:
    """Every recorded change of a fact, oldest first (NotFound if there is none)."""
    rows = conn.execute(
        "select seq, fact_id, event, at, old_text, new_text, detail from fact_history where fact_id = ? order by seq",
        (fact_id,),
    ).fetchall()
    if not rows:
        raise NotFound(f"no history for fact {fact_id} — check the id with `deepresearch kb query TEXT --json`")
    return [HistoryEvent(*r) for r in rows]


def last_seq(conn: Any) -> int:
    """The newest history sequence number (0 when there is no history)."""
    return int(conn.execute("select coalesce(max(seq), 0) from fact_history").fetchone()[0])


def changes_since(conn: Any, since: int, upto: int) -> list[tuple[str, int]]:
    """(fact id, first new history seq) of facts with history rows in (since, upto]."""
    return conn.execute(
        "select fact_id, min(seq) from fact_history where seq > ? and seq <= ? group by fact_id order by 2",
        (since, upto),
    ).fetchall()
