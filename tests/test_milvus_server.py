"""`kb sync milvus` against a real Milvus 2.3.5 server (PyPI `milvus`), with authorization on.

One server for the session (starting it costs ~30–45 s on 2 cores), on free loopback ports; see
tests/milvus_server.py. A server that cannot start fails these tests with its log tail.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from typer.testing import CliRunner

from deepresearch.config import MilvusConfig
from deepresearch.errors import SearchError
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase
from deepresearch.kb.sync import sync_milvus
from deepresearch.workspace import Workspace
from tests.fakes import FakeEmbedder
from tests.milvus_server import MilvusServer, ServerFailed

pytestmark = pytest.mark.milvus_server

T0 = 1_790_000_000.0
runner = CliRunner()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """The shared server; a start failure fails every test that needs it (with the log tail)."""
    server = MilvusServer(tmp_path_factory.mktemp("milvus-server"), auth=True)
    try:
        server.start()
    except ServerFailed as exc:
        server.stop()
        pytest.fail(f"the Milvus test server did not start: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def server(milvus_server, monkeypatch):
    """The shared server, answering (restarted if a test left it down), its token in MILVUS_TOKEN."""
    if milvus_server.proc is None or milvus_server.proc.poll() is not None:
        try:
            milvus_server.restart()
        except ServerFailed as exc:
            pytest.fail(f"the Milvus test server did not restart: {exc}", pytrace=False)
    monkeypatch.setenv("MILVUS_TOKEN", milvus_server.token)
    return milvus_server


def remote_rows(server: MilvusServer, collection: str) -> list[dict]:
    """Every row of a collection, read with strong consistency by a client of its own."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=server.uri, token=server.token, timeout=30)
    try:
        client.load_collection(collection, timeout=60)
        return client.query(
            collection, filter='id != ""', output_fields=["id", "fact", "sources"], consistency_level="Strong"
        )
    finally:
        client.close()


def active(kb: KnowledgeBase) -> dict[str, Fact]:
    ids = [r[0] for r in kb.conn.execute("select id from facts where status = 'active'")]
    return {i: kb.get(i) for i in ids}


def shape(kb: KnowledgeBase) -> list[tuple]:
    """What a reader sees, ids aside: each fact's text, status, sources, category, and what replaced it."""
    out = []
    for fid, text, status, by in kb.conn.execute("select id, fact, status, superseded_by from facts"):
        fact = kb.get(fid)
        newer = kb.get(by).fact if by else None
        out.append((text, status, tuple(sorted(fact.sources)), fact.category, newer))
    return sorted(out, key=repr)


def open_conflicts(kb: KnowledgeBase) -> set[frozenset[str]]:
    return {frozenset((kb.get(c.fact_id).fact, kb.get(c.other_id).fact)) for c in kb.conflicts()}


TEAM = [
    Fact("The staging cluster has 12 nodes.", "https://wiki.example/staging", category="technology", confidence=0.8),
    Fact("The production database runs PostgreSQL 15.", "https://wiki.example/db", category="technology"),
    Fact("The on-call rotation changes every Monday at 09:00 UTC.", "https://wiki.example/oncall",
         category="historical", confidence=0.9),
]  # fmt: skip
NEW_VALUE = Fact("The staging cluster has 16 nodes.", "https://wiki.example/staging-2025", category="technology",
                 confidence=0.8)  # fmt: skip


