"""`kb sync milvus` against a real milvus-lite server (one per module; a collection per test)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from deepresearch.config import MilvusConfig
from deepresearch.db import get_meta
from deepresearch.errors import DeepResearchError, DimensionMismatch, InputError, SearchError
from deepresearch.facts import Fact
from deepresearch.kb.milvus import is_retriable
from deepresearch.kb.store import KnowledgeBase
from deepresearch.kb.sync import sync_milvus
from deepresearch.workspace import Workspace
from tests.fakes import FakeEmbedder

DAY = 86400.0
T0 = 1_790_000_000.0


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    """A milvus-lite database shared by the module (its server start costs seconds)."""
    return str(tmp_path_factory.mktemp("milvus") / "milvus.db")


@pytest.fixture(scope="module")
def client(uri):
    """A direct client on the same server, to look at what the sync wrote."""
    from pymilvus import MilvusClient

    c = MilvusClient(uri=uri)
    yield c
    c.close()


def _facts():
    return [
        Fact("Nvidia shipped 3.76 million data-center GPUs in 2023", "https://example.com/gpu",
             category="market_data", confidence=0.9, research_topic="GPU shipments"),
        Fact("The H100 GPU has 80 GB of HBM3 memory", "https://example.com/h100",
             category="product_info", confidence=0.8, research_topic="GPU specs"),
        Fact("TSMC announced a new fab in Arizona in 2020", "https://example.com/tsmc",
             category="historical", confidence=0.95),
        Fact("AI芯片销量在2024年增长了三倍", "https://example.cn/chips",
             category="market_data", confidence=0.6),
    ]  # fmt: skip


def _remote_ids(client, collection):
    client.load_collection(collection)
    return {r["id"] for r in client.query(collection, filter='id != ""', output_fields=["id"])}


def test_push_then_pull_round_trips_facts(uri, open_kb):
    source = open_kb("a")
    added = source.add_facts(_facts(), now=T0).added
    source.add_facts([Fact(_facts()[1].fact, "https://example.org/second-source", confidence=0.5)], now=T0 + 60)
    report = sync_milvus(source, uri, "round_trip", now=T0 + 120)
    assert (report.pushed, report.deleted, report.created, report.remote_dimension) == (4, 0, True, 384)

    target = open_kb("b")
    preview = sync_milvus(target, uri, "round_trip", direction="pull", dry_run=True, now=T0 + 150)
    assert preview.pulled == 4
    assert target.conn.execute("select count(*) from facts").fetchone()[0] == 0
    pulled = sync_milvus(target, uri, "round_trip", direction="pull", now=T0 + 180)
    assert (pulled.pulled, pulled.reconfirmed, pulled.skipped) == (4, 0, 0)
    assert (pulled.reused_vectors, pulled.embedded) == (4, 0)  # same model: remote vectors kept
    for fact_id in added:
        mine, theirs = source.get(fact_id), target.get(fact_id)
        assert theirs == mine  # text, sources, category, confidence, topic, times, status, id
    assert target.get(added[1]).sources == ["https://example.com/h100", "https://example.org/second-source"]
    assert target.check() == []
    hit = target.query("H100 HBM3 memory", mode="off", now=T0 + 200).hits[0]
    assert hit.id == added[1] and hit.relevance > 0.5  # pulled facts were embedded here
    again = sync_milvus(target, uri, "round_trip", direction="pull", now=T0 + 240)
    assert (again.pulled, again.skipped) == (0, 4)
    # the pulled facts are already remote: the next push from the target sends nothing back
    assert sync_milvus(target, uri, "round_trip", now=T0 + 300).pushed == 0
    # a fact confirmed again at the source arrives as a reconfirmation of the same id
    source.add_facts([Fact(_facts()[2].fact, "https://example.org/tsmc-2")], now=T0 + 400)
    assert sync_milvus(source, uri, "round_trip", now=T0 + 400).pushed == 1
    report = sync_milvus(target, uri, "round_trip", direction="pull", now=T0 + 460)
    assert (report.pulled, report.reconfirmed, report.skipped) == (0, 1, 3)
    assert target.get(added[2]).verified_at == T0 + 400
    assert target.get(added[2]).sources == ["https://example.com/tsmc", "https://example.org/tsmc-2"]


def test_pull_with_another_local_model_embeds_here(uri, open_kb):
    source = open_kb("a")
    ids = source.add_facts(_facts(), now=T0).added
    sync_milvus(source, uri, "other_model", now=T0)
    tiny = FakeEmbedder(dimension=8, model_id="tiny-8")
    target = open_kb("b", tiny)
    report = sync_milvus(target, uri, "other_model", direction="pull", now=T0 + 60)
    assert (report.pulled, report.reused_vectors, report.embedded) == (4, 0, 4)
    assert get_meta(target.conn, "kb.embedding_model") == "tiny-8"
    assert target.query("H100 HBM3 memory", mode="off", now=T0 + 60).hits[0].id == ids[1]


def test_pull_reconfirms_duplicates_and_keeps_local_supersessions(uri, open_kb):
    source = open_kb("a")
    ids = source.add_facts(_facts(), now=T0).added
    sync_milvus(source, uri, "pull_rules", now=T0)
    target = open_kb("b")
    # same text under another id here: the pull reconfirms it and adds the remote source
    local = target.add_facts([Fact(_facts()[2].fact, "https://mirror.example/tsmc", category="historical")],
                             now=T0 - DAY).added[0]  # fmt: skip
    old = target.add_facts([Fact(_facts()[0].fact, "https://example.com/gpu", category="market_data")], now=T0).added
    report = sync_milvus(target, uri, "pull_rules", direction="pull", now=T0 + 60)
    assert (report.pulled, report.reconfirmed) == (2, 2)
    assert set(target.get(local).sources) == {"https://mirror.example/tsmc", "https://example.com/tsmc"}
    assert target.get(local).verified_at == pytest.approx(T0)
    assert old[0] != ids[0] and target.get(old[0]).status == "active"
    # a fact superseded here is not brought back by a pull
    target.supersede(ids[1], Fact("The H100 GPU has 80 GB of HBM3 memory and 3.35 TB/s bandwidth",
                                  "https://example.com/h100b"), now=T0 + 120)  # fmt: skip
    assert sync_milvus(target, uri, "pull_rules", direction="pull", now=T0 + 180).pulled == 0
    assert target.get(ids[1]).status == "superseded"


def test_incremental_push_sends_only_changed_facts(uri, open_kb, client):
    kb = open_kb()
    kb.add_facts(_facts(), now=T0)
    assert sync_milvus(kb, uri, "incremental", now=T0).pushed == 4
    assert sync_milvus(kb, uri, "incremental", now=T0 + 1).pushed == 0
    new = kb.add_facts([Fact("Intel delayed its Ohio fab to 2030", "https://example.com/intel",
                             category="strategy")], now=T0 + 10).added  # fmt: skip
    kb.add_facts([Fact(_facts()[2].fact, "https://example.net/tsmc-again")], now=T0 + 20)  # reconfirm
    preview = sync_milvus(kb, uri, "incremental", dry_run=True, now=T0 + 30)
    assert (preview.pushed, preview.dry_run) == (2, True)
    assert new[0] not in _remote_ids(client, "incremental")  # dry run wrote nothing
    assert sync_milvus(kb, uri, "incremental", now=T0 + 30).pushed == 2
    assert len(_remote_ids(client, "incremental")) == 5
    row = client.get("incremental", ids=[new[0]], output_fields=["fact", "expires_at", "embedding_model"])[0]
    assert row["fact"] == "Intel delayed its Ohio fab to 2030" and row["embedding_model"] == "fake-embedder"
    assert row["expires_at"] == pytest.approx(T0 + 10 + 90 * DAY)


def test_dropped_collection_and_missing_vectors_are_resent(uri, open_kb, client):
    kb = open_kb()
    ids = kb.add_facts(_facts(), now=T0).added
    rid = kb.conn.execute("select rid from facts where id = ?", (ids[2],)).fetchone()[0]
    kb.conn.execute("delete from fact_vec where rowid = ?", (rid,))  # as if stored while degraded
    report = sync_milvus(kb, uri, "resend", now=T0)
    assert (report.pushed, report.skipped) == (3, 1) and "kb reembed" in report.warnings[0]
    kb.reembed()  # rebuilds vectors without history rows: the held-back watermark covers it
    report = sync_milvus(kb, uri, "resend", now=T0 + 1)
    assert ids[2] in _remote_ids(client, "resend") and report.skipped == 0
    client.drop_collection("resend")
    report = sync_milvus(kb, uri, "resend", now=T0 + 2)
    assert (report.created, report.pushed) == (True, 4)
    assert _remote_ids(client, "resend") == set(ids)


def test_superseded_and_expired_facts_are_deleted_remotely(uri, open_kb, client):
    kb = open_kb()
    gpu, h100, tsmc, chips = kb.add_facts(_facts(), now=T0).added
    sync_milvus(kb, uri, "deletes", now=T0)
    newer = kb.supersede(h100, Fact("The H100 GPU has 80 GB of HBM3 memory and 3.35 TB/s bandwidth",
                                    "https://example.com/h100b"), now=T0 + 60)  # fmt: skip
    report = sync_milvus(kb, uri, "deletes", now=T0 + 60)
    assert (report.pushed, report.deleted) == (1, 1)
    assert _remote_ids(client, "deletes") == {gpu, newer, tsmc, chips}
    # market_data lives 7 days: a sweep expires both market facts, the push deletes them
    kb.sweep(now=T0 + 8 * DAY)
    report = sync_milvus(kb, uri, "deletes", now=T0 + 8 * DAY)
    assert (report.pushed, report.deleted) == (0, 2)
    assert _remote_ids(client, "deletes") == {newer, tsmc}
    # no sweep ran here: the merged fact (strategy, 90 days) is past expires_at; a filter deletes it
    report = sync_milvus(kb, uri, "deletes", now=T0 + 100 * DAY)
    assert (report.pushed, report.deleted) == (0, 1)
    assert _remote_ids(client, "deletes") == {tsmc}


def test_dimension_or_model_mismatch_fails_before_writing(uri, open_kb, client):
    small = open_kb("small", FakeEmbedder(dimension=8, model_id="tiny-8"))
    small.add_facts(_facts()[:1], now=T0)
    sync_milvus(small, uri, "dims", now=T0)
    kb = open_kb("big")
    kb.add_facts(_facts(), now=T0)
    with pytest.raises(DimensionMismatch, match=r"8-d vectors of tiny-8.*384-d.*another --collection"):
        sync_milvus(kb, uri, "dims", now=T0)
    other = open_kb("other", FakeEmbedder(dimension=8, model_id="other-8"))
    other.add_facts(_facts()[1:2], now=T0)
    with pytest.raises(DimensionMismatch, match="other-8"):
        sync_milvus(other, uri, "dims", now=T0)
    assert len(_remote_ids(client, "dims")) == 1
    for refused in (kb, other):  # no watermark: the next push after a fix sends everything
        assert refused.conn.execute("select count(*) from meta where key like 'sync.milvus:%'").fetchone()[0] == 0


def test_push_from_a_bare_connection_and_foreign_collections(uri, open_kb, client):
    kb = open_kb()
    kb.add_facts(_facts(), now=T0)
    assert sync_milvus(kb.conn, uri, "bare_conn", now=T0).pushed == 4  # no embedder needed to push
    client.create_collection("foreign", dimension=384)  # quick-setup schema: id + vector only
    with pytest.raises(InputError, match="foreign .* was not created by deepresearch"):
        sync_milvus(kb, uri, "foreign", now=T0)


@pytest.mark.parametrize("name", ["bad-name", "1starts_with_digit", "a;drop", "", "x" * 256, "名字"])
def test_invalid_collection_name_fails_before_connecting(tmp_path, open_kb, name):
    def factory(uri, timeout):
        raise AssertionError("connected despite an invalid name")

    with pytest.raises(InputError, match="invalid Milvus collection name"):
        sync_milvus(open_kb(), str(tmp_path / "m.db"), name, client_factory=factory)


def test_bad_uri_and_missing_extra_are_clear(tmp_path, open_kb, monkeypatch):
    kb = open_kb()
    with pytest.raises(InputError, match=r"ending in \.db"):
        sync_milvus(kb, str(tmp_path / "milvus.sqlite"))
    with pytest.raises(InputError, match="does not exist"):
        sync_milvus(kb, str(tmp_path / "nope" / "m.db"))
    monkeypatch.setitem(__import__("sys").modules, "pymilvus", None)
    with pytest.raises(DeepResearchError, match=r"pip install 'deepresearch\[milvus\]'"):
        sync_milvus(kb, str(tmp_path / "m.db"))


class Flaky:
    """A real client whose named calls first raise the queued errors (fake for retry logic only)."""

    def __init__(self, real, failures):
        self.real, self.failures = real, failures

    def __getattr__(self, op):
        target = getattr(self.real, op)

        def call(*args, **kwargs):
            if self.failures.get(op):
                raise self.failures[op].pop(0)
            return target(*args, **kwargs)

        return call


def test_transient_errors_are_retried_with_backoff(uri, open_kb):
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    kb = open_kb()
    kb.add_facts(_facts(), now=T0)
    sleeps, connects = [], []

    def factory(u, timeout):
        connects.append(u)
        if len(connects) == 1:
            raise ConnectionRefusedError("connection refused")
        return Flaky(MilvusClient(uri=u, timeout=timeout), {
            "upsert": [MilvusException(code=2, message="server unavailable"), TimeoutError("timed out")],
        })  # fmt: skip

    report = sync_milvus(kb, uri, "retries", now=T0, client_factory=factory, sleep=sleeps.append)
    assert report.pushed == 4 and len(connects) == 2
    assert sleeps == [0.5, 0.5, 1.0]  # connect once; upsert twice (0.5 then 1.0)

    def broken(u, timeout):
        failures = {"has_collection": [MilvusException(code=1100, message="bad request")]}
        return Flaky(MilvusClient(uri=u, timeout=timeout), failures)

    sleeps.clear()
    with pytest.raises(SearchError, match=r"Milvus at .*milvus\.db failed \(has_collection\): bad request"):
        sync_milvus(kb, uri, "retries2", now=T0, client_factory=broken, sleep=sleeps.append)
    assert sleeps == []  # not retriable: no retry

    def down(u, timeout):
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(SearchError, match=r"unreachable \(connect failed after 3 attempts"):
        settings = MilvusConfig(max_retries=2)
        sync_milvus(kb, "http://127.0.0.1:9", "x", client_factory=down, settings=settings, sleep=sleeps.append)
    assert sleeps == [0.5, 1.0]
    assert is_retriable(MilvusException(code=8, message="rate limit exceeded"))
    assert not is_retriable(ValueError("timeout"))  # only client/server errors, not our own bugs


class Silent:
    """A loopback server that accepts connections and never answers (nor closes them)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


