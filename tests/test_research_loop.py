"""The research loop with the real KB, cache, extraction and SQLite; fake model and embedder."""

from __future__ import annotations

import re
import time

import pytest

from deepresearch.research.loop import run_research
from deepresearch.research.runs import RunStore
from deepresearch.research.state import RunOptions
from tests.research_helpers import DOCS, ListBackend, RoutedChatModel, make_deps

TOPIC = "How does SQLite WAL mode let readers and writers work together?"


def _cited_numbers(report: str) -> set[int]:
    body = report.split("## Sources")[0]
    return {int(n) for n in re.findall(r"\[(\d+)\]", body)}


def _source_urls(report: str) -> dict[int, str]:
    tail = report.split("## Sources")[1].split("\n---")[0]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^(\d+)\. .*?(file://\S+)", tail, re.M)}


def test_one_loop_runs_exactly_one_reflection_and_cites_retrieved_sources(workspace, fake_embedder):
    deps = make_deps(
        workspace,
        fake_embedder,
        RoutedChatModel(
            reflect={"sufficient": False, "knowledge_gap": "x", "follow_up_queries": ["sqlite checkpoint"]}
        ),
    )
    result = run_research(workspace, TOPIC, RunOptions(loops=1, queries=2), deps=deps)
    state = RunStore(workspace.db).load_state(result.run_id)
    assert len(state.reflections) == 1 and result.loops == 1
    assert result.stop_reason == "sufficient"  # the cited passages speak to every key word of the question
    assert result.fact_ids, "grounded facts were stored"
    stored = [deps.kb.get(i) for i in result.fact_ids]
    assert all(f.source_url in DOCS for f in stored)
    numbers, urls = _cited_numbers(result.report), _source_urls(result.report)
    assert numbers and numbers <= set(urls)
    assert set(urls.values()) <= {s.url for s in state.sources}
    assert result.report_stats["invalid_citations_removed"] == 0
    assert (workspace.reports_dir / result.report_path.rsplit("/", 1)[-1]).read_text() == result.report
    steps = [s["step"] for s in RunStore(workspace.db).get(result.run_id).steps]
    assert steps == ["recall", "plan", "search", "rank", "extract", "reflect", "answer", "report"]


def test_a_loop_without_new_sources_stops_early(workspace, fake_embedder):
    # Loop 2's follow-up finds only the WAL document again: no new source.
    model = RoutedChatModel(
        plan={"rationale": "r", "queries": ["sqlite wal readers"]},
        reflect={"sufficient": False, "knowledge_gap": "more", "follow_up_queries": ["wal readers writer"]},
    )
    backend = ListBackend({"file:///corpus/wal.md": DOCS["file:///corpus/wal.md"]})
    result = run_research(
        workspace,
        "sqlite wal readers",
        RunOptions(loops=4, queries=1),
        deps=make_deps(workspace, fake_embedder, model, backend),
    )
    assert result.stop_reason == "no-progress"
    assert result.loops == 2
    assert backend.calls == ["sqlite wal readers", "wal readers writer"]


def test_budget_stops_the_run_and_still_writes_a_report(workspace, fake_embedder):
    model = RoutedChatModel(
        reflect={"sufficient": False, "knowledge_gap": "more", "follow_up_queries": ["sqlite vector search"]},
        reflect_delay=1.2,
    )
    topic = "How does SQLite WAL mode let readers and penguins work together?"  # never sufficient
    result = run_research(
        workspace, topic, RunOptions(loops=5, budget=1.0), deps=make_deps(workspace, fake_embedder, model)
    )
    assert result.stop_reason == "budget"
    assert result.loops == 1
    assert "## Evidence" in result.report and _cited_numbers(result.report)
    assert RunStore(workspace.db).get(result.run_id).status == "done"


def test_kb_first_second_topic_searches_less_and_sees_known_facts(workspace, fake_embedder, home, tmp_path):
    from deepresearch.workspace import Workspace

    first = ListBackend()
    run_research(
        workspace,
        "What do SQLite WAL mode and its checkpoints do with the pages of readers and writers?",
        RunOptions(loops=1),
        deps=make_deps(workspace, fake_embedder, backend=first),
    )
    topic_b = "SQLite WAL checkpoint pages"
    model_b = RoutedChatModel()
    warm = ListBackend()
    result = run_research(
        workspace, topic_b, RunOptions(loops=1), deps=make_deps(workspace, fake_embedder, model_b, warm)
    )
    cold_ws = Workspace.open(tmp_path / "cold")
    cold = ListBackend()
    try:
        run_research(cold_ws, topic_b, RunOptions(loops=1), deps=make_deps(cold_ws, fake_embedder, backend=cold))
    finally:
        cold_ws.close()
    assert len(warm.calls) < len(cold.calls)
    plan_prompt = model_b.prompts("plan search queries")[0]
    assert "[K1]" in plan_prompt and "checkpoint" in plan_prompt.lower()
    assert "Older facts may be outdated" in plan_prompt
    assert result.known_facts > 0
    assert "## From the knowledge base" in result.report


def test_lifecycle_off_wording_has_no_age_tags(workspace, fake_embedder):
    run_research(workspace, TOPIC, RunOptions(loops=1), deps=make_deps(workspace, fake_embedder))
    model = RoutedChatModel()
    run_research(
        workspace,
        "SQLite FTS5 BM25 ranking",
        RunOptions(loops=1, lifecycle="off"),
        deps=make_deps(workspace, fake_embedder, model),
    )
    prompt = model.prompts("plan search queries")[0]
    assert "Do not search these again." in prompt
    assert "verified" not in prompt and "Older facts" not in prompt


def test_no_kb_write_stores_nothing(workspace, fake_embedder):
    deps = make_deps(workspace, fake_embedder)
    result = run_research(workspace, TOPIC, RunOptions(loops=1, kb_write=False), deps=deps)
    assert result.fact_ids == [] and result.facts
    assert deps.kb.query("SQLite WAL").hits == []


def test_resume_continues_without_redoing_finished_steps(workspace, fake_embedder):
    class Boom(RoutedChatModel):
        def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
            if "review research" in messages[0]["content"]:
                raise KeyboardInterrupt  # the process dies during reflection
            return super().complete(messages, schema, max_tokens, temperature)

    backend = ListBackend()
    with pytest.raises(KeyboardInterrupt):
        run_research(workspace, TOPIC, RunOptions(loops=1), deps=make_deps(workspace, fake_embedder, Boom(), backend))
    store = RunStore(workspace.db)
    (run,) = store.recent()
    assert run.status == "interrupted" and run.step == "reflect"  # not left `running` (issue 21, item 7)
    calls_before = list(backend.calls)
    result = run_research(
        workspace, resume=run.id[:12], deps=make_deps(workspace, fake_embedder, RoutedChatModel(), backend)
    )
    assert result.run_id == run.id and backend.calls == calls_before  # searches were not redone
    steps = [s["step"] for s in store.get(run.id).steps]
    assert steps == ["recall", "plan", "search", "rank", "extract", "reflect", "answer", "report"]
    assert store.get(run.id).status == "done"


def test_runs_keep_no_prompt_text_and_old_rows_with_one_still_resume(workspace, fake_embedder):
    """Issue 13 (5): the full planning prompt was stored in run state; resuming needs only the queries."""
    import json

    from deepresearch.migrations import apply_migrations
    from deepresearch.research import prompts

    class Dies(RoutedChatModel):
        def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
            if "review research" in messages[0]["content"]:
                raise KeyboardInterrupt
            return super().complete(messages, schema, max_tokens, temperature)

    deps = make_deps(workspace, fake_embedder, Dies())
    assert "plan" in deps.model_steps  # the planner was asked, so a prompt existed
    with pytest.raises(KeyboardInterrupt):
        run_research(workspace, TOPIC, RunOptions(loops=1), deps=deps)
    db = workspace.db
    run_id, state_json = db.execute("select id, state_json from research_runs").fetchone()
    steps_json = " ".join(r[0] for r in db.execute("select info_json from research_steps"))
    for stored in (state_json, steps_json):
        assert "planning_prompt" not in stored and "Research question:" not in stored
        assert prompts.PLAN.system not in stored
    assert json.loads(state_json)["pending"] or json.loads(state_json)["queries_done"]  # what resume needs

    # A row saved by an older version, prompt included, still loads and resumes ...
    old = {**json.loads(state_json), "planning_prompt": "Research question: secret plans\n- [K1] a known fact"}
    db.execute("update research_runs set state_json = ? where id = ?", (json.dumps(old), run_id))
    assert RunStore(db).load_state(run_id).pending == old["pending"]
    # ... and the migration forgets the copies older runs saved.
    db.execute("delete from _migrations where name = 'm302_runs_forget_prompts'")
    assert apply_migrations(db) == ["m302_runs_forget_prompts"]
    assert "planning_prompt" not in db.execute("select state_json from research_runs").fetchone()[0]
    db.execute("update research_runs set state_json = ? where id = ?", (json.dumps(old), run_id))
    result = run_research(workspace, resume=run_id, deps=make_deps(workspace, fake_embedder))
    assert result.report and RunStore(db).get(run_id).status == "done"
    assert "planning_prompt" not in db.execute("select state_json from research_runs").fetchone()[0]


def test_runs_list_show_search(workspace, fake_embedder):
    a = run_research(workspace, TOPIC, RunOptions(loops=1), deps=make_deps(workspace, fake_embedder))
    b = run_research(workspace, "sqlite-vec 向量 search", RunOptions(loops=1), deps=make_deps(workspace, fake_embedder))
    store = RunStore(workspace.db)
    assert [r.id for r in store.recent()] == [b.run_id, a.run_id]
    assert [r.id for r in store.search("向量")] == [b.run_id]
    assert [r.id for r in store.search("readers writers")] == [a.run_id]
    assert store.get(a.run_id).report == a.report


def test_io_bound_backend_searches_queries_concurrently(workspace, fake_embedder):
    class SlowBackend(ListBackend):
        io_bound = True

        def search(self, query, count):  # type: ignore[no-untyped-def]
            time.sleep(0.5)
            return super().search(query, count)

    backend = SlowBackend()
    queries = ["sqlite fts5 bm25", "sqlite-vec vectors knn"]
    model = RoutedChatModel(plan={"rationale": "r", "queries": queries})
    deps = make_deps(workspace, fake_embedder, model, backend)
    topic = "sqlite wal readers, fts5 bm25 and sqlite-vec knn vectors"
    result = run_research(workspace, topic, RunOptions(loops=1, queries=3), deps=deps)
    state = RunStore(workspace.db).load_state(result.run_id)
    search_seconds = RunStore(workspace.db).get(result.run_id).steps[2]["seconds"]
    assert sorted(backend.calls) == sorted([topic, *queries])
    assert search_seconds < 1.2  # three 0.5 s searches overlapped (sequential: ≥ 1.5 s)
    assert {s.url for s in state.sources} == set(DOCS)


def test_fast_changing_known_facts_are_rechecked_not_trusted(workspace, fake_embedder):
    from deepresearch.facts import Fact

    deps = make_deps(workspace, fake_embedder)
    price = "The price of sqlite-vec vectors in vec0 tables is 0 dollars in 2026."
    spec = "sqlite-vec stores vectors in vec0 virtual tables."
    deps.kb.add_facts(  # verified three days ago: too old for market data, fresh for technology
        [
            Fact(price, "https://pypi.org/project/sqlite-vec/", category="market_data"),
            Fact(spec, "https://github.com/asg017/sqlite-vec", category="technology"),
        ],
        now=time.time() - 3 * 86400,
    )
    result = run_research(workspace, "sqlite-vec vectors in vec0 tables", RunOptions(loops=1, queries=3), deps=deps)
    state = RunStore(workspace.db).load_state(result.run_id)
    # The fresh technology fact covers the topic; the market_data fact is re-verified by a search.
    assert state.queries_done == [price]
    assert "## From the knowledge base" in result.report and "https://pypi.org/project/sqlite-vec/" in result.report


def test_a_failing_search_backend_is_reported_and_the_run_still_finishes(workspace, fake_embedder):
    from deepresearch.errors import SearchError

    class DownBackend(ListBackend):
        def search(self, query, count):
            self.calls.append(query)
            raise SearchError("SearXNG at http://127.0.0.1:9 is unreachable — start it or use --backend corpus")

    events = []
    deps = make_deps(workspace, fake_embedder, RoutedChatModel(), DownBackend())
    result = run_research(
        workspace,
        TOPIC,
        RunOptions(loops=2, queries=1),
        deps=deps,
        progress=lambda event, **info: events.append((event, info)),
    )
    failed = [info for event, info in events if event == "search" and "search failed" in info.get("skipped", "")]
    assert failed and "unreachable" in failed[0]["skipped"]
    assert result.stop_reason == "no-progress"
    assert RunStore(workspace.db).get(result.run_id).status == "done"
    assert "## Sources" not in result.report or not _cited_numbers(result.report)
