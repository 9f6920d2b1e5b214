"""Issue 13: SIGKILL `corpus add`, `kb import`, `kb compress`, `kb sync milvus` and `research` at
several points; the rerun (or `--resume`) completes and every check is clean afterwards.

The killed command and its rerun run the real CLI in a subprocess on real SQLite + sqlite-vec
files, with the fake embedder and chat model registered as backends (tests/crash_cli.py), so
a start costs about a second; setup and checks run in this process with the same fake.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.research.hooks import PAUSE_ENV
from tests.fakes import FakeEmbedder

# ~1 minute on a loaded 2-core machine (milvus-lite starts three times): out of the quick loop.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "DEEPRESEARCH__EMBEDDING__BACKEND": "fake",
    "DEEPRESEARCH_LLM_BACKEND": "fake",
}


@pytest.fixture
def fake(use_embedder) -> FakeEmbedder:  # type: ignore[no-untyped-def]
    """In this process too, the fake embedder the subprocesses use (same model id)."""
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def _cmd(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.crash_cli", "--home", str(home), *args]


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Rerun a command in a subprocess to completion; it must succeed."""
    done = subprocess.run(_cmd(home, *args), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stderr[-2000:])
    return done


def cli(home: Path, *args: str) -> str:
    """A command run in this process (setup, checks); it must succeed."""
    result = CliRunner().invoke(app, ["--home", str(home), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def count(db: Path, sql: str) -> int:
    """One number from a read-only connection (0 while the table does not exist yet)."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def kill_when(home: Path, args: list[str], ready: Callable[[], bool], env: dict[str, str] | None = None) -> bool:
    """Start a command and SIGKILL it as soon as `ready()`; True if it was killed (not already done)."""
    proc = subprocess.Popen(
        _cmd(home, *args), cwd=ROOT, env=env or ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline and not ready():
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
    assert proc.returncode in (0, -signal.SIGKILL), err[-2000:]
    return proc.returncode == -signal.SIGKILL


def assert_clean(home: Path) -> None:
    """`PRAGMA integrity_check` ok and `kb check` exits 0."""
    bad = "select count(*) from pragma_integrity_check where integrity_check != 'ok'"
    assert count(home / "deepresearch.db", bad) == 0
    cli(home, "kb", "check")


def facts_file(path: Path, n: int, twins: bool = False) -> Path:
    """`n` import records; with `twins`, a near-duplicate of each (one `kb compress` cluster per pair)."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            text = f"Crash test fact {i} says plant {i % 7} shipped {i * 3} units in region {i % 5}."
            out.write(json.dumps({"id": f"01CRASH{i:019d}", "fact": text, "source_url": f"https://e.org/{i}"}) + "\n")
            if twins:
                twin = {"id": f"01TWIN{i:020d}", "fact": text.replace("units", "units overall")}
                out.write(json.dumps({**twin, "source_url": f"https://f.org/{i}"}) + "\n")
    return path


@pytest.mark.parametrize("at_chunks", [1, 150])
def test_corpus_add_killed_then_rerun(tmp_path: Path, fake: FakeEmbedder, at_chunks: int) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(120):
        words = " ".join(f"w{i}x{j}" for j in range(400))
        (docs / f"d{i:03d}.md").write_text(f"# Document {i}\n\n{words}\n", encoding="utf-8")
    home, db = tmp_path / "ws", tmp_path / "ws" / "deepresearch.db"
    chunks = "select count(*) from corpus_chunks"
    assert kill_when(home, ["corpus", "add", str(docs)], lambda: count(db, chunks) >= at_chunks)
    run(home, "corpus", "add", str(docs))
    assert count(db, "select count(*) from corpus_sources") == 120
    assert count(db, "select count(*) from corpus_documents") == 120
    assert_clean(home)


@pytest.mark.parametrize("at_facts", [1, 300])
def test_kb_import_killed_then_rerun(tmp_path: Path, fake: FakeEmbedder, at_facts: int) -> None:
    facts = facts_file(tmp_path / "facts.jsonl", 600)
    home, db = tmp_path / "ws", tmp_path / "ws" / "deepresearch.db"
    assert kill_when(home, ["kb", "import", str(facts)], lambda: count(db, "select count(*) from facts") >= at_facts)
    run(home, "kb", "import", str(facts))
    assert count(db, "select count(*) from facts") == 600
    assert_clean(home)


def test_kb_compress_killed_then_rerun(tmp_path: Path, fake: FakeEmbedder) -> None:
    home, db = tmp_path / "ws", tmp_path / "ws" / "deepresearch.db"
    cli(home, "kb", "import", str(facts_file(tmp_path / "facts.jsonl", 300, twins=True)))
    merged = "select count(*) from facts where status = 'superseded'"
    for at in (1, 150):
        assert kill_when(home, ["kb", "compress", "--no-model"], lambda at=at: count(db, merged) >= at)  # type: ignore[misc]
    run(home, "kb", "compress", "--no-model")
    assert count(db, "select count(*) from facts where status = 'active'") == 300
    assert_clean(home)


def test_kb_sync_milvus_killed_then_rerun(tmp_path: Path, fake: FakeEmbedder) -> None:
    """Killed right after the sync wrote its watermark: the rerun must still leave every fact remote."""
    pytest.importorskip("milvus_lite", reason="kb sync milvus needs the milvus extra")
    from pymilvus import MilvusClient

    home, db = tmp_path / "ws", tmp_path / "ws" / "deepresearch.db"
    cli(home, "kb", "import", str(facts_file(tmp_path / "facts.jsonl", 600)))
    uri = str(tmp_path / "milvus.db")
    watermark = "select count(*) from meta where key like 'sync.milvus:%'"
    kill_when(home, ["kb", "sync", "milvus", "--uri", uri], lambda: count(db, watermark) >= 1)
    run(home, "kb", "sync", "milvus", "--uri", uri)
    client = MilvusClient(uri)
    try:
        assert client.get_collection_stats("deepresearch_facts")["row_count"] == 600
    finally:
        client.close()
    assert_clean(home)


@pytest.mark.parametrize("after", ["search", "reflect"])
def test_research_killed_then_resumed(tmp_path: Path, fake: FakeEmbedder, after: str) -> None:
    home, db = tmp_path / "ws", tmp_path / "ws" / "deepresearch.db"
    cli(home, "corpus", "add", str(ROOT / "docs" / "corpus"))
    question = "How does SQLite WAL mode treat readers and writers?"
    step_done = f"select count(*) from research_steps where step = '{after}'"
    paused = {**ENV, PAUSE_ENV: after}
    args = ["research", question, "--loops", "1", "--queries", "1"]
    assert kill_when(home, args, lambda: count(db, step_done) >= 1, paused)
    run_id = sqlite3.connect(db).execute("select id from research_runs").fetchone()[0]
    done = json.loads(run(home, "research", "--resume", run_id, "--json").stdout)
    assert done["run_id"] == run_id and done["report"].startswith("# ")
    assert count(db, f"select count(*) from research_runs where id = '{run_id}' and status = 'done'") == 1
    assert_clean(home)
