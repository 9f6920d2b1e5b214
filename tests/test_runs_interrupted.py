"""Issue 21 (7): a research run stopped by SIGKILL, SIGINT or an MCP cancel no longer stays
`running` in `runs list`: it shows `interrupted` with the command that resumes it.

Real subprocesses of the real CLI (`tests.crash_cli`: the fake embedder and chat model come in
through the registries), paused after a step and then killed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.research.hooks import PAUSE_ENV
from tests.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "DEEPRESEARCH__EMBEDDING__BACKEND": "fake",
    "DEEPRESEARCH_LLM_BACKEND": "fake",
    PAUSE_ENV: "search",
}
runner = CliRunner()


@pytest.fixture
def fake(use_embedder) -> FakeEmbedder:  # type: ignore[no-untyped-def]
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def _paused_run(home: Path) -> tuple[subprocess.Popen[str], str]:
    """A research run in a subprocess, paused after its search step; (process, run id)."""
    args = ["research", "How does SQLite WAL mode treat readers?", "--loops", "1", "--queries", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_cli", "--home", str(home), *args],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started in the background by a shell without job control inherits SIGINT ignored,
        # and Python then installs no Ctrl-C handler: the child must get the default back to test Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    db, deadline = home / "deepresearch.db", time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            row = conn.execute("select run_id from research_steps where step = 'search'").fetchone()
            conn.close()
        except sqlite3.Error:
            row = None
        if row:
            return proc, str(row[0])
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the run never finished its search step")


def _runs(home: Path) -> tuple[list[dict], str, str]:
    listed = runner.invoke(app, ["--home", str(home), "runs", "list"])
    as_json = runner.invoke(app, ["--home", str(home), "runs", "list", "--json"])
    assert listed.exit_code == 0 and as_json.exit_code == 0, listed.output
    return json.loads(as_json.stdout), listed.stdout, listed.stderr


def _stored_status(home: Path, run_id: str) -> str:
    conn = sqlite3.connect(home / "deepresearch.db")
    try:
        return str(conn.execute("select status from research_runs where id = ?", (run_id,)).fetchone()[0])
    finally:
        conn.close()


def _corpus(home: Path) -> None:
    added = runner.invoke(app, ["--home", str(home), "corpus", "add", str(ROOT / "docs" / "corpus" / "sqlite-wal.md")])
    assert added.exit_code == 0, added.output


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_or_interrupted_run_is_listed_interrupted_with_its_resume_command(
    tmp_path: Path, fake: FakeEmbedder, sig: signal.Signals
) -> None:
    home = tmp_path / "ws"
    _corpus(home)
    proc, run_id = _paused_run(home)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGINT:  # Ctrl-C: one Error line, exit 130, and the row itself says so
        assert proc.returncode == 130 and "Error: interrupted" in err, err[-2000:]
        assert _stored_status(home, run_id) == "interrupted"
    else:  # SIGKILL: no chance to write anything; the row names a process that is gone
        assert proc.returncode == -signal.SIGKILL
        assert _stored_status(home, run_id) == "running"
    runs, table, hint = _runs(home)
    assert [(r["id"], r["status"]) for r in runs] == [(run_id, "interrupted")]
    assert f"{run_id}" in table and " interrupted " in table
    assert f"deepresearch research --resume {run_id}" in hint
    shown = runner.invoke(app, ["--home", str(home), "runs", "show", run_id, "--json"])
    assert json.loads(shown.stdout)["status"] == "interrupted"
    done = runner.invoke(app, ["--home", str(home), "research", "--resume", run_id, "--json"])
    assert done.exit_code == 0, done.output
    assert [(r["id"], r["status"]) for r in _runs(home)[0]] == [(run_id, "done")]


def test_a_run_of_a_live_process_or_another_host_stays_running() -> None:
    from deepresearch.research.runs import owner_gone, this_process

    me = json.loads(this_process())
    assert not owner_gone(this_process())
    assert not owner_gone(json.dumps({**me, "host": "another-host"}))  # cannot be checked: running
    assert not owner_gone(None) and not owner_gone("not json")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert owner_gone(json.dumps({**me, "pid": child.pid}))  # its pid is free now
    if me["started"]:  # Linux: a pid reused by a process that started at another time
        assert owner_gone(json.dumps({**me, "started": str(int(me["started"]) - 1)}))


def test_an_older_database_gains_the_owner_column_and_its_runs_keep_their_status(tmp_path: Path) -> None:
    from deepresearch.db import connect
    from deepresearch.migrations import MIGRATIONS, apply_migrations
    from deepresearch.research.runs import RunStore

    db = tmp_path / "old.db"
    old = connect(db, migrate=False)
    apply_migrations(old, [m for m in MIGRATIONS if m.name != "m303_research_runs_owner"])
    old.execute(
        "insert into research_runs (id, topic, status, step, options_json, state_json, created_at, updated_at)"
        " values ('01OLD', 'an old run', 'running', 'search', '{}', '{}', 1, 1)"
    )
    old.commit()
    old.close()
    conn = connect(db)
    try:
        assert "owner" in [c[1] for c in conn.execute("pragma table_info(research_runs)")]
        assert [(r.id, r.status) for r in RunStore(conn).recent()] == [("01OLD", "running")]  # unknown: unchanged
    finally:
        conn.close()
