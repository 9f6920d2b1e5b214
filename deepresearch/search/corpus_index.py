"""The corpus's chunk vectors: the model claim, the filler that embeds chunks stored without a
vector (in the background of an ingest, or later), writes that stay correct without
sqlite-vec, the repair of what such writes left stale, and `check_corpus`.

Text comes first: an ingest writes chunks and their FTS5 rows at once (keyword search answers
right away) and `VectorFiller` embeds the chunks that have no vector yet, in a thread, while
later files are still being read. Until it is done a hybrid search ranks those chunks by BM25
alone; `pending()` says how many there are.

A write without sqlite-vec (`DEEPRESEARCH_DISABLE_VEC=1`, or a binding that cannot load it)
cannot touch `corpus_vec`: a deleted chunk would leave its vector behind for a new chunk to
inherit under the same id. Such writes record the chunk ids in a stale table instead; the
next process with sqlite-vec drops those vectors and embeds the chunks again before it
searches or ingests.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.db import transaction
from deepresearch.errors import SearchError
from deepresearch.indexing import LazyEmbedder, ModelClaim, VecTable, fts_integrity_problem, vec_loaded

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.models.embed import Embedder

log = logging.getLogger(__name__)

CORPUS_VEC = VecTable("corpus_vec")
CLAIM = ModelClaim(
    "corpus.embedding_model",
    "corpus.embedding_dim",
    "the corpus",
    "rebuild the corpus: `deepresearch corpus remove --all` then `corpus add` again",
)
# Chunk ids whose vector is wrong or gone stale because they were written or deleted without
# sqlite-vec; created on first use, emptied when the vectors are fixed (see ChunkVectors.forget).
STALE_TABLE = "corpus_vec_stale"
# Chunks embedded per call: enough for sorting by length to leave little padding (SciFact rows:
# pools of 64 embedded ≈ 0.8× as fast as today's 256-row calls; HTML pages, which were embedded
# a few chunks per call, 1.25× with pools of 256 — docs/BENCHMARKS.md session 11), few enough
# that memory holds one pool whatever the size of the ingest. An interrupt waits for the pool
# being embedded (≈ 10 s on 2 quiet cores).
EMBED_POOL = 256
# A vector search embeds up to this many chunks that miss a vector before it answers (a degraded
# write's leftovers); more are left to `corpus embed` / `corpus add` and rank by BM25 meanwhile.
SEARCH_FILL_LIMIT = 64


class ChunkVectors:
    """The vectors of the corpus chunks (`corpus_vec`) on one connection."""

    def __init__(self, conn: Any, embedder: LazyEmbedder):
        self.conn = conn
        self.embedder = embedder

    @property
    def enabled(self) -> bool:
        """True when chunk vectors are written and searched (sqlite-vec loaded, embedder given)."""
        return vec_loaded(self.conn) and self.embedder.given

    def degraded(self) -> bool:
        """A vector table exists but this connection cannot write it (sqlite-vec not loaded)."""
        return not vec_loaded(self.conn) and CORPUS_VEC.exists(self.conn)

    def _ensure_table(self, embedder: Embedder) -> None:
        CLAIM.check(self.conn, embedder)
        if CORPUS_VEC.exists(self.conn):
            return
        with transaction(self.conn):
            CORPUS_VEC.create(self.conn, embedder.dimension)
            CLAIM.record(self.conn, embedder)

    def forget(self, chunk_ids: list[int]) -> None:
        """Drop the vectors of deleted chunks, or, without sqlite-vec, mark them stale (caller holds
        the transaction): the next run with sqlite-vec drops them and embeds the chunks again."""
        if self.degraded():
            self.conn.execute(f"create table if not exists {STALE_TABLE} (chunk_id integer primary key)")
            self.conn.executemany(
                f"insert or ignore into {STALE_TABLE} (chunk_id) values (?)", [(i,) for i in chunk_ids]
            )
        elif vec_loaded(self.conn) and CORPUS_VEC.exists(self.conn):
            CORPUS_VEC.delete(self.conn, chunk_ids)

    def drop(self) -> None:
        """Drop the table and the model claim once the corpus is empty (a vec0 table cannot be
        dropped without sqlite-vec: then it stays, and its stale marks with it)."""
        if not self.degraded():
            CLAIM.forget(self.conn)
            self.conn.execute(f"drop table if exists {CORPUS_VEC.name}")
            self.conn.execute(f"drop table if exists {STALE_TABLE}")

    def _drop_stale(self, stale: list[int]) -> int:
        """Delete the vectors of stale chunk ids and of chunks that no longer exist; returns how many."""
        with transaction(self.conn):
            CORPUS_VEC.delete(self.conn, stale)
            orphans = self.conn.execute(
                "select rowid from corpus_vec where rowid not in (select id from corpus_chunks)"
            ).fetchall()
            CORPUS_VEC.delete(self.conn, [r[0] for r in orphans])
            if stale:
                self.conn.execute(f"delete from {STALE_TABLE}")
        return len(stale) + len(orphans)

    def repair(self) -> None:
        """Drop the vectors that degraded writes made stale (see `forget`) and vectors without a chunk;
        the chunks they belonged to then count as pending and are embedded again."""
        if not vec_loaded(self.conn) or not CORPUS_VEC.exists(self.conn):
            return
        chunks = self.conn.execute("select count(*) from corpus_chunks").fetchone()[0]
        # sqlite-vec's rowid shadow table: a count(*) on the vec0 table itself reads every vector chunk
        have = self.conn.execute("select count(*) from corpus_vec_rowids").fetchone()[0]
        stale = stale_chunk_ids(self.conn)
        if stale or have > chunks:
            self._drop_stale(stale)

    def pending(self) -> int | None:
        """Chunks that have no vector yet (None: cannot tell, sqlite-vec is not loaded)."""
        if not vec_loaded(self.conn):
            return None
        chunks = int(self.conn.execute("select count(*) from corpus_chunks").fetchone()[0])
        if not CORPUS_VEC.exists(self.conn):
            return chunks
        have = int(self.conn.execute("select count(*) from corpus_vec_rowids").fetchone()[0])
        return max(0, chunks - have + len(stale_chunk_ids(self.conn)))

    def prepare(self) -> Embedder:
        """The embedder, after claiming the model for the corpus (fails closed on another model)."""
        embedder = self.embedder()
        self._ensure_table(embedder)
        return embedder

    def missing(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(chunk id, text to embed) of up to `limit` chunks with an id above `after` and no vector."""
        rows = self.conn.execute(
            """select c.id, d.title, c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id
               where c.id > ? and not exists (select 1 from corpus_vec v where v.rowid = c.id)
               order by c.id limit ?""",
            (after, limit),
        ).fetchall()
        return [(int(i), f"{t}\n{x}" if t else x) for i, t, x in rows]

    def store(self, rows: list[tuple[int, str]], vectors: np.ndarray) -> int:
        """Write the vectors of `rows` whose chunk still holds the embedded text and has no vector yet
        (another writer may have replaced or embedded it meanwhile); returns how many were written."""
        ids = [r[0] for r in rows]
        marks = ",".join("?" * len(ids))
        with transaction(self.conn):
            current = {
                int(i): f"{t}\n{x}" if t else x
                for i, t, x in self.conn.execute(
                    f"""select c.id, d.title, c.text from corpus_chunks c join corpus_documents d
                        on d.id = c.doc_id where c.id in ({marks})""",
                    ids,
                )
            }
            keep = [
                (chunk_id, vector)
                for (chunk_id, text), vector in zip(rows, vectors, strict=True)
                if current.get(chunk_id) == text
                and self.conn.execute("select 1 from corpus_vec where rowid = ?", (chunk_id,)).fetchone() is None
            ]
            CORPUS_VEC.insert(self.conn, keep)
        return len(keep)

    def embed_missing(self, limit: int | None = None) -> int:
        """Embed the chunks that have no vector, here and now, in bounded pools (none when vectors
        are off, or when more than `limit` are missing); returns how many were embedded."""
        if not self.enabled:
            return 0
        self.repair()
        pending = self.pending() or 0
        if not pending or (limit is not None and pending > limit):
            return 0
        return VectorFiller(self).run()

    def nearest(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the `depth` nearest chunk vectors; a few chunks missing a
        vector are embedded first, many are left to `corpus embed` (they still rank by BM25)."""
        if not self.enabled:
            raise SearchError(
                "vector search is unavailable: sqlite-vec is not loaded or no embedding model was given"
                " — run `deepresearch doctor`, or search with --mode bm25"
            )
        embedder = CLAIM.check(self.conn, self.embedder())
        self.embed_missing(limit=SEARCH_FILL_LIMIT)
        if not CORPUS_VEC.exists(self.conn):
            return []
        return [(r[0], r[1]) for r in CORPUS_VEC.knn(self.conn, embedder.embed(query), depth)]


@dataclass
class VectorProgress:
    """Progress of the embedding of pending chunks: `done` of about `total` in this run."""

    done: int
    total: int
    seconds: float


class VectorFiller:
    """Embeds every chunk that has no vector, `pool` chunks at a time in id order, and stores the
    vectors in short transactions.

    `start()` runs it in a thread with its own connection while the text of later files is still
    being written (`nudge()` after each commit, `finish()` once the text is in); `run()` runs it
    inline. The backlog lives in the database (chunks without a vector), not in memory, so memory
    holds one pool whatever the size of the ingest, and an interrupted run resumes where it stopped.
    """

    def __init__(
        self,
        vectors: ChunkVectors,
        *,
        pool: int = EMBED_POOL,
        progress: Callable[[VectorProgress], None] | None = None,
        written: Callable[[], int] = lambda: 0,
    ):
        self.vectors = vectors
        self.pool = pool
        self.progress = progress
        self.written = written  # chunks the text writer has added so far (for the progress total)
        self.done = 0
        self._text_done = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ended = threading.Event()  # set by the thread as it ends (see `_wait`)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._started = time.perf_counter()
        self._backlog = 0

    def run(self) -> int:
        """Embed every pending chunk on the calling thread; returns how many were stored."""
        self._text_done.set()
        self._fill(self.vectors)
        return self.done

    def start(self) -> None:
        """Start filling in a thread (inline at `finish()` instead for an in-memory database)."""
        path = database_file(self.vectors.conn)
        if not path:
            return
        self.vectors.prepare()  # claim the model before any text is written (fails closed here)
        self._thread = threading.Thread(target=self._thread_main, args=(path,), name="corpus-embed", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        """New chunks were committed: wake the thread if it waits for work."""
        self._wake.set()

    def finish(self) -> int:
        """The text is in: embed what is left, wait for it, re-raise what failed in the thread."""
        if self._thread is None:
            return self.run()
        self._text_done.set()
        self._wake.set()
        self._wait()
        if self._error is not None:
            raise self._error
        return self.done

    def stop(self) -> None:
        """Stop after the pool being embedded (interrupted ingest); what is stored stays."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._wait()

    def _wait(self) -> None:
        # An Event, not Thread.join: a KeyboardInterrupt inside join(timeout) can leave CPython 3.11
        # taking a running thread for stopped (then onnxruntime aborts at exit under its feet).
        while not self._ended.wait(0.5):
            pass

    def _thread_main(self, path: str) -> None:
        from deepresearch.db import connect

        try:
            conn = connect(path, migrate=False)
            try:
                self._fill(ChunkVectors(conn, self.vectors.embedder))
            finally:
                conn.close()
        except BaseException as exc:  # handed to finish() on the main thread
            self._error = exc
        finally:
            self._ended.set()

    def _fill(self, vectors: ChunkVectors) -> None:
        embedder = vectors.prepare()
        self._backlog = vectors.pending() or 0
        self._report()  # the total is known before the first pool is embedded
        after, stored = 0, False
        while not self._stop.is_set():
            rows = vectors.missing(after, self.pool)
            if rows:
                count = vectors.store(rows, embedder.embed_documents([text for _, text in rows]))
                self.done += count
                stored = stored or count > 0
                after = rows[-1][0]
                self._report()
            elif not self._text_done.is_set():
                self._wake.wait(0.5)
                self._wake.clear()
            elif after and stored:  # ids below the cursor can be reused by later writes: one more pass
                after, stored = 0, False
            else:
                return

    def _report(self) -> None:
        if self.progress:
            total = max(self.done, self._backlog + self.written())
            self.progress(VectorProgress(self.done, total, time.perf_counter() - self._started))


def database_file(conn: Any) -> str:
    """The file of the connection's main database ('' for an in-memory one)."""
    for row in conn.execute("pragma database_list"):
        if row[1] == "main":
            return str(row[2] or "")
    return ""


def stale_chunk_ids(conn: Any) -> list[int]:
    """Chunk ids whose vector degraded writes made stale (empty when there are none)."""
    if not conn.execute("select 1 from sqlite_master where name = ?", (STALE_TABLE,)).fetchone():
        return []
    return [int(r[0]) for r in conn.execute(f"select chunk_id from {STALE_TABLE} order by chunk_id")]


def check_corpus(conn: Any) -> list[str]:
    """Problems of the corpus tables: FTS rows vs chunks, documents vs chunks, and (with sqlite-vec)
    vectors vs chunks — a chunk without a vector, a vector without a chunk, or a stale vector."""
    problems: list[str] = []
    if (mismatch := fts_integrity_problem(conn, "corpus_fts")) is not None:
        problems.append(
            f"corpus FTS index does not match the chunks ({mismatch}) — run `deepresearch corpus remove` and"
            " `corpus add` for the affected files"
        )
    orphans = conn.execute(
        "select count(*) from corpus_chunks c where not exists (select 1 from corpus_documents d where d.id = c.doc_id)"
    ).fetchone()[0]
    if orphans:
        problems.append(f"{orphans} corpus chunks without a document — run `deepresearch corpus remove --all`")
    if not vec_loaded(conn) or not CORPUS_VEC.exists(conn):
        return problems
    fix = "`deepresearch corpus embed` (or the next `corpus add`) embeds them"
    missing = conn.execute(
        "select count(*) from corpus_chunks c where not exists (select 1 from corpus_vec v where v.rowid = c.id)"
    ).fetchone()[0]
    extra = conn.execute(
        "select count(*) from corpus_vec v where v.rowid not in (select id from corpus_chunks)"
    ).fetchone()[0]
    stale = stale_chunk_ids(conn)
    if missing:
        problems.append(f"{missing} corpus chunks without a vector — {fix}")
    if extra:
        problems.append(f"{extra} corpus vectors without a chunk — {fix}")
    if stale:
        problems.append(f"{len(stale)} corpus vectors that do not match their chunk text (stale) — {fix}")
    return problems
