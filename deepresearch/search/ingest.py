"""Writing the corpus: files and folders ingested into chunks, FTS5 rows and chunk vectors,
and removed again.

Text first, vectors behind it: the main thread reads, chunks and writes each file's chunks and
FTS5 rows in short transactions (keyword search answers as soon as a file is in), while a
`VectorFiller` thread embeds the chunks that have no vector yet (search/corpus_index.py).
Memory does not grow with the input: a large text file is read and chunked in pieces and
written `STREAM_CHUNKS` chunks at a time, tables are streamed in row batches, and the
embedding backlog waits in the database, not in memory.

Ingestion is idempotent: an unchanged file is skipped, a changed file has only its changed
documents replaced, identical content already stored elsewhere is not added twice. A source
whose file hash is not recorded yet (null) is incomplete: its ingest was interrupted, and the
next `corpus add` finishes it.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from deepresearch.db import database_failure, transaction
from deepresearch.errors import DeepResearchError, InputError, NotFound, NotIndexed
from deepresearch.facts import text_hash
from deepresearch.files import file_sha256
from deepresearch.search.chunking import chunk_text, iter_chunks
from deepresearch.search.corpus_index import ChunkVectors, VectorFiller, VectorProgress
from deepresearch.search.readers import (
    STREAM_BYTES,
    SUPPORTED,
    RawDocument,
    TableSpec,
    is_table,
    is_text,
    iter_table,
    read_file,
    stream_text_file,
)
from deepresearch.text import has_cjk, words

if TYPE_CHECKING:
    from deepresearch.config import CorpusConfig

log = logging.getLogger(__name__)

ROW_BATCH = 256
# Chunks of one streamed text file written per transaction.
STREAM_CHUNKS = 512
# content_hash of a streamed document until its last chunk is written: an interrupted one is
# never taken for the complete document by the next ingest.
PARTIAL = "partial:"

__all__ = ["CorpusWriter", "IngestProgress", "IngestReport", "VectorProgress", "chunk_text", "fts_text"]


@dataclass
class IngestReport:
    """What one `add_paths` call did; `errors` holds one user-facing message per failed file."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_indexed: list[str] = field(default_factory=list)  # HTML pages marked robots noindex (skipped)
    errors: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    removed_documents: int = 0
    duplicates: int = 0
    seconds: float = 0.0
    text_seconds: float = 0.0  # until the text of every file was in (keyword search complete)
    vectors: int = 0  # chunks embedded by this run
    vectors_pending: int | None = None  # chunks left without a vector (None: cannot tell without sqlite-vec)


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
class _Run:
    """One `add_paths` call as its steps see it: the report, the vector filler to wake after each
    commit, and the progress callback (told after each batch of a table or a streamed file)."""

    report: IngestReport
    started: float
    total: int
    filler: VectorFiller | None = None
    progress: Callable[[IngestProgress], None] | None = None
    path: str = ""
    done: int = 0
    in_batches: bool = False
    include_noindex: bool = False  # index HTML pages marked robots noindex too

    def event(self) -> IngestProgress:
        r, seconds = self.report, time.perf_counter() - self.started
        return IngestProgress(self.path, self.done, self.total, r.documents, r.chunks, seconds)

    def committed(self) -> None:
        """New chunks are in: wake the vector filler; tell the progress callback inside long files."""
        if self.filler is not None:
            self.filler.nudge()
        if self.progress and self.in_batches:
            self.progress(self.event())


def fts_text(text: str) -> str:
    """Text as indexed by FTS5: CJK runs become overlapping bigrams so 芯片 matches inside 芯片销量."""
    return " ".join(words(text)) if has_cjk(text) else text


