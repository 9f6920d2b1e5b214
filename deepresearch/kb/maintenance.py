"""KB maintenance: the expiry sweep, `kb check`, and the fact vectors' backfill and rebuild.

The sweep marks facts past `expires_at` expired (or deletes them with purge). Cron-safe by
construction: each batch is its own short `BEGIN IMMEDIATE` transaction, so a research run
writing to the same WAL database waits milliseconds, never the whole sweep; rows are selected
by the partial index on `expires_at`; a second run finds nothing to do. Purged facts keep their
history (a `delete` row records the text). Purging a fact also deletes the older versions it
superseded, transitively: they are never recalled, and kept they would name a successor that no
longer exists (`kb check` flags that).

`check` proves facts, sources, history, vectors and FTS rows agree. `backfill` embeds facts
stored (and resyncs lifecycle columns changed) while sqlite-vec was unavailable; `reembed`
rebuilds every vector with the configured model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from deepresearch.db import get_meta, set_meta, transaction
from deepresearch.errors import DeepResearchError, ModelError
from deepresearch.facts import new_id
from deepresearch.indexing import fts_integrity_problem, vec_loaded
from deepresearch.kb.codes import fold
from deepresearch.kb.codes import verify as verify_codes
from deepresearch.kb.engines import CLAIM, claim_model
from deepresearch.kb.repository import (
    DIMENSION_KEY,
    FACT_VEC,
    MISSING_KEY,
    VECTORS_KEY,
    all_rows,
    bump,
    delete,
    due,
    expire,
    facts_from_rows,
    has_vectors,
    integrity_problems,
    older_versions,
    rows_without_vector,
    select_facts,
    stale_vector_rids,
    sync_vector_meta,
    vec_dimension,
    vector_check_rows,
    write_vector,
)

if TYPE_CHECKING:
    from deepresearch.models.embed import Embedder


@dataclass
class SweepResult:
    """Counts of one sweep (`expired` newly marked, `purged` deleted)."""

    expired: int = 0
    purged: int = 0
    batches: int = 0
    dry_run: bool = False
    seconds: float = 0.0
    now: float = 0.0

    def summary(self) -> str:
        """One line for logs and cron mail."""
        verb = "would expire" if self.dry_run else "expired"
        text = f"sweep: {verb} {self.expired} fact(s)"
        if self.purged or not self.dry_run:
            text += f", {'would purge' if self.dry_run else 'purged'} {self.purged}"
        return f"{text} in {self.batches} batch(es), {self.seconds:.2f}s"


def sweep(
    conn: Any,
    *,
    now: float | None = None,
    purge: bool = False,
    batch: int = 500,
    dry_run: bool = False,
) -> SweepResult:
    """Expire (or delete) every fact whose `expires_at` is before `now`, `batch` rows per transaction."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    result = SweepResult(dry_run=dry_run, now=now)
    if dry_run:
        rows = due(conn, now, purge, -1)
        result.expired = sum(1 for r in rows if r[3] == "active")
        if purge:
            doomed = {r[1] for r in rows}
            for row in rows:
                doomed.update(old_id for _, old_id, _ in older_versions(conn, row[1]))
            result.purged = len(doomed)
        result.batches = 0
        result.seconds = time.perf_counter() - started
        return result
    vectors = has_vectors(conn)
    if purge and not vectors and conn.execute("select 1 from sqlite_master where name = 'fact_vec'").fetchone():
        raise DeepResearchError(
            "sweep --purge must delete vectors too, but sqlite-vec is not available — fix: pip install"
            " sqlite-vec sqlean-py, or run the sweep without --purge"
        )
    while True:
        with transaction(conn):
            rows = due(conn, now, purge, batch)
            for rid, fact_id, text, status in rows:
                if purge:
                    for old in older_versions(conn, fact_id):
                        delete(conn, old, now, vectors, f"purged with {fact_id}, which superseded it")
                        result.purged += 1
                    delete(conn, (rid, fact_id, text), now, vectors, "purged by sweep (past expires_at)")
                    result.purged += 1
                else:
                    expire(conn, rid, fact_id, now, vectors)
                if status == "active":
                    result.expired += 1
            if rows:
                bump(conn)
                result.batches += 1
        if len(rows) < batch:
            break
    if result.batches and vectors:
        fold(conn)  # a sweep may touch half the KB: readers should not each re-apply that
    result.seconds = time.perf_counter() - started
    return result


# --- `kb check` -------------------------------------------------------------------------------


def _ids(rows: list[tuple]) -> str:
    shown = ", ".join(str(r[0]) for r in rows[:5])
    return shown + (f" (+{len(rows) - 5} more)" if len(rows) > 5 else "")


def vectors_not_checked(conn: Any) -> str | None:
    """Why `check` cannot verify the vectors on `conn` (sqlite-vec's load error), or None when it can."""
    return None if vec_loaded(conn) else getattr(conn, "vec_error", None)