class StallingProxy(Silent):
    """A loopback proxy to a real Milvus server that stops forwarding (both ways) once `stall()`ed."""

    def __init__(self, target: str) -> None:
        self.target = int(target.rsplit(":", 1)[1])
        self.stalled = threading.Event()
        super().__init__()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client = self.sock.accept()[0]
                server = socket.create_connection(("127.0.0.1", self.target))
                self.held += [client, server]
                for a, b in ((client, server), (server, client)):
                    threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                while self.stalled.is_set():
                    time.sleep(0.05)
                dst.sendall(data)

    def stall(self) -> None:
        self.stalled.set()


def test_a_silent_server_cannot_stall_the_sync(home, fake_model, monkeypatch):
    """Issue 13 (6): every Milvus call has a deadline; connect included (1 s, 1 retry: 2 s in all)."""
    from deepresearch.cli.main import app

    server = Silent()
    for key, value in {"TIMEOUT": "1", "MAX_RETRIES": "1", "BACKOFF_SECONDS": "0.2"}.items():
        monkeypatch.setenv(f"DEEPRESEARCH__KB__MILVUS__{key}", value)
    started = time.monotonic()
    try:
        result = runner.invoke(app, ["--home", str(home), "kb", "sync", "milvus", "--uri", server.url])
    finally:
        server.close()
    seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    # Two attempts, or one when a loaded machine let the first overrun (then the wait would pass the deadline).
    expected = f"Error: Milvus at {server.url} is unreachable (connect failed after "
    assert result.stderr.startswith(expected), result.stderr
    assert seconds < 8.0, seconds  # 2 s of deadline plus start-up on a loaded machine; without one: forever


