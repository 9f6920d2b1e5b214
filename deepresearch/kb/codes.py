"""The compact copy of the fact vectors kept in the KB file: sign bits, int8 vectors, lifecycle columns.

Recall over hundreds of thousands of facts cannot afford the float32 matrix in RAM (≈ 1.5 GiB
at 1M facts) nor vec0's full scan (≈ 0.8 s at 1M), and a one-shot CLI process cannot afford
to rebuild any index from the float vectors. So the file also holds, per fact, one sign bit
per dimension (48 bytes at 384-d) next to its category, status, verified_at and confidence,
in segments of 65,536 rowids (table `fact_codes`, blobs of numpy arrays, bits word-major),
and an int8 copy of its vector (table `fact_codes_int8`, one row per fact). A process loads
the segments in a fraction of a second (≈ 75 MB at 1M), filters by lifecycle with masks over
every row (so results are never short), ranks by Hamming distance, re-scores a shortlist on
the int8 rows (µs point reads), and re-ranks the best few exactly by cosine on their float32
vectors read from vec0 by rowid (up to a ms each, which is why they are few).

Keeping it current needs no writer's cooperation: triggers on `facts` (migration m106) append
every insert, lifecycle update and delete to `fact_codes_log`. A reader applies the log rows
newer than the copy (reading vectors only for inserted rows) and, once enough piled up,
folds them into the segments they touch (`fold`, in one short write transaction guarded by
the copy's state, so concurrent folds cannot lose changes). `meta['kb.codes']` records the
log position the segments cover and the vector generation they were built from; a
`kb reembed` (new generation) or a database from before m106 leads to one full build.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import get_meta, set_meta, transaction
from deepresearch.facts import CATEGORIES, STATUSES
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.repository import FACT_VEC, GENERATION_KEY, VECTORS_KEY, lifecycle_rows, vec_dimension

if TYPE_CHECKING:
    from collections.abc import Iterator

log = logging.getLogger(__name__)

STATE_KEY = "kb.codes"
SEGMENT_SHIFT = 16  # 65,536 rowids per segment: a fold rewrites only the segments it touches
FOLD_MIN = 1000  # log rows a reader applies in RAM before it writes them into the segments
INT8_MARGIN = 0.005  # int8 cosine error is ≈ 4e-4 (std) on unit 384-d vectors: a tie zone of > 10 σ
_COLUMNS = ("rids", "bits", "category", "status", "verified", "confidence")


def encode(vectors: np.ndarray) -> np.ndarray:
    """Sign bits of (n, dim) vectors as (words, n) uint64, one 64-bit word per 64 dimensions."""
    vectors = np.atleast_2d(np.asarray(vectors))
    n, dim = vectors.shape
    words = (dim + 63) // 64
    packed = np.zeros((n, words * 8), dtype=np.uint8)
    packed[:, : (dim + 7) // 8] = np.packbits(vectors > 0, axis=1)
    return np.ascontiguousarray(packed.view(np.uint64).T)


def quantize(vectors: np.ndarray) -> np.ndarray:
    """int8 (n, dim), each row scaled to use the full range: cosine needs only the direction."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    scale = 127.0 / np.maximum(np.abs(vectors).max(axis=1, keepdims=True), 1e-12)
    return np.round(vectors * scale).astype(np.int8)


def hamming(bits: np.ndarray, query_bits: np.ndarray) -> np.ndarray:
    """Bit differences (int16) between every column of `bits` and `query_bits` (both word-major).

    Word-major keeps each XOR + popcount pass over one contiguous array: ≈ 7 ms at 1M facts.
    """
    out = np.zeros(bits.shape[1], dtype=np.int16)
    for word, q in zip(bits, query_bits, strict=True):
        out += np.bitwise_count(word ^ q)
    return out


