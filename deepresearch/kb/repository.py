"""Plain functions over a connection for the KB tables: facts, sources, vectors, history.

Every write function here runs inside the caller's transaction (`deepresearch.db.transaction`);
the caller bumps the generation once per transaction (`bump`), which tells RAM indexes in this
and other processes that facts changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np

from deepresearch.db import set_meta
from deepresearch.errors import NotFound
from deepresearch.facts import Fact, new_id, text_hash
from deepresearch.indexing import VecTable
from deepresearch.kb import lifecycle
from deepresearch.kb.records import Conflict, log_event

if TYPE_CHECKING:
    from deepresearch.config import KBConfig

MODEL_KEY = "kb.embedding_model"
DIMENSION_KEY = "kb.embedding_dimension"
MISSING_KEY = "kb.vectors_missing"
GENERATION_KEY = "kb.generation"  # changes with every write transaction (RAM indexes reload)
VECTORS_KEY = "kb.vectors_generation"  # changes when the vectors are rebuilt (reembed)

# The fact vectors with their lifecycle columns: the columns of migration m103.
FACT_VEC = VecTable(
    "fact_vec",
    partition=("category text partition key",),
    metadata=("status text", "verified_at float", "confidence float"),
)

FACT_COLUMNS = (
    "rid, id, fact, source_url, research_topic, category, confidence, created_at, verified_at,"
    " expires_at, status, superseded_by"
)


def vec_dimension(conn: Any) -> int | None:
    """The vector length the fact_vec table was created with (None if it does not exist)."""
    return FACT_VEC.dimension(conn)


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
    names = FACT_COLUMNS.split(", ", 1)[1]  # every column but rid, then the text hash
    values = [getattr(fact, name.strip()) for name in names.split(",")]
    sql = f"insert into facts ({names}, text_hash) values ({marks(values)}, ?)"
    cur = conn.execute(sql, [*values, text_hash(fact.fact)])
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


# --- reads for the other kb modules (every SQL statement on `facts` lives in this module) ----------

LIFECYCLE_COLUMNS = "rid, category, status, verified_at, confidence"


def max_rid(conn: Any) -> int:
    """The largest rowid (O(1)): close enough to the row count to pick a search engine."""
    return int(conn.execute("select coalesce(max(rid), 0) from facts").fetchone()[0])


def count_active(conn: Any) -> int:
    """The number of active facts."""
    return int(conn.execute("select count(*) from facts where status = 'active'").fetchone()[0])


def exists(conn: Any, fact_id: str) -> bool:
    """True when a fact row has this id (any status)."""
    return conn.execute("select 1 from facts where id = ?", (fact_id,)).fetchone() is not None


def column_of(conn: Any, fact_id: str | None, column: str) -> Any:
    """One column (`fact`, `verified_at`, …) of the fact `fact_id`, None when there is no such fact."""
    if column not in ("fact", "verified_at", "status"):
        raise ValueError(f"not a fact column read by id: {column}")
    row = conn.execute(f"select {column} from facts where id = ?", (fact_id,)).fetchone()
    return None if row is None else row[0]


def stored_texts(conn: Any, ids: list[str]) -> dict[str, str]:
    """{id: text} of the stored facts among `ids`."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        found.update(conn.execute(f"select id, fact from facts where id in ({marks(part)})", part).fetchall())
    return found


