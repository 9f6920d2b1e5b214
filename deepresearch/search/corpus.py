"""The local corpus: documents chunked into the workspace SQLite file with an FTS5 index and
chunk embeddings (sqlite-vec); hybrid retrieval fuses BM25 and vector ranks (RRF).

Ingestion is idempotent: an unchanged file is skipped, a changed file has only its changed
documents replaced, identical content already stored elsewhere is not added twice.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from deepresearch.db import sqlite_errors, transaction
from deepresearch.errors import DeepResearchError, InputError, NotFound, SearchError
from deepresearch.facts import text_hash
from deepresearch.indexing import LazyEmbedder, ModelClaim, VecTable, fts_integrity_problem, match_any, vec_loaded
from deepresearch.search.base import SearchResult
from deepresearch.search.readers import SUPPORTED, RawDocument, TableSpec, is_table, iter_table, read_file
from deepresearch.text import STOPWORDS, content_words, has_cjk, split_sentences, truncate, words

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.config import CorpusConfig
    from deepresearch.models.embed import Embedder
    from deepresearch.workspace import Workspace

log = logging.getLogger(__name__)

MODES = ("hybrid", "bm25", "vector")
CORPUS_VEC = VecTable("corpus_vec")
CLAIM = ModelClaim(
    "corpus.embedding_model",
    "corpus.embedding_dim",
    "the corpus",
    "rebuild the corpus: `deepresearch corpus remove --all` then `corpus add` again",
)
# Chunk ids whose vector is wrong or gone stale because they were written or deleted without
# sqlite-vec; created on first use, emptied when the vectors are fixed (see Corpus._mark_stale).
STALE_TABLE = "corpus_vec_stale"
ROW_BATCH = 256
SNIPPET_CHARS = 300


@dataclass
class IngestReport:
    """What one `add_paths` call did; `errors` holds one user-facing message per failed file."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    removed_documents: int = 0
    duplicates: int = 0
    seconds: float = 0.0


@dataclass
class IngestProgress:
    """Progress of an ingest, passed to the optional callback after each batch and file."""

    path: str
    files_done: int
    files_total: int
    documents: int
    chunks: int
    seconds: float


@dataclass
class SourceInfo:
    """One ingested file as listed by `corpus list`."""

    path: str
    kind: str
    documents: int
    chunks: int
    updated_at: float


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Split text into windows of about `size` words sharing `overlap` words (CJK: 2 chars = 1 word)."""
    spans = [m.span() for m in re.finditer(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{1,2}|\S+", text)]
    if not spans:
        return []
    step = max(1, size - min(overlap, size - 1))
    chunks = []
    start = 0
    while True:
        end = min(len(spans), start + size)
        chunks.append(text[spans[start][0] : spans[end - 1][1]].strip())
        if end >= len(spans):
            break
        start += step
    return chunks


def fts_text(text: str) -> str:
    """Text as indexed by FTS5: CJK runs become overlapping bigrams so 芯片 matches inside 芯片销量."""
    return " ".join(words(text)) if has_cjk(text) else text


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's content words, each quoted (no syntax injection)."""
    seen: dict[str, None] = {}
    for token in words(query):
        # "covid-19" or "1.5" would become FTS5 phrases; separate OR terms rank better (SciFact).
        for part in re.split(r"[^\w]+", token):
            if part and part not in STOPWORDS:
                seen.setdefault(part, None)
    return match_any(seen)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _snippet(text: str, query: str) -> str:
    """The sentence sharing most words with the query (plus what follows), cut to ~300 chars."""
    wanted = set(content_words(query))
    sentences = split_sentences(text) or [text]
    best = max(range(len(sentences)), key=lambda i: len(wanted & set(words(sentences[i]))))
    return truncate(" ".join(sentences[best:]), SNIPPET_CHARS)