class CorpusWriter:
    """Adds and removes corpus documents on one connection; `vectors` keeps the chunk vectors in step."""

    def __init__(self, conn: Any, config: CorpusConfig, vectors: ChunkVectors):
        self.conn = conn
        self.config = config
        self.vectors = vectors

    def add_paths(
        self,
        paths: Iterable[Path | str],
        *,
        table: TableSpec | None = None,
        glob: str | None = None,
        progress: Callable[[IngestProgress], None] | None = None,
        vector_progress: Callable[[VectorProgress], None] | None = None,
        embed: bool = True,
        include_noindex: bool = False,
    ) -> IngestReport:
        """Ingest files and folders (folders: every supported file, or those matching `glob`):
        text first, vectors in a background thread (`embed=False`: text only, `corpus embed` later).
        An HTML page marked robots noindex is skipped into `not_indexed` unless `include_noindex`."""
        report = IngestReport()
        started = time.perf_counter()
        files = self._expand(paths, glob, report)
        filler = None
        if embed and self.vectors.enabled and (files or self.vectors.pending()):
            self.vectors.repair()
            filler = VectorFiller(self.vectors, progress=vector_progress, written=lambda: report.chunks)
        run = _Run(report, started, len(files), filler, progress, include_noindex=include_noindex)
        try:
            if filler:
                filler.start()
            for index, path in enumerate(files):
                run.path, run.done = str(path), index
                self._add_guarded(path, table or TableSpec(), run)
                run.done, run.in_batches = index + 1, False
                if progress:
                    progress(run.event())
            report.text_seconds = time.perf_counter() - started
            if filler:
                report.vectors = filler.finish()
        finally:
            if filler:
                filler.stop()  # after an interrupt: stop embedding; what is stored stays
        report.vectors_pending = self.vectors.pending()
        report.seconds = time.perf_counter() - started
        return report

    def _add_guarded(self, path: Path, spec: TableSpec, run: _Run) -> None:
        """Ingest one file; a bad file becomes one message in the report's errors."""
        report = run.report
        try:
            self._add_one(path, spec, run)
        except NotIndexed:
            report.not_indexed.append(str(path))  # what the page asked for: not a failure
        except InputError as exc:
            report.errors.append(str(exc))
        except DeepResearchError:
            raise
        except Exception as exc:  # one bad file must not stop the batch …
            if database_failure(exc):
                raise  # … but a locked, read-only or corrupt database stops it (the caller names the file)
            log.debug("ingest of %s failed", path, exc_info=True)
            report.errors.append(f"{path}: cannot ingest ({type(exc).__name__}: {exc})")

    def embed_pending(self, progress: Callable[[VectorProgress], None] | None = None) -> int:
        """Embed every chunk that has no vector yet (after `add_paths(embed=False)` or an interrupted
        ingest); returns how many were embedded (0 when vectors are off)."""
        if not self.vectors.enabled:
            return 0
        self.vectors.repair()
        return VectorFiller(self.vectors, progress=progress).run()

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

    def _add_one(self, path: Path, spec: TableSpec, run: _Run) -> None:
        if not path.is_file():
            raise InputError(f"{path}: not a regular file (broken link or special file) — check the path")
        tabular = is_table(path)
        spec_json = json.dumps(spec.__dict__ if tabular else {}, sort_keys=True)
        try:
            file_hash = file_sha256(path)
        except PermissionError:
            raise InputError(f"{path}: permission denied — make the file readable (chmod u+r) or skip it") from None
        source, report = self._source(path), run.report
        if source is not None and source[1] == file_hash and source[2] == spec_json:
            report.skipped.append(str(path))
            return
        streamed = is_text(path) and path.stat().st_size > STREAM_BYTES
        run.in_batches = tabular or streamed
        batches: Iterator[list[RawDocument]] = iter(())
        if not streamed:
            whole = None if tabular else read_file(path, self._max_bytes, run.include_noindex)
            batches = iter_table(path, spec, ROW_BATCH) if whole is None else iter([[whole]])
        # Read the first batch before touching the DB, so a bad file leaves no trace.
        first = next(batches, [])
        source_id = self._open_source(path, source, "table" if tabular else "file", spec_json)
        existing = {
            key: (int(doc_id), digest)
            for doc_id, key, digest in self.conn.execute(
                "select id, doc_key, content_hash from corpus_documents where source_id = ?", (source_id,)
            )
        }
        seen: set[str] = set()
        if streamed:
            inserted = self._add_streamed(path, source_id, file_hash, existing, seen, run)
        else:
            inserted = sum(
                self._write_batch(source_id, batch, existing, seen, run) for batch in itertools.chain([first], batches)
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

    @property
    def _max_bytes(self) -> int:
        return int(self.config.max_file_mb * (1 << 20))

    def _open_source(self, path: Path, source: tuple[int, str | None, str] | None, kind: str, spec: str) -> int:
        """The source row of `path`, marked incomplete (no file hash) until its ingest ends."""
        now = time.time()
        with transaction(self.conn):
            if source is not None:
                self.conn.execute("update corpus_sources set file_hash = null where id = ?", (source[0],))
                return source[0]
            cur = self.conn.execute(
                "insert into corpus_sources (path, kind, file_hash, spec, added_at, updated_at)"
                " values (?, ?, null, ?, ?, ?)",
                (str(path), kind, spec, now, now),
            )
            return int(cur.lastrowid)

    def _add_streamed(
        self,
        path: Path,
        source_id: int,
        file_hash: str,
        existing: dict[str, tuple[int, str]],
        seen: set[str],
        run: _Run,
    ) -> int:
        """A large text file as one document, read, chunked and written in pieces (bounded memory)."""
        title, pieces = stream_text_file(path)
        report = run.report
        digest = f"file:{file_hash}"  # the text is never held whole, so the file's bytes identify it
        seen.add("")
        old = existing.get("")
        if old is not None and old[1] == digest:
            return 0
        if old is None and self._duplicate(digest):
            report.duplicates += 1
            return 0
        with transaction(self.conn):
            self._delete_documents([old[0]] if old else [])
            doc_id = self.conn.execute(
                "insert into corpus_documents (source_id, doc_key, url, title, content_hash) values (?, '', ?, ?, ?)",
                (source_id, path.absolute().as_uri(), title, PARTIAL + digest),
            ).lastrowid
        written = 0
        chunks = iter_chunks(pieces, self.config.chunk_words, self.config.chunk_overlap)
        while part := list(itertools.islice(chunks, STREAM_CHUNKS)):
            with transaction(self.conn):
                self._insert_chunks(int(doc_id), title, part, written)
            written += len(part)
            report.chunks += len(part)
            run.committed()
        with transaction(self.conn):
            if not written:
                self._delete_documents([int(doc_id)])
            else:
                self.conn.execute("update corpus_documents set content_hash = ? where id = ?", (digest, doc_id))
        if not written:
            raise InputError(f"{path}: empty file (no text to index) — remove it or add content")
        report.documents += 1
        report.removed_documents += 1 if old else 0
        return 1

    def _insert_chunks(self, doc_id: int, title: str, chunks: list[str], first_seq: int) -> list[int]:
        """Insert chunks (and their FTS rows) of one document (caller holds the transaction); their ids."""
        # Ids are assigned here (max + 1, what SQLite would pick) so every table is written with one
        # executemany instead of one statement per row.
        chunk_id = self.conn.execute("select coalesce(max(id), 0) from corpus_chunks").fetchone()[0]
        ids = list(range(chunk_id + 1, chunk_id + 1 + len(chunks)))
        fts_title = fts_text(title)
        self.conn.executemany(
            "insert into corpus_chunks (id, doc_id, seq, text) values (?, ?, ?, ?)",
            [(i, doc_id, first_seq + n, chunk) for n, (i, chunk) in enumerate(zip(ids, chunks, strict=True))],
        )
        self.conn.executemany(
            "insert into corpus_fts (rowid, title, body) values (?, ?, ?)",
            [(i, fts_title, fts_text(chunk)) for i, chunk in zip(ids, chunks, strict=True)],
        )
        return ids

    def _duplicate(self, digest: str) -> bool:
        return (
            self.conn.execute("select 1 from corpus_documents where content_hash = ? limit 1", (digest,)).fetchone()
            is not None
        )

    def _write_batch(
        self,
        source_id: int,
        batch: list[RawDocument],
        existing: dict[str, tuple[int, str]],
        seen: set[str],
        run: _Run,
    ) -> int:
        """Write the new and changed documents of one batch (chunks + FTS rows; vectors come later)."""
        size, overlap = self.config.chunk_words, self.config.chunk_overlap
        report = run.report
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
            elif digest in batch_hashes or self._duplicate(digest):
                report.duplicates += 1
                continue
            batch_hashes.add(digest)
            chunks = chunk_text(doc.text, size, overlap)
            if chunks:
                fresh.append((doc, digest, chunks))
        with transaction(self.conn):
            self._delete_documents(replace)
            for doc, digest, chunks in fresh:
                doc_id = self.conn.execute(
                    "insert into corpus_documents (source_id, doc_key, url, title, content_hash)"
                    " values (?, ?, ?, ?, ?)",
                    (source_id, doc.key, doc.url, doc.title, digest),
                ).lastrowid
                report.chunks += len(self._insert_chunks(int(doc_id), doc.title, chunks, 0))
        run.committed()
        report.documents += len(fresh)
        report.removed_documents += len(replace)
        return len(fresh)

    def _delete_documents(self, doc_ids: list[int]) -> None:
        """Delete documents with their chunks, FTS rows and vectors (caller holds the transaction)."""
        for doc_id in doc_ids:
            chunk_ids = [r[0] for r in self.conn.execute("select id from corpus_chunks where doc_id = ?", (doc_id,))]
            self.vectors.forget(chunk_ids)
            self.conn.executemany("delete from corpus_fts where rowid = ?", [(i,) for i in chunk_ids])
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
        with transaction(self.conn):
            for source_id, _ in rows:
                doc_ids = [
                    r[0] for r in self.conn.execute("select id from corpus_documents where source_id = ?", (source_id,))
                ]
                self._delete_documents(doc_ids)
                removed += len(doc_ids)
                self.conn.execute("delete from corpus_sources where id = ?", (source_id,))
            if all_sources:
                self.vectors.drop()
        return removed
