"""`deepresearch doctor`: real components, offline, exit codes."""

import json
import socket

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app

runner = CliRunner()


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.slow
def test_doctor_all_ok_with_network_blocked(home, no_network):
    result = runner.invoke(app, ["--home", str(home), "doctor", "--json"])
    report = json.loads(result.stdout)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert result.exit_code == 0 and report["ok"], failed
    names = {c["name"] for c in report["checks"]}
    assert names == {"sqlite", "sqlite-vec", "fts5-trigram", "embedding-model", "llm", "duckdb", "workspace"}
    detail = {c["name"]: c["detail"] for c in report["checks"]}
    assert "dimension 384" in detail["embedding-model"]
    assert "context" in detail["llm"]


def test_doctor_reports_failure_with_fix_and_exit_1(home, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    result = runner.invoke(app, ["--home", str(home), "doctor", "--skip", "embedding-model", "--skip", "llm"])
    assert result.exit_code == 1
    assert "FAIL sqlite-vec" in result.stdout
    assert "fix: pip install sqlite-vec" in result.stdout


def test_doctor_missing_model_file_names_the_fix(home):
    cfg = home / "config.yaml"
    cfg.write_text("llm:\n  model_path: /nonexistent/model.gguf\n")
    result = runner.invoke(app, ["--home", str(home), "doctor", "--json", "--skip", "embedding-model"])
    report = json.loads(result.stdout)
    llm = next(c for c in report["checks"] if c["name"] == "llm")
    assert result.exit_code == 1
    assert not llm["ok"] and "model file not found: /nonexistent/model.gguf" in llm["detail"]


def _can_unshare_network() -> bool:
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare_network(), reason="needs `unshare -n` (root or user namespaces)")
def test_doctor_passes_in_a_process_without_network(home):
    """The real CLI in a network namespace with no interfaces up: every check still passes."""
    import subprocess
    import sys

    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "deepresearch", "--home", str(home), "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout + proc.stderr
