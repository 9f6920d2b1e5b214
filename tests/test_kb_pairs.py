"""`kb compress` at scale (`clusters_at_scale`): the linear candidate search finds the groups all-pairs finds."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import Fact
from deepresearch.kb.compress import _keys, _may_align, clusters, clusters_at_scale, similar_pairs
from deepresearch.kb.merge import value_change
from deepresearch.kb.store import KnowledgeBase
from deepresearch.kb.write import CANDIDATES
from deepresearch.models.base import Embedder

NOW = 1_800_000_000.0
DAY = 86400.0
WORDS = "amber basalt cobalt dune ember fjord garnet heath iris jade kelp lichen moss nectar onyx".split()


def _vector(key: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=384)


class TwinEmbedder(Embedder):
    """Texts equal up to their numbers (updates) share most of their vector (cosine ≈ 0.92);
    "It is reported that …" rewordings even more (≈ 0.99); anything else is unrelated."""

    model_id, dimension = "twin-fake", 384

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            plain = text.removeprefix("It is reported that ")
            noise = 0.1 if plain != text else 0.3 if re.search(r"\d", plain) else 0.0
            vector = _vector(re.sub(r"\d+", "#", plain.lower())) + noise * _vector(text)
            out.append(vector / np.linalg.norm(vector))
        return np.array(out, dtype=np.float32)


def _name(i: int) -> str:
    return " ".join(WORDS[(i // 15**p) % 15] for p in range(3))


def test_linear_pairs_find_the_groups_all_pairs_finds(tmp_path):
    kb = KnowledgeBase(connect(tmp_path / "kb.db"), TwinEmbedder(), KBConfig())
    facts = [Fact(f"The {_name(i)} survey counted {i} stations.", f"https://p.example/{i}") for i in range(1500)]
    kb.add_facts(facts, now=NOW - 10 * DAY, merge=False)
    later = [
        Fact(f"The {_name(i)} survey counted {i + 7} stations.", f"https://q.example/{i}") for i in range(0, 300, 10)
    ]
    reworded = [
        Fact(f"It is reported that the {_name(i)} survey counted {i} stations.", f"https://r.example/{i}")
        for i in range(5, 300, 10)
    ]
    kb.add_facts(later + reworded, now=NOW, merge=False)
    total = kb.conn.execute("select count(*) from facts where status = 'active'").fetchone()[0]

    exact, _, _ = clusters(kb.conn, kb.config)  # below PAIRS_MIN_FACTS: all pairs
    linear, count, vectors = clusters_at_scale(kb.conn, kb.config, total, CANDIDATES + 1)
    assert count == total == 1560
    groups = {frozenset(f.id for f in g) for g in exact}
    assert len(groups) >= 50  # of 30 updates (those the rule calls one) and 30 rewordings
    assert {frozenset(f.id for f in g) for g in linear} == groups
    assert set(vectors) == {f.id for g in linear for f in g}


def test_pairs_are_exact_cosines_above_the_threshold(tmp_path):
    kb = KnowledgeBase(connect(tmp_path / "kb.db"), TwinEmbedder(), KBConfig())
    kb.add_facts([Fact(f"The {_name(i)} survey counted {i} stations.", f"https://p.example/{i}") for i in range(200)])
    kb.add_facts(
        [
            Fact(f"It is reported that the {_name(i)} survey counted {i} stations.", "https://r.example/x")
            for i in range(0, 200, 20)
        ],
        merge=False,
    )
    a, b, cosine, _ = similar_pairs(kb.conn, 0.9, CANDIDATES + 1)
    assert len(a) == 10
    for x, y, c in zip(a.tolist(), b.tolist(), cosine.tolist(), strict=True):
        vx, vy = (
            np.frombuffer(
                kb.conn.execute("select embedding from fact_vec where rowid = ?", (r,)).fetchone()[0], dtype=np.float32
            )
            for r in (x, y)
        )
        assert abs(float(vx @ vy) - c) < 2e-3


def test_the_text_bound_never_drops_a_pair_the_rule_links(tmp_path):
    conn = connect(tmp_path / "kb.db")
    kb = KnowledgeBase(conn, TwinEmbedder(), KBConfig())
    texts = [
        "The cat is 2 years old and very clingy.",
        "The cat is 3 years old and very clingy.",
        "Revenue grew 12% in 2023, the company said.",
        "Revenue grew 15% in 2023, the company said.",
        "Paris is the capital of France.",
        "该片由詹姆斯·卡梅隆执导，于2009年上映。",  # Chinese: one whitespace token, many words
        "该片由斯蒂夫·康拉德执导，于2009年上映。",
        "小明喜欢画画，也喜欢在公园里跑步。",
    ]
    kb.add_facts([Fact(t, f"https://t.example/{i}") for i, t in enumerate(texts)], merge=False)
    keys = _keys(conn, [1, 2, 3, 4, 5, 6, 7, 8])
    assert _may_align(keys[1], keys[2]) and _may_align(keys[3], keys[4])
    assert not _may_align(keys[1], keys[5])
    assert value_change(texts[5], texts[6]) is not None and _may_align(keys[6], keys[7])  # kept: the rule links it
    assert not _may_align(keys[6], keys[8])
