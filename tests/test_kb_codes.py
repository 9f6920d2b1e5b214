"""The compact vector copy (kb/codes.py): lifecycle filters inside the search, the log that keeps it
current under every kind of write, folds that cannot lose changes, and an old file's upgrade."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import CATEGORIES, Fact
from deepresearch.kb import lifecycle
from deepresearch.kb.codes import STATE_KEY, CodeIndex, fold, quantize
from deepresearch.kb.engines import search_vec0
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.store import KnowledgeBase
from deepresearch.migrations import MIGRATIONS, apply_migrations
from deepresearch.models.base import Embedder

NOW = 1_800_000_000.0
DAY = 86400.0


class DenseEmbedder(Embedder):
    """A dense unit vector seeded by the text: no ties, so every engine must give one order."""

    model_id, dimension = "dense-fake", 384

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).normal(size=self.dimension)
            out.append(vector / np.linalg.norm(vector))
        return np.array(out, dtype=np.float32)


def facts(n: int, start: int = 0) -> list[Fact]:
    return [
        Fact(
            f"bench fact number {i} in the compact copy test",
            f"https://codes.example/{i}",
            category=CATEGORIES[i % 5],
            confidence=0.3 + (i % 7) / 10,
            created_at=NOW - (i % 61) * 3 * DAY,
        )
        for i in range(start, start + n)
    ]


def id_of(kb: KnowledgeBase, rid: int) -> str:
    return kb.conn.execute("select id from facts where rid = ?", (rid,)).fetchone()[0]


def arrays(index: CodeIndex) -> list[np.ndarray]:
    return [index.rids, index.bits, index.category, index.status, index.verified, index.confidence]


def rebuilt(conn) -> CodeIndex:
    """A copy built from scratch (as after a reembed), without storing it."""
    index = CodeIndex()
    index.dim = 384
    conn.execute("begin")
    index._build(conn)
    conn.execute("commit")
    return index


@pytest.fixture
def kb(tmp_path):
    store = KnowledgeBase(connect(tmp_path / "kb.db"), DenseEmbedder(), KBConfig())
    store.add_facts(facts(600), now=NOW, merge=False)
    yield store
    store.conn.close()


def test_compact_search_is_exact_search_under_every_lifecycle_rule(kb):
    """With every eligible row re-ranked exactly, the compact path must return vec0's exact top-k:
    the filters (status, category, age, decayed confidence) are the same rules, applied first."""
    kb.sweep(now=NOW + 20 * DAY)
    kb.absorb(
        [id_of(kb, 3), id_of(kb, 8)],
        Fact("a merged bench fact for the compact test", "https://codes.example/m"),
        now=NOW,
    )
    index = CodeIndex(rerank=10**6)
    index.refresh(kb.conn)
    query = DenseEmbedder().embed("what the query asks")
    cases = [
        dict(mode="off"),
        dict(mode="inform"),
        dict(mode="freshness", freshness="medium"),
        dict(mode="lifecycle"),
        dict(mode="lifecycle", category="technology"),
        dict(mode="off", include_expired=True),
    ]
    for case in cases:
        for floor in (0.0, 0.5):
            vis = lifecycle.visibility(case.pop("mode"), kb.config, **case)
            flt = Filter(vis, NOW + 20 * DAY, floor, kb.config)
            exact = search_vec0(kb.conn, query, flt, 10)
            compact = index.search(query, flt, 10)
            assert [r for r, _ in compact] == [r for r, _ in exact], (vis, floor)
            assert [s for _, s in compact] == pytest.approx([s for _, s in exact], abs=1e-5)
            case["mode"] = vis.mode


def test_stale_neighbours_never_make_a_result_short(tmp_path):
    """The 40 nearest facts were swept: the query still returns k active ones (filters come first)."""
    config = KBConfig(ram_index_min_facts=0, bit_index_min_facts=0)
    store = KnowledgeBase(connect(tmp_path / "kb.db"), DenseEmbedder(), config)
    store.add_facts(facts(300), now=NOW, merge=False)
    query = DenseEmbedder().embed("the question")
    nearest = search_vec0(
        store.conn, query, Filter(lifecycle.visibility("off", store.config), NOW, 0, store.config), 40
    )
    for rid, _ in nearest:
        store.conn.execute("update facts set status = 'expired' where rid = ?", (rid,))
        store.conn.execute("update fact_vec set status = 'expired' where rowid = ?", (rid,))
    store.conn.execute("update meta set value = 'x' where key = 'kb.generation'")
    store.conn.commit()
    found = store.query("the question", top_k=10, mode="off", now=NOW)
    assert len(found.hits) == 10 and {h.status for h in found.hits} == {"active"}
    assert store.indexes.codes.loaded and not store.indexes.ram.rids.size
    hidden = {store.conn.execute("select id from facts where rid = ?", (r,)).fetchone()[0] for r, _ in nearest}
    assert not hidden & {h.id for h in found.hits}


def test_the_log_keeps_the_copy_equal_to_a_rebuild_after_every_kind_of_write(kb):
    live = CodeIndex()
    live.refresh(kb.conn)
    assert kb.conn.execute("select count(*) from fact_codes_log").fetchone()[0] == 0  # folded on build
    steps = [
        lambda: kb.add_facts(facts(50, start=600), now=NOW, merge=False),  # inserts
        lambda: kb.add_facts(facts(5, start=10), now=NOW + DAY, merge=False),  # reconfirms: verified_at moves
        lambda: kb.sweep(now=NOW + 40 * DAY),  # status updates (and a fold)
        lambda: kb.sweep(now=NOW + 400 * DAY, purge=True),  # deletes
        lambda: kb.absorb([id_of(kb, 20), id_of(kb, 25)], facts(1, start=900)[0], now=NOW),
        lambda: kb.add_facts(facts(3, start=950), now=NOW, merge=False),  # rowids after a purge
    ]
    for step in steps:
        step()
        live.refresh(kb.conn, fold_min=10**9)  # apply in RAM only
        fresh = rebuilt(kb.conn)
        for mine, theirs in zip(arrays(live), arrays(fresh), strict=True):
            assert np.array_equal(mine, theirs)
        stored = CodeIndex()  # stored segments + the log
        stored.refresh(kb.conn, fold_min=10**9)
        for mine, theirs in zip(arrays(stored), arrays(fresh), strict=True):
            assert np.array_equal(mine, theirs)
    fold(kb.conn)
    int8 = dict(kb.conn.execute("select rid, vector from fact_codes_int8"))
    assert sorted(int8) == fresh.rids.tolist()
    for rid, blob in int8.items():
        stored_vector = kb.conn.execute("select embedding from fact_vec where rowid = ?", (rid,)).fetchone()[0]
        assert blob == quantize(np.frombuffer(stored_vector, dtype=np.float32))[0].tobytes()
    assert kb.check() == []


def test_a_stale_fold_is_skipped_and_loses_nothing(kb):
    """Two processes: the one that read the copy before the other folded must not write it back."""
    slow, fast = CodeIndex(), CodeIndex()
    slow.refresh(kb.conn)
    kb.add_facts(facts(20, start=700), now=NOW, merge=False)
    fast.refresh(kb.conn, fold_min=1)  # folds the 20 inserts
    kb.sweep(now=NOW + 40 * DAY)  # also folds
    state = kb.conn.execute("select value from meta where key = ?", (STATE_KEY,)).fetchone()[0]
    slow.seq -= 5  # as if it had read the log before the others folded
    slow._save(kb.conn, slow._state, "", full=False)
    assert kb.conn.execute("select value from meta where key = ?", (STATE_KEY,)).fetchone()[0] == state
    fresh, stored = rebuilt(kb.conn), CodeIndex()
    stored.refresh(kb.conn)
    for mine, theirs in zip(arrays(stored), arrays(fresh), strict=True):
        assert np.array_equal(mine, theirs)


def test_reembed_rebuilds_the_copy(kb):
    index = CodeIndex()
    index.refresh(kb.conn)
    before = index.bits.copy()

    class Other(DenseEmbedder):
        def embed_batch(self, texts):
            return super().embed_batch([t + " (other model)" for t in texts])

    KnowledgeBase(kb.conn, Other(), kb.config).reembed()  # the same file, rebuilt by another model
    index.refresh(kb.conn)
    assert index.rids.size == 600 and not np.array_equal(index.bits, before)
    assert np.array_equal(index.bits, rebuilt(kb.conn).bits)


def test_a_file_from_before_the_compact_copy_upgrades(tmp_path):
    path = tmp_path / "old.db"
    conn = connect(path, migrate=False)
    apply_migrations(conn, [m for m in MIGRATIONS if m.name != "m106_fact_codes"])
    old = KnowledgeBase(conn, DenseEmbedder(), KBConfig())
    old.add_facts(facts(200), now=NOW, merge=False)
    assert conn.execute("select count(*) from sqlite_master where name = 'fact_codes'").fetchone()[0] == 0
    conn.close()

    conn = connect(path)  # applies m106
    kb = KnowledgeBase(conn, DenseEmbedder(), KBConfig(ram_index_min_facts=0))
    kb.one_shot = True  # as `kb query`: the compact copy, built on first use
    hits = kb.query("the question", top_k=10, mode="off", now=NOW).hits
    flt = Filter(lifecycle.visibility("off", kb.config), NOW, 0, kb.config)
    exact = search_vec0(conn, DenseEmbedder().embed("the question"), flt, 10)
    rid_of = dict(conn.execute("select id, rid from facts"))
    assert [rid_of[h.id] for h in hits] == [r for r, _ in exact]
    assert conn.execute("select sum(n) from fact_codes").fetchone()[0] == 200
    kb.add_facts(facts(10, start=200), now=NOW, merge=False)
    assert conn.execute("select count(*) from fact_codes_log").fetchone()[0] == 10
    fold(conn)
    assert conn.execute("select sum(n) from fact_codes").fetchone()[0] == 210
    assert kb.check() == []


def test_merging_at_scale_uses_the_compact_copy_not_the_float_matrix(tmp_path):
    from tests.fakes import FakeEmbedder

    kb = KnowledgeBase(
        connect(tmp_path / "kb.db"), FakeEmbedder(), KBConfig(ram_index_min_facts=0, bit_index_min_facts=0)
    )
    kb.add_facts([Fact("The Rhine is 1,230 km long and flows into the North Sea.", "https://a.example/1")], now=NOW)
    result = kb.add_facts(
        [Fact("The Rhine is 1,230 km long and it flows into the North Sea.", "https://b.example/2")], now=NOW
    )
    assert len(result.merged) == 1
    assert kb.indexes.codes.loaded and not kb.indexes.ram.rids.size


def test_check_reports_a_copy_that_disagrees_with_the_facts(kb):
    fix = " — rebuild it: `sqlite3 deepresearch.db \"delete from meta where key = 'kb.codes'\"` (next query)"
    CodeIndex().refresh(kb.conn)
    kb.sweep(now=NOW + 40 * DAY)  # logged and folded
    assert kb.check() == []
    kb.conn.execute("update fact_codes set verified = zeroblob(length(verified))")
    assert kb.check() == ["compact vector copy: 600 lifecycle values differ from the facts" + fix]
    kb.conn.execute("delete from fact_codes")
    assert kb.check() == ["compact vector copy: 0 rows without a fact, 600 facts without a row" + fix]
    kb.conn.execute("delete from meta where key = ?", (STATE_KEY,))
    CodeIndex().refresh(kb.conn)
    assert kb.check() == []
