"""Issue 13 through the real CLI: bad input and broken environments end in one `Error:` line
(exit 1), nothing stored is lost, files are private, and secrets in URLs are never echoed."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from tests.cli_helpers import one_error_line

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def cli(home: Path, *args: str):
    return runner.invoke(app, ["--home", str(home), *args])


def _add(home: Path, text: str) -> None:
    result = cli(home, "kb", "add", text, "--source", "https://example.com/a")
    assert result.exit_code == 0, result.output


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and folders unwritable, even for root (chattr +i), and restore them after."""
    if os.geteuid() != 0:
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield
        finally:
            for p in paths:
                p.chmod(modes[p])
        return
    chattr = shutil.which("chattr")
    done: list[Path] = []
    try:
        for p in paths:
            if chattr is None or subprocess.run([chattr, "+i", str(p)], capture_output=True).returncode:
                pytest.skip("root cannot be kept from writing here (no chattr +i support)")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run([chattr, "-i", str(p)], check=True)


# --- files are private -------------------------------------------------------------------


def test_workspace_files_are_private_by_default(home: Path, fake_model) -> None:
    """Issue 13 (5): the database was 0644 and the workspace and reports 0755."""
    fresh = home / "new-ws"
    _add(fresh, "Private files keep facts from other users")
    from deepresearch.workspace import Workspace

    ws = Workspace.open(fresh)
    reports, cache = ws.reports_dir, ws.cache_dir
    ws.close()
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (fresh, cache, reports)}
    assert modes == {"new-ws": 0o700, "cache": 0o700, "reports": 0o700}
    for name in ("deepresearch.db", "deepresearch.db-wal", "deepresearch.db-shm"):
        if (fresh / name).exists():
            assert stat.S_IMODE((fresh / name).stat().st_mode) == 0o600, name


def test_private_false_follows_the_umask(tmp_path: Path, fake_model) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workspace:\n  private: false\n")
    old = os.umask(0o022)
    try:
        result = runner.invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(cfg), "kb", "stats"])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "ws").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "ws" / "deepresearch.db").stat().st_mode) == 0o644


# --- OS and SQLite errors at the root -------------------------------------------------------


def test_database_path_that_is_a_folder(home: Path, fake_model) -> None:
    (home / "deepresearch.db").mkdir()
    one_error_line(cli(home, "kb", "stats"), "is a folder, not a file")


@pytest.mark.parametrize("command", [["kb", "query", "private files"], ["runs", "list"], ["kb", "stats"]])
def test_read_only_workspace_is_one_error_line(home: Path, fake_model, command: list[str]) -> None:
    """Issue 13 (7): a read-only workspace was a traceback, even for read-only commands."""
    _add(home, "Private files keep facts from other users")
    (home / "cache").mkdir(exist_ok=True, mode=0o700)
    before = (home / "deepresearch.db").read_bytes()
    with read_only(home, home / "deepresearch.db"):
        line = one_error_line(cli(home, *command))
    assert "writable" in line or "read-only" in line, line
    assert (home / "deepresearch.db").read_bytes() == before
    assert "Private files" in cli(home, "kb", "query", "private files").stdout


def test_sqlite_errors_after_connect_are_one_error_line(home: Path, fake_model) -> None:
    """A damaged table read after connect (not only at open) ends in an Error line."""
    _add(home, "Damaged pages must not print tracebacks")
    from deepresearch.db import connect

    conn = connect(home / "deepresearch.db")
    conn.execute("drop table fact_fts")
    conn.close()
    line = one_error_line(cli(home, "kb", "add", "Another fact to index", "--source", "https://e.org"), "SQLite: ")
    assert "fact_fts" in line


# --- kb export -o ----------------------------------------------------------------------------


def test_export_refuses_existing_file_folder_and_missing_folder(home: Path, fake_model, tmp_path: Path) -> None:
    """Issue 13 (7, 8): `kb export -o` overwrote silently, and a folder / missing folder was a traceback."""
    _add(home, "Exports never overwrite a file silently")
    existing = tmp_path / "facts.jsonl"
    existing.write_text("keep me\n")
    one_error_line(cli(home, "kb", "export", "-o", str(existing)), "already exists", "--force")
    assert existing.read_text() == "keep me\n"
    one_error_line(cli(home, "kb", "export", "-o", str(tmp_path)), "is a folder")
    one_error_line(cli(home, "kb", "export", "-o", str(tmp_path / "no" / "such" / "f.jsonl")), "does not exist")
    result = cli(home, "kb", "export", "-o", str(existing), "--force")
    assert result.exit_code == 0, result.output
    assert json.loads(existing.read_text().splitlines()[0])["fact"] == "Exports never overwrite a file silently"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["facts.jsonl", "ws"]


