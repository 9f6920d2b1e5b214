"""The local corpus: documents chunked into the workspace SQLite file with an FTS5 index and
chunk embeddings (sqlite-vec); hybrid retrieval fuses BM25 and vector ranks (RRF).

`Corpus` is the public face: writes come from `search/ingest.py`, chunk vectors and their
repair from `search/corpus_index.py`; ranking and results are here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from deepresearch.errors import SearchError
from deepresearch.indexing import EmbedderSource, LazyEmbedder, match_any
from deepresearch.search.base import SearchResult
from deepresearch.search.corpus_index import CLAIM, ChunkVectors
from deepresearch.search.ingest import CorpusWriter
from deepresearch.text import STOPWORDS, content_words, split_sentences, truncate, words

if TYPE_CHECKING:
    from deepresearch.config import CorpusConfig
    from deepresearch.models.embed import Embedder
    from deepresearch.workspace import Workspace

log = logging.getLogger(__name__)

MODES = ("hybrid", "bm25", "vector")
SNIPPET_CHARS = 300


@dataclass
class SourceInfo:
    """One ingested file as listed by `corpus list`; `complete` is False while (or when) its ingest
    did not finish — the next `corpus add` of the file finishes it."""

    path: str
    kind: str
    documents: int
    chunks: int
    updated_at: float
    complete: bool = True


@dataclass
class CorpusStatus:
    """What `corpus status` shows: sizes, unfinished ingests and chunks waiting for a vector."""

    sources: int
    incomplete_sources: int
    documents: int
    chunks: int
    vectors_pending: int | None  # None: cannot tell (sqlite-vec not loaded)
    embedding_model: str | None


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's content words, each quoted (no syntax injection)."""
    seen: dict[str, None] = {}
    for token in words(query):
        # "covid-19" or "1.5" would become FTS5 phrases; separate OR terms rank better (SciFact).
        for part in re.split(r"[^\w]+", token):
            if part and part not in STOPWORDS:
                seen.setdefault(part, None)
    return match_any(seen)


def _snippet(text: str, query: str) -> str:
    """The sentence sharing most words with the query (plus what follows), cut to ~300 chars."""
    wanted = set(content_words(query))
    sentences = split_sentences(text) or [text]
    best = max(range(len(sentences)), key=lambda i: len(wanted & set(words(sentences[i]))))
    return truncate(" ".join(sentences[best:]), SNIPPET_CHARS)