def states(conn: Any, ids: list[str]) -> dict[str, tuple[str, float]]:
    """{id: (status, verified_at)} of the stored facts among `ids`."""
    found: dict[str, tuple[str, float]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        sql = f"select id, status, verified_at from facts where id in ({marks(part)})"
        found.update((r[0], (r[1], r[2])) for r in conn.execute(sql, part))
    return found


def texts_by_rid(conn: Any, rids: list[int]) -> Iterator[tuple[int, str]]:
    """(rid, text) of the facts among `rids`."""
    for start in range(0, len(rids), 900):
        part = rids[start : start + 900]
        yield from conn.execute(f"select rid, fact from facts where rid in ({marks(part)})", part)


def active_rows(conn: Any) -> list[tuple]:
    """Rows (FACT_COLUMNS) of every active fact, in rid order."""
    return conn.execute(f"select {FACT_COLUMNS} from facts where status = 'active' order by rid").fetchall()


def all_rows(conn: Any) -> list[tuple]:
    """Rows (FACT_COLUMNS) of every fact, in rid order."""
    return conn.execute(f"select {FACT_COLUMNS} from facts order by rid").fetchall()


def lifecycle_rows(conn: Any, rids: Sequence[int] | None = None) -> list[tuple]:
    """(rid, category, status, verified_at, confidence) in rid order, of `rids` or of every fact."""
    if rids is None or len(rids) > 50000:  # one scan beats many `in (…)` lookups
        rows = conn.execute(f"select {LIFECYCLE_COLUMNS} from facts order by rid").fetchall()
        if rids is None:
            return rows
        wanted = set(rids)
        return [r for r in rows if r[0] in wanted]
    out: list[tuple] = []
    for i in range(0, len(rids), 500):
        part = list(rids[i : i + 500])
        sql = f"select {LIFECYCLE_COLUMNS} from facts where rid in ({marks(part)}) order by rid"
        out += conn.execute(sql, part).fetchall()
    return out


def vector_check_rows(conn: Any) -> dict[int, tuple]:
    """{rid: (category, status, verified_at, confidence, id)} of every fact (`kb check` against fact_vec)."""
    return {r[0]: r[1:] for r in conn.execute(f"select {LIFECYCLE_COLUMNS}, id from facts")}


def stale_vector_rids(conn: Any) -> list[tuple[int]]:
    """Rowids whose vector row's lifecycle columns differ from their fact's."""
    return conn.execute(
        "select v.rowid from fact_vec v join facts f on f.rid = v.rowid"
        " where v.status != f.status or v.verified_at != f.verified_at or v.confidence != f.confidence"
    ).fetchall()


def rows_without_vector(conn: Any) -> list[tuple[int, str]]:
    """(rid, text) of facts that have no vector row."""
    return conn.execute("select rid, fact from facts where rid not in (select rowid from fact_vec)").fetchall()


def integrity_problems(conn: Any) -> dict[str, list[tuple]]:
    """`kb check`'s row checks: {problem: [(fact id,), …]} for each kind of inconsistency found."""
    queries = {
        "facts without any source": "select id from facts f where not exists"
        " (select 1 from fact_sources s where s.fact_id = f.id)",
        "facts whose source_url is not among their sources": "select id from facts f where not exists"
        " (select 1 from fact_sources s where s.fact_id = f.id and s.url = f.source_url)",
        "facts without an add/merge history row": "select id from facts f where not exists"
        " (select 1 from fact_history h where h.fact_id = f.id and h.event in ('add', 'merge'))",
        "superseded facts without a valid superseded_by": "select id from facts f"
        " where status = 'superseded' and"
        " (superseded_by is null or not exists (select 1 from facts g where g.id = f.superseded_by))",
    }
    found = {label: conn.execute(sql).fetchall() for label, sql in queries.items()}
    return {label: rows for label, rows in found.items() if rows}


def fts_active(conn: Any, expr: str, k: int) -> list[int]:
    """Rowids of active facts matching the FTS5 expression `expr`, best BM25 first."""
    rows = conn.execute(
        "select f.rid from fact_fts join facts f on f.rid = fact_fts.rowid"
        " where fact_fts match ? and f.status = 'active' order by bm25(fact_fts) limit ?",
        (expr, k),
    )
    return [int(r[0]) for r in rows]


def keyword_rows(conn: Any, expr: str | None, likes: list[str], where: str, params: list[Any]) -> Iterator[tuple]:
    """(rid, bm25, category, verified_at, confidence) of the facts (alias `f`) passing `where`: those
    matching the FTS5 expression `expr`, best first, or (no `expr`) those matching any of the LIKE
    patterns `likes`, newest first."""
    if expr is not None:
        return conn.execute(
            "select f.rid, bm25(fact_fts), f.category, f.verified_at, f.confidence"
            f" from fact_fts join facts f on f.rid = fact_fts.rowid where fact_fts match ? and {where}"
            " order by bm25(fact_fts)",
            [expr, *params],
        )
    condition = " or ".join("f.fact like ? escape '\\'" for _ in likes)
    return conn.execute(
        "select f.rid, 0.0, f.category, f.verified_at, f.confidence from facts f"
        f" where ({condition}) and {where} order by f.verified_at desc",
        [*likes, *params],
    )


# --- the sweep -------------------------------------------------------------------------------


def due(conn: Any, now: float, purge: bool, limit: int) -> list[tuple[int, str, str, str]]:
    """(rid, id, text, status) of facts past `expires_at`: active ones, and expired ones with `purge`."""
    # INDEXED BY: without ANALYZE statistics SQLite prefers the status index and sorts every
    # active row per batch.
    if purge:
        index, statuses = "facts_expires_any", "status in ('active', 'expired')"
    else:
        index, statuses = "facts_expiry", "status = 'active'"
    return conn.execute(
        f"select rid, id, fact, status from facts indexed by {index}"
        f" where expires_at is not null and expires_at < ? and {statuses} order by expires_at limit ?",
        (now, limit),
    ).fetchall()


def older_versions(conn: Any, fact_id: str) -> list[tuple[int, str, str]]:
    """(rid, id, text) of every fact superseded by `fact_id`, directly or through a chain."""
    return conn.execute(
        "with recursive chain(id) as (select id from facts where superseded_by = ?"
        " union select f.id from facts f join chain c on f.superseded_by = c.id)"
        " select rid, id, fact from facts where id in (select id from chain)",
        (fact_id,),
    ).fetchall()


def delete(conn: Any, row: tuple[int, str, str], now: float, vectors: bool, why: str) -> None:
    """Delete the fact (rid, id, text) and its vector row; a `delete` history row keeps the text."""
    rid, fact_id, text = row
    conn.execute("delete from facts where rid = ?", (rid,))
    if vectors:
        conn.execute("delete from fact_vec where rowid = ?", (rid,))
    log_event(conn, fact_id, "delete", now, text, None, why)


def expire(conn: Any, rid: int, fact_id: str, now: float, vectors: bool) -> None:
    """Mark one fact expired (and its vector row, or the vectors as needing a resync)."""
    conn.execute("update facts set status = 'expired' where rid = ?", (rid,))
    if vectors:
        conn.execute("update fact_vec set status = 'expired' where rowid = ?", (rid,))
    else:
        set_meta(conn, MISSING_KEY, "1")  # vector rows resync when sqlite-vec is back
    log_event(conn, fact_id, "expire", now, None, None, "past expires_at")


# --- analytics ------------------------------------------------------------------------------

ARROW_COLUMNS = (
    "id", "fact", "source_url", "category", "confidence", "research_topic", "created_at", "verified_at",
    "expires_at", "status", "superseded_by",
)  # fmt: skip


def arrow_facts(conn: Any) -> Any:
    """Every fact (the interchange columns, `sources` a list) as an Arrow table, in rid order."""
    import pyarrow as pa

    rows = conn.execute(f"select {', '.join(ARROW_COLUMNS)} from facts order by rid").fetchall()
    sources: dict[str, list[str]] = {}
    for fid, url in conn.execute("select fact_id, url from fact_sources order by added_at, rowid"):
        sources.setdefault(fid, []).append(url)
    columns: dict[str, list[Any]] = {name: [r[i] for r in rows] for i, name in enumerate(ARROW_COLUMNS)}
    columns["sources"] = [sources.get(r[0], []) for r in rows]
    text, number = pa.string(), pa.float64()
    types = {"confidence": number, "created_at": number, "verified_at": number, "expires_at": number}
    schema = pa.schema([(name, types.get(name, text)) for name in ARROW_COLUMNS] + [("sources", pa.list_(text))])
    return pa.table({name: columns[name] for name in schema.names}, schema=schema)
