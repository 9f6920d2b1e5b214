"""Near-duplicate merging (kb/merge.py): fusion with differential preservation, the write
path, contradictions, `kb compress` (library and CLI)."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import Fact
from deepresearch.kb.merge import decide, fuse, fusion_problem, mechanical_merge, relation
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeChatModel, FakeEmbedder

OLD_CAT = "The cat is 2 years old and very clingy."
NEW_CAT = "The cat is 3 years old."
SQLITE_A = "SQLite stores the whole database in a single file on disk."
SQLITE_B = "SQLite stores an entire database in a single file on disk."
TOWER = "The Eiffel Tower in Paris is 330 metres tall."
T0, T1 = 1_700_000_000.0, 1_700_086_400.0


@pytest.fixture
def fake_kb(tmp_path):
    """A KB with the bag-of-words fake embedder and a threshold the cat pair (cos ≈ 0.68) passes."""
    conn = connect(tmp_path / "kb.db")
    yield KnowledgeBase(conn, FakeEmbedder(), KBConfig(duplicate_similarity=0.6))
    conn.close()


@pytest.fixture
def real_kb(tmp_path, real_embedder):
    """A KB with the real MiniLM embedder and the default threshold."""
    conn = connect(tmp_path / "real.db")
    yield KnowledgeBase(conn, real_embedder, KBConfig())
    conn.close()


def _digest(path) -> str:
    """The database file and its WAL (the -shm file is a shared-memory index that readers touch)."""
    return "".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in (path, path.with_name(path.name + "-wal")))


# --- fusion logic ------------------------------------------------------------------------


def test_mechanical_merge_keeps_every_old_detail():
    assert mechanical_merge(OLD_CAT, NEW_CAT) == "The cat is 3 years old and very clingy."
    # an added clause next to an old one: both kept
    assert (
        mechanical_merge("Apple was founded in 1976 in Cupertino.", "Apple was founded in 1976 by Steve Jobs.")
        == "Apple was founded in 1976 by Steve Jobs in Cupertino."
    )
    # reordered paraphrase that adds nothing: the richer old text stays
    old = "Paris is the capital of France and its largest city."
    assert mechanical_merge(old, "The capital of France is Paris.") == old
    # texts that do not align: nothing dropped, both kept
    merged = mechanical_merge("The company has 500 employees in Berlin.", "The company employs 800 people.")
    assert merged == "The company employs 800 people (earlier: The company has 500 employees in Berlin)."


def test_fusion_problem_and_relation():
    assert fusion_problem(OLD_CAT, NEW_CAT, "The cat is 3 years old and very clingy") is None
    assert "clingy" in fusion_problem(OLD_CAT, NEW_CAT, NEW_CAT)
    assert "new fact" in fusion_problem(OLD_CAT, NEW_CAT, OLD_CAT)
    assert "neither" in fusion_problem(OLD_CAT, NEW_CAT, "The cat is 3 years old, very clingy and black.")
    older, newer = (
        Fact(OLD_CAT, "https://a.example", verified_at=T0),
        Fact(NEW_CAT, "https://b.example", verified_at=T1),
    )
    assert relation(older, newer)[0] == "update"
    assert relation(older, Fact(NEW_CAT, "https://b.example", verified_at=T0))[0] == "contradiction"
    assert relation(older, Fact("The cat is 2 years old and clingy.", "https://c", verified_at=T0))[0] == "duplicate"
    py12 = Fact("Python 3.12 was released in October 2023.", "https://p", verified_at=T0)
    py13 = Fact("Python 3.13 was released in October 2024.", "https://q", verified_at=T1)
    assert relation(py12, py13)[0] == "distinct"
    assert decide(py12, py13).kind == "distinct"
    us = Fact("Product X costs 5 dollars in the US.", "https://u", verified_at=T0)
    uk = Fact("Product X costs 7 dollars in the UK.", "https://k", verified_at=T1)
    assert relation(us, uk)[0] == "distinct"  # another subject with its own value
    ceo = Fact("Tim Cook is the CEO of Apple.", "https://c", verified_at=T0)
    assert relation(ceo, Fact("Jane Doe is the CEO of Apple.", "https://d", verified_at=T1))[0] == "update"


def test_fuse_prefers_a_good_model_fusion_and_refuses_a_lossy_one():
    good = FakeChatModel([{"merged": "The cat, very clingy, is 3 years old.", "contradiction": False}])
    fusion = fuse(OLD_CAT, NEW_CAT, good)
    assert (fusion.method, fusion.text) == ("model", "The cat, very clingy, is 3 years old.")
    prompt = good.history[0]["messages"][-1]["content"]
    assert OLD_CAT in prompt and NEW_CAT in prompt
    lossy = FakeChatModel(default={"merged": "The cat is 3 years old.", "contradiction": False})
    fusion = fuse(OLD_CAT, NEW_CAT, lossy)
    assert (fusion.method, fusion.text) == ("mechanical", "The cat is 3 years old and very clingy.")
    assert len(lossy.history) == 2  # one retry told what was wrong, then the fallback
    assert "clingy" in lossy.history[1]["messages"][-1]["content"]


# --- the write path ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "method", "text"),
    [
        (
            {"merged": "The cat, very clingy, is 3 years old.", "contradiction": False},
            "model",
            "The cat, very clingy, is 3 years old.",
        ),
        (
            {"merged": "The cat is 3 years old.", "contradiction": False},
            "mechanical",
            "The cat is 3 years old and very clingy.",
        ),
    ],
)
def test_cat_update_on_write(fake_kb, reply, method, text):
    old_id = fake_kb.add_facts([Fact(OLD_CAT, "https://vet.example/2024")], now=T0).added[0]
    model = FakeChatModel(default=reply)
    result = fake_kb.add_facts([Fact(NEW_CAT, "https://vet.example/2025")], now=T1, model=model)
    assert result.reconfirmed == [] and len(result.merged) == 1
    record = result.merged[0]
    assert (record.kind, record.method, record.new_text) == ("update", method, text)
    merged = fake_kb.get(record.new_id)
    assert merged.fact == text and "clingy" in merged.fact
    assert merged.sources == ["https://vet.example/2024", "https://vet.example/2025"]
    assert merged.verified_at == T1 and result.added == [record.new_id]  # an update adds a value
    old = fake_kb.get(old_id)
    assert (old.status, old.superseded_by, old.fact) == ("superseded", record.new_id, OLD_CAT)
    assert [e.event for e in fake_kb.history(old_id)] == ["add", "supersede"]
    assert fake_kb.history(record.new_id)[0].old_text == OLD_CAT
    assert fake_kb.check() == []


def test_no_model_write_is_deterministic_and_merge_false_keeps_both(fake_kb):
    fake_kb.add_facts([Fact(OLD_CAT, "https://a.example")], now=T0)
    kept = fake_kb.add_facts([Fact(NEW_CAT, "https://b.example")], now=T1, merge=False)
    assert len(kept.added) == 1 and kept.merged == []
    again = fake_kb.add_facts([Fact("The cat is 3 years old now.", "https://c.example")], now=T1 + 60)
    assert [m.method for m in again.merged] == ["mechanical"]


def test_near_duplicate_with_real_embedder_merges_and_keeps_history(real_kb):
    old_id = real_kb.add_facts([Fact(SQLITE_A, "https://sqlite.org/onefile.html")], now=T0).added[0]
    result = real_kb.add_facts([Fact(SQLITE_B, "https://example.com/sqlite")], now=T1)
    assert len(result.merged) == 1 and result.added == []
    new_id = result.merged[0].new_id
    assert real_kb.get(old_id).status == "superseded" and real_kb.get(old_id).superseded_by == new_id
    assert set(real_kb.get(new_id).sources) == {
        "https://sqlite.org/onefile.html",
        "https://example.com/sqlite",
    }
    assert [e.event for e in real_kb.history(new_id)] == ["merge"]
    hits = real_kb.query("where does SQLite keep its data", mode="off", now=T1).hits
    assert [h.id for h in hits] == [new_id]  # the superseded row is never recalled
    # unrelated facts do not merge
    other = real_kb.add_facts([Fact("Bananas are rich in potassium and vitamin B6.", "https://f.example")], now=T1)
    assert len(other.added) == 1 and other.merged == []
    # different years: two claims about different times, both kept
    real_kb.add_facts([Fact("Python 3.12 was released in October 2023.", "https://py.example/12")], now=T0)
    py = real_kb.add_facts([Fact("Python 3.13 was released in October 2024.", "https://py.example/13")], now=T1)
    assert len(py.added) == 1 and py.merged == [] and py.flagged == []
    assert real_kb.check() == []


def test_contradiction_is_kept_side_by_side_and_flagged(real_kb):
    first = real_kb.add_facts([Fact(TOWER, "https://a.example")], now=T0).added[0]
    result = real_kb.add_facts([Fact("The Eiffel Tower in Paris is 300 metres tall.", "https://b.example")], now=T0)
    assert len(result.added) == 1 and result.merged == []
    second = result.added[0]
    assert result.flagged[0][:2] == (second, first)
    assert {real_kb.get(i).status for i in (first, second)} == {"active"}
    [conflict] = real_kb.conflicts([first])
    assert (conflict.fact_id, conflict.other_id, conflict.resolved_at) == (second, first, None)
    assert "330" in conflict.reason or "replaces" in conflict.reason
    # a later, clearly newer report updates the fact: the conflict is no longer open
    update = real_kb.add_facts(
        [Fact("The Eiffel Tower in Paris is 330 metres tall today.", "https://c.example")], now=T1
    )
    assert len(update.merged) == 1 and real_kb.conflicts() == []
    assert len(real_kb.conflicts(include_resolved=True)) == 1


def test_conflicts_cli(home, real_embedder):
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    kb = KnowledgeBase.from_workspace(ws)
    first = kb.add_facts([Fact(TOWER, "https://a.example")], now=T0).added[0]
    second = kb.add_facts([Fact("The Eiffel Tower in Paris is 300 metres tall.", "https://b.example")], now=T0).added[0]
    ws.close()
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["--home", str(home), "kb", "conflicts", "--json"]).stdout)
    assert [(c["fact_id"], c["other_id"]) for c in data] == [(second, first)]
    assert (data[0]["fact"], data[0]["other_fact"]) == (
        "The Eiffel Tower in Paris is 300 metres tall.",
        TOWER,
    )
    out = runner.invoke(app, ["--home", str(home), "kb", "conflicts"])
    assert out.exit_code == 0 and out.stdout.count("Eiffel") == 2 and "reason:" in out.stdout


def test_near_duplicates_within_one_batch_merge(real_kb):
    result = real_kb.add_facts(
        [
            Fact(SQLITE_A, "https://a.example", verified_at=T0),
            Fact(SQLITE_B, "https://b.example", verified_at=T1),
        ],
        now=T1,
    )
    assert len(result.added) == 1 and len(result.merged) == 1
    active = real_kb.conn.execute("select count(*) from facts where status = 'active'").fetchone()[0]
    assert active == 1 and real_kb.check() == []


# --- kb compress ---------------------------------------------------------------------------


def _cluster(kb: KnowledgeBase) -> list[str]:
    texts = [SQLITE_A, SQLITE_B, "SQLite keeps the whole database in a single file on disk."]
    return [
        kb.add_facts([Fact(t, f"https://s.example/{i}")], now=T0 + i * 3600, merge=False).added[0]
        for i, t in enumerate(texts)
    ] + kb.add_facts(
        [Fact("Bananas are rich in potassium and vitamin B6.", "https://f.example")], now=T0, merge=False
    ).added


def test_compress_dry_run_changes_nothing_then_merges_the_cluster(real_kb, tmp_path):
    ids = _cluster(real_kb)
    before = _digest(tmp_path / "real.db")
    dry = real_kb.compress(dry_run=True, now=T1)
    assert _digest(tmp_path / "real.db") == before
    assert dry.dry_run and dry.facts == 4 and len(dry.merges) == 1 and dry.merges[0].new_id is None
    assert sorted(dry.merges[0].old_ids) == sorted(ids[:3])
    done = real_kb.compress(now=T1)
    [merge] = done.merges
    assert merge.new_text == dry.merges[0].new_text and merge.new_id
    statuses = dict(real_kb.conn.execute("select id, status from facts"))
    # the fused text equals the newest member's: that row absorbs the two others
    assert merge.new_id == ids[2] and merge.new_text == real_kb.get(ids[2]).fact
    assert [statuses[i] for i in ids] == ["superseded", "superseded", "active", "active"]
    assert {real_kb.get(i).superseded_by for i in ids[:2]} == {ids[2]}
    assert len(real_kb.get(merge.new_id).sources) == 3
    assert real_kb.compress(now=T1).merges == []  # idempotent
    assert real_kb.check() == []


def test_compress_cli(home, real_embedder):
    from deepresearch.workspace import Workspace

    runner = CliRunner()
    ws = Workspace.open(home)
    ids = _cluster(KnowledgeBase.from_workspace(ws))
    ws.close()
    db = home / "deepresearch.db"
    dry = runner.invoke(app, ["--home", str(home), "kb", "compress", "--dry-run", "--json", "--no-model"])
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.stdout)
    assert data["dry_run"] is True and len(data["merges"]) == 1 and data["merges"][0]["new_id"] is None
    text = runner.invoke(app, ["--home", str(home), "kb", "compress", "--no-model"])
    assert text.exit_code == 0, text.output
    assert "merged 1" in text.stdout and SQLITE_A in text.stdout and "→" in text.stdout
    again = json.loads(runner.invoke(app, ["--home", str(home), "kb", "compress", "--json", "--no-model"]).stdout)
    assert again["merges"] == [] and again["facts"] == 2
    assert db.exists() and ids


def test_compress_without_vectors_is_a_user_error(home, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    result = CliRunner().invoke(app, ["--home", str(home), "kb", "compress", "--no-model"])
    assert result.exit_code == 1
    assert "Error:" in result.stderr and "sqlite-vec" in result.stderr


@pytest.mark.slow
def test_real_llm_fusion_never_loses_a_detail(real_llm):
    """Whatever the shipped tiny model proposes, the result keeps the new value and every old detail."""
    fusion = fuse(OLD_CAT, NEW_CAT, real_llm)
    assert fusion.method in ("model", "mechanical")
    assert fusion_problem(OLD_CAT, NEW_CAT, fusion.text) is None
    assert "3" in fusion.text and "clingy" in fusion.text and "2" not in fusion.text.split()
    # a pair that is not the prompt's own example
    old, new = "The old bridge is 120 metres long and painted red.", "The old bridge is 150 metres long."
    fusion = fuse(old, new, real_llm)
    assert fusion_problem(old, new, fusion.text) is None
    assert "150" in fusion.text and "red" in fusion.text and "120" not in fusion.text
