"""Exact nearest-neighbour search over fact vectors with the lifecycle filters applied first.

Two engines give the same answer (tests compare them):

- `vec0`: sqlite-vec KNN, one query per category partition with status / verified_at /
  confidence constraints inside the KNN, so stale rows never fill the top-k. A decayed
  confidence floor cannot be written as a vec0 constraint, so k doubles until enough rows
  pass it or the partition is exhausted. Best for small KBs (no load cost).
- `ram`: the float32 matrix held in RAM (numpy), masks computed for every row, then one
  matrix-vector product. vec0 KNN is a full scan (≈80 ms at 100k rows, see
  docs/BENCHMARKS.md); the matrix product is ≈6 ms. Loaded once per process and refreshed
  incrementally when the `kb.generation` counter in `meta` changes.

Beyond `kb.bit_index_min_facts`, and in one-shot processes, recall uses the compact copy
stored in the file instead (kb/codes.py).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import get_meta
from deepresearch.facts import CATEGORIES
from deepresearch.indexing import VEC_K_LIMIT
from deepresearch.kb.repository import FACT_VEC, GENERATION_KEY, VECTORS_KEY, lifecycle_rows, vec_dimension

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.kb.lifecycle import Visibility

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Filter:
    """Everything a search must honour before ranking."""

    visibility: Visibility
    now: float
    min_confidence: float
    config: KBConfig

    def decay_factor(self, category: str, age_days: np.ndarray) -> np.ndarray:
        """The multiplier applied to raw confidence (1 when the mode does not decay)."""
        if not self.visibility.decay:
            return np.ones_like(age_days)
        policy = self.config.categories[category]
        factor = np.maximum(self.config.decay_floor, np.exp(-policy.decay * np.maximum(age_days, 0.0)))
        if policy.ttl_days is not None:
            factor = np.where(age_days > policy.ttl_days, 0.0, factor)
        return factor


def search_vec0(conn: Any, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
    """Top-k (rid, cosine) among eligible facts via sqlite-vec KNN per category partition."""
    statuses = flt.visibility.statuses
    found: list[tuple[int, float]] = []
    for category, cutoff in flt.visibility.cutoffs(flt.now).items():
        where = f"category = ? and status in ({','.join('?' * len(statuses))}) and confidence >= ?"
        params: list[Any] = [category, *statuses, flt.min_confidence]
        if cutoff is not None:
            where += " and verified_at >= ?"
            params.append(cutoff)
        want = k
        while True:
            rows = FACT_VEC.knn(conn, query, want, where, params, columns=("verified_at", "confidence"))
            kept = _passing(rows, category, flt)
            if len(kept) >= k or len(rows) < want or want >= VEC_K_LIMIT:
                break
            want = min(VEC_K_LIMIT, want * 4)
        found.extend(kept[:k])
    found.sort(key=lambda item: (-item[1], item[0]))
    return found[:k]


def _passing(rows: list[tuple], category: str, flt: Filter) -> list[tuple[int, float]]:
    if not rows:
        return []
    verified = np.array([r[2] for r in rows], dtype=np.float64)
    raw = np.array([r[3] for r in rows], dtype=np.float64)
    decayed = raw * flt.decay_factor(category, (flt.now - verified) / 86400.0)
    return [(r[0], r[1]) for r, c in zip(rows, decayed, strict=False) if c >= flt.min_confidence]


def eligible_slices(index: Any, status_ok: np.ndarray, flt: Filter) -> list[tuple[int, int, np.ndarray]]:
    """(start, end, eligible mask) per category block of a RAM/bit index laid out by category and verified_at.

    The age limit is a suffix of each block (binary search); status and the (decayed)
    confidence floor are masks on it. Empty slices are left out.
    """
    out = []
    for category, cutoff in flt.visibility.cutoffs(flt.now).items():
        start, end = index.blocks.get(category, (0, 0))
        if cutoff is not None:
            start += int(np.searchsorted(index.verified[start:end], cutoff, side="left"))
        if start >= end:
            continue
        conf = index.confidence[start:end]
        ok = status_ok[start:end] & (conf >= flt.min_confidence)
        if flt.visibility.decay and flt.min_confidence > 0:
            factor = flt.decay_factor(category, (flt.now - index.verified[start:end]) / 86400.0)
            ok &= conf * factor >= flt.min_confidence
        out.append((start, end, ok))
    return out


_BLAS: Any = None


def one_blas_thread() -> Any:
    """A context running BLAS single-threaded.

    Measured at 100k rows on the shared 2-core machine: the lifecycle query took 7 ms with
    one thread and 32 ms with OpenBLAS's default threads, which must wake for every
    matrix-vector product (one per category slice).
    """
    global _BLAS
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # optional: without it BLAS keeps its default threads
        return contextlib.nullcontext()
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def read_all_vectors(conn: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every (rowid, vector) of fact_vec, read chunk-wise from vec0's shadow tables.

    Reading through the vec0 virtual table costs ≈ 25 µs per row (2.5 s at 100k); its
    chunks are 1024 rows per blob. The layout is sqlite-vec's internal one, so the result
    is checked against the row count and the plain SQL scan is used if anything differs.
    """
    try:
        # one read transaction: chunk bitmaps and vector blobs from the same WAL snapshot
        own = not conn.in_transaction
        if own:
            conn.execute("begin")
        try:
            rids, matrix = _read_vec_chunks(conn)
            count = conn.execute("select count(*) from fact_vec_rowids").fetchone()[0]
        finally:
            if own:
                conn.execute("commit")
        if rids.size == count:
            return rids, matrix
        log.warning("unexpected sqlite-vec chunk layout; reading vectors row by row")
    except Exception as exc:  # an sqlite-vec version with another layout: fall back, never fail
        log.warning("cannot read sqlite-vec chunks (%s); reading vectors row by row", exc)
    rows = conn.execute("select rowid, embedding from fact_vec").fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, vec_dimension(conn) or 0), dtype=np.float32)
    rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return rids, np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()


