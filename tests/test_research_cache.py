"""Cache/KB coupling: a cached search result whose fact was superseded is evicted, not reused."""

from __future__ import annotations

from deepresearch.facts import Fact
from deepresearch.research.cache_links import evict_for_fact, linked_facts
from deepresearch.research.loop import run_research
from deepresearch.research.state import RunOptions
from tests.research_helpers import ListBackend, RoutedChatModel, make_deps

QUERY = "sqlite wal readers"


def _run(ws, embedder, backend):  # type: ignore[no-untyped-def]
    deps = make_deps(ws, embedder, RoutedChatModel(plan={"rationale": "r", "queries": [QUERY]}), backend)
    deps.cover_similarity = 2.0  # never skip the search because the KB covers it: this test is about the cache
    return run_research(ws, QUERY, RunOptions(loops=1, queries=1), deps=deps), deps


def test_superseded_fact_evicts_the_cached_result_that_produced_it(workspace, fake_embedder):
    backend = ListBackend()
    first, deps = _run(workspace, fake_embedder, backend)
    assert backend.calls == [QUERY] and first.counters["backend_searches"] == 1
    key = deps.cache.key("list", QUERY, 5)
    produced = linked_facts(workspace.db, key)
    assert produced and set(produced) <= set(first.fact_ids)

    second, _ = _run(workspace, fake_embedder, backend)  # KB unchanged: served from the cache
    assert backend.calls == [QUERY] and second.counters["cache_hits"] == 1

    old = deps.kb.get(produced[0])
    new_id = deps.kb.supersede(old.id, Fact(old.fact + " (corrected in 2026)", old.source_url), reason="correct")
    assert deps.kb.get(old.id).status == "superseded"

    third, _ = _run(workspace, fake_embedder, backend)  # the KB wins: the stale cached result is evicted
    assert backend.calls == [QUERY, QUERY] and third.counters["backend_searches"] == 1
    assert old.id not in linked_facts(workspace.db, key)
    assert deps.kb.get(new_id).status == "active"


def test_evict_for_fact_drops_every_entry_that_produced_it(workspace, fake_embedder):
    backend = ListBackend()
    first, deps = _run(workspace, fake_embedder, backend)
    key = deps.cache.key("list", QUERY, 5)
    fact_id = linked_facts(workspace.db, key)[0]
    assert deps.cache.get("list", QUERY, 5) is not None
    assert evict_for_fact(workspace.db, deps.cache, fact_id) == 1
    assert deps.cache.get("list", QUERY, 5) is None and linked_facts(workspace.db, key) == []
