"""The corpus's chunk vectors: the model claim, writes that stay correct without sqlite-vec,
the repair that re-embeds what such writes left stale or missing, and `check_corpus`.

A write without sqlite-vec (`DEEPRESEARCH_DISABLE_VEC=1`, or a binding that cannot load it)
cannot touch `corpus_vec`: a deleted chunk would leave its vector behind for a new chunk to
inherit under the same id. Such writes record the chunk ids in a stale table instead; the
next process with sqlite-vec drops those vectors and embeds the chunks again before it
searches or ingests.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

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
EMBED_BATCH = 256


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

    def embed(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts` (claiming the model on first use), or None when vectors are off."""
        if not texts or not self.enabled:
            return None
        embedder = self.embedder()
        self._ensure_table(embedder)
        return embedder.embed_batch(texts)

    def write(self, chunk_ids: list[int], vectors: np.ndarray | None) -> None:
        """Store the vectors of new chunks (caller holds the transaction; None: vectors are off)."""
        if vectors is not None:
            CORPUS_VEC.insert(self.conn, zip(chunk_ids, vectors, strict=True))

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

    def embed_missing(self, batch: int = EMBED_BATCH) -> int:
        """Embed chunks stored without a vector (ingested while sqlite-vec was unavailable), after
        dropping the vectors that degraded writes made stale (see `forget`)."""
        if not self.enabled:
            return 0
        chunks = self.conn.execute("select count(*) from corpus_chunks").fetchone()[0]
        have = self.conn.execute("select count(*) from corpus_vec").fetchone()[0] if CORPUS_VEC.exists(self.conn) else 0
        stale = stale_chunk_ids(self.conn)
        if stale or have > chunks:
            self._drop_stale(stale)
            have = self.conn.execute("select count(*) from corpus_vec").fetchone()[0]
        if not chunks or have >= chunks:
            return 0
        embedder = self.embedder()
        self._ensure_table(embedder)
        missing = self.conn.execute(
            """select c.id, d.title, c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id
               where not exists (select 1 from corpus_vec v where v.rowid = c.id) order by c.id"""
        ).fetchall()
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            vectors = embedder.embed_batch([f"{t}\n{x}" if t else x for _, t, x in part])
            with transaction(self.conn):
                self.write([r[0] for r in part], vectors)
        log.info("embedded %d chunks that had no vector", len(missing))
        return len(missing)

    def nearest(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the `depth` nearest chunk vectors."""
        if not self.enabled:
            raise SearchError(
                "vector search is unavailable: sqlite-vec is not loaded or no embedding model was given"
                " — run `deepresearch doctor`, or search with --mode bm25"
            )
        embedder = CLAIM.check(self.conn, self.embedder())
        self.embed_missing()  # vectors a degraded write left stale or missing are fixed first
        if not CORPUS_VEC.exists(self.conn):
            return []
        return [(r[0], r[1]) for r in CORPUS_VEC.knn(self.conn, embedder.embed(query), depth)]


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
    fix = "the next `deepresearch corpus add` (or a vector search) re-embeds them"
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
