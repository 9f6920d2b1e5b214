"""KnowledgeBase storage: add/reconfirm/reject, supersede + history, fail-closed model checks,
filters inside the search, the RAM engine, degraded keyword recall and check()."""

from __future__ import annotations

import hashlib

import pytest

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.errors import DimensionMismatch, InputError, ModelNotFound, NotFound
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeEmbedder

NOW = 1_800_000_000.0
DAY = 86400.0


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "kb.db"


@pytest.fixture
def kb(db_path):
    conn = connect(db_path)
    yield KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    conn.close()


def _file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_add_rejects_reconfirms_normalizes(kb):
    result = kb.add_facts(
        [
            Fact(
                "Nvidia shipped 3.7 million data-center GPUs in 2023.",
                "https://a.example/1",
                category="Market Data",
                confidence=1.7,
            ),
            Fact("tiny", "https://a.example/2"),
            Fact("   ", "https://a.example/3"),
            Fact("A fact without any real source url", "source-1"),
            Fact("nvidia  shipped 3.7 million data-center GPUs in 2023", "https://b.example/1", confidence=0.4),
            Fact(
                "Some claim with an odd category label",
                "https://c.example/1",
                category="gossip",
                confidence=-3,
            ),
        ],
        now=NOW,
    )
    assert len(result.added) == 2 and len(result.reconfirmed) == 1
    assert [r for _, r in result.rejected][0].startswith("too short")
    assert "source_url" in result.rejected[2][1]
    first = kb.get(result.added[0])
    assert first.category == "market_data" and first.confidence == 1.0
    assert first.sources == ["https://a.example/1", "https://b.example/1"]
    assert first.expires_at == NOW + 7 * DAY
    other = kb.get(result.added[1])
    assert other.category == "strategy" and other.confidence == 0.0
    assert [e.event for e in kb.history(first.id)] == ["add", "reconfirm"]
    assert kb.check() == []


def test_reconfirm_refreshes_verified_at_keeps_max_confidence_and_reactivates(kb):
    fid = kb.add_facts(
        [Fact("Chip prices rose 12% in March", "https://a.example", category="market_data", confidence=0.9)],
        now=NOW,
    ).added[0]
    assert kb.sweep(now=NOW + 8 * DAY).expired == 1
    assert kb.get(fid).status == "expired"
    again = kb.add_facts(
        [Fact("Chip prices rose 12% in March.", "https://b.example", category="market_data", confidence=0.5)],
        now=NOW + 9 * DAY,
    )
    assert again.reconfirmed == [fid]
    fact = kb.get(fid)
    assert (fact.status, fact.confidence, fact.verified_at) == ("active", 0.9, NOW + 9 * DAY)
    assert fact.expires_at == NOW + 16 * DAY
    assert [e.event for e in kb.history(fid)] == ["add", "expire", "reconfirm"]
    assert kb.query("chip prices", mode="lifecycle", now=NOW + 10 * DAY).hits[0].id == fid
    assert kb.check() == []


def test_supersede_keeps_provenance_and_history(kb):
    old = kb.add_facts([Fact("The cat is 2 years old and very clingy", "https://pets.example/a")], now=NOW).added[0]
    new = kb.supersede(old, Fact("The cat is 3 years old and very clingy", "https://pets.example/b"), now=NOW + DAY)
    old_fact, new_fact = kb.get(old), kb.get(new)
    assert old_fact.status == "superseded" and old_fact.superseded_by == new
    assert new_fact.sources == ["https://pets.example/a", "https://pets.example/b"]
    assert [e.event for e in kb.history(old)] == ["add", "supersede"]
    merge = kb.history(new)[0]
    assert (merge.event, merge.old_text, merge.new_text) == ("merge", old_fact.fact, new_fact.fact)
    assert [h.id for h in kb.query("cat years clingy", mode="off", now=NOW + DAY).hits] == [new]
    with pytest.raises(InputError, match="already superseded"):
        kb.supersede(old, Fact("The cat is 4 years old and very clingy", "https://pets.example/c"))
    assert kb.check() == []


