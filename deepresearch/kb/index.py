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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import get_meta
from deepresearch.facts import CATEGORIES

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.kb.lifecycle import Visibility

VEC_K_LIMIT = 4096  # sqlite-vec refuses larger k
GENERATION_KEY = "kb.generation"
VECTORS_KEY = "kb.vectors_generation"


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


def vec_dimension(conn: Any) -> int | None:
    """The vector length the fact_vec table was created with (None if it does not exist)."""
    row = conn.execute("select sql from sqlite_master where name = 'fact_vec'").fetchone()
    if row is None:
        return None
    match = re.search(r"float\[(\d+)\]", row[0])
    return int(match.group(1)) if match else None


def create_vec_table(conn: Any, dimension: int) -> None:
    """(Re)create fact_vec for `dimension`; same columns as migration m103."""
    conn.execute("drop table if exists fact_vec")
    conn.execute(
        f"""create virtual table fact_vec using vec0(
            category text partition key,
            embedding float[{int(dimension)}] distance_metric=cosine,
            status text,
            verified_at float,
            confidence float
        )"""
    )


def search_vec0(conn: Any, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
    """Top-k (rid, cosine) among eligible facts via sqlite-vec KNN per category partition."""
    blob = np.asarray(query, dtype=np.float32).tobytes()
    statuses = flt.visibility.statuses
    found: list[tuple[int, float]] = []
    for category, cutoff in flt.visibility.cutoffs(flt.now).items():
        sql = (
            "select rowid, distance, verified_at, confidence from fact_vec where embedding match ?"
            f" and k = ? and category = ? and status in ({','.join('?' * len(statuses))})"
            " and confidence >= ?"
        )
        params: list[Any] = [category, *statuses, flt.min_confidence]
        if cutoff is not None:
            sql += " and verified_at >= ?"
            params.append(cutoff)
        want = k
        while True:
            rows = conn.execute(sql, [blob, want, *params]).fetchall()
            kept = _passing(rows, category, flt)
            if len(kept) >= k or len(rows) < want or want >= VEC_K_LIMIT:
                break
            want = min(VEC_K_LIMIT, want * 4)
        found.extend(kept[:k])
    found.sort(key=lambda item: -item[1])
    return found[:k]


def _passing(rows: list[tuple], category: str, flt: Filter) -> list[tuple[int, float]]:
    if not rows:
        return []
    verified = np.array([r[2] for r in rows], dtype=np.float64)
    raw = np.array([r[3] for r in rows], dtype=np.float64)
    decayed = raw * flt.decay_factor(category, (flt.now - verified) / 86400.0)
    return [
        (int(r[0]), 1.0 - float(r[1])) for r, c in zip(rows, decayed, strict=False) if c >= flt.min_confidence
    ]


class RamIndex:
    """The fact vectors as one float32 matrix plus lifecycle columns, for exact masked search."""

    def __init__(self) -> None:
        self.generation: tuple[str | None, str | None] = (None, None)
        self.rids = np.zeros(0, dtype=np.int64)
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.category = np.zeros(0, dtype=np.int8)
        self.status_ok: dict[tuple[str, ...], np.ndarray] = {}
        self.status = np.zeros(0, dtype=object)
        self.verified = np.zeros(0, dtype=np.float64)
        self.confidence = np.zeros(0, dtype=np.float64)

    def refresh(self, conn: Any) -> None:
        """Reload what changed since the last call (new vectors, then all lifecycle columns)."""
        generation = (get_meta(conn, GENERATION_KEY), get_meta(conn, VECTORS_KEY))
        if generation == self.generation and self.rids.size:
            return
        if generation[1] != self.generation[1]:
            self.rids = np.zeros(0, dtype=np.int64)
            self.matrix = np.zeros((0, 0), dtype=np.float32)
        last = int(self.rids[-1]) if self.rids.size else 0
        rows = conn.execute(
            "select rowid, embedding from fact_vec where rowid > ? order by rowid", (last,)
        ).fetchall()
        if rows:
            new_rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            new = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            self.matrix = new.copy() if not self.matrix.size else np.vstack([self.matrix, new])
            self.rids = np.concatenate([self.rids, new_rids])
        meta = conn.execute(
            "select rid, category, status, verified_at, confidence from facts order by rid"
        ).fetchall()
        n = self.rids.size
        self.category = np.full(n, -1, dtype=np.int8)
        self.status = np.full(n, "gone", dtype=object)
        self.verified = np.zeros(n, dtype=np.float64)
        self.confidence = np.zeros(n, dtype=np.float64)
        if meta and n:
            meta_rids = np.fromiter((r[0] for r in meta), dtype=np.int64, count=len(meta))
            pos = np.searchsorted(self.rids, meta_rids)
            ok = (pos < n) & (self.rids[np.minimum(pos, n - 1)] == meta_rids)
            index = {c: i for i, c in enumerate(CATEGORIES)}
            cats = np.array([index.get(r[1], -1) for r in meta], dtype=np.int8)
            self.category[pos[ok]] = cats[ok]
            self.status[pos[ok]] = np.array([r[2] for r in meta], dtype=object)[ok]
            self.verified[pos[ok]] = np.array([r[3] for r in meta], dtype=np.float64)[ok]
            self.confidence[pos[ok]] = np.array([r[4] for r in meta], dtype=np.float64)[ok]
        self.status_ok = {}
        self.generation = generation

    def search(self, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
        """Top-k (rid, cosine) among eligible rows: mask first, then one matrix product."""
        if not self.rids.size:
            return []
        statuses = flt.visibility.statuses
        if statuses not in self.status_ok:
            self.status_ok[statuses] = np.isin(self.status, list(statuses))
        mask = self.status_ok[statuses] & (self.confidence >= flt.min_confidence)
        allowed = np.zeros(self.rids.size, dtype=bool)
        age = (flt.now - self.verified) / 86400.0
        for category, cutoff in flt.visibility.cutoffs(flt.now).items():
            in_cat = self.category == CATEGORIES.index(category)
            if cutoff is not None:
                in_cat &= self.verified >= cutoff
            if flt.visibility.decay or flt.min_confidence > 0:
                idx = np.flatnonzero(in_cat & mask)
                factor = flt.decay_factor(category, age[idx])
                in_cat[idx] = self.confidence[idx] * factor >= flt.min_confidence
            allowed |= in_cat
        allowed &= mask
        idx = np.flatnonzero(allowed)
        if not idx.size:
            return []
        # One product over all rows is cheaper than copying the eligible rows out first.
        scores = (self.matrix @ np.asarray(query, dtype=np.float32))[idx]
        top = np.argpartition(-scores, min(k, idx.size) - 1)[:k] if idx.size > k else np.arange(idx.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self.rids[idx[i]]), float(scores[i])) for i in top]
