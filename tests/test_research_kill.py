"""A research run SIGKILLed mid-way resumes from its last checkpoint; the DB stays sound."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.research.hooks import PAUSE_ENV

CORPUS = Path(__file__).resolve().parents[1] / "docs" / "corpus"
QUESTION = "How does SQLite WAL mode treat readers and writers?"


def _cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "deepresearch", "--home", str(home), *args]


def _wait_for_step(db: Path, step: str, proc: subprocess.Popen, timeout: float = 150) -> str:
    from deepresearch.db import connect

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        if db.exists():
            conn = connect(db, load_vec=False, migrate=False)
            try:
                row = conn.execute("select run_id from research_steps where step = ?", (step,)).fetchone()
            except Exception:  # tables not created yet
                row = None
            finally:
                conn.close()
            if row:
                return str(row[0])
        time.sleep(0.3)
    raise AssertionError(f"step {step} never finished")


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_finishes(home, real_embedder):
    from deepresearch.db import connect
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        Corpus(ws.db, real_embedder, ws.config.search.corpus).add_paths([CORPUS / "sqlite-wal.md", CORPUS / "fts5.md"])
    finally:
        ws.close()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DEEPRESEARCH__RESEARCH__MAX_TOKENS": "16",
        "DEEPRESEARCH__SEARCH__RESULTS_PER_QUERY": "2",
        "DEEPRESEARCH__RESEARCH__FACTS_PER_SOURCE": "2",
    }
    args = ["research", QUESTION, "--loops", "1", "--queries", "1"]
    proc = subprocess.Popen(
        _cli(home, *args),
        env={**env, PAUSE_ENV: "search"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = _wait_for_step(home / "deepresearch.db", "search", proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL

    done = subprocess.run(
        _cli(home, "research", "--resume", run_id, "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["run_id"] == run_id and result["loops"] == 1 and result["report"].startswith(f"# {QUESTION}")

    conn = connect(home / "deepresearch.db")
    try:
        assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
        steps = [r[0] for r in conn.execute("select step from research_steps where run_id = ? order by seq", (run_id,))]
        assert steps == [
            "recall",
            "plan",
            "search",
            "rank",
            "extract",
            "reflect",
            "answer",
            "report",
        ]  # nothing redone
        assert conn.execute("select status from research_runs where id = ?", (run_id,)).fetchone()[0] == "done"
    finally:
        conn.close()
    check = CliRunner().invoke(app, ["--home", str(home), "kb", "check"])
    assert check.exit_code == 0, check.output
