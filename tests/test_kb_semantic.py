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