def test_get_and_history_of_unknown_id(kb):
    with pytest.raises(NotFound):
        kb.get("01NOPE")
    with pytest.raises(NotFound):
        kb.history("01NOPE")


def test_model_mismatch_fails_closed_and_writes_nothing(kb, db_path):
    kb.add_facts([Fact("GPU shipments grew strongly last year", "https://a.example")], now=NOW)
    kb.conn.close()
    before = _file_digest(db_path)
    for other in (FakeEmbedder(model_id="another-model"), FakeEmbedder(dimension=128)):
        conn = connect(db_path)
        wrong = KnowledgeBase(conn, other, KBConfig())
        with pytest.raises(DimensionMismatch, match="deepresearch kb reembed"):
            wrong.query("GPU shipments", now=NOW)
        with pytest.raises(DimensionMismatch, match="deepresearch kb reembed"):
            wrong.add_facts([Fact("Another fact that must not be stored", "https://b.example")], now=NOW)
        assert conn.execute("select count(*) from facts").fetchone()[0] == 1
        conn.close()
    assert _file_digest(db_path) == before


def test_reembed_switches_model_and_dimension(db_path):
    conn = connect(db_path)
    KnowledgeBase(conn, FakeEmbedder(), KBConfig()).add_facts(
        [Fact("Reembedding keeps every fact searchable", "https://a.example")], now=NOW
    )
    kb = KnowledgeBase(conn, FakeEmbedder(dimension=64, model_id="small"), KBConfig())
    assert kb.reembed() == 1
    assert kb.query("reembedding searchable", now=NOW).hits[0].fact.startswith("Reembedding")
    assert kb.check() == []
    conn.close()


def test_filters_run_inside_the_search_so_stale_facts_never_crowd_out(kb):
    # 40 stale near-identical facts, then 3 fresh ones that are less similar to the query
    stale = [
        Fact(
            f"GPU shipments report number {i} GPU shipments",
            f"https://old.example/{i}",
            category="market_data",
            created_at=NOW - 60 * DAY,
        )
        for i in range(40)
    ]
    fresh = [
        Fact(f"Fresh note {i} about GPU demand", f"https://new.example/{i}", category="market_data") for i in range(3)
    ]
    kb.add_facts(stale + fresh, now=NOW)
    hits = kb.query("GPU shipments", top_k=3, mode="lifecycle", now=NOW).hits
    assert sorted(h.source_url for h in hits) == [f"https://new.example/{i}" for i in range(3)]
    low = kb.query("GPU shipments", top_k=3, mode="freshness", min_confidence=0.5, now=NOW).hits
    assert len(low) == 3


def test_ram_engine_matches_vec0(db_path):
    conn = connect(db_path)
    vec = KnowledgeBase(conn, FakeEmbedder(), KBConfig(ram_index_min_facts=10**9))
    ram = KnowledgeBase(conn, FakeEmbedder(), KBConfig(ram_index_min_facts=0))
    cats = ["market_data", "product_info", "strategy", "technology", "historical"]
    vec.add_facts(
        [
            Fact(
                f"topic {i % 7} detail {i} words {i % 3}",
                f"https://x.example/{i}",
                category=cats[i % 5],
                confidence=(i % 10) / 10,
                created_at=NOW - (i % 50) * DAY,
            )
            for i in range(300)
        ],
        now=NOW,
        merge=False,  # synthetic texts: the fake embedder's hash collisions would merge some
    )
    for kw in (
        {},
        {"mode": "lifecycle"},
        {"mode": "off", "category": "technology"},
        {"min_confidence": 0.4},
        {"mode": "freshness", "freshness": "high", "top_k": 25},
    ):
        a = vec.query("topic 3 detail words 1", now=NOW, **kw).hits
        b = ram.query("topic 3 detail words 1", now=NOW, **kw).hits
        assert [h.relevance for h in a] == pytest.approx([h.relevance for h in b], abs=1e-5)
        cut = a[-1].relevance + 1e-4  # equal scores may tie-break differently at the k boundary
        assert {h.id for h in a if h.relevance > cut} == {h.id for h in b if h.relevance > cut}

        by_id = {h.id: h for h in b}
        assert all(by_id[h.id].confidence == pytest.approx(h.confidence) for h in a if h.relevance > cut)
    # the RAM index notices writes made through another KnowledgeBase (generation counter)
    new = vec.add_facts([Fact("topic 3 detail words 1 brand new", "https://x.example/new")], now=NOW).added[0]
    assert ram.query("topic 3 detail words 1 brand new", now=NOW).hits[0].id == new
    vec.sweep(now=NOW + 400 * DAY, purge=True)
    later = NOW + 400 * DAY
    left = {h.id for h in vec.query("topic", mode="off", now=later, top_k=500).hits}
    assert {h.id for h in ram.query("topic", mode="off", now=later, top_k=500).hits} == left
    assert len(left) == conn.execute("select count(*) from facts").fetchone()[0]
    conn.close()


