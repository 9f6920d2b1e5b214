"""Keyword recall: user text is escaped for FTS5 (never raises) and CJK text is searchable."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.errors import InputError
from deepresearch.facts import Fact
from deepresearch.kb.engines import match_expression, search_fts, terms
from deepresearch.kb.lifecycle import Filter, visibility
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeEmbedder

NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    conn = connect(tmp_path_factory.mktemp("fts") / "kb.db")
    store = KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    store.add_facts(
        [
            Fact('He said "AND OR NOT" (NEAR) * in a quote', "https://q.example"),
            Fact("AI芯片销量在2024年增长了三倍", "https://zh.example"),
            Fact("GPU出货量创下历史新高", "https://zh.example/2"),
            Fact("SQLite uses a write-ahead log for concurrency", "https://s.example"),
        ],
        now=NOW,
    )
    yield store
    conn.close()


def _fts(kb, text, k=10):
    flt = Filter(visibility("off", kb.config), NOW, 0.0, kb.config)
    return search_fts(kb.conn, text, flt, k)


@given(text=st.text(max_size=60))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_query_text_never_raises(kb, text):
    hits = _fts(kb, text)
    assert all(0.0 <= rel <= 1.0 for _, rel in hits)


@given(text=st.text(alphabet=st.sampled_from(list("\"()*:^-+ ANDORNT{}[]'\\%_ab芯片")), max_size=30))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fts_syntax_characters_are_plain_text(kb, text):
    expr = match_expression(text)
    if expr is not None:
        kb.conn.execute("select count(*) from fact_fts where fact_fts match ?", (expr,)).fetchone()
    _fts(kb, text)


@pytest.mark.parametrize(
    ("query", "url"),
    [
        ("芯片销量", "https://zh.example"),
        ("GPU出货量", "https://zh.example/2"),
        ('"AND OR NOT" (NEAR', "https://q.example"),
        ("write-ahead", "https://s.example"),
        ("AI", "https://zh.example"),
    ],
)
def test_keyword_recall_finds(kb, query, url):
    rids = [rid for rid, _ in _fts(kb, query)]
    found = [kb.conn.execute("select source_url from facts where rid = ?", (r,)).fetchone()[0] for r in rids]
    assert url in found


def test_terms_split_cjk_runs_into_trigrams():
    long_terms, short_terms = terms("GPU出货量 AI")
    assert long_terms == ["出货量", "gpu"] and short_terms == ["ai"]
    assert terms("the of and")[0] == []


@pytest.fixture(scope="module")
def degraded_kb(tmp_path_factory):
    """A KB created while sqlite-vec was unavailable (migration m103 skipped)."""
    import os

    path = tmp_path_factory.mktemp("novec") / "kb.db"
    os.environ["DEEPRESEARCH_DISABLE_VEC"] = "1"
    try:
        conn = connect(path)
    finally:
        del os.environ["DEEPRESEARCH_DISABLE_VEC"]
    store = KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    store.add_facts([Fact("Stored before sqlite-vec was installed", "https://early.example")], now=NOW)
    yield store, path
    conn.close()


@given(text=st.text(max_size=40), mode=st.sampled_from(["off", "inform", "freshness", "lifecycle", "x"]))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_kb_query_with_arbitrary_text_never_raises(degraded_kb, text, mode):
    store, _ = degraded_kb
    if mode == "x":  # an unknown mode is a user error naming the modes (issue 21), whatever the text
        with pytest.raises(InputError, match="use one of off, inform, freshness, lifecycle"):
            store.query(text, mode=mode, now=NOW)
        return
    recall = store.query(text, mode=mode, now=NOW)
    assert recall.degraded and "sqlite-vec" in recall.reason


def test_db_created_without_sqlite_vec_upgrades_when_it_returns(degraded_kb):
    store, path = degraded_kb
    assert store.conn.execute("select count(*) from sqlite_master where name = 'fact_vec'").fetchone()[0] == 0
    conn = connect(path)  # m103 applies now
    kb = KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    assert any("without a vector" in p for p in kb.check())
    recall = kb.query("stored before sqlite-vec", now=NOW)
    assert not recall.degraded and recall.hits[0].source_url == "https://early.example"
    assert kb.check() == []
    conn.close()
