"""`deepresearch research` and `deepresearch runs …` through CliRunner; the end-to-end run uses
the real default GGUF and the real embedding model on the shipped sample corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.research.loop import run_research
from deepresearch.research.state import RunOptions
from tests.research_helpers import make_deps

runner = CliRunner()
CORPUS = Path(__file__).resolve().parents[1] / "docs" / "corpus"
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def _populate(home: Path, embedder) -> list[str]:  # type: ignore[no-untyped-def]
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        ids = [
            run_research(ws, t, RunOptions(loops=1), deps=make_deps(ws, embedder)).run_id
            for t in ("How does SQLite WAL mode work?", "FTS5 的 trigram tokenizer")
        ]
    finally:
        ws.close()
    return ids


def test_research_without_a_question_is_a_clean_error(home):
    result = runner.invoke(app, ["--home", str(home), "research"])
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: give a research question, or --resume RUN_ID to continue a run"


def test_resume_of_an_unknown_run_names_the_fix(home):
    result = runner.invoke(app, ["--home", str(home), "research", "--resume", "NOPE"])
    assert result.exit_code == 1
    assert "no research run 'NOPE'" in result.stderr and "deepresearch runs list" in result.stderr


def test_resume_warns_that_new_options_are_ignored(home, fake_embedder):
    first, _ = _populate(home, fake_embedder)
    result = runner.invoke(app, ["--home", str(home), "research", "--resume", first, "--loops", "5", "--json"])
    assert result.exit_code == 0, result.output
    assert "Warning: --resume continues a run with its saved question and options" in result.stderr
    assert json.loads(result.stdout)["run_id"] == first  # a finished run: its saved result, nothing redone


def test_bad_option_value_is_a_usage_error(home):
    result = runner.invoke(app, ["--home", str(home), "research", "q", "--fresh", "sometimes"])
    assert result.exit_code == 2


def test_runs_list_show_search(home, fake_embedder):
    first, second = _populate(home, fake_embedder)
    listed = runner.invoke(app, ["--home", str(home), "runs", "list"])
    assert listed.exit_code == 0
    lines = [ULID.sub("<ID>", re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<WHEN>", ln)) for ln in listed.stdout.splitlines()]
    assert [re.sub(r"\s+", " ", ln) for ln in lines] == [
        "<ID> <WHEN> done max-loops FTS5 的 trigram tokenizer",
        "<ID> <WHEN> done sufficient How does SQLite WAL mode work?",
    ]
    as_json = json.loads(runner.invoke(app, ["--home", str(home), "runs", "list", "--json"]).stdout)
    assert [r["id"] for r in as_json] == [second, first]
    found = runner.invoke(app, ["--home", str(home), "runs", "search", "trigram", "--json"])
    assert [r["id"] for r in json.loads(found.stdout)] == [second]
    shown = runner.invoke(app, ["--home", str(home), "runs", "show", first[:10]])
    assert shown.exit_code == 0 and shown.stdout.startswith("# How does SQLite WAL mode work?")
    detail = json.loads(runner.invoke(app, ["--home", str(home), "runs", "show", first, "--json"]).stdout)
    assert [s["step"] for s in detail["steps"]][-1] == "report" and detail["status"] == "done"
    missing = runner.invoke(app, ["--home", str(home), "runs", "show", "ZZZ"])
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: no research run 'ZZZ'")


@pytest.mark.slow
@pytest.mark.product_defaults
def test_end_to_end_with_the_real_models_on_the_sample_corpus(home, tmp_path, monkeypatch, real_embedder):
    """The README's main job, small: the CLI defaults, so the default model (Qwen) reads the evidence."""
    # Small on purpose: 2 documents, 1 loop, 2 queries, 2 results each, short generations.
    monkeypatch.setenv("DEEPRESEARCH__RESEARCH__MAX_TOKENS", "48")
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__RESULTS_PER_QUERY", "2")
    monkeypatch.setenv("DEEPRESEARCH__RESEARCH__FACTS_PER_SOURCE", "3")
    added = runner.invoke(
        app, ["--home", str(home), "corpus", "add", str(CORPUS / "sqlite-wal.md"), str(CORPUS / "fts5.md")]
    )
    assert added.exit_code == 0, added.output
    out = tmp_path / "report.md"
    result = runner.invoke(
        app,
        [
            "--home",
            str(home),
            "research",
            "Which SQLite journal mode lets readers and writers work at the same time?",
            "--loops",
            "1",
            "--queries",
            "2",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["loops"] == 1 and data["fact_ids"]
    assert "[loop 1] search" in result.stderr and "report saved:" in result.stderr
    # Every stored fact is grounded: its text occurs in (or is supported by) the source it cites.
    from deepresearch.grounding import is_grounded
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        kb = KnowledgeBase(ws.db, real_embedder, ws.config.kb)
        facts = [kb.get(i) for i in data["fact_ids"]]
        for fact in facts:
            path = Path(fact.source_url.removeprefix("file://"))
            assert path.parent == CORPUS and is_grounded(fact.fact, path.read_text(encoding="utf-8"))
        assert kb.check() == []
    finally:
        ws.close()
    # Every citation number resolves to a source this run retrieved.
    report = out.read_text(encoding="utf-8")
    assert report == data["report"] == Path(data["report_path"]).read_text(encoding="utf-8")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", report.split("## Sources")[0])}
    listed = {s["n"]: s["url"] for s in data["sources"]}
    assert cited and cited <= set(listed)
    retrieved = {f"file://{CORPUS / 'sqlite-wal.md'}", f"file://{CORPUS / 'fts5.md'}"}
    assert set(listed.values()) <= retrieved
    assert data["report_stats"]["citations"] >= 1
    # The reader answered from the WAL page (or abstained: then no bold guess); a kept answer is
    # stated by a passage it cites, and the footer says the model read.
    assert "model used for: answer (" in report.split("---")[-1]
    if data["short_answer"] is not None:
        assert data["answer_sources"] and all(s["url"] in retrieved for s in data["answer_sources"])
        wal = (CORPUS / "sqlite-wal.md").read_text(encoding="utf-8").lower()
        assert " ".join(data["short_answer"].lower().split()[:3]) in " ".join(wal.split())
    else:
        assert "does not state the answer directly" in report


def test_unwritable_out_file_is_a_clean_error_and_the_run_is_kept(home, fake_embedder, tmp_path):
    from deepresearch.errors import InputError
    from deepresearch.research.runs import RunStore
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        # a folder missing from the start: refused before the run, nothing created
        with pytest.raises(InputError, match="does not exist"):
            run_research(ws, "SQLite WAL readers", RunOptions(loops=1), out=tmp_path / "missing" / "r.md")
        assert RunStore(ws.db).recent() == []
        # a folder gone by the end of the run: the error names where the report is saved
        gone = tmp_path / "gone"
        gone.mkdir()
        with pytest.raises(InputError, match="cannot write the report.*it is saved at"):
            run_research(
                ws,
                "SQLite WAL readers",
                RunOptions(loops=1),
                deps=make_deps(ws, fake_embedder),
                progress=lambda event, **info: gone.rmdir() if event == "report" and gone.exists() else None,
                out=gone / "r.md",
            )
        (run,) = RunStore(ws.db).recent()
        assert run.status == "done" and Path(run.report_path).is_file()
    finally:
        ws.close()


@pytest.mark.slow
def test_research_with_the_search_backend_down_exits_1_with_the_reason(home, monkeypatch):
    import socket

    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__MAX_RETRIES", "0")
    argv = ["--home", str(home), "research", "What is WAL?", "--backend", "searxng", "--loops", "1"]
    result = runner.invoke(app, [*argv, "--queries", "1", "--no-kb-write"])
    assert result.exit_code == 1, result.output
    assert "search failed" in result.stderr
    assert "Error: no source could be searched" in result.stderr
    assert "0 hits" not in result.stderr  # no contradicting progress line