def _read_vec_chunks(conn: Any) -> tuple[np.ndarray, np.ndarray]:
    dim = vec_dimension(conn) or 0
    # two plain queries: a join ordered by chunk_id sorts the big vector blobs (4× slower)
    chunks = conn.execute("select chunk_id, size, validity, rowids from fact_vec_chunks").fetchall()
    vectors = dict(conn.execute("select rowid, vectors from fact_vec_vector_chunks00").fetchall())
    rid_parts, vec_parts = [], []
    for chunk_id, size, validity, rowids in chunks:
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
        rid_parts.append(np.frombuffer(rowids, dtype=np.int64)[:size][valid])
        vec_parts.append(np.frombuffer(vectors[chunk_id], dtype=np.float32).reshape(size, dim)[valid])
    if not rid_parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32)
    return np.concatenate(rid_parts), np.concatenate(vec_parts)


class RamIndex:
    """Fact vectors in RAM, laid out by category and then by `verified_at`, for exact search.

    The layout makes the lifecycle filters slices instead of masks: a category filter picks
    one block, and an age limit (`verified_at >= cutoff`) is a suffix of that block found by
    binary search, so only eligible rows are ever multiplied (no copy, numpy views).
    Status and the decayed-confidence floor are masks on those slices.
    """

    def __init__(self) -> None:
        self.generation: tuple[str | None, str | None] = (None, None)
        self.rids = np.zeros(0, dtype=np.int64)
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.category = np.zeros(0, dtype=np.int8)
        self.status = np.zeros(0, dtype=object)
        self.verified = np.zeros(0, dtype=np.float64)
        self.confidence = np.zeros(0, dtype=np.float64)
        self.blocks: dict[str, tuple[int, int]] = {}
        self._status_ok: dict[tuple[str, ...], np.ndarray] = {}

    def refresh(self, conn: Any) -> None:
        """Load new vectors and all lifecycle columns if any KB write happened since last time."""
        generation = (get_meta(conn, GENERATION_KEY), get_meta(conn, VECTORS_KEY))
        if generation == self.generation:
            return
        if generation[1] != self.generation[1]:  # vectors rebuilt (reembed): start over
            self.rids, self.matrix = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        meta = lifecycle_rows(conn)
        rids, matrix = self.rids, self.matrix
        if not rids.size:
            rids, matrix = read_all_vectors(conn)
        else:  # only facts added since the last refresh: point lookups, not a vec0 full scan
            known = set(rids.tolist())
            fresh = FACT_VEC.vectors(conn, [r[0] for r in meta if r[0] not in known])
            if fresh:
                rids = np.concatenate([rids, np.fromiter(fresh, dtype=np.int64, count=len(fresh))])
                matrix = np.vstack([matrix, np.stack(list(fresh.values()))])
        index = {c: i for i, c in enumerate(CATEGORIES)}
        by_rid = np.argsort(rids)
        meta_rids = np.fromiter((r[0] for r in meta), dtype=np.int64, count=len(meta))
        pos = by_rid[np.minimum(np.searchsorted(rids, meta_rids, sorter=by_rid), max(0, rids.size - 1))]
        found = rids[pos] == meta_rids if rids.size else np.zeros(len(meta), dtype=bool)
        pos = pos[found]
        category = np.full(rids.size, -1, dtype=np.int8)
        status = np.full(rids.size, "gone", dtype=object)
        verified = np.zeros(rids.size)
        confidence = np.zeros(rids.size)
        category[pos] = np.array([index.get(r[1], -1) for r in meta], dtype=np.int8)[found]
        status[pos] = np.array([r[2] for r in meta], dtype=object)[found]
        verified[pos] = np.array([r[3] for r in meta], dtype=np.float64)[found]
        confidence[pos] = np.array([r[4] for r in meta], dtype=np.float64)[found]
        keep = np.flatnonzero(category >= 0)  # vectors of purged facts are dropped here
        order = keep[np.lexsort((verified[keep], category[keep]))]
        if order.size != rids.size or not np.array_equal(order, np.arange(rids.size)):
            matrix, rids = matrix[order], rids[order]
            category, status, verified, confidence = (
                category[order],
                status[order],
                verified[order],
                confidence[order],
            )
        self.rids, self.matrix, self.category, self.status = rids, matrix, category, status
        self.verified, self.confidence = verified, confidence
        bounds = np.searchsorted(category, np.arange(len(CATEGORIES) + 1))
        self.blocks = {c: (int(bounds[i]), int(bounds[i + 1])) for i, c in enumerate(CATEGORIES)}
        self._status_ok = {}
        self.generation = generation

    def search(self, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
        """Top-k (rid, cosine) among eligible rows, scanning only the eligible slices."""
        statuses = flt.visibility.statuses
        if statuses not in self._status_ok:
            self._status_ok[statuses] = np.isin(self.status, list(statuses))
        status_ok = self._status_ok[statuses]
        query = np.asarray(query, dtype=np.float32)
        with one_blas_thread():
            found = self._search_slices(query, flt, k, status_ok)
        found.sort(key=lambda item: (-item[1], item[0]))
        return found[:k]

    def _search_slices(self, query: np.ndarray, flt: Filter, k: int, status_ok: np.ndarray) -> list[tuple[int, float]]:
        found: list[tuple[int, float]] = []
        for start, end, ok in eligible_slices(self, status_ok, flt):
            scores = np.where(ok, self.matrix[start:end] @ query, -np.inf)
            top = np.argpartition(-scores, k - 1)[:k] if scores.size > k else np.arange(scores.size)
            found.extend((int(self.rids[start + i]), float(scores[i])) for i in top if ok[i])
        return found


STATUSES = ("active", "expired", "superseded")  # codes of the compact copy (kb/codes.py)
