"""`kb compress`: merge near-duplicates and updates, flag contradictions, across the whole KB with the
write path's rules (kb/merge.py)."""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import transaction
from deepresearch.errors import ModelError
from deepresearch.facts import STATUSES, Fact, text_hash
from deepresearch.kb import records
from deepresearch.kb import repository as repo
from deepresearch.kb.align import tokens
from deepresearch.kb.classify import decide
from deepresearch.kb.codes import CodeIndex, vector_chunks
from deepresearch.kb.engines import Context, one_blas_thread, read_all_vectors
from deepresearch.kb.merge import merged_fact, relation
from deepresearch.kb.records import CompressResult, MergeRecord
from deepresearch.kb.write import CANDIDATES, absorb

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.models.llm import ChatModel


def clusters(conn: Any, config: KBConfig) -> tuple[list[list[Fact]], int, dict[str, np.ndarray]]:
    """Groups of active facts to fold together, the active fact count, and the facts' vectors.

    Linked are equal texts, pairs at cosine >= kb.duplicate_similarity, and pairs among each
    fact's `CANDIDATES` nearest at cosine >= kb.related_similarity that `relation` calls an
    update or a contradiction (the write path's rule); one matrix product per block of rows.
    From `PAIRS_MIN_FACTS` active facts on, that all-pairs product would be quadratic: the
    pairs come from the compact copy's sign codes instead (`clusters_at_scale`, below).
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


# --- at scale: similar pairs without comparing every pair ------------------------------------
#
# Comparing every fact with every other is quadratic: ≈ 10^12 products at 1M facts. Instead the
# compact copy's sign codes (kb/codes.py) are sorted by several random orders of their bits,
# so facts whose codes agree on a long prefix land next to each other, and each fact is
# compared only with its neighbours in each order (`TABLES` × 2 × `WINDOW` of them): similar
# vectors agree on most sign bits, so they meet in at least one order with high probability
# (≥ 0.99 measured for cosine ≥ 0.95 pairs on real MiniLM vectors — docs/BENCHMARKS.md). Pairs
# whose Hamming distance allows the threshold are then scored exactly on their float vectors,
# streamed once from vec0 and kept as float16 only for the facts that have a candidate.
# Cost: O(n · TABLES · (log n + WINDOW)).

TABLES = 12
WINDOW = 8
PAIRS_MIN_FACTS = 50000  # below, `kb compress` compares all pairs exactly (`clusters`)

# (rid a, rid b, cosine, (rids, their float16 vectors)); float16: cosine error ≈ 1e-3, half the RAM
Pairs = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]


def clusters_at_scale(
    conn: Any, config: KBConfig, total: int, candidates: int
) -> tuple[list[list[Fact]], int, dict[str, np.ndarray]]:
    """`kb compress`'s groups from similar pairs instead of all pairs (same linking rules as
    compress.clusters): cosine >= kb.duplicate_similarity links; a related pair (cosine >=
    kb.related_similarity, among each fact's `candidates` nearest) links when `relation` calls it an
    update or a contradiction. Texts are read only for pairs, Facts only for plausible ones."""
    a, b, cosine, (stored, vectors) = similar_pairs(conn, config.related_similarity, candidates)
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    near = cosine >= config.duplicate_similarity
    for x, y in zip(a[near].tolist(), b[near].tolist(), strict=True):
        parent[root(x)] = root(y)
    band = [(x, y) for x, y in zip(a[~near].tolist(), b[~near].tolist(), strict=True)]
    keys = _keys(conn, sorted({r for pair in band for r in pair}))
    plausible = [(x, y) for x, y in band if _may_align(keys[x], keys[y])]
    facts = _facts(conn, sorted({r for pair in plausible for r in pair}))
    for x, y in plausible:
        older, newer = sorted((facts[x], facts[y]), key=lambda f: (f.verified_at, f.created_at, f.id))
        if relation(older, newer, near=False)[0] != "distinct":
            parent[root(x)] = root(y)
    members: dict[int, list[int]] = {}
    for rid in list(parent):
        members.setdefault(root(rid), []).append(rid)
    grouped = sorted(r for group in members.values() if len(group) > 1 for r in group)
    facts = _facts(conn, grouped)
    groups = [[facts[r] for r in sorted(g)] for g in members.values() if len(g) > 1]
    at = np.searchsorted(stored, grouped)
    return (
        groups,
        total,
        {facts[r].id: vectors[i].astype(np.float32) for r, i in zip(grouped, at.tolist(), strict=True)},
    )


def _keys(conn: Any, rids: list[int]) -> dict[int, Counter[str]]:
    """Per fact, its tokens' keys as `claims.compare` aligns them (kb/align.py; punctuation left out)."""
    out: dict[int, Counter[str]] = {}
    for start in range(0, len(rids), 900):
        part = rids[start : start + 900]
        for rid, text in repo.texts_by_rid(conn, part):
            out[rid] = Counter(t.key for t in tokens(text) if not t.glue)
    return out


def _may_align(x: Counter[str], y: Counter[str]) -> bool:
    """False when the texts cannot align well enough for `claims.compare` (≥ 70% of the shorter
    text's non-punctuation tokens equal in order — at most the shared ones), so `relation` would say distinct.
    One token of slack: the bound must never drop a pair the rule would link."""
    return sum((x & y).values()) >= 0.7 * min(sum(x.values()), sum(y.values())) - 1


def _facts(conn: Any, rids: list[int]) -> dict[int, Fact]:
    out: dict[int, Fact] = {}
    for start in range(0, len(rids), 500):
        found, facts = repo.select_facts(conn, "rid", rids[start : start + 500])
        out.update((row[0], fact) for row, fact in zip(found, facts, strict=True))
    return out


def similar_pairs(conn: Any, threshold: float, per_fact: int) -> Pairs:
    """Active pairs at cosine >= `threshold` (see `Pairs`), at most `per_fact` nearest per fact
    (each pair is among the `per_fact` closest codes of one of its ends)."""
    codes = CodeIndex()
    codes.refresh(conn)
    rows = np.flatnonzero(codes.status == STATUSES.index("active"))
    bits, rids, dim = codes.bits[:, rows], codes.rids[rows], codes.dim
    a, b, h = _candidates(bits, dim, threshold)
    if not a.size:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32), (empty, np.zeros((0, dim), dtype=np.float16))
    keep = _nearest_per_row(a, b, h, per_fact)
    a, b = a[keep], b[keep]
    involved = np.unique(np.concatenate([a, b]))
    vectors = np.zeros((involved.size, dim), dtype=np.float16)
    wanted = rids[involved]
    for chunk_rids, chunk in vector_chunks(conn, dim):
        pos = np.searchsorted(wanted, chunk_rids)
        hit = (pos < wanted.size) & (wanted[np.minimum(pos, wanted.size - 1)] == chunk_rids)
        vectors[pos[hit]] = chunk[hit]
    ia, ib = np.searchsorted(involved, a), np.searchsorted(involved, b)
    cosine = np.empty(a.size, dtype=np.float32)
    for start in range(0, a.size, 1 << 18):
        x, y = vectors[ia[start : start + (1 << 18)]], vectors[ib[start : start + (1 << 18)]]
        cosine[start : start + x.shape[0]] = np.einsum("ij,ij->i", x.astype(np.float32), y.astype(np.float32))
    close = cosine >= threshold
    return rids[a[close]], rids[b[close]], cosine[close], (wanted, vectors)


