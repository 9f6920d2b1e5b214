"""Writing the corpus: files and folders ingested into chunks, FTS5 rows and chunk vectors,
and removed again.

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

from deepresearch.db import database_failure, transaction
from deepresearch.errors import DeepResearchError, InputError, NotFound
from deepresearch.facts import text_hash
from deepresearch.search.corpus_index import ChunkVectors
from deepresearch.search.readers import SUPPORTED, RawDocument, TableSpec, is_table, iter_table, read_file
from deepresearch.text import has_cjk, words

if TYPE_CHECKING:
    from deepresearch.config import CorpusConfig

log = logging.getLogger(__name__)

ROW_BATCH = 256


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


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    ) -> IngestReport:
        """Ingest files and folders (folders: every supported file, or those matching `glob`)."""
        report = IngestReport()
        started = time.perf_counter()
        files = self._expand(paths, glob, report)
        if files:
            self.vectors.embed_missing()
        for index, path in enumerate(files):
            try:
                self._add_one(path, table or TableSpec(), report, progress, index, len(files), started)
            except InputError as exc:
                report.errors.append(str(exc))
            except DeepResearchError:
                raise
            except Exception as exc:  # one bad file must not stop the batch …
                if database_failure(exc):
                    raise  # … but a locked, read-only or corrupt database stops it (the caller names the file)
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
        vectors = self.vectors.embed(texts)
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
            self.vectors.write([row[0] for row in chunk_rows], vectors)
        report.documents += len(fresh)
        report.chunks += len(chunk_rows)
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
