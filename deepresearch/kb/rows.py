"""Plain functions over a connection for the KB tables: facts, sources, vectors, history.

Every write function here runs inside the caller's transaction (`deepresearch.db.transaction`);
the caller bumps the generation once per transaction (`bump`), which tells RAM indexes in this
and other processes that facts changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from deepresearch.db import set_meta
from deepresearch.errors import NotFound
from deepresearch.facts import Fact, new_id, text_hash
from deepresearch.kb import lifecycle
from deepresearch.kb.index import GENERATION_KEY, vec_dimension
from deepresearch.kb.records import Conflict, HistoryEvent

if TYPE_CHECKING:
    from deepresearch.config import KBConfig

MODEL_KEY = "kb.embedding_model"
DIMENSION_KEY = "kb.embedding_dimension"
MISSING_KEY = "kb.vectors_missing"

FACT_COLUMNS = (
    "rid, id, fact, source_url, research_topic, category, confidence, created_at, verified_at,"
    " expires_at, status, superseded_by"
)


def has_vectors(conn: Any) -> bool:
    """True when sqlite-vec is loaded and the vector table exists."""
    return bool(getattr(conn, "vec_version", None)) and vec_dimension(conn) is not None


def marks(values: Sequence[Any]) -> str:
    """The `?,?,…` placeholder list for an `in (…)` clause."""
    return ",".join("?" * len(values))


def select_facts(conn: Any, column: str, values: Sequence[Any]) -> tuple[list[tuple], list[Fact]]:
    """Rows (FACT_COLUMNS) and their facts whose `column` (rid or id) is in `values`."""
    if not values:
        return [], []
    rows = conn.execute(f"select {FACT_COLUMNS} from facts where {column} in ({marks(values)})", list(values))
    rows = rows.fetchall()
    return rows, facts_from_rows(conn, rows)


def facts_from_rows(conn: Any, rows: Iterable[tuple]) -> list[Fact]:
    """Facts (with all their sources) from rows selected as FACT_COLUMNS."""
    rows = list(rows)
    sources: dict[str, list[str]] = {}
    ids = [r[1] for r in rows]
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        for fid, url in conn.execute(
            f"select fact_id, url from fact_sources where fact_id in ({marks(chunk)}) order by added_at, rowid",
            chunk,
        ):
            sources.setdefault(fid, []).append(url)
    return [
        Fact(
            fact=r[2],
            source_url=r[3],
            research_topic=r[4],
            category=r[5],
            confidence=r[6],
            created_at=r[7],
            verified_at=r[8],
            expires_at=r[9],
            status=r[10],
            superseded_by=r[11],
            id=r[1],
            sources=sources.get(r[1], [r[3]]),
        )
        for r in rows
    ]


def get(conn: Any, fact_id: str) -> Fact:
    """One fact with all its sources (NotFound if no fact has this id)."""
    _, facts = select_facts(conn, "id", [fact_id])
    if not facts:
        raise NotFound(f"no fact with id {fact_id} — list ids with `deepresearch kb query TEXT --json`")
    return facts[0]


def insert(
    conn: Any,
    fact: Fact,
    vector: np.ndarray | None,
    now: float,
    *,
    event: str,
    detail: str | None,
    old_text: str | None = None,
) -> None:
    """Insert a cleaned fact with its sources, its vector (if any) and an `event` history row."""
    cur = conn.execute(
        "insert into facts (id, fact, source_url, research_topic, category, confidence, created_at,"
        " verified_at, expires_at, status, superseded_by, text_hash) values (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            fact.id,
            fact.fact,
            fact.source_url,
            fact.research_topic,
            fact.category,
            fact.confidence,
            fact.created_at,
            fact.verified_at,
            fact.expires_at,
            fact.status,
            fact.superseded_by,
            text_hash(fact.fact),
        ),
    )
    add_sources(conn, fact.id, fact.sources or [fact.source_url], now)
    if vector is not None:
        write_vector(conn, cur.lastrowid, fact, vector)
    else:
        set_meta(conn, MISSING_KEY, "1")
    log_event(conn, fact.id, event, now, old_text, fact.fact, detail)


def add_sources(conn: Any, fact_id: str, urls: Iterable[str], now: float) -> list[str]:
    """Attach source URLs to a fact (known ones are ignored); return the ones that were new."""
    added = []
    for url in urls:
        cursor = conn.execute(
            "insert or ignore into fact_sources (fact_id, url, added_at) values (?,?,?)",
            (fact_id, url, now),
        )
        if cursor.rowcount > 0:
            added.append(url)
    return added


def write_vector(conn: Any, rid: int, fact: Fact, vector: np.ndarray) -> None:
    """Insert the vector row of a fact, with its lifecycle columns."""
    conn.execute(
        "insert into fact_vec (rowid, category, embedding, status, verified_at, confidence) values (?,?,?,?,?,?)",
        (
            rid,
            fact.category,
            np.asarray(vector, dtype=np.float32).tobytes(),
            fact.status,
            fact.verified_at,
            fact.confidence,
        ),
    )


def sync_vector_meta(conn: Any, rid: int) -> None:
    """Copy the lifecycle columns of one fact into its vector row."""
    if not has_vectors(conn):
        set_meta(conn, MISSING_KEY, "1")  # resynced by the backfill once sqlite-vec is back
        return
    row = conn.execute("select status, verified_at, confidence from facts where rid = ?", (rid,)).fetchone()
    conn.execute("update fact_vec set status = ?, verified_at = ?, confidence = ? where rowid = ?", (*row, rid))


def reconfirm(conn: Any, fact_id: str, new: Fact, now: float, config: KBConfig) -> None:
    """Another source confirms a stored fact: later verification, higher confidence, reactivated."""
    rid, text, category, confidence, verified, status = conn.execute(
        "select rid, fact, category, confidence, verified_at, status from facts where id = ?", (fact_id,)
    ).fetchone()
    verified = max(verified, new.verified_at)
    conn.execute(
        "update facts set confidence = ?, verified_at = ?, expires_at = ?, status = 'active' where rid = ?",
        (max(confidence, new.confidence), verified, lifecycle.expires_at(category, verified, config), rid),
    )
    added = add_sources(conn, fact_id, new.sources or [new.source_url], now)
    sync_vector_meta(conn, rid)
    # the history names what this reconfirmation brought (its new sources), and the text confirmed
    detail = f"source {', '.join(added)}" if added else f"source {new.source_url} (already known)"
    detail += "; reactivated" if status == "expired" else ""
    log_event(conn, fact_id, "reconfirm", now, None, text, detail)


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


def bump(conn: Any) -> None:
    """Tell RAM indexes in this and other processes that facts changed."""
    set_meta(conn, GENERATION_KEY, new_id())


def find_by_hash(conn: Any, digest: str) -> str | None:
    """The id of a live (not superseded) fact with this text hash, active ones first."""
    row = conn.execute(
        "select id from facts where text_hash = ? and status != 'superseded'"
        " order by status = 'active' desc, verified_at desc limit 1",
        (digest,),
    ).fetchone()
    return None if row is None else row[0]


def existing_hashes(conn: Any, hashes: list[str]) -> set[str]:
    """The text hashes among `hashes` that a live (not superseded) fact has."""
    found: set[str] = set()
    for i in range(0, len(hashes), 500):
        chunk = hashes[i : i + 500]
        rows = conn.execute(
            f"select text_hash from facts where status != 'superseded' and text_hash in ({marks(chunk)})", chunk
        )
        found.update(r[0] for r in rows)
    return found


def live_head(conn: Any, fact_id: str | None) -> str | None:
    """The active fact `fact_id` is now (following supersede links), None if gone or expired."""
    while fact_id is not None:
        row = conn.execute("select status, superseded_by from facts where id = ?", (fact_id,)).fetchone()
        if row is None:
            return None
        if row[0] != "superseded":
            return fact_id if row[0] == "active" else None
        fact_id = row[1]
    return None


def supersede(
    conn: Any, old_ids: list[str], cleaned: Fact, vector: Any, now: float, reason: str, config: KBConfig
) -> str:
    """Store `cleaned` (or reconfirm its exact twin) and supersede `old_ids` by it; return its id."""
    _, olds = select_facts(conn, "id", old_ids)
    cleaned.sources = list(dict.fromkeys([*(s for o in olds for s in o.sources), *cleaned.sources]))
    target = find_by_hash(conn, text_hash(cleaned.fact))
    if target is not None:
        reconfirm(conn, target, cleaned, now, config)
        if target not in old_ids:
            log_event(conn, target, "merge", now, None, None, f"absorbed {', '.join(old_ids)} ({reason})")
    else:
        target = cleaned.id
        insert(
            conn,
            cleaned,
            vector,
            now,
            event="merge",
            detail=f"supersedes {', '.join(old_ids)} ({reason})",
            old_text=" | ".join(o.fact for o in olds),
        )
    for old in olds:
        if old.id == target:
            continue
        rid = conn.execute(
            "update facts set status = 'superseded', superseded_by = ? where id = ? returning rid", (target, old.id)
        ).fetchone()[0]
        sync_vector_meta(conn, rid)
        log_event(conn, old.id, "supersede", now, old.fact, cleaned.fact, f"superseded by {target} ({reason})")
        conn.execute(
            "update fact_conflicts set resolved_at = ? where resolved_at is null and (fact_id = ? or other_id = ?)",
            (now, old.id, old.id),
        )
    return target


def flag(conn: Any, fact_id: str, other_id: str, reason: str, now: float) -> None:
    """Record that two facts contradict each other (both stay active)."""
    conn.execute(
        "insert or ignore into fact_conflicts (fact_id, other_id, detected_at, reason) values (?,?,?,?)",
        (fact_id, other_id, now, reason),
    )


def conflicts(conn: Any, fact_ids: Iterable[str] | None = None, include_resolved: bool = False) -> list[Conflict]:
    """Flagged contradictions (involving `fact_ids`, if given), oldest first; by default only
    open ones: not resolved, and both facts still active (not superseded, expired or purged)."""
    sql = "select fact_id, other_id, detected_at, reason, resolved_at from fact_conflicts c where 1"
    params: list[Any] = []
    if not include_resolved:
        sql += (
            " and resolved_at is null"
            " and exists (select 1 from facts f where f.id = c.fact_id and f.status = 'active')"
            " and exists (select 1 from facts f where f.id = c.other_id and f.status = 'active')"
        )
    if fact_ids is not None:
        ids = list(fact_ids)
        sql += f" and (fact_id in ({marks(ids)}) or other_id in ({marks(ids)}))"
        params += ids + ids
    return [Conflict(*r) for r in conn.execute(sql + " order by detected_at, rowid", params)]


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