class CodeIndex:
    """The compact copy loaded in RAM (rid order), kept current from `fact_codes_log`."""

    def __init__(self, rerank: int = 3, shortlist: int = 100):
        self.rerank, self.shortlist = rerank, shortlist  # × k: exact float32 / int8 re-score pools
        self.generation: tuple[str | None, str | None] = (None, None)
        self.seq = 0  # log position the arrays reflect
        self.dim = 0
        self.rids = np.zeros(0, dtype=np.int64)
        self.bits = np.zeros((0, 0), dtype=np.uint64)
        self.category = np.zeros(0, dtype=np.int8)
        self.status = np.zeros(0, dtype=np.int8)
        self.verified = np.zeros(0, dtype=np.float64)
        self.confidence = np.zeros(0, dtype=np.float64)
        self._state: dict[str, Any] | None = None  # meta['kb.codes'] the arrays were read against
        self._missing: set[int] = set()  # logged inserts without a vector yet (kept pending)
        # int8 rows to store at the next save: all of them after a build, else new and gone ones
        self._int8_all: tuple[np.ndarray, np.ndarray] | None = None
        self._int8_new: dict[int, np.ndarray] = {}
        self._int8_gone: set[int] = set()
        self.conn: Any = None  # the connection last refreshed from (searches read vectors there)

    @property
    def loaded(self) -> bool:
        """True once the copy was read in this process."""
        return self.generation != (None, None)

    # --- loading ----------------------------------------------------------------------------

    def refresh(self, conn: Any, fold_min: int = FOLD_MIN) -> None:
        """Bring the arrays up to date with the file; build or fold the stored copy when due."""
        self.conn = conn
        generation = (get_meta(conn, GENERATION_KEY), get_meta(conn, VECTORS_KEY))
        if generation == self.generation:
            return
        with _reading(conn):
            state = _state(conn)
            vectors = get_meta(conn, VECTORS_KEY) or ""
            self.dim = vec_dimension(conn) or 0
            full = state is None or state["vectors"] != vectors or state["dim"] != self.dim
            if full:
                self._build(conn)
            elif not self.loaded or self._state != state:  # first load, or another process folded
                self._load_segments(conn)
                self.seq, self._state = int(state["seq"]), state  # type: ignore[index]
            self._apply_log(conn)
        if full or self.seq - int(state["seq"]) >= fold_min:  # type: ignore[index]
            self._save(conn, state, vectors, full)
        self.generation = generation

    def _load_segments(self, conn: Any) -> None:
        parts: dict[str, list[np.ndarray]] = {c: [] for c in _COLUMNS}
        words = (self.dim + 63) // 64
        for n, *blobs in conn.execute(f"select n, {', '.join(_COLUMNS)} from fact_codes order by seg"):
            for name, blob in zip(_COLUMNS, blobs, strict=True):
                dtype = _DTYPES[name]
                array = np.frombuffer(blob, dtype=dtype)
                parts[name].append(array.reshape(words, n) if name == "bits" else array)
        self._set(**{c: _concat(c, parts[c], words) for c in _COLUMNS})

    def _build(self, conn: Any) -> None:
        """Codes of every stored vector, streamed one vec0 chunk at a time, with the facts' columns."""
        self.seq = int(conn.execute("select coalesce(max(seq), 0) from fact_codes_log").fetchone()[0])
        rid_parts, bit_parts, int8_parts = [], [], []
        for rids, vectors in vector_chunks(conn, self.dim):
            rid_parts.append(rids)
            bit_parts.append(encode(vectors))
            int8_parts.append(quantize(vectors))
        words = (self.dim + 63) // 64
        rids = np.concatenate(rid_parts) if rid_parts else np.zeros(0, dtype=np.int64)
        bits = np.concatenate(bit_parts, axis=1) if bit_parts else np.zeros((words, 0), dtype=np.uint64)
        order = np.argsort(rids)
        meta = _fact_columns(conn, None)
        pos = np.searchsorted(meta[0], rids[order])
        found = (pos < meta[0].size) & (meta[0][np.minimum(pos, max(0, meta[0].size - 1))] == rids[order])
        keep, pos = order[found], pos[found]  # vectors without a fact row are left out
        self._set(rids[keep], bits[:, keep], *(column[pos] for column in meta[1:]))
        int8 = np.concatenate(int8_parts) if int8_parts else np.zeros((0, self.dim), dtype=np.int8)
        self._int8_all, self._int8_new, self._int8_gone = (self.rids, int8[keep]), {}, set()
        self._missing = set(np.setdiff1d(meta[0], self.rids).tolist())  # facts without a vector

    def _apply_log(self, conn: Any) -> None:
        """Apply the log rows after `self.seq`: updated columns, dropped and inserted rows."""
        rows = conn.execute(
            "select rid, max(fresh), max(seq) from fact_codes_log where seq > ? group by rid", (self.seq,)
        ).fetchall()
        if not rows:
            return
        self.seq = max(r[2] for r in rows)
        pending = np.array(sorted({r[0] for r in rows} | self._missing), dtype=np.int64)
        fresh = np.isin(pending, [r[0] for r in rows if r[1]] + sorted(self._missing))  # (re-)inserted
        meta = _fact_columns(conn, pending)
        pos = np.minimum(np.searchsorted(self.rids, pending), max(0, self.rids.size - 1))
        present = self.rids[pos] == pending if self.rids.size else np.zeros(pending.size, dtype=bool)
        alive = np.isin(pending, meta[0])
        keep = np.ones(self.rids.size, dtype=bool)
        keep[pos[present & (~alive | fresh)]] = False  # deleted, or inserted again under its rowid
        self._int8_gone.update(pending[present & ~alive].tolist())
        update = present & alive & ~fresh
        at = np.searchsorted(meta[0], pending[update])
        for array, column in zip(self._lifecycle(), meta[1:], strict=True):
            array[pos[update]] = column[at]
        new_rids = [int(r) for r in pending[alive & (~present | fresh)]]
        vectors = FACT_VEC.vectors(conn, new_rids)
        self._missing = {r for r in new_rids if r not in vectors}
        added = np.array([r for r in new_rids if r in vectors], dtype=np.int64)
        self._int8_new.update((r, quantize(vectors[r])[0]) for r in added.tolist())
        at = np.searchsorted(meta[0], added)
        words = self.bits.shape[0] if self.bits.size else (self.dim + 63) // 64
        new_bits = encode(np.stack([vectors[r] for r in added.tolist()])) if added.size else np.zeros((words, 0))
        columns = [
            np.concatenate([self.rids[keep], added]),
            np.concatenate([self.bits[:, keep], new_bits.astype(np.uint64)], axis=1),
            *(np.concatenate([a[keep], c[at]]) for a, c in zip(self._lifecycle(), meta[1:], strict=True)),
        ]
        order = np.argsort(columns[0], kind="stable")
        if not np.array_equal(order, np.arange(order.size)):
            columns = [c[:, order] if c.ndim == 2 else c[order] for c in columns]
        self._set(*columns)

    def _lifecycle(self) -> tuple[np.ndarray, ...]:
        return self.category, self.status, self.verified, self.confidence

    def _set(self, rids, bits, category, status, verified, confidence) -> None:  # type: ignore[no-untyped-def]
        self.rids, self.bits, self.category, self.status = rids, bits, category, status
        self.verified, self.confidence = verified, confidence

    # --- storing ------------------------------------------------------------------------------

    def _save(self, conn: Any, expected: dict[str, Any] | None, vectors: str, full: bool) -> None:
        """Write the segments the log touched (all of them after a build) and the new state.

        Skipped when another process changed the stored copy since it was read (its fold
        covers at least as much), or when the file cannot be written (read-only, busy).
        """
        try:
            with transaction(conn):
                if _state(conn) != expected or (get_meta(conn, VECTORS_KEY) or "") != vectors:
                    return
                if full:
                    conn.execute("delete from fact_codes")
                    segments = np.unique(self.rids >> SEGMENT_SHIFT)
                else:
                    segments = np.array(
                        [
                            r[0]
                            for r in conn.execute(
                                "select distinct rid >> ? from fact_codes_log where seq > ? and seq <= ?",
                                (SEGMENT_SHIFT, expected["seq"] if expected else 0, self.seq),
                            )
                        ],
                        dtype=np.int64,
                    )
                for seg in segments.tolist():
                    self._write_segment(conn, seg)
                self._write_int8(conn)
                conn.execute("delete from fact_codes_log where seq <= ?", (self.seq,))
                conn.executemany(  # still without a vector: stay pending for the next reader
                    "insert into fact_codes_log (rid, fresh) values (?, 1)", [(r,) for r in sorted(self._missing)]
                )
                state = {"vectors": vectors, "seq": self.seq, "dim": self.dim}
                set_meta(conn, STATE_KEY, json.dumps(state))
                self._state = state
        except Exception as exc:  # a cache: failing to store it must never fail a query
            if type(exc).__name__ not in ("OperationalError", "DatabaseError"):
                raise
            log.info("compact vector copy not stored (%s); kept in RAM only", exc)
        finally:
            self._int8_all = None  # the file has them now (or a search reads float32 for them)

    def _write_int8(self, conn: Any) -> None:
        if self._int8_all is not None:
            conn.execute("delete from fact_codes_int8")
            rids, int8 = self._int8_all
            conn.executemany(
                "insert into fact_codes_int8 (rid, vector) values (?, ?)",
                ((rid, row.tobytes()) for rid, row in zip(rids.tolist(), int8, strict=True)),
            )
        conn.executemany("delete from fact_codes_int8 where rid = ?", [(r,) for r in sorted(self._int8_gone)])
        conn.executemany(
            "insert or replace into fact_codes_int8 (rid, vector) values (?, ?)",
            [(r, v.tobytes()) for r, v in sorted(self._int8_new.items())],
        )
        self._int8_new, self._int8_gone = {}, set()

    def _write_segment(self, conn: Any, seg: int) -> None:
        lo, hi = np.searchsorted(self.rids, [seg << SEGMENT_SHIFT, (seg + 1) << SEGMENT_SHIFT])
        if lo == hi:
            conn.execute("delete from fact_codes where seg = ?", (seg,))
            return
        blobs = [np.ascontiguousarray(self.bits[:, lo:hi]).tobytes()] + [
            np.ascontiguousarray(a[lo:hi]).tobytes() for a in (self.rids, *self._lifecycle())
        ]
        conn.execute(
            "insert or replace into fact_codes (seg, n, bits, rids, category, status, verified, confidence)"
            " values (?, ?, ?, ?, ?, ?, ?, ?)",
            (seg, int(hi - lo), *blobs),
        )

    # --- searching ----------------------------------------------------------------------------

    def eligible(self, flt: Filter) -> np.ndarray:
        """Mask of the rows the lifecycle rules let through (status, category, age, confidence)."""
        wanted = np.zeros(len(STATUSES) + 1, dtype=bool)
        wanted[[STATUSES.index(s) for s in flt.visibility.statuses]] = True
        ok = wanted[self.status] & (self.confidence >= flt.min_confidence)
        cut = np.full(len(CATEGORIES), np.inf)
        for category, cutoff in flt.visibility.cutoffs(flt.now).items():
            cut[CATEGORIES.index(category)] = -np.inf if cutoff is None else cutoff
        ok &= self.verified >= cut[self.category]
        if flt.visibility.decay and flt.min_confidence > 0:
            for category in flt.visibility.cutoffs(flt.now):
                rows = np.flatnonzero(ok & (self.category == CATEGORIES.index(category)))
                factor = flt.decay_factor(category, (flt.now - self.verified[rows]) / 86400.0)
                ok[rows] = self.confidence[rows] * factor >= flt.min_confidence
        return ok

    def search_batch(self, queries: np.ndarray, flt: Filter, k: int) -> list[list[tuple[int, float]]]:
        """`search` for each row of `queries`."""
        return [self.search(q, flt, k) for q in np.asarray(queries, dtype=np.float32)]

    def search(self, query: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
        """Top-k (rid, exact cosine) among eligible rows: Hamming shortlist, int8 re-score, exact re-rank
        (vectors read on the connection of the last `refresh`)."""
        conn, query = self.conn, np.asarray(query, dtype=np.float32)
        ok = self.eligible(flt)
        eligible = int(ok.sum())
        if not eligible:
            return []
        distance = np.where(ok, hamming(self.bits, encode(query[None, :])[:, 0]), np.int16(32767))
        short = min(eligible, self.shortlist * k)
        pool = np.argpartition(distance, short - 1)[:short] if short < ok.size else np.flatnonzero(ok)
        score = self._int8_scores(conn, self.rids[pool].tolist(), query)
        order = np.argsort(-score, kind="stable")[: self.rerank * k]
        # exact scores only where int8 could misorder: the k best and any within INT8_MARGIN of the k-th
        kth = score[order[min(k, order.size) - 1]]
        best = pool[order[: max(k, int(np.sum(score[order] >= kth - INT8_MARGIN)))]]
        found = exact_cosines(conn, self.rids[best].tolist(), query)
        found.sort(key=lambda item: (-item[1], item[0]))
        return found[:k]

    def _int8_scores(self, conn: Any, rids: list[int], query: np.ndarray) -> np.ndarray:
        """Cosine of `query` to the int8 copies of `rids` (plain B-tree point reads, ≈ µs each;
        a vec0 point read costs ≈ 0.2–1 ms). Rows not stored yet are scored exactly."""
        found: list[tuple[int, bytes]] = []
        for start in range(0, len(rids), 900):
            part = rids[start : start + 900]
            sql = f"select rid, vector from fact_codes_int8 where rid in ({','.join('?' * len(part))})"
            found += conn.execute(sql, part).fetchall()
        at = {rid: i for i, (rid, _) in enumerate(found)}
        stored = np.frombuffer(b"".join(blob for _, blob in found), dtype=np.int8).reshape(len(found), self.dim)
        qnorm = float(np.linalg.norm(query)) or 1.0
        vectors = stored.astype(np.float32)
        scores = vectors @ query / (np.maximum(np.linalg.norm(vectors, axis=1), 1e-12) * qnorm)
        out = np.empty(len(rids), dtype=np.float32)
        absent = []
        for i, rid in enumerate(rids):
            if rid in at:
                out[i] = scores[at[rid]]
            elif rid in self._int8_new:  # applied in RAM, not folded into the file yet
                vector = self._int8_new[rid].astype(np.float32)
                out[i] = float(vector @ query) / ((float(np.linalg.norm(vector)) or 1.0) * qnorm)
            else:
                absent.append(rid)
        exact = dict(exact_cosines(conn, absent, query)) if absent else {}
        gone = set(absent) - set(exact)
        for i, rid in enumerate(rids):
            if rid in exact:
                out[i] = exact[rid]
            elif rid in gone:
                out[i] = -np.inf  # gone since the copy was read
        return out


def verify(conn: Any) -> list[str]:
    """Where the stored copy (segments + pending log) disagrees with the facts ([] = it agrees)."""
    state = _state(conn)
    if state is None or state["vectors"] != (get_meta(conn, VECTORS_KEY) or ""):
        return []  # none yet, or outdated by a reembed: the next search builds it from scratch
    index = CodeIndex()
    with _reading(conn):
        index.dim, index.seq, index._state = int(state["dim"]), int(state["seq"]), state
        index._load_segments(conn)
        index._apply_log(conn)
        facts = _fact_columns(conn, None)
    fix = "— rebuild it: `sqlite3 deepresearch.db \"delete from meta where key = 'kb.codes'\"` (next query)"
    expected = np.setdiff1d(facts[0], np.array(sorted(index._missing), dtype=np.int64))
    if not np.array_equal(index.rids, expected):
        extra, missing = np.setdiff1d(index.rids, expected).size, np.setdiff1d(expected, index.rids).size
        return [f"compact vector copy: {extra} rows without a fact, {missing} facts without a row {fix}"]
    at = np.searchsorted(facts[0], index.rids)
    differ = sum(int(np.sum(a != c[at])) for a, c in zip(index._lifecycle(), facts[1:], strict=True))
    return [f"compact vector copy: {differ} lifecycle values differ from the facts {fix}"] if differ else []


def fold(conn: Any) -> None:
    """Write every pending log row into the stored copy, if the file has one (after big writes)."""
    if get_meta(conn, STATE_KEY) is not None:
        CodeIndex().refresh(conn, fold_min=1)


def exact_cosines(conn: Any, rids: list[int], query: np.ndarray) -> list[tuple[int, float]]:
    """(rid, cosine to `query`) from the stored float32 vectors of `rids` (vanished rows left out)."""
    vectors = FACT_VEC.vectors(conn, rids)
    qnorm = float(np.linalg.norm(query)) or 1.0
    return [(rid, float(v @ query) / ((float(np.linalg.norm(v)) or 1.0) * qnorm)) for rid, v in vectors.items()]


_DTYPES = {
    "rids": np.int64,
    "bits": np.uint64,
    "category": np.int8,
    "status": np.int8,
    "verified": np.float64,
    "confidence": np.float64,
}


def _concat(name: str, parts: list[np.ndarray], words: int) -> np.ndarray:
    if name == "bits":
        return np.concatenate(parts, axis=1) if parts else np.zeros((words, 0), dtype=np.uint64)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=_DTYPES[name])