def _candidates(bits: np.ndarray, dim: int, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (row a < row b, Hamming) pairs that meet in a sorted order within a plausible distance."""
    n = bits.shape[1]
    flip = math.acos(max(-1.0, min(1.0, threshold))) / math.pi  # chance one sign bit differs
    bound = dim * flip + 4 * math.sqrt(dim * flip * (1 - flip)) + 1
    rng = np.random.default_rng(0)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    one = np.uint64(1)
    for _ in range(TABLES):
        key = np.zeros(n, dtype=np.uint64)
        for p in rng.choice(dim, min(64, dim), replace=False).tolist():
            key = (key << one) | ((bits[p // 64] >> np.uint64(p % 64)) & one)
        order = np.argsort(key, kind="stable")
        for d in range(1, min(WINDOW, n - 1) + 1):
            x, y = order[:-d], order[d:]
            h = np.zeros(x.size, dtype=np.int16)
            for word in bits:
                h += np.bitwise_count(word[x] ^ word[y])
            ok = h <= bound
            found.append((np.minimum(x[ok], y[ok]), np.maximum(x[ok], y[ok]), h[ok]))
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)
    a, b, h = (np.concatenate(part) for part in zip(*found, strict=True))
    _, first = np.unique(a.astype(np.int64) * n + b, return_index=True)
    return a[first].astype(np.int64), b[first].astype(np.int64), h[first]


def _nearest_per_row(a: np.ndarray, b: np.ndarray, h: np.ndarray, per_row: int) -> np.ndarray:
    """Mask of pairs among the `per_row` closest of either end."""
    keep = np.zeros(a.size, dtype=bool)
    for end in (a, b):
        order = np.lexsort((h, end))
        grouped = end[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        rank = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
        keep[order[rank < per_row]] = True
    return keep
