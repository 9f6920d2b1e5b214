"""The KB's search engines over one file: exact vector search behind one interface, and keyword search.

Three vector engines answer `search(query_vector, filter, k)` with the lifecycle filters applied
first, and `engine_for(count, one_shot)` is the one rule choosing among them (recall and merge
planning alike):

- `vec0` (`Vec0`): sqlite-vec KNN, one query per category partition with status / verified_at /
  confidence constraints inside the KNN, so stale rows never fill the top-k. A decayed
  confidence floor cannot be written as a vec0 constraint, so k doubles until enough rows
  pass it or the partition is exhausted. Best for small KBs (no load cost).
- `ram` (`RamIndex`): the float32 matrix held in RAM (numpy), masks computed for every row, then
  one matrix-vector product. vec0 KNN is a full scan (≈80 ms at 100k rows, see
  docs/BENCHMARKS.md); the matrix product is ≈6 ms. Loaded once per process and refreshed
  incrementally when the `kb.generation` counter in `meta` changes.
- `codes` (`CodeIndex`, kb/codes.py): the compact copy stored in the file, beyond
  `kb.bit_index_min_facts` facts and in one-shot processes.

Keyword recall over the FTS5 trigram index (`search_fts`) is the degraded path when vectors
cannot be used. User text never reaches FTS5 syntax: each term becomes a quoted string (quotes
doubled), so operators, parentheses, `NEAR`, `*` or `:` in a query are just characters. The
trigram tokenizer matches any 3+ character substring, which makes Chinese/Japanese text (no
spaces) searchable; shorter terms ("AI", two-character CJK words) fall back to LIKE.

Also here: the embedding-model claim in `meta` (a process configured with another model fails
closed), and the `Context` a `KnowledgeBase` owns and hands to recall, write and compress.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from deepresearch.db import get_meta, set_meta
from deepresearch.errors import DimensionMismatch, ModelError, ModelNotFound
from deepresearch.facts import CATEGORIES, new_id
from deepresearch.indexing import VEC_K_LIMIT, ModelClaim, match_any, vec_loaded
from deepresearch.kb.codes import CodeIndex
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.repository import (
    DIMENSION_KEY,
    FACT_VEC,
    GENERATION_KEY,
    MODEL_KEY,
    VECTORS_KEY,
    keyword_rows,
    lifecycle_rows,
    max_rid,
    vec_dimension,
)
from deepresearch.text import STOPWORDS, has_cjk, normalize_space

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)


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

    def search_batch(self, queries: np.ndarray, flt: Filter, k: int) -> list[list[tuple[int, float]]]:
        """`search` for each row of `queries`, one matrix product per eligible slice for them all."""
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        statuses = flt.visibility.statuses
        status_ok = self._status_ok.setdefault(statuses, np.isin(self.status, list(statuses)))
        found: list[list[tuple[int, float]]] = [[] for _ in range(len(queries))]
        with one_blas_thread():
            for start, end, ok in eligible_slices(self, status_ok, flt):
                scores = self.matrix[start:end] @ queries.T
                scores[~ok] = -np.inf
                for col, column in enumerate(scores.T):
                    top = np.argpartition(-column, k - 1)[:k] if column.size > k else np.arange(column.size)
                    found[col].extend((int(self.rids[start + i]), float(column[i])) for i in top if ok[i])
        return [sorted(hits, key=lambda item: (-item[1], item[0]))[:k] for hits in found]

    def _search_slices(self, query: np.ndarray, flt: Filter, k: int, status_ok: np.ndarray) -> list[tuple[int, float]]:
        found: list[tuple[int, float]] = []
        for start, end, ok in eligible_slices(self, status_ok, flt):
            scores = np.where(ok, self.matrix[start:end] @ query, -np.inf)
            top = np.argpartition(-scores, k - 1)[:k] if scores.size > k else np.arange(scores.size)
            found.extend((int(self.rids[start + i]), float(scores[i])) for i in top if ok[i])
        return found


class Vec0:
    """The sqlite-vec engine: no load cost, a full scan per query (`search_vec0`)."""

    def __init__(self, conn: Any):
        self.conn = conn

    def search(self, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
        """Top-k (rid, cosine) among eligible facts."""
        return search_vec0(self.conn, query, flt, k)

    def search_batch(self, queries: np.ndarray, flt: Filter, k: int) -> list[list[tuple[int, float]]]:
        """`search` for each row of `queries`."""
        return [self.search(q, flt, k) for q in queries]


class Engine(Protocol):
    """A vector engine: exact top-k (rid, cosine) among the facts a lifecycle filter lets through."""

    def search(self, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]: ...

    def search_batch(self, queries: np.ndarray, flt: Filter, k: int) -> list[list[tuple[int, float]]]: ...


class Engines:
    """A process's vector engines over one KB file; the float matrix and the compact copy load on first use."""

    def __init__(self, conn: Any, config: KBConfig):
        self.conn, self.config = conn, config
        self.vec0 = Vec0(conn)
        self.ram = RamIndex()
        self.codes = CodeIndex()

    def engine_for(self, count: int, one_shot: bool, *, bulk: bool = False) -> Engine:
        """The engine for a KB of about `count` facts (the rule recall and merge planning share).

        Below `ram_index_min_facts` facts one vec0 KNN is cheapest. Above it a long-running
        process keeps the exact float32 matrix in RAM up to `bit_index_min_facts` (146 MiB at
        100k), and the compact copy stored in the file (kb/codes.py) beyond; a one-shot process
        always uses the compact copy, which loads in a fraction of the matrix's time
        (docs/BENCHMARKS.md). `bulk` (a sync pull's batch) takes the matrix from the first fact on.
        """
        small = count < self.config.ram_index_min_facts and not bulk
        if small:
            return self.vec0
        if count >= self.config.bit_index_min_facts or (one_shot and not self.ram.rids.size):
            self.codes.refresh(self.conn)
            return self.codes
        self.ram.refresh(self.conn)
        return self.ram


