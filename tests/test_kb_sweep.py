"""The expiry sweep: exact, idempotent, batched, purge keeps history, and safe while another
process writes to the same database."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeEmbedder

NOW = 1_800_000_000.0
DAY = 86400.0
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def kb(tmp_path):
    conn = connect(tmp_path / "kb.db")
    yield KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    conn.close()


def _seed(kb: KnowledgeBase) -> dict[str, str]:
    """market_data facts verified 6.99 and 7.01 days before NOW (TTL 7), plus a historical one."""
    ids = {}
    for label, age in (("below", 6.99), ("above", 7.01)):
        for i in range(7):
            fact = Fact(
                f"Market figure {label} number {i}",
                f"https://m.example/{label}/{i}",
                category="market_data",
                created_at=NOW - age * DAY,
            )
            ids[f"{label}{i}"] = kb.add_facts([fact], now=NOW - age * DAY, merge=False).added[0]
    ids["historic"] = kb.add_facts(
        [
            Fact(
                "The company was founded in 1993",
                "https://h.example",
                category="historical",
                created_at=NOW - 9000 * DAY,
            )
        ],
        now=NOW,
    ).added[0]
    return ids


def _statuses(kb: KnowledgeBase) -> dict[str, str]:
    return dict(kb.conn.execute("select id, status from facts"))


def test_sweep_expires_exactly_the_facts_past_expires_at_and_is_idempotent(kb):
    ids = _seed(kb)
    dry = kb.sweep(now=NOW, dry_run=True)
    assert (dry.expired, dry.purged, dry.dry_run) == (7, 0, True)
    assert set(_statuses(kb).values()) == {"active"}
    result = kb.sweep(now=NOW, batch=3)
    assert (result.expired, result.batches) == (7, 3)
    statuses = _statuses(kb)
    assert {k for k, v in ids.items() if statuses[v] == "expired"} == {f"above{i}" for i in range(7)}
    assert kb.sweep(now=NOW).expired == 0
    assert [e.event for e in kb.history(ids["above0"])] == ["add", "expire"]
    assert [e.event for e in kb.history(ids["below0"])] == ["add"]
    assert "expired 7 fact(s)" in result.summary()
    assert kb.check() == []


def test_purge_deletes_rows_vectors_and_fts_but_keeps_history(kb):
    ids = _seed(kb)
    kb.sweep(now=NOW)
    dry = kb.sweep(now=NOW + 1, purge=True, dry_run=True)
    assert (dry.expired, dry.purged) == (0, 7)
    result = kb.sweep(now=NOW + 1, purge=True)
    assert (result.expired, result.purged) == (0, 7)
    assert kb.conn.execute("select count(*) from facts").fetchone()[0] == 8
    assert kb.conn.execute("select count(*) from fact_vec").fetchone()[0] == 8
    assert kb.query("Market figure above", mode="off", now=NOW, top_k=50).hits[0].id != ids["above0"]
    assert [e.event for e in kb.history(ids["above0"])] == ["add", "expire", "delete"]
    assert kb.sweep(now=NOW + 1, purge=True).purged == 0
    assert kb.sweep(now=NOW + 10**9, purge=True).purged == 7  # historical stays
    assert kb.check() == []


def test_purge_deletes_the_older_versions_a_purged_fact_superseded(kb):
    """A purged fact takes its superseded predecessors along (a chain of two), so no fact is left
    naming a successor that is gone; a fact superseded by one that stays is kept."""
    first = kb.add_facts(
        [Fact("Price index is 101 points", "https://m.example/a", category="market_data")], now=NOW - 30 * DAY
    ).added[0]
    second = kb.supersede(
        first, Fact("Price index is 102 points", "https://m.example/b", category="market_data"), now=NOW - 20 * DAY
    )
    third = kb.supersede(
        second, Fact("Price index is 103 points", "https://m.example/c", category="market_data"), now=NOW - 10 * DAY
    )
    kept_old = kb.add_facts(
        [Fact("The company was founded in 1992", "https://h.example/a", category="historical")], now=NOW
    ).added[0]
    kept_new = kb.supersede(
        kept_old, Fact("The company was founded in 1993", "https://h.example/b", category="historical"), now=NOW
    )
    assert kb.sweep(now=NOW, purge=True, dry_run=True).purged == 3
    result = kb.sweep(now=NOW, purge=True)
    assert (result.expired, result.purged) == (1, 3)
    assert set(_statuses(kb)) == {kept_old, kept_new}
    assert kb.conn.execute("select count(*) from fact_vec").fetchone()[0] == 2
    assert [e.event for e in kb.history(first)][-1] == "delete"
    assert kb.history(first)[-1].detail == f"purged with {third}, which superseded it"
    assert kb.history(third)[-1].detail == "purged by sweep (past expires_at)"
    assert kb.check() == []
    assert kb.sweep(now=NOW, purge=True).purged == 0


WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from deepresearch.config import KBConfig
    from deepresearch.db import connect
    from deepresearch.facts import Fact
    from deepresearch.kb.store import KnowledgeBase
    from tests.fakes import FakeEmbedder

    kb = KnowledgeBase(connect({db!r}), FakeEmbedder(), KBConfig())
    for i in range({n}):
        # merge=False: texts differing in one number look alike to the fake embedder
        kb.add_facts([Fact(f"Fresh writer fact number {{i}} while sweeping", f"https://w.example/{{i}}")], merge=False)
    print("done", flush=True)
    """
)


