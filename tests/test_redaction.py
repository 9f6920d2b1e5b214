"""Issue 21 (4): a base URL with `user:password@` or `?api_key=` is never printed — not by doctor,
`models list`, `models info` (plain or --json) — and paths are joined before its query string."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from tests.loopback import JsonServer

runner = CliRunner()
SECRETS = ("PASSWORD", "SECRET")
OTHER_CHECKS = ("sqlite", "sqlite-vec", "fts5-trigram", "embedding-model", "llama-build", "duckdb", "workspace")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(tmp_path: Path, base_url: str) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "llm:\n  backend: openai\n  openai:\n"
        f"    base_url: {base_url}\n    max_retries: 0\n    timeout: 5\n    model: m1\n"
    )
    return cfg


def _run(home: Path, cfg: Path, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["--home", str(home), "--config", str(cfg), *args])


def _assert_redacted(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text
    assert "***@127.0.0.1" in text, text


@pytest.mark.parametrize("as_json", [False, True])
def test_doctor_fail_line_redacts_the_base_url(home: Path, tmp_path: Path, as_json: bool) -> None:
    cfg = _config(tmp_path, f"http://alice:PASSWORD@127.0.0.1:{_closed_port()}/v1?api_key=SECRET")
    skip = [a for name in OTHER_CHECKS for a in ("--skip", name)]
    result = _run(home, cfg, "doctor", *skip, *(["--json"] if as_json else []))
    assert result.exit_code == 1, result.output
    _assert_redacted(result.output)
    if as_json:
        (check,) = json.loads(result.stdout)["checks"]
        assert check["name"] == "llm" and not check["ok"] and "api_key=***" in check["detail"]
    else:
        assert result.stdout.startswith("FAIL llm")


@pytest.mark.parametrize("as_json", [False, True])
def test_models_list_redacts_the_base_url(home: Path, tmp_path: Path, as_json: bool) -> None:
    cfg = _config(tmp_path, "http://alice:PASSWORD@127.0.0.1:9/v1?api_key=SECRET")
    result = _run(home, cfg, "models", "list", *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    _assert_redacted(result.output)
    if as_json:
        assert json.loads(result.stdout)[0]["path"] == "http://***@127.0.0.1:9/v1?api_key=***"


@pytest.mark.parametrize("as_json", [False, True])
def test_models_info_asks_base_path_models_and_keeps_the_query(home: Path, tmp_path: Path, as_json: bool) -> None:
    """`/models` was appended after the query string (`/v1?api_key=SECRET/models`)."""
    server = JsonServer()
    server.serve({"data": [{"id": "m1"}]})
    try:
        cfg = _config(tmp_path, server.url.replace("http://", "http://alice:PASSWORD@") + "/v1?api_key=SECRET")
        result = _run(home, cfg, "models", "info", *(["--json"] if as_json else []))
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    assert server.paths == ["/v1/models?api_key=SECRET"]
    _assert_redacted(result.output)
    if as_json:
        assert json.loads(result.stdout)["model_listed"] is True


def test_join_url_appends_to_the_path_and_keeps_the_query() -> None:
    from deepresearch.text import join_url

    assert join_url("http://h:1/v1/", "/models") == "http://h:1/v1/models"
    assert join_url("http://u:p@h/v1?api_key=K", "/chat/completions") == "http://u:p@h/v1/chat/completions?api_key=K"
    assert join_url("http://h/?token=T#frag", "/search", {"q": "a b", "format": "json"}) == (
        "http://h/search?token=T&q=a+b&format=json"
    )


def test_searxng_keeps_its_token_and_names_itself_redacted() -> None:
    from deepresearch.errors import SearchError
    from deepresearch.search.searxng import SearxngBackend

    server = JsonServer()
    server.serve({"results": [{"title": "t", "url": "https://e.org/a", "content": "c"}]})
    try:
        base = server.url.replace("http://", "http://bob:PASSWORD@") + "/?token=SECRET"
        backend = SearxngBackend(base, timeout=5, max_retries=0, sleep=lambda s: None)
        assert [r.url for r in backend.search("wal mode", 3)] == ["https://e.org/a"]
        server.serve({"error": "no"}, status=500)
        with pytest.raises(SearchError) as failed:
            backend.search("again", 3)
    finally:
        server.close()
    assert server.paths[0] == "/search?token=SECRET&q=wal+mode&format=json"
    _assert_redacted(str(failed.value))


def test_kb_sync_json_report_redacts_the_server_url(home: Path, tmp_path: Path, fake_model, monkeypatch) -> None:
    """The sync report's `uri` was printed as given, password included."""
    from pymilvus import MilvusClient  # the milvus extra is part of dev, as for tests/test_kb_sync.py

    from deepresearch.kb import sync

    lite = str(tmp_path / "milvus.db")  # the server URL below is served by milvus-lite here
    monkeypatch.setattr(sync, "default_client", lambda uri, timeout: MilvusClient(uri=lite))
    added = runner.invoke(
        app, ["--home", str(home), "kb", "add", "Sync reports never show passwords", "-s", "https://e.org"]
    )
    assert added.exit_code == 0, added.output
    url = "http://root:PASSWORD@127.0.0.1:19530?token=SECRET"
    result = runner.invoke(app, ["--home", str(home), "kb", "sync", "milvus", "--uri", url, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["uri"] == "http://***@127.0.0.1:19530?token=***"
    for secret in SECRETS:
        assert secret not in result.output
