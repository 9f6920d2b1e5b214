"""Lifecycle-aware recall: semantic (vec0, the RAM matrix or the compact copy) or, degraded, FTS5 keyword search."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from deepresearch.facts import Hit
from deepresearch.kb import lifecycle
from deepresearch.kb import repository as repo
from deepresearch.kb.codes import Indexes
from deepresearch.kb.fts import search_fts
from deepresearch.kb.index import Filter, search_vec0, vec_dimension
from deepresearch.kb.records import Recall
from deepresearch.kb.repository import select_facts
from deepresearch.kb.vectors import backfill

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.models.embed import Embedder

log = logging.getLogger(__name__)


class RecallOptions(TypedDict, total=False):
    """The keyword options of `recall` a caller chooses (`KnowledgeBase.query` passes them on)."""

    top_k: int | None
    min_confidence: float | None
    mode: str | None
    freshness: str | None
    category: str | None
    now: float | None
    include_expired: bool


def recall(
    conn: Any,
    config: KBConfig,
    indexes: Indexes,
    vectors: tuple[Embedder | None, str | None],
    text: str,
    *,
    top_k: int | None = None,
    min_confidence: float | None = None,
    mode: str | None = None,
    freshness: str | None = None,
    category: str | None = None,
    now: float | None = None,
    include_expired: bool = False,
    one_shot: bool = False,
) -> Recall:
    """Recall facts related to `text` under a lifecycle mode (FTS5 keyword search if degraded).

    `vectors` is (checked embedder, None) or (None, why not). Relevance is the cosine
    similarity; on the degraded path it is BM25 mapped to 0..1. `one_shot` (a process that
    answers one query, e.g. the CLI) never loads the float matrix.
    """
    now = time.time() if now is None else now
    k = top_k or config.top_k
    vis = lifecycle.visibility(mode, config, freshness, category, include_expired)
    minimum = config.min_confidence if min_confidence is None else float(min_confidence)
    flt = Filter(vis, now, minimum, config)
    embedder, reason = vectors
    if embedder is not None:
        backfill(conn, embedder)
        # an unclaimed (empty) vector table may still have the migration's default dimension
        empty = vec_dimension(conn) != embedder.dimension
        vector = embedder.embed(text)
        found = [] if empty else search_vectors(conn, config, indexes, vector, flt, k, one_shot=one_shot)
    else:
        log.info("keyword recall instead of semantic: %s", reason)  # Recall.reason carries it
        found = search_fts(conn, text, flt, k)
    return Recall(
        hits(conn, config, found, flt),
        degraded=embedder is None,
        reason=reason,
        mode=vis.mode,
        include_expired=include_expired,
    )


def search_vectors(
    conn: Any,
    config: KBConfig,
    indexes: Indexes,
    vector: np.ndarray,
    flt: Filter,
    k: int,
    *,
    one_shot: bool = False,
) -> list[tuple[int, float]]:
    """Top-k (rid, cosine): sqlite-vec KNN for small KBs, else the float matrix or the compact copy.

    Below `ram_index_min_facts` facts one vec0 KNN is cheapest. Above it a long-running process
    keeps the exact float32 matrix in RAM up to `bit_index_min_facts` (146 MiB at 100k), and
    the compact copy stored in the file (kb/codes.py) beyond; a one-shot process always uses
    the compact copy, which loads in a fraction of the matrix's time (docs/BENCHMARKS.md).
    """
    # max(rid) is O(1) and close enough to the row count to pick an engine
    count = repo.max_rid(conn)
    if count < config.ram_index_min_facts:
        return search_vec0(conn, vector, flt, k)
    if count >= config.bit_index_min_facts or (one_shot and not indexes.ram.rids.size):
        indexes.codes.refresh(conn)
        return indexes.codes.search(conn, vector, flt, k)
    indexes.ram.refresh(conn)
    return indexes.ram.search(vector, flt, k)


def hits(conn: Any, config: KBConfig, found: list[tuple[int, float]], flt: Filter) -> list[Hit]:
    """Hits for (rid, relevance) pairs, with confidence decayed by the lifecycle mode."""
    if not found:
        return []
    rows, facts = select_facts(conn, "rid", [rid for rid, _ in found])
    by_rid = {r[0]: f for r, f in zip(rows, facts, strict=False)}
    out = []
    for rid, relevance in found:
        fact = by_rid.get(rid)
        if fact is None:
            continue  # purged between search and fetch
        age = max(0.0, (flt.now - fact.verified_at) / lifecycle.DAY)
        out.append(
            Hit(
                id=fact.id,
                fact=fact.fact,
                source_url=fact.source_url,
                sources=fact.sources,
                category=fact.category,
                confidence=lifecycle.decayed_confidence(
                    fact.confidence, fact.category, age, flt.visibility.mode, config
                ),
                raw_confidence=fact.confidence,
                relevance=relevance,
                age_days=age,
                created_at=fact.created_at,
                research_topic=fact.research_topic,
                verified_at=fact.verified_at,
                status=fact.status,
                expires_at=fact.expires_at,
                expired=fact.status == "expired" or (fact.expires_at is not None and fact.expires_at < flt.now),
            )
        )
    return out