class Corpus(CorpusWriter):
    """Chunks, FTS5 and vectors of local documents in one SQLite connection: the writes
    (`add_paths`, `remove`) come from CorpusWriter, ranking and results are here."""

    def __init__(self, conn: Any, embedder: EmbedderSource | None, config: CorpusConfig):
        self._embedder = LazyEmbedder(embedder, "the corpus")
        super().__init__(conn, config, ChunkVectors(conn, self._embedder))
        self._warned_pending = 0

    @classmethod
    def from_workspace(cls, ws: Workspace) -> Corpus:
        """The workspace corpus; the embedding model loads only when vectors are needed."""
        from deepresearch.models.embed import get_embedder

        return cls(ws.db, lambda: get_embedder(ws.config.embedding), ws.config.search.corpus)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder (resolved lazily from a zero-arg callable), or None for a BM25-only corpus."""
        return self._embedder() if self._embedder.given else None

    @property
    def vectors_enabled(self) -> bool:
        """True when chunk vectors are written and searched (sqlite-vec loaded, embedder given)."""
        return self.vectors.enabled

    def sources(self) -> list[SourceInfo]:
        """Every ingested file with its document and chunk counts."""
        rows = self.conn.execute(
            """select s.path, s.kind, s.updated_at,
                      (select count(*) from corpus_documents d where d.source_id = s.id),
                      (select count(*) from corpus_chunks c join corpus_documents d on c.doc_id = d.id
                        where d.source_id = s.id),
                      s.file_hash is not null
               from corpus_sources s order by s.path"""
        ).fetchall()
        return [
            SourceInfo(path=r[0], kind=r[1], updated_at=r[2], documents=r[3], chunks=r[4], complete=bool(r[5]))
            for r in rows
        ]

    def status(self) -> CorpusStatus:
        """Sizes of the corpus, ingests left incomplete, and chunks that wait for their vector."""
        q = self.conn.execute
        return CorpusStatus(
            sources=int(q("select count(*) from corpus_sources").fetchone()[0]),
            incomplete_sources=int(q("select count(*) from corpus_sources where file_hash is null").fetchone()[0]),
            documents=int(q("select count(*) from corpus_documents").fetchone()[0]),
            chunks=self.count_chunks(),
            vectors_pending=self.vectors.pending(),
            embedding_model=CLAIM.stored(self.conn)[0],
        )

    def vectors_pending(self) -> int:
        """Chunks without a vector yet (0 when that cannot be told): they rank by BM25 alone."""
        return self.vectors.pending() or 0

    def count_chunks(self) -> int:
        """Number of chunks in the corpus."""
        return int(self.conn.execute("select count(*) from corpus_chunks").fetchone()[0])

    # --- retrieval ----------------------------------------------------------------------------

    def bm25_chunks(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for the best `depth` keyword matches."""
        expression = fts_query(query)
        if expression is None:
            return []
        rows = self.conn.execute(
            "select rowid, bm25(corpus_fts) as s from corpus_fts where corpus_fts match ? order by s limit ?",
            (expression, depth),
        ).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def vector_chunks(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the `depth` nearest chunk vectors (stale ones fixed first)."""
        return self.vectors.nearest(query, depth)

    def _doc_ranking(self, hits: list[tuple[int, float]]) -> list[tuple[int, int, float]]:
        """Chunk hits → (doc id, best chunk id, score) in rank order, one entry per document."""
        if not hits:
            return []
        marks = ",".join("?" * len(hits))
        doc_of = dict(
            self.conn.execute(
                f"select id, doc_id from corpus_chunks where id in ({marks})", [c for c, _ in hits]
            ).fetchall()
        )
        ranking, seen = [], set()
        for chunk_id, score in hits:
            doc_id = doc_of.get(chunk_id)
            if doc_id is not None and doc_id not in seen:
                seen.add(doc_id)
                ranking.append((doc_id, chunk_id, score))
        return ranking

    def rank(self, query: str, count: int, mode: str = "hybrid") -> list[tuple[int, float]]:
        """(chunk id, score) of the best chunk of each of the top `count` documents."""
        if mode not in MODES:
            raise SearchError(f"unknown corpus search mode {mode!r} — use one of {', '.join(MODES)}")
        depth = max(count * 3, 100)
        if mode == "hybrid" and not self.vectors_enabled:
            log.warning("vector search unavailable; hybrid search falls back to BM25")
            mode = "bm25"
        if mode == "bm25":
            return [(c, s) for _, c, s in self._doc_ranking(self.bm25_chunks(query, depth))[:count]]
        vector = self._doc_ranking(self.vector_chunks(query, depth))
        if (pending := self.vectors_pending()) and pending != self._warned_pending:
            self._warned_pending = pending  # once per backlog size, not on every query of a research run
            log.warning(
                "%d corpus chunks have no vector yet: %s — `deepresearch corpus embed` embeds them",
                pending,
                "hybrid search ranks them by BM25 alone" if mode == "hybrid" else "vector search cannot find them",
            )
        if mode == "vector":
            return [(c, s) for _, c, s in vector[:count]]
        lists = (
            (self.config.bm25_weight, self._doc_ranking(self.bm25_chunks(query, depth))),
            (self.config.vector_weight, vector),
        )
        # A document whose chunks have no vector yet is in the BM25 list only: it still ranks.
        return rrf_fuse(lists, self.config.rrf_k)[:count]

    def search(self, query: str, count: int, mode: str = "hybrid") -> list[SearchResult]:
        """The top `count` documents for `query` (best chunk of each), newest index state."""
        ranked = self.rank(query, count, mode)
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        rows = {
            r[0]: r[1:]
            for r in self.conn.execute(
                f"""select c.id, c.text, d.title, d.url from corpus_chunks c
                    join corpus_documents d on d.id = c.doc_id where c.id in ({marks})""",
                [c for c, _ in ranked],
            )
        }
        results = []
        for chunk_id, score in ranked:
            text, title, url = rows[chunk_id]
            results.append(
                SearchResult(
                    title=title,
                    url=url,
                    snippet=_snippet(text, query),
                    text=text,
                    score=round(float(score), 6),
                    backend="corpus",
                )
            )
        return results


def rrf_fuse(lists: Iterable[tuple[float, list[tuple[int, int, float]]]], k: float) -> list[tuple[int, float]]:
    """Weighted reciprocal-rank fusion of per-document rankings → (best chunk id, fused score)."""
    scores: dict[int, float] = {}
    best: dict[int, tuple[float, int]] = {}
    for weight, ranking in lists:
        for rank, (doc_id, chunk_id, _) in enumerate(ranking, start=1):
            part = weight / (k + rank)
            scores[doc_id] = scores.get(doc_id, 0.0) + part
            if doc_id not in best or part > best[doc_id][0]:
                best[doc_id] = (part, chunk_id)
    order = sorted(scores, key=lambda d: -scores[d])
    return [(best[d][1], scores[d]) for d in order]