def check(conn: Any) -> list[str]:
    """A list of human-readable problems; empty when everything agrees.

    Also checks the whole file (`PRAGMA quick_check`: a damaged page in any table) and the
    corpus (`search.corpus_index.check_corpus`). Without sqlite-vec the vectors are not checked,
    which is not a problem (`vectors_not_checked` says why, for a note).
    """
    from deepresearch.search.corpus_index import check_corpus

    problems: list[str] = []
    try:
        damage = [str(r[0]) for r in conn.execute("pragma quick_check").fetchall() if str(r[0]) != "ok"]
    except Exception as exc:  # a page too damaged to read at all
        if type(exc).__name__ not in ("DatabaseError", "OperationalError"):
            raise
        damage = [str(exc)]
    if damage:
        problems.append(
            f"the database file is damaged ({'; '.join(damage[:3])}) — restore a backup, or recover what is"
            " readable with `sqlite3 deepresearch.db .recover | sqlite3 recovered.db`"
        )
        return problems  # the row checks below would only report the same damage again
    problems += check_corpus(conn)
    if (mismatch := fts_integrity_problem(conn, "fact_fts")) is not None:
        problems.append(
            f"FTS index does not match the facts table ({mismatch}) — rebuild with"
            " `insert into fact_fts(fact_fts) values('rebuild')`"
        )
    for label, rows in integrity_problems(conn).items():
        problems.append(f"{len(rows)} {label}: {_ids(rows)}")
    return problems + _vector_problems(conn)


def _vector_problems(conn: Any) -> list[str]:
    """What `check` finds wrong with the vectors: table, dimension, rows, the compact copy."""
    problems: list[str] = []
    dim = get_meta(conn, DIMENSION_KEY)
    if not vec_loaded(conn):
        return problems
    if vec_dimension(conn) is None:
        problems.append("the vector table fact_vec is missing — run `deepresearch kb reembed`")
        return problems
    if dim is not None and int(dim) != vec_dimension(conn):
        problems.append(
            f"meta says {dim}-d vectors but fact_vec holds {vec_dimension(conn)}-d — run `deepresearch kb reembed`"
        )
    vec_rows = {
        r[0]: r[1:] for r in conn.execute("select rowid, category, status, verified_at, confidence from fact_vec")
    }
    fact_rows = vector_check_rows(conn)
    missing = [(fact_rows[r][4],) for r in fact_rows if r not in vec_rows]
    orphans = [(r,) for r in vec_rows if r not in fact_rows]
    stale = [(fact_rows[r][4],) for r in fact_rows if r in vec_rows and tuple(vec_rows[r]) != tuple(fact_rows[r][:4])]
    if missing:
        problems.append(f"{len(missing)} facts without a vector: {_ids(missing)} — run `deepresearch kb reembed`")
    if orphans:
        problems.append(
            f"{len(orphans)} vectors without a fact (rowids): {_ids(orphans)} — run `deepresearch kb reembed`"
        )
    if stale:
        problems.append(
            f"{len(stale)} vectors whose lifecycle columns differ from their fact: {_ids(stale)}"
            " — run `deepresearch kb reembed`"
        )
    problems += verify_codes(conn)
    return problems


# --- fact vectors: backfill, rebuild ---------------------------------------------------------------


def backfill(conn: Any, embedder: Embedder) -> None:
    """Embed facts stored, and resync lifecycle columns changed, while sqlite-vec was unavailable."""
    if get_meta(conn, MISSING_KEY) != "1":
        return
    stale = stale_vector_rids(conn)
    rows = rows_without_vector(conn)
    vectors = embedder.embed_batch([r[1] for r in rows]) if rows else None
    with transaction(conn):
        claim_model(conn, embedder)
        for (rid, _), vector in zip(rows, vectors if vectors is not None else [], strict=False):
            _, fact = select_facts(conn, "rid", [rid])
            if fact:
                write_vector(conn, rid, fact[0], vector)
        for (rid,) in stale:
            sync_vector_meta(conn, rid)
        conn.execute("delete from meta where key = ?", (MISSING_KEY,))
        bump(conn)


def reembed(
    conn: Any,
    get_embedder: Callable[[], Embedder],
    batch: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Rebuild every fact vector with the embedder `get_embedder` loads; returns the number of facts."""
    if not vec_loaded(conn):
        raise ModelError("cannot rebuild vectors: sqlite-vec is not available — fix: pip install sqlite-vec sqlean-py")
    embedder = get_embedder()
    rows = all_rows(conn)
    facts = facts_from_rows(conn, rows)
    parts = []
    for i in range(0, len(facts), batch):
        parts.append(embedder.embed_batch([f.fact for f in facts[i : i + batch]]))
        if progress:
            progress(min(i + batch, len(facts)), len(facts))
    matrix = np.concatenate(parts) if parts else np.zeros((0, embedder.dimension), dtype=np.float32)
    with transaction(conn):
        FACT_VEC.create(conn, embedder.dimension)
        for row, fact, vector in zip(rows, facts, matrix, strict=False):
            write_vector(conn, row[0], fact, vector)
        CLAIM.record(conn, embedder)
        set_meta(conn, VECTORS_KEY, new_id())
        conn.execute("delete from meta where key = ?", (MISSING_KEY,))
        bump(conn)
    return len(facts)
