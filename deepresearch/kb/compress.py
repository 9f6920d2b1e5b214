"""`kb compress`: merge near-duplicates and updates, flag contradictions, across the whole KB with the
write path's rules (kb/merge.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import transaction
from deepresearch.errors import ModelError
from deepresearch.facts import Fact, text_hash
from deepresearch.kb import records
from deepresearch.kb import repository as repo
from deepresearch.kb.classify import decide
from deepresearch.kb.engines import Context, one_blas_thread, read_all_vectors
from deepresearch.kb.merge import merged_fact, relation
from deepresearch.kb.pairs import PAIRS_MIN_FACTS, clusters_at_scale
from deepresearch.kb.plan import CANDIDATES
from deepresearch.kb.records import CompressResult, MergeRecord
from deepresearch.kb.write import absorb

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.models.llm import ChatModel


def clusters(conn: Any, config: KBConfig) -> tuple[list[list[Fact]], int, dict[str, np.ndarray]]:
    """Groups of active facts to fold together, the active fact count, and the facts' vectors.

    Linked are equal texts, pairs at cosine >= kb.duplicate_similarity, and pairs among each
    fact's `CANDIDATES` nearest at cosine >= kb.related_similarity that `relation` calls an
    update or a contradiction (the write path's rule); one matrix product per block of rows.
    From `PAIRS_MIN_FACTS` active facts on, that all-pairs product would be quadratic: the
    pairs come from the compact copy's sign codes instead (kb/pairs.py).
    """
    total = repo.count_active(conn)
    if total >= PAIRS_MIN_FACTS and repo.has_vectors(conn):
        return clusters_at_scale(conn, config, total, CANDIDATES + 1)
    found = repo.active_rows(conn)
    facts = repo.facts_from_rows(conn, found)
    pos = {r[0]: i for i, r in enumerate(found)}
    parent = list(range(len(facts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_hash: dict[str, int] = {}
    for i, f in enumerate(facts):
        other = by_hash.setdefault(text_hash(f.fact), i)
        parent[root(i)] = root(other)
    rids, matrix = read_all_vectors(conn) if repo.has_vectors(conn) else (np.zeros(0), np.zeros((0, 0)))
    keep = [n for n, rid in enumerate(rids.tolist()) if rid in pos]
    idx, vectors = [pos[int(rids[n])] for n in keep], np.asarray(matrix[keep], dtype=np.float32)
    near, related = config.duplicate_similarity, config.related_similarity
    k = min(CANDIDATES + 1, len(idx))
    compared: set[tuple[int, int]] = set()
    with one_blas_thread():
        for start in range(0, len(idx), 1024):
            block = vectors[start : start + 1024] @ vectors.T
            for a, b in zip(*np.nonzero(block >= near), strict=True):
                if start + a < b:
                    parent[root(idx[start + a])] = root(idx[b])
            band = np.where((block >= related) & (block < near), block, -np.inf)
            top = np.argpartition(-band, k - 1, axis=1)[:, :k] if k else np.zeros((len(block), 0), dtype=int)
            for a, b in zip(*np.nonzero(np.take_along_axis(band, top, axis=1) > -np.inf), strict=True):
                x, y = sorted((idx[start + a], idx[int(top[a, b])]))
                if x != y and (x, y) not in compared:
                    compared.add((x, y))
                    older, newer = sorted((facts[x], facts[y]), key=lambda f: (f.verified_at, f.created_at, f.id))
                    if relation(older, newer, near=False)[0] != "distinct":
                        parent[root(x)] = root(y)
    groups: dict[int, list[Fact]] = {}
    for i, f in enumerate(facts):
        groups.setdefault(root(i), []).append(f)
    by_id = {facts[i].id: vectors[n] for n, i in enumerate(idx)}
    return [g for g in groups.values() if len(g) > 1], len(facts), by_id


def compress(
    ctx: Context, model: ChatModel | None = None, *, dry_run: bool = False, now: float | None = None
) -> CompressResult:
    """Merge near-duplicate clusters of the whole KB (oldest first, each member folded into the
    running merge); contradictions are flagged, distinct members left alone."""
    started, conn, config = time.perf_counter(), ctx.conn, ctx.config
    now = time.time() if now is None else now
    if not repo.has_vectors(conn):
        raise ModelError(
            "kb compress needs fact vectors: sqlite-vec is not available or the vector table is missing"
            " — fix: pip install sqlite-vec sqlean-py, then `deepresearch kb reembed`"
        )
    groups, total, vectors_by_id = clusters(conn, config)

    def is_near(fact: Fact, members: list[Fact]) -> bool:
        """Same text, or cosine >= kb.duplicate_similarity with a member (else only related)."""
        mine = vectors_by_id.get(fact.id)
        return mine is None or any(
            (other := vectors_by_id.get(m.id)) is None or float(mine @ other) >= config.duplicate_similarity
            for m in members
        )

    result = CompressResult(total, len(groups), dry_run=dry_run)
    for group in groups:
        group.sort(key=lambda f: (f.verified_at, f.created_at, f.id))
        head, members, flags = group[0], [group[0]], []
        record = MergeRecord([], [], head.fact, "duplicate", "none")
        for fact in group[1:]:
            decision = decide(head, fact, model, near=is_near(fact, members), classify=config.classify_with_model)
            if decision.kind in ("duplicate", "update") and decision.text:
                members.append(fact)
                head = merged_fact(members, decision.text)
                record.kind = "update" if "update" in (record.kind, decision.kind) else "duplicate"
                record.method = "model" if "model" in (record.method, decision.method) else decision.method
            elif decision.kind == "contradiction":
                flags.append((fact.id, decision.reason))
        if len(members) > 1:
            record.old_ids, record.old_texts = [m.id for m in members], [m.fact for m in members]
            record.new_text = head.fact
            if not dry_run:
                record.new_id = absorb(ctx, record.old_ids, head, now, f"compress: {record.kind}")
            result.merges.append(record)
        for fact_id, reason in flags:
            other = record.new_id or members[0].id
            result.flagged.append((fact_id, other, reason))
            if not dry_run:
                with transaction(conn):
                    records.flag(conn, fact_id, other, reason, now)
    result.seconds = time.perf_counter() - started
    return result