@pytest.mark.slow  # the real embedding model
def test_team_update_travels_as_if_added_locally(server, open_kb, real_embedder):
    """A pushes, B pulls and recalls; A records a new value and pushes; B pulls: new value active,
    old superseded, ids as in A — the state a third workspace reaches adding both facts itself."""
    a, b, c = (open_kb(name, real_embedder) for name in "abc")
    first = a.add_facts(TEAM, now=T0).added
    assert sync_milvus(a, server.uri, "team", now=T0 + 10).pushed == 3
    report = sync_milvus(b, server.uri, "team", direction="pull", now=T0 + 20)
    assert (report.pulled, report.updated, report.flagged) == (3, 0, 0)
    hit = b.query("how many nodes does the staging cluster have", mode="off", now=T0 + 30).hits[0]
    assert (hit.id, hit.fact) == (first[0], "The staging cluster has 12 nodes.")

    result = a.add_facts([NEW_VALUE], now=T0 + 100)
    assert [m.old_ids for m in result.merged] == [[first[0]]]  # A linked the update itself
    newest = result.merged[0].new_id
    report = sync_milvus(a, server.uri, "team", now=T0 + 110)
    assert (report.pushed, report.deleted) == (1, 1)
    report = sync_milvus(b, server.uri, "team", direction="pull", now=T0 + 120)
    assert (report.pulled, report.updated, report.flagged, report.skipped) == (0, 1, 0, 2)

    old = b.get(first[0])
    assert (old.status, old.superseded_by) == ("superseded", newest)
    assert b.get(newest) == a.get(newest)  # same id, text, sources, times as in A
    hit = b.query("how many nodes does the staging cluster have", mode="off", now=T0 + 130).hits[0]
    assert (hit.id, hit.fact) == (newest, "The staging cluster has 16 nodes.")
    assert set(active(b)) == set(active(a))
    assert b.check() == []
    assert [e.event for e in b.history(first[0])][-1] == "supersede"

    c.add_facts(TEAM, now=T0)
    c.add_facts([NEW_VALUE], now=T0 + 100)
    assert shape(b) == shape(c) == shape(a)

    # B's next push changes nothing remotely: the remote holds A's active facts, once each
    sync_milvus(b, server.uri, "team", now=T0 + 140)
    rows = remote_rows(server, "team")
    assert sorted(r["id"] for r in rows) == sorted(active(a))
    assert {r["id"]: r["sources"] for r in rows}[newest] == {
        "urls": ["https://wiki.example/staging", "https://wiki.example/staging-2025"]
    }  # a JSON object: Milvus 2.3 refuses a list in a JSON field


@pytest.mark.slow  # the real embedding model
def test_disagreeing_sources_travel_as_an_open_conflict(server, open_kb, real_embedder):
    """A less confident newer source does not replace the value: both stay active, flagged — in B too."""
    a, b, c = (open_kb(name, real_embedder) for name in "abc")
    a.add_facts(TEAM, now=T0)
    sync_milvus(a, server.uri, "team_conflict", now=T0 + 10)
    sync_milvus(b, server.uri, "team_conflict", direction="pull", now=T0 + 20)
    doubt = Fact("The staging cluster has 16 nodes.", "https://chat.example/rumour", category="technology",
                 confidence=0.3)  # fmt: skip
    assert len(a.add_facts([doubt], now=T0 + 100).flagged) == 1
    assert sync_milvus(a, server.uri, "team_conflict", now=T0 + 110).pushed == 1
    report = sync_milvus(b, server.uri, "team_conflict", direction="pull", now=T0 + 120)
    assert (report.pulled, report.updated, report.flagged) == (1, 0, 1)
    expected = {frozenset(("The staging cluster has 12 nodes.", "The staging cluster has 16 nodes."))}
    assert open_conflicts(b) == open_conflicts(a) == expected
    c.add_facts(TEAM, now=T0)
    c.add_facts([doubt], now=T0 + 100)
    assert shape(b) == shape(c) and open_conflicts(c) == expected
    assert b.check() == []


def _many(n: int) -> list[Fact]:
    return [
        Fact(
            f"Deployment {i} of service {i % 17} finished in {i % 50 + 3} minutes",
            f"https://ci.example/run/{i}",
            category="historical",
        )  # fmt: skip
        for i in range(n)
    ]


