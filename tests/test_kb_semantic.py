"""Semantic recall with the real all-MiniLM-L6-v2 model (DESIGN §3 "GPU shipments")."""

from __future__ import annotations

import pytest

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase

pytestmark = pytest.mark.slow
NOW = 1_800_000_000.0
DAY = 86400.0

CHIPS = [
    "Nvidia's sales of AI accelerator chips to data centers tripled in 2024.",
    "AI chip sales reached 53 billion dollars last year, led by Nvidia and AMD.",
    "TSMC said demand for AI processors will keep its advanced nodes fully booked.",
]
UNRELATED = [
    "The Eiffel Tower is about 330 metres tall.",
    "Bananas are a good source of potassium.",
    "The Treaty of Westphalia was signed in 1648.",
    "Regular exercise lowers the risk of heart disease.",
    "The city council approved a new bicycle lane on Main Street.",
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory, real_embedder):
    conn = connect(tmp_path_factory.mktemp("semantic") / "kb.db")
    store = KnowledgeBase(conn, real_embedder, KBConfig())
    facts = [
        Fact(t, f"https://chips.example/{i}", category="market_data", created_at=NOW - DAY) for i, t in enumerate(CHIPS)
    ]
    facts += [
        Fact(t, f"https://other.example/{i}", category="historical", created_at=NOW - DAY)
        for i, t in enumerate(UNRELATED)
    ]
    store.add_facts(facts, now=NOW)
    yield store
    conn.close()


def test_gpu_shipments_recalls_ai_chip_sales(kb):
    recall = kb.query("GPU shipments", top_k=8, now=NOW)
    assert not recall.degraded
    ranked = [h.fact for h in recall.hits]
    assert set(ranked[:3]) == set(CHIPS)
    chip_scores = [h.relevance for h in recall.hits if h.fact in CHIPS]
    other_scores = [h.relevance for h in recall.hits if h.fact in UNRELATED]
    assert min(chip_scores) > max(other_scores)
    assert recall.hits[0].age_days == pytest.approx(1.0)
    assert recall.hits[0].confidence == pytest.approx(0.7 * 2.718281828**-0.1, rel=1e-6)


def test_same_answer_from_ram_engine_and_model_recorded(kb, real_embedder):
    ram = KnowledgeBase(kb.conn, real_embedder, KBConfig(ram_index_min_facts=0))
    assert [h.id for h in ram.query("GPU shipments", top_k=3, now=NOW).hits] == [
        h.id for h in kb.query("GPU shipments", top_k=3, now=NOW).hits
    ]
    meta = dict(kb.conn.execute("select key, value from meta where key like 'kb.embedding%'"))
    assert meta == {"kb.embedding_model": real_embedder.model_id, "kb.embedding_dimension": "384"}


def test_lifecycle_hides_stale_chip_facts_but_inform_shows_them(kb):
    later = NOW + 10 * DAY  # market_data TTL is 7 days
    assert not any(h.fact in CHIPS for h in kb.query("GPU shipments", mode="lifecycle", now=later).hits)
    inform = kb.query("GPU shipments", mode="inform", top_k=3, now=later).hits
    assert {h.fact for h in inform} == set(CHIPS) and {h.confidence for h in inform} == {0.7}


@pytest.fixture(scope="module")
def docs_kb(tmp_path_factory, real_embedder):
    """~300 real sentences (the project's own docs and docstrings) in five categories at mixed ages."""
    import re
    from pathlib import Path

    from deepresearch.facts import CATEGORIES

    root = Path(__file__).resolve().parents[1]
    texts: dict[str, None] = {}
    for path in (
        sorted(root.glob("*.md")) + sorted(root.glob("docs/**/*.md")) + sorted(root.glob("deepresearch/**/*.py"))
    ):
        for part in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-#*]", path.read_text(encoding="utf-8")):
            sentence = " ".join(part.replace("#", "").split())
            if 40 <= len(sentence) <= 300 and not any(c in sentence for c in "|=("):
                texts.setdefault(sentence)
    chosen = list(texts)[:300]
    conn = connect(tmp_path_factory.mktemp("bits") / "kb.db")
    store = KnowledgeBase(conn, real_embedder, KBConfig(ram_index_min_facts=0, bit_index_min_facts=0))
    facts = [
        Fact(
            t,
            f"https://docs.example/{i}",
            category=CATEGORIES[i % 5],
            created_at=NOW - (i % 37) * 5 * DAY,
        )
        for i, t in enumerate(chosen)
    ]
    store.add_facts(facts, now=NOW, merge=False)
    yield store
    conn.close()


@pytest.mark.parametrize("mode", ["off", "lifecycle"])
def test_compact_copy_and_exact_search_agree_on_real_vectors(docs_kb, real_embedder, mode):
    """The quantized path (sign bits, sign re-score, exact re-rank) returns exact search's top-10."""
    from deepresearch.kb import lifecycle
    from deepresearch.kb.codes import CodeIndex
    from deepresearch.kb.engines import search_vec0
    from deepresearch.kb.lifecycle import Filter

    assert docs_kb.conn.execute("select count(*) from facts").fetchone()[0] >= 250
    flt = Filter(lifecycle.visibility(mode, docs_kb.config), NOW, 0.0, docs_kb.config)
    # 20 exact re-ranks from a 40-row Hamming shortlist out of ~300: the codes must rank well
    tight = CodeIndex(rerank=2, shortlist=4)
    tight.refresh(docs_kb.conn)
    overlaps = []
    for query in ("how fast is recall at a hundred thousand facts", "expired facts and the sweep", "cache files"):
        vector = real_embedder.embed(query)
        exact = search_vec0(docs_kb.conn, vector, flt, 10)
        assert len(exact) == 10
        via_kb = docs_kb.query(query, top_k=10, mode=mode, now=NOW)  # bit_index_min_facts=0: the compact copy
        assert docs_kb.indexes.codes.loaded and not docs_kb.indexes.ram.rids.size
        assert [h.id for h in via_kb.hits] == [
            docs_kb.conn.execute("select id from facts where rid = ?", (rid,)).fetchone()[0] for rid, _ in exact
        ]
        assert [h.relevance for h in via_kb.hits] == pytest.approx([score for _, score in exact], abs=1e-5)
        overlaps.append(len({r for r, _ in tight.search(vector, flt, 10)} & {r for r, _ in exact}))
    assert sum(overlaps) / len(overlaps) >= 8, overlaps  # sign codes alone must rank close to exact