def test_a_server_that_stops_answering_hits_the_call_deadline(uri, open_kb):
    """Connected through a proxy that then stalls: pymilvus calls without `timeout=` would wait forever."""
    from milvus_lite.server_manager import server_manager_instance

    from deepresearch.kb.milvus import default_client

    proxy = StallingProxy(server_manager_instance.start_and_get_uri(uri))
    kb = open_kb()
    kb.add_facts(_facts(), now=T0)

    def connect_then_stall(u, timeout):
        client = default_client(u, timeout)
        proxy.stall()
        return client

    settings = MilvusConfig(timeout=1.0, max_retries=1, backoff_seconds=0.2)
    started = time.monotonic()
    try:
        stalled = r"unreachable \(has_collection failed after [12] attempts?: .*[Dd]eadline"
        with pytest.raises(SearchError, match=stalled):
            sync_milvus(kb, proxy.url, "stalled", now=T0, client_factory=connect_then_stall, settings=settings)
    finally:
        proxy.close()
    seconds = time.monotonic() - started
    assert seconds < 6.0, seconds  # 1 s + 0.2 s wait + the 0.8 s left; without a deadline: forever


runner = CliRunner()


@pytest.fixture
def fake_model(use_embedder):
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def test_cli_push_pull_json_and_exit_codes(uri, home, tmp_path, fake_model):
    from deepresearch.cli.main import app

    ws = Workspace.open(home)
    KnowledgeBase(ws.db, fake_model, ws.config.kb).add_facts(_facts(), now=time.time())
    ws.close()

    def run(*args, at=home):
        return runner.invoke(app, ["--home", str(at), "kb", "sync", "milvus", "--uri", uri, *args])

    result = run("--collection", "cli_sync", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {
        "uri", "collection", "direction", "dry_run", "pushed", "deleted", "pulled", "reconfirmed",
        "updated", "flagged", "skipped", "reused_vectors", "embedded", "created", "remote_dimension", "remote_model",
        "seconds", "warnings",
    }  # fmt: skip
    assert (data["pushed"], data["direction"], data["remote_dimension"]) == (4, "push", 384)
    assert "push:" not in result.stderr  # progress only on a terminal
    result = run("--collection", "cli_sync", "--pull", at=tmp_path / "other")
    assert result.exit_code == 0, result.output
    assert "pull 4 (reconfirmed 0, updated 0, conflicts 0)" in result.stdout
    assert "Traceback" not in result.stderr  # milvus-lite's gRPC server noise is silenced
    other = Workspace.open(tmp_path / "other")
    KnowledgeBase(other.db, fake_model, other.config.kb).add_facts(
        [Fact("Samsung started HBM4 mass production in 2026", "https://example.kr/hbm4")]
    )
    other.close()
    result = run("--collection", "cli_sync", "--both", "--dry-run", "--json", at=tmp_path / "other")
    assert json.loads(result.stdout)["pushed"] == 1 and json.loads(result.stdout)["dry_run"] is True
    result = run("--collection", "cli_sync", "--both", "--json", at=tmp_path / "other")
    data = json.loads(result.stdout)
    # push first, then pull: the 4 pulled before and the one just pushed are all known here
    assert (data["direction"], data["pushed"], data["pulled"], data["skipped"]) == ("both", 1, 0, 5)
    assert run("--push", "--pull").exit_code == 2
    result = run("--collection", "bad-name")
    assert result.exit_code == 1 and "Error: invalid Milvus collection name 'bad-name'" in result.stderr
    result = run("--collection", "never_pushed", "--pull")
    assert result.exit_code == 1 and "no collection never_pushed" in result.stderr


def test_progress_counts_push_and_pull_against_their_totals(uri, open_kb):
    source, target = open_kb("a"), open_kb("b")
    source.add_facts(_facts(), now=T0)
    calls = []
    sync_milvus(source, uri, "progress", batch=3, progress=lambda *c: calls.append(c), now=T0)
    sync_milvus(target, uri, "progress", "pull", batch=3, progress=lambda *c: calls.append(c), now=T0)
    assert calls == [("push", 3, 4), ("push", 4, 4), ("pull", 3, 4), ("pull", 4, 4)]


def test_cli_progress_is_one_line_on_a_terminal_and_silent_elsewhere(capsys):
    from deepresearch.cli.kb_sync import Progress

    clock = iter([0.0, 0.1, 0.5, 0.6, 2.0, 3.0]).__next__
    progress = Progress(tty=True, clock=clock)
    for done in (500, 1000, 1500, 2000):  # at 0.1 s: too soon after the last update, skipped
        progress("push", done, 2000)
    progress("pull", 400, 800)
    progress("pull", 800, 800)
    progress.finish()
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        "\rpush: 500/2,000 facts (25%)\rpush: 1,500/2,000 facts (75%), 2,000/s"
        "\rpush: 2,000/2,000 facts (100%), 2,500/s\n\rpull: 400/800 facts (50%)\rpull: 800/800 facts (100%), 400/s\n"
    )
    quiet = Progress(tty=False)
    quiet("push", 1, 2)
    quiet.finish()
    assert capsys.readouterr().err == ""