def test_a_push_killed_with_the_server_converges_after_restart(server, open_kb):
    """The server dies mid-push (SIGKILL, no shutdown) and restarts; the next push converges."""
    kb = open_kb("a")
    kb.add_facts(_many(600), now=T0, merge=False)  # near-identical texts: kept apart, 600 facts
    batches = []

    def crash_on_third_batch(stage, done, total):
        batches.append(done)
        if len(batches) == 3:
            server.kill()

    fast = MilvusConfig(timeout=2.0, max_retries=1, backoff_seconds=0.2)
    with pytest.raises(SearchError, match=r"Milvus at http://127\.0\.0\.1:\d+ is unreachable \(upsert failed"):
        sync_milvus(kb, server.uri, "crash", batch=100, progress=crash_on_third_batch, settings=fast, now=T0 + 10)
    assert batches == [100, 200, 300]
    server.restart()
    # a fact superseded while the server was down: its delete goes out with the rest
    olds = list(active(kb))[:2]
    kb.supersede(olds[0], Fact("Deployment 0 of service 0 was rolled back after 3 minutes",
                                "https://ci.example/run/0b"), now=T0 + 20)  # fmt: skip
    report = sync_milvus(kb, server.uri, "crash", now=T0 + 30)
    assert report.pushed == 600  # the failed push wrote no watermark: everything is sent again
    rows = remote_rows(server, "crash")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 600  # every active fact once, no duplicates
    assert set(ids) == set(active(kb)) and olds[0] not in ids
    assert kb.check() == []
    assert sync_milvus(kb, server.uri, "crash", now=T0 + 40).pushed == 0  # converged


def _cli(home, *args):
    from deepresearch.cli.main import app

    return runner.invoke(app, ["--home", str(home), "kb", "sync", "milvus", *args])


@pytest.fixture
def fake_model(use_embedder):
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def _workspace_with_facts(home, embedder):
    ws = Workspace.open(home)
    KnowledgeBase(ws.db, embedder, ws.config.kb).add_facts(TEAM, now=time.time())
    ws.close()


def test_a_frozen_server_ends_within_the_deadline(server, home, fake_model, monkeypatch):
    """A server that accepts the connection and never answers (SIGSTOPped): a clear error in time."""
    _workspace_with_facts(home, fake_model)
    for key, value in {"TIMEOUT": "2", "MAX_RETRIES": "1", "BACKOFF_SECONDS": "0.2"}.items():
        monkeypatch.setenv(f"DEEPRESEARCH__KB__MILVUS__{key}", value)
    server.pause()
    started = time.monotonic()
    try:
        result = _cli(home, "--uri", server.uri, "--collection", "frozen", "--json")
    finally:
        server.resume()
    seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    # connect, or the first call when pymilvus reuses an open channel to that uri
    unreachable = rf"Error: Milvus at {re.escape(server.uri)} is unreachable \((connect|has_collection) failed after "
    assert re.match(unreachable, result.stderr), result.stderr
    assert result.stdout == ""  # no half report
    assert seconds < 10.0, seconds  # 2 s × (1 retry + 1) plus start-up on a loaded machine
    assert _cli(home, "--uri", server.uri, "--collection", "frozen", "--json").exit_code == 0  # thawed: works


def test_wrong_credentials_are_a_clear_error_and_never_printed(server, home, fake_model, monkeypatch):
    _workspace_with_facts(home, fake_model)
    secret = "Sup3r-s3cret-passw0rd"
    monkeypatch.setenv("MILVUS_TOKEN", f"root:{secret}")
    for args in (("--json",), ()):
        result = _cli(home, "--uri", server.uri, "--collection", "auth", *args)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"Error: Milvus at {server.uri} refused the credentials"), result.stderr
        assert "MILVUS_TOKEN" in result.stderr
        assert secret not in result.output and secret not in result.stderr
    monkeypatch.delenv("MILVUS_TOKEN")
    result = _cli(home, "--uri", server.uri, "--collection", "auth")
    assert result.exit_code == 1 and "refused the credentials" in result.stderr, result.stderr
    # the variable named by kb.milvus.token_env carries the right token
    monkeypatch.setenv("TEAM_MILVUS", server.token)
    monkeypatch.setenv("DEEPRESEARCH__KB__MILVUS__TOKEN_ENV", "TEAM_MILVUS")
    result = _cli(home, "--uri", server.uri, "--collection", "auth", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pushed"] == 3 and server.token not in result.stdout