def test_three_engines_answer_one_search_interface_and_one_rule_picks_them(db_path):
    from deepresearch.kb import lifecycle
    from deepresearch.kb.engines import Engines
    from deepresearch.kb.lifecycle import Filter

    kb = KnowledgeBase(connect(db_path), FakeEmbedder(), KBConfig())
    texts = [f"topic {i % 7} detail {i} words {i % 3}" for i in range(200)]
    facts = [Fact(t, f"https://x.example/{i}", created_at=NOW - i * DAY) for i, t in enumerate(texts)]
    kb.add_facts(facts, now=NOW, merge=False)
    engines = Engines(kb.conn, KBConfig(ram_index_min_facts=100, bit_index_min_facts=1000))
    assert engines.engine_for(50, one_shot=False) is engines.vec0
    assert engines.engine_for(500, one_shot=True) is engines.codes  # one query: never load the matrix
    assert engines.engine_for(500, one_shot=False) is engines.ram
    assert engines.engine_for(500, one_shot=True) is engines.ram  # loaded already: keep using it
    assert engines.engine_for(50, one_shot=False, bulk=True) is engines.ram  # a sync pull's batch
    assert engines.engine_for(5000, one_shot=False) is engines.codes
    queries = FakeEmbedder().embed_batch(["topic 3 detail words 1", "topic 5 detail 12"])
    for mode in ("off", "lifecycle"):
        flt = Filter(lifecycle.visibility(mode, kb.config), NOW, 0.0, kb.config)
        per_engine = [
            [engine.search(q, flt, 10) for q in queries] for engine in (engines.vec0, engines.ram, engines.codes)
        ]
        for engine, found in zip((engines.vec0, engines.ram, engines.codes), per_engine, strict=True):
            batch = engine.search_batch(queries, flt, 10)  # one query at a time or all at once: the same facts, and
            for one, many in zip(found, batch, strict=True):  # scores up to a matrix product's last bit
                assert [i for i, _ in many] == [i for i, _ in one]
                assert [s for _, s in many] == pytest.approx([s for _, s in one], abs=1e-6)
        for found in per_engine[1:]:
            for exact, other in zip(per_engine[0], found, strict=True):
                assert [s for _, s in other] == pytest.approx([s for _, s in exact], abs=1e-5)