def test_rows_of_the_old_shape_are_read_and_the_collection_kept(uri, open_kb, client):
    """Before Milvus 2.3 support `sources` held a bare list; such milvus-lite collections still sync."""
    from deepresearch.kb.milvus import fact_row

    source = open_kb("a")
    ids = source.add_facts(_facts()[:2], now=T0).added
    source.add_facts([Fact(_facts()[0].fact, "https://example.org/gpu-2")], now=T0 + 1)
    sync_milvus(source, uri, "old_shape", now=T0 + 2)
    fact = source.get(ids[0])
    row, _ = fact_row(fact, [1.0] + [0.0] * 383, "fake-embedder")
    assert row is not None and row["sources"] == {"urls": ["https://example.com/gpu", "https://example.org/gpu-2"]}
    client.upsert("old_shape", [{**row, "sources": fact.sources}])  # the old shape: a list
    target = open_kb("b")
    assert sync_milvus(target, uri, "old_shape", "pull", now=T0 + 3).pulled == 2
    assert target.get(ids[0]).sources == fact.sources
    source.add_facts([Fact("Micron sampled HBM3E memory in 2023", "https://example.com/micron")], now=T0 + 4)
    assert sync_milvus(source, uri, "old_shape", now=T0 + 5).pushed == 1
    assert len(_remote_ids(client, "old_shape")) == 3


