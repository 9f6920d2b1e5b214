"""Lifecycle-aware recall: semantic (the vector engine `engine_for` picks) or, degraded, FTS5 keyword search."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, TypedDict

from deepresearch.facts import Hit
from deepresearch.kb import lifecycle
from deepresearch.kb.engines import Context, search_fts
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.maintenance import backfill
from deepresearch.kb.records import Recall
from deepresearch.kb.repository import select_facts, vec_dimension

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from deepresearch.config import KBConfig

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


def recall(ctx: Context, text: str, **options: Unpack[RecallOptions]) -> Recall:
    """Recall facts related to `text` under a lifecycle mode (FTS5 keyword search if degraded).

    Relevance is the cosine similarity; on the degraded path it is BM25 mapped to 0..1. The
    vector engine is `Engines.engine_for`'s (a one-shot process never loads the float matrix).
    """
    config, conn = ctx.config, ctx.conn
    now = options.get("now")
    now = time.time() if now is None else now
    k = options.get("top_k") or config.top_k
    include_expired = bool(options.get("include_expired", False))
    vis = lifecycle.visibility(
        options.get("mode"), config, options.get("freshness"), options.get("category"), include_expired
    )
    minimum = options.get("min_confidence")
    flt = Filter(vis, now, config.min_confidence if minimum is None else float(minimum), config)
    embedder, reason = ctx.vectors()
    if embedder is not None:
        backfill(conn, embedder)
        # an unclaimed (empty) vector table may still have the migration's default dimension
        empty = vec_dimension(conn) != embedder.dimension
        vector = embedder.embed(text)
        found = [] if empty else ctx.engine().search(vector, flt, k)
    else:
        log.info("keyword recall instead of semantic: %s", reason)  # Recall.reason carries it
        found = search_fts(conn, text, flt, k)
    return Recall(
        hits(conn, config, found, flt), degraded=embedder is None, reason=reason, mode=vis.mode,
        include_expired=include_expired,
    )  # fmt: skip


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