def test_sweep_while_another_process_inserts(kb, tmp_path):
    """Two processes on one WAL file: no lost row, no 'database is locked'."""
    month_ago = time.time() - 30 * DAY  # the sweeps below use the real clock, like cron
    old = [
        Fact(
            f"Stale market number {i} due for expiry",
            f"https://s.example/{i}",
            category="market_data",
            created_at=month_ago,
        )
        for i in range(400)
    ]
    assert len(kb.add_facts(old, now=month_ago, merge=False).added) == 400
    db = str(tmp_path / "kb.db")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=str(ROOT), db=db, n=300)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    expired = purged = sweeps = 0
    deadline = time.monotonic() + 120

    def written() -> int:
        return kb.conn.execute("select count(*) from facts where source_url like 'https://w.example/%'").fetchone()[0]

    while written() == 0 and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    at_start = written()
    while writer.poll() is None and time.monotonic() < deadline:
        expired += kb.sweep(batch=7).expired
        purged += kb.sweep(batch=5, purge=True).purged
        sweeps += 1
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert "locked" not in err.lower() and "done" in out
    expired += kb.sweep().expired
    purged += kb.sweep(purge=True).purged
    assert at_start < 300 and sweeps >= 1  # the sweeps really overlapped the writer
    assert expired == 400 and purged == 400
    rows = dict(kb.conn.execute("select status, count(*) from facts group by status"))
    assert rows == {"active": 300}
    assert kb.conn.execute("select count(*) from fact_history where event = 'delete'").fetchone()[0] == 400
    assert kb.check() == []


MODES = ("off", "inform", "freshness", "lifecycle")


def _gpu_kb(kb: KnowledgeBase) -> tuple[str, str]:
    """A market_data fact verified 10 days before NOW (TTL 7) and a fresh one."""
    old = Fact("Graphics processor prices rose 20 percent", "https://m.example/old", category="market_data")
    fresh = Fact("Graphics processor prices fell in spring", "https://m.example/new", category="market_data")
    old_id = kb.add_facts([old], now=NOW - 10 * DAY).added[0]
    fresh_id = kb.add_facts([fresh], now=NOW - DAY).added[0]
    return old_id, fresh_id