def _state(conn: Any) -> dict[str, Any] | None:
    raw = get_meta(conn, STATE_KEY)
    return None if raw is None else dict(json.loads(raw))


@contextlib.contextmanager
def _reading(conn: Any) -> Iterator[None]:
    """One read transaction (segments, log and facts from the same snapshot) unless already in one."""
    own = not conn.in_transaction
    if own:
        conn.execute("begin")
    try:
        yield
    finally:
        if own:
            conn.execute("commit")


def _fact_columns(conn: Any, rids: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """(rid, category, status, verified_at, confidence) arrays in rid order, for `rids` or every fact."""
    rows = lifecycle_rows(conn, None if rids is None else rids.tolist())
    categories = {c: i for i, c in enumerate(CATEGORIES)}
    statuses = {s: i for i, s in enumerate(STATUSES)}
    n = len(rows)
    return (
        np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
        np.fromiter((categories.get(r[1], 0) for r in rows), dtype=np.int8, count=n),
        np.fromiter((statuses.get(r[2], len(STATUSES)) for r in rows), dtype=np.int8, count=n),
        np.fromiter((r[3] for r in rows), dtype=np.float64, count=n),
        np.fromiter((r[4] for r in rows), dtype=np.float64, count=n),
    )


def vector_chunks(conn: Any, dim: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rowids, vectors) of fact_vec, one vec0 chunk at a time (the float vectors are never all in RAM).

    The layout is sqlite-vec's internal one: the row count is checked, and the plain SQL scan
    through the virtual table is used if anything differs.
    """
    try:
        chunks = conn.execute("select chunk_id, size, validity, rowids from fact_vec_chunks").fetchall()
        valid = [
            np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
            for _, size, validity, _ in chunks
        ]
        usable = sum(int(v.sum()) for v in valid) == conn.execute("select count(*) from fact_vec_rowids").fetchone()[0]
    except Exception as exc:  # another sqlite-vec layout: read through the virtual table
        log.warning("cannot read sqlite-vec chunks (%s); reading vectors row by row", exc)
        usable = False
    if usable:
        for (chunk_id, size, _, rowids), ok in zip(chunks, valid, strict=True):
            blob = conn.execute("select vectors from fact_vec_vector_chunks00 where rowid = ?", (chunk_id,))
            vectors = np.frombuffer(blob.fetchone()[0], dtype=np.float32).reshape(size, dim)
            yield np.frombuffer(rowids, dtype=np.int64)[:size][ok], vectors[ok]
        return
    log.warning("unexpected sqlite-vec chunk layout; reading vectors row by row")
    rows = conn.execute("select rowid, embedding from fact_vec")
    while batch := rows.fetchmany(4096):
        yield (
            np.array([r[0] for r in batch], dtype=np.int64),
            np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32).reshape(len(batch), dim),
        )