def test_degraded_without_sqlite_vec_uses_fts_with_same_rules(db_path, monkeypatch):
    conn = connect(db_path)
    KnowledgeBase(conn, FakeEmbedder(), KBConfig()).add_facts(
        [
            Fact("AI chip sales tripled in 2024", "https://a.example", category="market_data"),
            Fact("AI芯片销量在2024年增长了三倍", "https://b.example", category="market_data"),
            Fact(
                "Old AI chip sales figure from 2019",
                "https://c.example",
                category="market_data",
                created_at=NOW - 30 * DAY,
            ),
        ],
        now=NOW,
    )
    conn.close()
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    conn = connect(db_path)
    embedder = FakeEmbedder()
    kb = KnowledgeBase(conn, embedder, KBConfig())
    recall = kb.query("chip sales", mode="lifecycle", now=NOW)
    assert recall.degraded and "sqlite-vec" in recall.reason
    assert [h.source_url for h in recall.hits] == ["https://a.example"]
    assert embedder.calls == 0
    assert [h.source_url for h in kb.query("芯片销量", now=NOW).hits] == ["https://b.example"]
    assert [h.source_url for h in kb.query("AI", mode="off", now=NOW, top_k=5).hits]  # short term → LIKE
    # writes still work; the vectors are filled in once sqlite-vec is back
    kb.add_facts([Fact("Written while sqlite-vec was off", "https://d.example")], now=NOW)
    conn.close()
    monkeypatch.delenv("DEEPRESEARCH_DISABLE_VEC")
    conn = connect(db_path)
    kb = KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    assert any("without a vector" in p for p in kb.check())
    assert kb.query("written while sqlite-vec was off", now=NOW).hits[0].source_url == "https://d.example"
    assert kb.check() == []
    conn.close()


def test_degraded_when_model_cannot_load_and_loaded_lazily(kb):
    kb.add_facts([Fact("Lazy loading keeps keyword recall fast", "https://a.example")], now=NOW)
    calls = []

    def broken():
        calls.append(1)
        raise ModelNotFound("embedding model folder not found: /nowhere — set embedding.model")

    lazy = KnowledgeBase(kb.conn, broken, KBConfig())
    recall = lazy.query("keyword recall", now=NOW)
    assert recall.degraded and "cannot be loaded" in recall.reason and "/nowhere" in recall.reason
    assert recall.hits[0].fact.startswith("Lazy")
    assert calls == [1]


def test_check_reports_disagreement(kb):
    fid = kb.add_facts([Fact("Check finds a vector that went missing", "https://a.example")], now=NOW).added[0]
    kb.conn.execute("delete from fact_vec")
    kb.conn.execute("delete from fact_sources")
    problems = kb.check()
    assert any("without a vector" in p and fid in p for p in problems)
    assert any("without any source" in p for p in problems)


def test_other_dimension_on_a_fresh_db_rebuilds_the_empty_vector_table(db_path):
    conn = connect(db_path)
    kb = KnowledgeBase(conn, FakeEmbedder(dimension=64, model_id="small-model"), KBConfig())
    assert kb.query("nothing stored yet", now=NOW).hits == []
    kb.add_facts([Fact("A sixty-four dimensional fact vector", "https://a.example")], now=NOW)
    assert kb.query("sixty-four dimensional", now=NOW).hits[0].fact.startswith("A sixty-four")
    assert kb.check() == []
    conn.close()


def test_bulk_vector_read_matches_the_vec0_table(kb):
    import numpy as np

    from deepresearch.kb.engines import read_all_vectors

    ids = kb.add_facts(
        [
            Fact(
                f"Bulk read fact number {i} here",
                f"https://b.example/{i}",
                category="market_data" if i % 3 else "historical",
            )
            for i in range(2100)
        ],
        now=NOW,
    ).added
    kb.supersede(ids[5], Fact("Bulk read fact number 5 corrected", "https://b.example/x"), now=NOW)
    kb.sweep(now=NOW + 30 * DAY, purge=True)  # deletes leave holes in vec0 chunks
    rids, matrix = read_all_vectors(kb.conn)
    rows = kb.conn.execute("select rowid, embedding from fact_vec").fetchall()
    expected = {r[0]: np.frombuffer(r[1], dtype=np.float32) for r in rows}
    assert len(rids) == len(expected) == 702  # 700 historical + superseded old + its successor
    assert all(np.array_equal(matrix[i], expected[int(rid)]) for i, rid in enumerate(rids))