@pytest.mark.parametrize("engine", ["vec0", "ram", "fts"])
def test_swept_fact_is_never_recalled_unless_asked(kb, engine, monkeypatch):
    old_id, fresh_id = _gpu_kb(kb)
    if engine == "ram":
        kb.config.ram_index_min_facts = 0
    if engine == "fts":
        monkeypatch.setattr(kb.ctx, "vectors", lambda embedder=None: (None, "test: keyword path"))
    # before the sweep: off/inform return the past-TTL fact, tagged; the TTL modes drop it by age
    for mode in ("off", "inform"):
        hits = {h.id: h for h in kb.query("graphics processor prices", mode=mode, now=NOW).hits}
        assert hits[old_id].status == "active" and hits[old_id].expired
        assert hits[old_id].expires_at == pytest.approx(NOW - 3 * DAY)
        assert not hits[fresh_id].expired and hits[fresh_id].status == "active"
    assert kb.sweep(now=NOW).expired == 1
    for mode in MODES:
        recall = kb.query("graphics processor prices", mode=mode, now=NOW)
        assert [h.id for h in recall.hits] == [fresh_id], mode
        assert recall.degraded == (engine == "fts")
        shown = kb.query("graphics processor prices", mode=mode, now=NOW, include_expired=True, top_k=5)
        statuses = {h.id: h.status for h in shown.hits}
        # lifecycle mode still filters by the TTL; asking for expired facts does not lift that
        assert statuses.get(old_id) == (None if mode == "lifecycle" else "expired"), mode
        assert shown.include_expired
    assert "expire" in [e.event for e in kb.history(old_id)]


def test_reconfirmed_expired_fact_is_active_again_with_history(kb):
    old_id, _ = _gpu_kb(kb)
    kb.sweep(now=NOW)
    same = Fact("Graphics processor prices rose 20 percent.", "https://other.example/confirm", category="market_data")
    assert kb.add_facts([same], now=NOW).reconfirmed == [old_id]
    hits = {h.id: h for h in kb.query("graphics processor prices", mode="lifecycle", now=NOW).hits}
    assert hits[old_id].status == "active" and not hits[old_id].expired
    assert [e.event for e in kb.history(old_id)] == ["add", "expire", "reconfirm"]
    assert "reactivated" in (kb.history(old_id)[-1].detail or "")
    assert kb.check() == []


def test_superseded_fact_only_with_include_expired(kb):
    old_id, _ = _gpu_kb(kb)
    new_id = kb.supersede(old_id, Fact("Graphics processor prices rose 25 percent", "https://m.example/fix"), now=NOW)
    for mode in MODES:
        ids = [h.id for h in kb.query("graphics processor prices", mode=mode, now=NOW, top_k=5).hits]
        assert old_id not in ids and new_id in ids
    shown = kb.query("graphics processor prices", mode="off", now=NOW, top_k=5, include_expired=True)
    assert {h.id: h.status for h in shown.hits}[old_id] == "superseded"


def test_cli_query_shows_status_expiry_and_the_sweep(home, use_embedder):
    import json

    from typer.testing import CliRunner

    from deepresearch.cli.main import app
    from deepresearch.workspace import Workspace

    use_embedder(FakeEmbedder(model_id="fake-embedder"))
    ws = Workspace.open(home)
    store = KnowledgeBase.from_workspace(ws)
    now = time.time()
    old_id = store.add_facts(
        [Fact("Graphics processor prices rose 20 percent", "https://m.example/old", category="market_data")],
        now=now - 10 * DAY,
    ).added[0]
    ws.close()

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, ["--home", str(home), "kb", *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    table = run("query", "graphics processor prices", "--lifecycle", "inform")
    assert "EXPIRED (past TTL, not swept yet)" in table
    assert json.loads(run("sweep", "--json"))["expired"] == 1
    for mode in MODES:
        data = json.loads(run("query", "graphics processor prices", "--lifecycle", mode, "--json"))
        assert data["hits"] == [] and data["include_expired"] is False
    data = json.loads(run("query", "graphics processor prices", "--lifecycle", "off", "--include-expired", "--json"))
    assert data["include_expired"] is True
    assert [(h["id"], h["status"], h["expired"]) for h in data["hits"]] == [(old_id, "expired", True)]
    assert "(expired)" in run("query", "graphics processor prices", "--lifecycle", "off", "--include-expired")
    assert "expire" in run("history", old_id)