# --- the embedding model claim ------------------------------------------------------------------

REEMBED_FIX = "run `deepresearch kb reembed` to rebuild the vectors with the configured model"
CLAIM = ModelClaim(MODEL_KEY, DIMENSION_KEY, "the knowledge base", REEMBED_FIX)

# (checked embedder, None) or (None, why vectors cannot be used)
Vectors = tuple["Embedder | None", "str | None"]


def vector_or_reason(conn: Any, embedder: Callable[[], Embedder]) -> Vectors:
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


@dataclass
class Context:
    """What the KB's collaborators (recall, write, compress, sync) share, owned by `KnowledgeBase`:
    the connection, the config, the vector engines, the embedder (loaded on first use), the chat
    model that proposes fusions on write (None: the mechanical merge), and whether this process
    answers one query only (the CLI: never load the float matrix)."""

    conn: Any
    config: KBConfig
    embedder: Callable[[], Embedder]
    engines: Engines
    merge_model: ChatModel | None = None
    one_shot: bool = False

    def vectors(self, embedder: Embedder | None = None) -> Vectors:
        """(checked embedder, None) — this KB's, or `embedder` for one call — or (None, why not)."""
        return vector_or_reason(self.conn, (lambda: embedder) if embedder else self.embedder)

    def engine(self, *, bulk: bool = False) -> Engine:
        """The vector engine for this KB's size (`Engines.engine_for`)."""
        return self.engines.engine_for(max_rid(self.conn), self.one_shot, bulk=bulk)


# --- keyword search (the degraded path) ------------------------------------------------------------

_TERM = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
MAX_TERMS = 32


def terms(text: str) -> tuple[list[str], list[str]]:
    """(terms of 3+ characters for MATCH, shorter terms for LIKE) from free user text."""
    long_terms: list[str] = []
    short_terms: list[str] = []
    for token in _TERM.findall(normalize_space(text).lower()):
        pieces = [token]
        if has_cjk(token):
            # CJK runs have no word boundaries: search their overlapping trigrams.
            pieces = []
            for run in _CJK_RUN.findall(token):
                pieces.extend(run[i : i + 3] for i in range(max(1, len(run) - 2)))
            pieces.extend(p for p in _CJK_RUN.split(token) if p)
        for piece in pieces:
            if piece in STOPWORDS or not piece.strip():
                continue
            target = long_terms if len(piece) >= 3 else short_terms
            if piece not in target:
                target.append(piece)
    return long_terms[:MAX_TERMS], short_terms[:MAX_TERMS]


def match_expression(text: str) -> str | None:
    """A safe FTS5 MATCH string: every term quoted and OR-ed; None when no term is long enough."""
    return match_any(terms(text)[0])


def _like_pattern(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def visibility_sql(flt: Filter, alias: str = "f") -> tuple[str, list[Any]]:
    """SQL condition + params for the lifecycle rules (decayed-confidence floor excluded)."""
    statuses = flt.visibility.statuses
    parts: list[str] = []
    params: list[Any] = []
    for category, cutoff in flt.visibility.cutoffs(flt.now).items():
        if cutoff is None:
            parts.append(f"{alias}.category = ?")
            params.append(category)
        else:
            parts.append(f"({alias}.category = ? and {alias}.verified_at >= ?)")
            params.extend([category, cutoff])
    sql = (
        f"{alias}.status in ({','.join('?' * len(statuses))}) and {alias}.confidence >= ?"
        f" and ({' or '.join(parts) or '0'})"
    )
    return sql, [*statuses, flt.min_confidence, *params]


def search_fts(conn: Any, text: str, flt: Filter, k: int) -> list[tuple[int, float]]:
    """Top-k (rid, relevance in 0..1 from BM25) among eligible facts matching the words of `text`."""
    where, params = visibility_sql(flt)
    expr = match_expression(text)
    short_terms = [] if expr is not None else terms(text)[1]
    if expr is None and not short_terms:
        return []
    rows = keyword_rows(conn, expr, [_like_pattern(t) for t in short_terms], where, params)
    out: list[tuple[int, float]] = []
    for rid, score, category, verified, raw in rows:
        factor = flt.decay_factor(category, np.array([(flt.now - verified) / 86400.0]))[0]
        if raw * factor < flt.min_confidence:
            continue
        strength = max(0.0, -float(score))
        out.append((int(rid), strength / (1.0 + strength) if expr else 0.5))
        if len(out) >= k:
            break
    return out