class Corpus:
    """Chunks, FTS5 and vectors of local documents in one SQLite connection."""

    def __init__(self, conn: Any, embedder: Embedder | Callable[[], Embedder] | None, config: CorpusConfig):
        self.conn = conn
        self.config = config
        self._embedder = LazyEmbedder(embedder, "the corpus")

    @classmethod
    def from_workspace(cls, ws: Workspace) -> Corpus:
        """The workspace corpus; the embedding model loads only when vectors are needed."""
        from deepresearch.models.embed import get_embedder

        return cls(ws.db, lambda: get_embedder(ws.config.embedding), ws.config.search.corpus)

    # --- embeddings ---------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder (resolved lazily from a zero-arg callable), or None for a BM25-only corpus."""
        return self._embedder() if self._embedder.given else None

    @property
    def vectors_enabled(self) -> bool:
        """True when chunk vectors are written and searched (sqlite-vec loaded, embedder given)."""
        return vec_loaded(self.conn) and self._embedder.given

    def _degraded(self) -> bool:
        """A vector table exists but this connection cannot write it (sqlite-vec not loaded)."""
        return not vec_loaded(self.conn) and CORPUS_VEC.exists(self.conn)

    def _mark_stale(self, chunk_ids: Iterable[int]) -> None:
        """Record chunk ids whose vector, if any, is wrong (written or deleted while degraded):
        the next run with sqlite-vec drops those vectors and embeds the chunks again."""
        self.conn.execute(f"create table if not exists {STALE_TABLE} (chunk_id integer primary key)")
        self.conn.executemany(f"insert or ignore into {STALE_TABLE} (chunk_id) values (?)", [(i,) for i in chunk_ids])

    def _drop_stale_vectors(self, stale: list[int]) -> int:
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

    def _ensure_vec_table(self, embedder: Embedder) -> None:
        CLAIM.check(self.conn, embedder)
        if CORPUS_VEC.exists(self.conn):
            return
        with transaction(self.conn):
            CORPUS_VEC.create(self.conn, embedder.dimension)
            CLAIM.record(self.conn, embedder)

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        if not texts or not self.vectors_enabled:
            return None
        embedder = self._embedder()
        self._ensure_vec_table(embedder)
        return embedder.embed_batch(texts)

    def embed_missing(self, batch: int = ROW_BATCH) -> int:
        """Embed chunks stored without a vector (ingested while sqlite-vec was unavailable), after
        dropping the vectors that degraded writes made stale (see `_mark_stale`)."""
        if not self.vectors_enabled:
            return 0
        have = self.conn.execute("select count(*) from corpus_vec").fetchone()[0] if CORPUS_VEC.exists(self.conn) else 0
        stale = stale_chunk_ids(self.conn)
        if stale or have > self.count_chunks():
            self._drop_stale_vectors(stale)
            have = self.conn.execute("select count(*) from corpus_vec").fetchone()[0]
        if not self.count_chunks():
            return 0
        if have >= self.count_chunks():
            return 0
        embedder = self._embedder()
        self._ensure_vec_table(embedder)
        missing = self.conn.execute(
            """select c.id, d.title, c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id
               where not exists (select 1 from corpus_vec v where v.rowid = c.id) order by c.id"""
        ).fetchall()
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            vectors = embedder.embed_batch([f"{t}\n{x}" if t else x for _, t, x in part])
            with transaction(self.conn):
                CORPUS_VEC.insert(self.conn, zip([r[0] for r in part], vectors, strict=True))
        log.info("embedded %d chunks that had no vector", len(missing))
        return len(missing)

    # --- ingestion ----------------------------------------------------------------------------

    def add_paths(
        self,
        paths: Iterable[Path | str],
        *,
        table: TableSpec | None = None,
        glob: str | None = None,
        progress: Callable[[IngestProgress], None] | None = None,
    ) -> IngestReport:
        """Ingest files and folders (folders: every supported file, or those matching `glob`)."""
        report = IngestReport()
        started = time.perf_counter()
        files = self._expand(paths, glob, report)
        if files:
            with sqlite_errors("the workspace database"):
                self.embed_missing()
        for index, path in enumerate(files):
            try:
                with sqlite_errors("the workspace database"):
                    self._add_one(path, table or TableSpec(), report, progress, index, len(files), started)
            except InputError as exc:
                report.errors.append(str(exc))
            except DeepResearchError:
                raise
            except Exception as exc:  # one bad file must not stop the batch
                log.debug("ingest of %s failed", path, exc_info=True)
                report.errors.append(f"{path}: cannot ingest ({type(exc).__name__}: {exc})")
            if progress:
                progress(
                    IngestProgress(
                        str(path),
                        index + 1,
                        len(files),
                        report.documents,
                        report.chunks,
                        time.perf_counter() - started,
                    )
                )
        report.seconds = time.perf_counter() - started
        return report

    def _expand(self, paths: Iterable[Path | str], glob: str | None, report: IngestReport) -> list[Path]:
        files: list[Path] = []
        for raw in paths:
            path = Path(raw).expanduser().absolute()
            if path.is_dir():
                pattern = glob or "**/*"
                found = sorted(
                    p
                    for p in path.glob(pattern)
                    if p.is_file() and (glob or p.suffix.lower() in SUPPORTED) and not p.name.startswith(".")
                )
                if not found:
                    report.errors.append(f"{path}: no supported files found (pattern {pattern!r}) — check --glob")
                files.extend(found)
            elif path.exists() or path.is_symlink():
                files.append(path)
            else:
                report.errors.append(f"{path}: no such file or folder — check the path")
        return files

    def _source(self, path: Path) -> tuple[int, str | None, str] | None:
        row = self.conn.execute(
            "select id, file_hash, spec from corpus_sources where path = ?", (str(path),)
        ).fetchone()
        return None if row is None else (int(row[0]), row[1], str(row[2]))

    def _add_one(
        self,
        path: Path,
        spec: TableSpec,
        report: IngestReport,
        progress: Callable[[IngestProgress], None] | None,
        index: int,
        total: int,
        started: float,
    ) -> None:
        if not path.is_file():
            raise InputError(f"{path}: not a regular file (broken link or special file) — check the path")
        tabular = is_table(path)
        spec_json = json.dumps(spec.__dict__ if tabular else {}, sort_keys=True)
        try:
            file_hash = _file_hash(path)
        except PermissionError:
            raise InputError(f"{path}: permission denied — make the file readable (chmod u+r) or skip it") from None
        source = self._source(path)
        if source is not None and source[1] == file_hash and source[2] == spec_json:
            report.skipped.append(str(path))
            return
        batches: Iterator[list[RawDocument]] = (
            iter_table(path, spec, ROW_BATCH) if tabular else iter([[read_file(path)]])
        )
        # Read the first batch before touching the DB, so a bad file leaves no trace.
        first = next(batches, [])
        now = time.time()
        with transaction(self.conn):
            if source is None:
                cur = self.conn.execute(
                    "insert into corpus_sources (path, kind, file_hash, spec, added_at, updated_at)"
                    " values (?, ?, null, ?, ?, ?)",
                    (str(path), "table" if tabular else "file", spec_json, now, now),
                )
                source_id = int(cur.lastrowid)
            else:
                source_id = source[0]
        existing = {
            key: (int(doc_id), digest)
            for doc_id, key, digest in self.conn.execute(
                "select id, doc_key, content_hash from corpus_documents where source_id = ?", (source_id,)
            )
        }
        seen: set[str] = set()
        inserted = 0
        for batch in itertools.chain([first], batches):
            inserted += self._write_batch(source_id, batch, existing, seen, report)
            if progress and tabular:
                progress(
                    IngestProgress(
                        str(path),
                        index,
                        total,
                        report.documents,
                        report.chunks,
                        time.perf_counter() - started,
                    )
                )
        stale = [doc_id for key, (doc_id, _) in existing.items() if key not in seen]
        with transaction(self.conn):
            self._delete_documents(stale)
            self.conn.execute(
                "update corpus_sources set file_hash = ?, spec = ?, updated_at = ? where id = ?",
                (file_hash, spec_json, time.time(), source_id),
            )
        report.removed_documents += len(stale)
        if source is not None:
            report.replaced.append(str(path))
        elif inserted:
            report.added.append(str(path))
        else:
            report.skipped.append(str(path))

    def _write_batch(
        self,
        source_id: int,
        batch: list[RawDocument],
        existing: dict[str, tuple[int, str]],
        seen: set[str],
        report: IngestReport,
    ) -> int:
        size, overlap = self.config.chunk_words, self.config.chunk_overlap
        replace: list[int] = []
        fresh: list[tuple[RawDocument, str, list[str]]] = []
        batch_hashes: set[str] = set()
        for doc in batch:
            if doc.key in seen:
                continue  # a repeated id in one file: the first row wins
            seen.add(doc.key)
            digest = text_hash(f"{doc.title}\n{doc.text}")
            old = existing.get(doc.key)
            if old is not None and old[1] == digest:
                continue
            if old is not None:
                replace.append(old[0])
            elif (
                digest in batch_hashes
                or self.conn.execute(
                    "select 1 from corpus_documents where content_hash = ? limit 1", (digest,)
                ).fetchone()
            ):
                report.duplicates += 1
                continue
            batch_hashes.add(digest)
            chunks = chunk_text(doc.text, size, overlap)
            if chunks:
                fresh.append((doc, digest, chunks))
        texts = [f"{doc.title}\n{chunk}" if doc.title else chunk for doc, _, chunks in fresh for chunk in chunks]
        vectors = self._embed(texts)
        with transaction(self.conn):
            self._delete_documents(replace)
            # Ids are assigned here (max + 1, what SQLite would pick) so every table is written
            # with one executemany instead of one statement per row.
            doc_id = self.conn.execute("select coalesce(max(id), 0) from corpus_documents").fetchone()[0]
            chunk_id = self.conn.execute("select coalesce(max(id), 0) from corpus_chunks").fetchone()[0]
            documents, chunk_rows, fts_rows = [], [], []
            for doc, digest, chunks in fresh:
                doc_id += 1
                documents.append((doc_id, source_id, doc.key, doc.url, doc.title, digest))
                title = fts_text(doc.title)
                for seq, chunk in enumerate(chunks):
                    chunk_id += 1
                    chunk_rows.append((chunk_id, doc_id, seq, chunk))
                    fts_rows.append((chunk_id, title, fts_text(chunk)))
            self.conn.executemany(
                "insert into corpus_documents (id, source_id, doc_key, url, title, content_hash)"
                " values (?, ?, ?, ?, ?, ?)",
                documents,
            )
            self.conn.executemany("insert into corpus_chunks (id, doc_id, seq, text) values (?, ?, ?, ?)", chunk_rows)
            self.conn.executemany("insert into corpus_fts (rowid, title, body) values (?, ?, ?)", fts_rows)
            if vectors is not None:
                CORPUS_VEC.insert(self.conn, zip([row[0] for row in chunk_rows], vectors, strict=True))
        report.documents += len(fresh)
        report.chunks += len(chunk_rows)
        report.removed_documents += len(replace)
        return len(fresh)

    def _delete_documents(self, doc_ids: list[int]) -> None:
        """Delete documents with their chunks, FTS rows and vectors (caller holds the transaction)."""
        has_vec = CORPUS_VEC.exists(self.conn) and vec_loaded(self.conn)
        degraded = self._degraded()
        for doc_id in doc_ids:
            chunk_ids = [r[0] for r in self.conn.execute("select id from corpus_chunks where doc_id = ?", (doc_id,))]
            if degraded:  # the vectors cannot be deleted now: a new chunk could inherit one
                self._mark_stale(chunk_ids)
            self.conn.executemany("delete from corpus_fts where rowid = ?", [(i,) for i in chunk_ids])
            if has_vec:
                CORPUS_VEC.delete(self.conn, chunk_ids)
            self.conn.execute("delete from corpus_documents where id = ?", (doc_id,))

    def remove(self, paths: Iterable[Path | str] = (), *, all_sources: bool = False) -> int:
        """Remove ingested files (by path, or all); returns how many documents were deleted."""
        if all_sources:
            rows = self.conn.execute("select id, path from corpus_sources").fetchall()
        else:
            rows = []
            for raw in paths:
                path = str(Path(raw).expanduser().absolute())
                row = self.conn.execute("select id, path from corpus_sources where path = ?", (path,)).fetchone()
                if row is None:
                    raise NotFound(f"{path} is not in the corpus — see `deepresearch corpus list`")
                rows.append(row)
        removed = 0
        with sqlite_errors("the workspace database"), transaction(self.conn):
            for source_id, _ in rows:
                doc_ids = [
                    r[0] for r in self.conn.execute("select id from corpus_documents where source_id = ?", (source_id,))
                ]
                self._delete_documents(doc_ids)
                removed += len(doc_ids)
                self.conn.execute("delete from corpus_sources where id = ?", (source_id,))
            if all_sources and not self._degraded():  # a vec0 table cannot be dropped without sqlite-vec
                CLAIM.forget(self.conn)
                self.conn.execute("drop table if exists corpus_vec")
                self.conn.execute(f"drop table if exists {STALE_TABLE}")
        return removed

    def sources(self) -> list[SourceInfo]:
        """Every ingested file with its document and chunk counts."""
        rows = self.conn.execute(
            """select s.path, s.kind, s.updated_at,
                      (select count(*) from corpus_documents d where d.source_id = s.id),
                      (select count(*) from corpus_chunks c join corpus_documents d on c.doc_id = d.id
                        where d.source_id = s.id)
               from corpus_sources s order by s.path"""
        ).fetchall()
        return [SourceInfo(path=r[0], kind=r[1], updated_at=r[2], documents=r[3], chunks=r[4]) for r in rows]

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
        """(chunk id, cosine similarity) of the `depth` nearest chunk vectors."""
        if not self.vectors_enabled:
            raise SearchError(
                "vector search is unavailable: sqlite-vec is not loaded or no embedding model was given"
                " — run `deepresearch doctor`, or search with --mode bm25"
            )
        embedder = CLAIM.check(self.conn, self._embedder())
        self.embed_missing()  # vectors a degraded write left stale or missing are fixed first
        if not CORPUS_VEC.exists(self.conn):
            return []
        return [(r[0], r[1]) for r in CORPUS_VEC.knn(self.conn, embedder.embed(query), depth)]

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
        if mode == "vector":
            return [(c, s) for _, c, s in self._doc_ranking(self.vector_chunks(query, depth))[:count]]
        lists = (
            (self.config.bm25_weight, self._doc_ranking(self.bm25_chunks(query, depth))),
            (self.config.vector_weight, self._doc_ranking(self.vector_chunks(query, depth))),
        )
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