@pytest.mark.slow  # the real embedding model
@pytest.mark.parametrize(
    ("collection", "older", "newer"),
    [
        ("older", "The staging cluster has 12 nodes.", "The staging cluster has 16 nodes."),  # a number
        (  # a person's name in Chinese: aligned on jieba's words
            "older_zh",
            "张伟是北辰航运公司的首席执行官。",
            "李娜是北辰航运公司的首席执行官。",
        ),
        (  # a multi-word name in English
            "older_name",
            "Maria Lindqvist is the chief executive of the Nordvik shipping company.",
            "Tomas Berg is the chief executive of the Nordvik shipping company.",
        ),
    ],
)
def test_a_pulled_older_value_yields_to_the_newer_one_here(uri, open_kb, real_embedder, collection, older, newer):
    """B knows the newer value; pulling A's older one keeps B's, stores A's as superseded (a later
    pull skips it, B's push deletes it remotely) — and A, pulling B's, ends in the same state."""
    a, b = open_kb("a", real_embedder), open_kb("b", real_embedder)
    old = a.add_facts([Fact(older, "https://wiki.example/staging", category="technology", confidence=0.8)],
                      now=T0).added[0]  # fmt: skip
    new = b.add_facts([Fact(newer, "https://wiki.example/staging-2025", category="technology", confidence=0.8)],
                      now=T0 + 100).added[0]  # fmt: skip
    sync_milvus(a, uri, collection, now=T0 + 110)
    report = sync_milvus(b, uri, collection, "both", now=T0 + 120)
    assert (report.pulled, report.updated) == (0, 1)
    assert (b.get(old).status, b.get(old).superseded_by, b.get(new).status) == ("superseded", new, "active")
    assert sync_milvus(b, uri, collection, "pull", now=T0 + 130).updated == 0  # skipped, not merged again
    report = sync_milvus(b, uri, collection, now=T0 + 140)
    assert (report.pushed, report.deleted) == (1, 1)
    report = sync_milvus(a, uri, collection, "pull", now=T0 + 150)
    assert (report.pulled, report.updated) == (0, 1)
    for kb in (a, b):
        assert (kb.get(old).status, kb.get(old).superseded_by) == ("superseded", new)
        assert kb.get(new).fact == newer and kb.check() == []
    same = [replace(kb.get(new), sources=sorted(kb.get(new).sources)) for kb in (a, b)]
    assert same[0] == same[1]  # sources in the order each workspace learned them
