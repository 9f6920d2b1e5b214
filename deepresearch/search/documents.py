"""The corpus as commands change it: add or remove documents, then forget the cached corpus
searches the change made stale (a cached result could name a removed document or miss a new
one). Every front end that changes documents goes through here, so no caller can forget the
eviction.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deepresearch.search.corpus import Corpus

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace


def add_documents(ws: Workspace, paths: Iterable[Path | str], **options: Any) -> Any:
    """Ingest files and folders into the workspace corpus (its IngestReport); stale cached searches go.
    `options` are `CorpusWriter.add_paths`'s: `table`, `glob`, `progress`, `vector_progress`, `embed`
    (False: the text only, keyword search; `embed_documents` adds the vectors later) and `include_noindex`
    (True: HTML pages marked robots noindex too)."""
    corpus = Corpus.from_workspace(ws)
    try:
        report = corpus.add_paths(paths, **options)
    except BaseException:
        _forget_cached_corpus_searches(ws)  # an interrupted ingest may have written documents already
        raise
    if report.documents or report.removed_documents or report.vectors:
        _forget_cached_corpus_searches(ws)
    return report


def embed_documents(ws: Workspace, progress: Callable[[Any], None] | None = None) -> tuple[int, int | None]:
    """Embed the corpus chunks that have no vector yet: (embedded, still pending); a cached hybrid
    search that ranked them by keywords alone goes."""
    corpus = Corpus.from_workspace(ws)
    embedded = corpus.embed_pending(progress)
    if embedded:
        _forget_cached_corpus_searches(ws)
    return embedded, corpus.vectors.pending()


def remove_documents(ws: Workspace, paths: Iterable[Path | str] = (), *, all_sources: bool = False) -> int:
    """Remove ingested files (or all) from the workspace corpus; returns the documents deleted."""
    removed = Corpus(ws.db, None, ws.config.search.corpus).remove(paths, all_sources=all_sources)
    _forget_cached_corpus_searches(ws)
    return removed


def _forget_cached_corpus_searches(ws: Workspace) -> None:
    from deepresearch.search.cache import SearchCache

    cache = SearchCache.from_workspace(ws)
    try:
        cache.evict_backend("corpus")
    finally:
        cache.close()
