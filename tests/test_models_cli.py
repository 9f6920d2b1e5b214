"""`deepresearch models list|info`, `ask`, `extract` through the real CLI app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.models.shipped import DEFAULT_MODEL

NOTES = (
    "# Notes on Curie\n\n"
    "Marie Curie won the Nobel Prize in Physics in 1903 together with Pierre Curie and Henri Becquerel.\n\n"
    "- The Curie Institute in Paris was founded in 1920 by Marie Curie and Claudius Regaud.\n"
    "- It is nice.\n"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _run(runner: CliRunner, home, *args: str):
    return runner.invoke(app, ["--home", str(home), *args])


def test_models_list_json_shows_shipped_models(runner, home):
    result = _run(runner, home, "models", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    default = next(r for r in rows if r["default"])
    assert default["name"] == DEFAULT_MODEL and default["status"].startswith("configured, ")
    assert default["size_bytes"] > 50_000_000 and default["n_ctx"] == 4096
    smollm2 = next(r for r in rows if r["name"] == "smollm2-135m-instruct")
    assert smollm2["path"].endswith(".gguf") and smollm2["status"] in ("found", "configured, found")
    qwen = next(r for r in rows if r["name"] == "qwen2.5-coder-1.5b-instruct")
    assert qwen["size_bytes"] == 1_117_320_768 and "Apache-2.0" in qwen["note"]
    assert qwen["status"].endswith(("found, verified", "installed, assembled on first use"))


def test_models_list_text(runner, home):
    result = _run(runner, home, "models", "list")
    assert result.exit_code == 0
    assert f"{DEFAULT_MODEL} (default)" in result.stdout and "llama-cpp" in result.stdout
    assert "qwen2.5-coder-1.5b-instruct" in result.stdout and "1117 MB" in result.stdout


def test_models_info_with_a_missing_model_names_the_fix(runner, home, tmp_path):
    result = _run(runner, home, "models", "info", "--model", str(tmp_path / "none.gguf"))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: model file not found:") and "--model" in result.stderr


@pytest.mark.slow
def test_models_info_on_a_file_that_is_not_gguf_names_the_fix(runner, home, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model" * 100)
    result = _run(runner, home, "models", "info", "--model", str(junk))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot load GGUF model {junk}") and "valid GGUF" in result.stderr


def test_extract_without_model_prints_grounded_json(runner, home, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text(NOTES, encoding="utf-8")
    result = _run(runner, home, "extract", str(doc), "--no-model", "--json", "--topic", "Curie")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert [f["fact"] for f in facts] == [
        "Marie Curie won the Nobel Prize in Physics in 1903 together with Pierre Curie and Henri Becquerel.",
        "The Curie Institute in Paris was founded in 1920 by Marie Curie and Claudius Regaud.",
    ]
    assert {f["source_url"] for f in facts} == {doc.absolute().as_uri()}
    assert {f["method"] for f in facts} == {"fallback"} and {f["category"] for f in facts} == {"historical"}
    assert "2 facts from file://" in result.stderr


def test_extract_missing_or_unsupported_file_is_an_error(runner, home, tmp_path):
    result = _run(runner, home, "extract", str(tmp_path / "missing.md"), "--no-model")
    assert result.exit_code == 1 and result.stderr.startswith("Error: ")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01")
    result = _run(runner, home, "extract", str(binary), "--no-model")
    assert result.exit_code == 1 and "unsupported file type" in result.stderr


@pytest.mark.slow
def test_ask_with_the_real_model(runner, home, real_llm):
    result = _run(runner, home, "ask", "Say hello.", "--max-tokens", "8", "--json", "--model", "smollm2-135m-instruct")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["text"].strip() and 1 <= answer["completion_tokens"] <= 8
    assert answer["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    result = _run(runner, home, "ask", "Say hello.", "--max-tokens", "4", "--model", "smollm2-135m-instruct")
    assert result.exit_code == 0 and result.stdout.strip() and "generated tokens" in result.stderr


@pytest.mark.slow
def test_extract_with_the_real_model_and_store_into_the_kb(runner, home, tmp_path, real_llm, real_embedder):
    from deepresearch.workspace import Workspace

    doc = tmp_path / "notes.md"
    doc.write_text(NOTES, encoding="utf-8")
    result = _run(runner, home, "extract", str(doc), "--store", "--json", "--max-facts", "2", "--topic", "Curie")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts and all(f["source_url"] == doc.absolute().as_uri() for f in facts)
    assert f"stored: {len(facts)} added" in result.stderr
    ws = Workspace.open(home)
    try:
        stored = ws.db.execute("select fact, source_url from facts").fetchall()
    finally:
        ws.close()
    assert sorted(row[0] for row in stored) == sorted(f["fact"] for f in facts)
    assert {row[1] for row in stored} == {doc.absolute().as_uri()}
