"""Search backends as callers use them: the configured backend for a workspace.

The types and the registry live in `deepresearch.search.base` (re-exported here for
callers). Built-ins (`corpus`, `zim`, `searxng`) register below with `register_backend`, the
same call an extension or a test fake uses; their modules import lazily so optional
dependencies stay optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepresearch.search.base import BACKENDS, SearchBackend, SearchResult, register_backend

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace

__all__ = ["BACKENDS", "CorpusBackend", "SearchBackend", "SearchResult", "get_backend", "register_backend"]


def get_backend(name: str, ws: Workspace) -> SearchBackend:
    """The backend `name` configured from the workspace; unknown or misconfigured → SearchError."""
    return BACKENDS.get(name)(ws)


class CorpusBackend(SearchBackend):
    """The local corpus in the workspace database (offline)."""

    name = "corpus"
    io_bound = False

    def __init__(self, corpus: object, mode: str = "hybrid"):
        self.corpus = corpus
        self.mode = mode

    def search(self, query: str, count: int) -> list[SearchResult]:
        """Hybrid (or configured mode) search over the ingested documents."""
        return self.corpus.search(query, count, mode=self.mode)  # type: ignore[attr-defined,no-any-return]


@register_backend("corpus")
def _corpus(ws: Workspace) -> SearchBackend:
    from deepresearch.search.corpus import Corpus

    return CorpusBackend(Corpus.from_workspace(ws), ws.config.search.corpus.mode)


@register_backend("zim")
def _zim(ws: Workspace) -> SearchBackend:
    from deepresearch.search.zim import ZimBackend

    return ZimBackend(ws.config.search.zim.files)


@register_backend("searxng")
def _searxng(ws: Workspace) -> SearchBackend:
    from deepresearch.search.searxng import SearxngBackend

    cfg = ws.config.search.searxng
    return SearxngBackend(
        cfg.base_url, timeout=cfg.timeout, max_retries=cfg.max_retries, backoff_seconds=cfg.backoff_seconds
    )
