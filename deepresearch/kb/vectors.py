"""The KB's embedding model claim and fact vectors: fail-closed model check, backfill, reembed.

The first write records the model id and dimension in `meta`; a later process configured
with another model fails closed (DimensionMismatch) instead of mixing vector spaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from deepresearch.db import get_meta, set_meta, transaction
from deepresearch.errors import DimensionMismatch, ModelError, ModelNotFound
from deepresearch.facts import new_id
from deepresearch.indexing import ModelClaim, vec_loaded
from deepresearch.kb.index import FACT_VEC, VECTORS_KEY, vec_dimension
from deepresearch.kb.repository import (
    DIMENSION_KEY,
    MISSING_KEY,
    MODEL_KEY,
    all_rows,
    bump,
    facts_from_rows,
    rows_without_vector,
    select_facts,
    stale_vector_rids,
    sync_vector_meta,
    write_vector,
)

if TYPE_CHECKING:
    from deepresearch.models.embed import Embedder

REEMBED_FIX = "run `deepresearch kb reembed` to rebuild the vectors with the configured model"
CLAIM = ModelClaim(MODEL_KEY, DIMENSION_KEY, "the knowledge base", REEMBED_FIX)


def vector_or_reason(conn: Any, embedder: Callable[[], Embedder]) -> tuple[Embedder | None, str | None]:
    """The checked embedder, or None and why semantic search cannot be used."""
    if not vec_loaded(conn):
        return None, f"sqlite-vec is not available ({getattr(conn, 'vec_error', None) or 'not loaded'})"
    if vec_dimension(conn) is None:
        return None, "the vector table is missing (sqlite-vec was unavailable when the DB was created)"
    try:
        return CLAIM.check(conn, embedder()), None
    except (ModelError, ModelNotFound) as exc:
        return None, f"the embedding model cannot be loaded ({exc})"


def claim_model(conn: Any, embedder: Embedder) -> None:
    """Record the model on first write; rebuild an empty vector table for its dimension."""
    if CLAIM.stored(conn)[0] is None:
        CLAIM.record(conn, embedder)
    if vec_dimension(conn) != embedder.dimension:
        if conn.execute("select count(*) from fact_vec").fetchone()[0]:
            raise DimensionMismatch(f"the vector table holds vectors of another dimension — {REEMBED_FIX}")
        FACT_VEC.create(conn, embedder.dimension)
        set_meta(conn, VECTORS_KEY, new_id())


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