def _fsize_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_export_on_a_full_disk_keeps_the_old_file(home: Path, fake_model, tmp_path: Path) -> None:
    """Issue 13 (7): a full disk during `kb export -o` was a traceback (simulated with RLIMIT_FSIZE)."""
    for n in range(40):
        _add(home, f"Fact number {n} about disks that fill up while exporting the knowledge base")
    target = tmp_path / "out"
    target.mkdir()
    old = target / "facts.jsonl"
    old.write_text("old export\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPRESEARCH_DISABLE_VEC": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "deepresearch", "--home", str(home), "kb", "export", "-o", str(old), "--force"],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_fsize_limit,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert old.read_text() == "old export\n"
    assert [p.name for p in target.iterdir()] == ["facts.jsonl"]


# --- readers ---------------------------------------------------------------------------------


def test_extract_of_a_csv_names_corpus_add(home: Path, tmp_path: Path) -> None:
    """Issue 13 (8): `extract x.csv` said '.csv is unsupported — supported: … .csv …'."""
    table = tmp_path / "x.csv"
    table.write_text("text\nhello\n")
    line = one_error_line(cli(home, "extract", str(table), "--no-model"), "corpus add")
    assert ".csv," not in line.split("reads", 1)[1]


def test_random_bytes_saved_as_markdown_are_not_indexed(home: Path, tmp_path: Path) -> None:
    """Issue 13 (8): random bytes in a .md file were indexed as text."""
    import random

    rng = random.Random(13)
    junk = tmp_path / "junk.md"
    junk.write_bytes(bytes(rng.choice([b for b in range(256) if b]) for _ in range(4000)))
    one_error_line(cli(home, "extract", str(junk), "--no-model"), "binary")
    from deepresearch.search.readers import read_file

    good = tmp_path / "latin1.md"
    good.write_bytes("# Café\n\nLes données du marché sont à jour, déjà vérifiées.\n".encode("cp1252"))
    assert read_file(good).title == "Café"
    utf8 = tmp_path / "utf8.md"
    utf8.write_text("# 芯片\n\n芯片出货量在 2024 年增长。\n", encoding="utf-8")
    assert "芯片出货量" in read_file(utf8).text


# --- secrets in URLs ---------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_credentials_in_urls_are_redacted_in_errors_and_warnings(tmp_path: Path) -> None:
    """Issue 13 (5): a `user:password@` base URL was echoed in warnings and errors."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DEEPRESEARCH_HOME": str(tmp_path / "ws"),
        "DEEPRESEARCH_LLM_BACKEND": "openai",
        "DEEPRESEARCH__LLM__OPENAI__BASE_URL": f"http://alice:s3cret-pw@127.0.0.1:{_closed_port()}/v1?api_key=k3y",
        "DEEPRESEARCH__LLM__OPENAI__MAX_RETRIES": "1",
        "DEEPRESEARCH__LLM__OPENAI__BACKOFF_SECONDS": "0",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "deepresearch", "ask", "hello"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 1
    assert "s3cret-pw" not in proc.stderr + proc.stdout and "k3y" not in proc.stderr + proc.stdout
    assert "http://***@127.0.0.1" in proc.stderr and proc.stderr.count("Error: ") == 1
    assert "WARNING" in proc.stderr  # the retry warning was shown, redacted too


def test_redact_secrets_cases() -> None:
    from deepresearch.text import redact_secrets

    assert redact_secrets("GET https://u:p@ss@h.example/v1?token=abc&q=1 failed") == (
        "GET https://***@h.example/v1?token=***&q=1 failed"
    )
    assert redact_secrets("postgres://bob@db/x") == "postgres://***@db/x"
    for untouched in ("plain text", "mail bob@example.com", "https://h.example/a@b", "x=1"):
        assert redact_secrets(untouched) == untouched


def test_research_run_that_dies_is_marked_failed_and_resumes(home: Path, use_embedder, tmp_path: Path) -> None:
    """Issue 13 (7): a research run that died on an error stayed `running` forever."""
    from tests.fakes import FakeEmbedder

    use_embedder(FakeEmbedder(model_id="model-a"))
    _add(home, "WAL mode lets readers continue while one writer appends to the log.")
    use_embedder(FakeEmbedder(model_id="model-b"))  # the KB was built with model-a: recall fails
    question = "How does WAL mode treat readers?"
    one_error_line(cli(home, "research", question, "--loops", "1", "--queries", "1"), "model-a")
    runs = json.loads(cli(home, "runs", "list", "--json").stdout)
    assert len(runs) == 1 and runs[0]["status"] == "failed", runs
    assert runs[0]["stop_reason"].startswith("error in recall: the knowledge base was built with")
    use_embedder(FakeEmbedder(model_id="model-a"))  # fixed: the same run resumes to its report
    done = cli(home, "research", "--resume", runs[0]["id"], "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(cli(home, "runs", "list", "--json").stdout)[0]["status"] == "done"
