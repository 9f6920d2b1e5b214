"""Changing the corpus through the library (`search/documents.py`) forgets stale cached corpus searches."""

from __future__ import annotations

from pathlib import Path

from deepresearch.search.backends import get_backend
from deepresearch.search.cache import SearchCache, cached_search
from deepresearch.search.documents import add_documents, remove_documents
from deepresearch.workspace import Workspace
from tests.fakes import FakeEmbedder


def _search(ws: Workspace) -> tuple[int, bool]:
    cache = SearchCache.from_workspace(ws)
    try:
        results, hit, _ = cached_search(get_backend("corpus", ws), "volcanoes", 3, cache)
    finally:
        cache.close()
    return len(results), hit


def test_adding_and_removing_documents_evicts_cached_corpus_searches(home: Path, tmp_path: Path, use_embedder) -> None:  # type: ignore[no-untyped-def]
    use_embedder(FakeEmbedder())
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("Volcanoes erupt lava.")
    b.write_text("Geysers and volcanoes share heat.")
    ws = Workspace.open(home)
    try:
        add_documents(ws, [a])
        assert _search(ws) == (1, False) and _search(ws) == (1, True)
        add_documents(ws, [b])  # a new document: the cached single hit is stale
        assert _search(ws) == (2, False) and _search(ws) == (2, True)
        add_documents(ws, [a, b])  # nothing changed: the cache stays
        assert _search(ws) == (2, True)
        assert remove_documents(ws, [b]) == 1
        assert _search(ws) == (1, False)
    finally:
        ws.close()
