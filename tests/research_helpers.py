"""Shared pieces of the research-loop tests: a list-backed search backend, a routed fake
chat model, and deps built on the real KB, cache and extraction with the fake embedder."""

from __future__ import annotations

import time
from typing import Any

from deepresearch.search.backends import SearchBackend, SearchResult
from deepresearch.text import content_words
from tests.fakes import FakeChatModel

DOCS = {
    "file:///corpus/wal.md": (
        "SQLite WAL mode lets readers continue while a writer appends to the write-ahead log. "
        # named: since session 38 grammar does not keep "A checkpoint copies pages …" whatever the check says (0.16)
        "SQLite WAL checkpoints copy pages from the write-ahead log into the main database file. "
        "WAL mode needs shared memory, so all processes must be on the same host."
    ),
    "file:///corpus/fts5.md": (
        "FTS5 is the full-text search extension built into SQLite. "
        "FTS5 ranks matches with the BM25 algorithm through its bm25 function. "
        "The trigram tokenizer of FTS5 supports substring search for Chinese text."
    ),
    "file:///corpus/vec.md": (
        "sqlite-vec is a SQLite extension that stores and searches vectors in vec0 tables. "
        "The KNN search in sqlite-vec is a brute-force full scan over all vectors. "
        "Binary quantization in sqlite-vec shrinks vectors thirty-two times."
    ),
}


# The pages' titles as a reader gives them (a Markdown file's first heading, docs/corpus's): a file name for a
# title ("wal.md") lowers the learned stands-alone check's probabilities (models/standalone.py), and at its
# threshold of the time (0.7, session 19) it dropped every fact of these pages; research's own readers give headings.
TITLES = {
    "file:///corpus/wal.md": "SQLite write-ahead logging (WAL)",
    "file:///corpus/fts5.md": "SQLite FTS5 full-text search",
    "file:///corpus/vec.md": "sqlite-vec: vector search inside SQLite",
}


class ListBackend(SearchBackend):
    """Searches a dict of url → text by shared content words; counts its calls. Titles: TITLES, else the
    url's file name."""

    name = "list"
    io_bound = False

    def __init__(self, docs: dict[str, str] | None = None):
        self.docs = dict(DOCS if docs is None else docs)
        self.calls: list[str] = []

    def search(self, query: str, count: int) -> list[SearchResult]:
        self.calls.append(query)
        words = set(content_words(query))
        scored = sorted(
            ((len(words & set(content_words(text))), url, text) for url, text in self.docs.items()),
            reverse=True,
        )
        return [
            SearchResult(TITLES.get(url, url.rsplit("/", 1)[-1]), url, text[:80], text, float(score), "list")
            for score, url, text in scored[:count]
            if score
        ]


class RoutedChatModel(FakeChatModel):
    """Answers by prompt kind (plan / reflect / answer); everything else gets ''."""

    def __init__(
        self,
        plan: Any = None,
        reflect: Any = None,
        answer: Any = "",
        reflect_delay: float = 0.0,
    ):
        super().__init__()
        self.by_kind = {"plan": plan, "reflect": reflect, "answer": answer}
        self.reflect_delay = reflect_delay

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        system = messages[0]["content"]
        kind = (
            "plan"
            if "plan search queries" in system
            else "reflect"
            if "review research" in system
            else "answer"
            if "answer research" in system
            else "other"
        )
        if kind == "reflect" and self.reflect_delay:
            time.sleep(self.reflect_delay)
        reply = self.by_kind.get(kind)
        self.replies = [reply if reply is not None else ""]
        return super().complete(messages, schema, max_tokens, temperature)

    def prompts(self, kind_marker: str) -> list[str]:
        """User prompts of the calls whose system prompt contains `kind_marker`."""
        return [h["messages"][-1]["content"] for h in self.history if kind_marker in h["messages"][0]["content"]]


def make_deps(
    ws: Any,
    embedder: Any,
    model: Any = None,
    backend: Any = None,
    cache: bool = True,
    model_steps: tuple[str, ...] = ("plan", "extract", "reflect", "answer"),
) -> Any:
    """Deps over the real KB, search cache and extraction, with the given fakes."""
    from deepresearch.kb.lifecycle import age_tag
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.models.extract import extract_facts
    from deepresearch.research.deps import Deps
    from deepresearch.search.cache import SearchCache

    return Deps(
        kb=KnowledgeBase(ws.db, embedder, ws.config.kb),
        model=model,
        embedder=embedder,
        backend=backend or ListBackend(),
        cache=SearchCache(ws.cache_dir, 3600) if cache else None,
        conn=ws.db,
        extract=extract_facts,
        age_tag=age_tag,
        freshness_days=dict(ws.config.kb.freshness_days),
        cover_similarity=ws.config.research.kb_cover_similarity,
        model_steps=model_steps,
    )
