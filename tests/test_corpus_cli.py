"""`deepresearch corpus add/list/search/remove` end to end, and hybrid quality with the real model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from tests.cli_helpers import one_error_line
from tests.fakes import FakeEmbedder


@pytest.fixture
def fake_model(use_embedder) -> FakeEmbedder:  # type: ignore[no-untyped-def]
    """The fake embedder plugged in through the embedding registry (the real seam)."""
    return use_embedder(FakeEmbedder())


def run(home: Path, *args: str) -> object:
    return CliRunner().invoke(app, ["--home", str(home), *args])


def test_corpus_cli_round_trip(home: Path, tmp_path: Path, fake_model: FakeEmbedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Lakes\n\nLake Baikal is the deepest lake on Earth.")
    (docs / "b.txt").write_text("The Amazon river carries the most water of any river.")
    (docs / "empty.txt").write_text("")
    table = tmp_path / "rows.csv"
    table.write_text("key,headline,content\nr1,Deserts,The Sahara is the largest hot desert.\n")

    result = run(home, "corpus", "add", str(docs), "--json")
    assert result.exit_code == 1  # one file failed …
    report = json.loads(result.stdout)
    assert len(report["added"]) == 2 and report["documents"] == 2  # … the others ingested
    assert (
        result.stderr.strip()
        == f"Error: {docs / 'empty.txt'}: empty file (no text to index) — remove it or add content"
    )

    result = run(
        home,
        "corpus",
        "add",
        str(table),
        "--text-col",
        "content",
        "--title-col",
        "headline",
        "--id-col",
        "key",
    )
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"added 1, replaced 0, skipped 0, failed 0 files; 1 documents, 1 chunks"
        r" in [\d.]+s \([\d.]+ chunks/s\)\n",
        result.stdout,
    )
    result = run(home, "corpus", "add", str(table), "--text-col", "nope")
    assert result.exit_code == 1 and "has no column 'nope' (columns: key, headline, content)" in result.stderr

    listing = json.loads(run(home, "corpus", "list", "--json").stdout)
    assert sorted((Path(s["path"]).name, s["documents"]) for s in listing) == [
        ("a.md", 1),
        ("b.txt", 1),
        ("rows.csv", 1),
    ]

    result = run(home, "corpus", "search", "largest hot desert", "--json", "-n", "1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mode"] == "hybrid" and data["results"][0]["url"] == f"{table.as_uri()}#r1"
    assert data["results"][0]["title"] == "Deserts"

    result = run(home, "corpus", "search", "deepest lake", "--mode", "bm25")
    assert result.stdout.splitlines()[:2] == [
        "1. Lakes  [" + result.stdout.split("[")[1].split("]")[0] + "]",
        f"   {(docs / 'a.md').as_uri()}",
    ]
    result = run(home, "corpus", "search", "zebra quantum", "--mode", "bm25")
    assert result.stdout.strip() == "No results for 'zebra quantum'."
    result = run(home, "corpus", "search", "x", "--mode", "fuzzy")
    assert result.exit_code == 2 and "Invalid value for '--mode'" in result.stderr  # checked by the CLI framework
    assert "'fuzzy' is not one of" in result.stderr

    result = run(home, "corpus", "remove", str(docs / "a.md"))
    assert result.exit_code == 0 and result.stdout.strip() == "removed 1 documents"
    result = run(home, "corpus", "remove", str(docs / "a.md"))
    assert result.exit_code == 1 and "is not in the corpus" in result.stderr
    result = run(home, "corpus", "remove")
    assert result.exit_code == 1 and "--all" in result.stderr
    assert json.loads(run(home, "corpus", "remove", "--all", "--json").stdout) == {"removed_documents": 2}
    assert run(home, "corpus", "list").stdout.startswith("The corpus is empty")


def test_corpus_add_invalidates_cached_corpus_results(home: Path, tmp_path: Path, fake_model: FakeEmbedder) -> None:
    note = tmp_path / "n.md"
    note.write_text("Old text about volcanoes.")
    run(home, "corpus", "add", str(note))
    first = json.loads(run(home, "search", "volcanoes", "--json").stdout)
    assert json.loads(run(home, "search", "volcanoes", "--json").stdout)["cache_hit"] is True
    note.write_text("New text about volcanoes and geysers.")
    assert run(home, "corpus", "add", str(note)).exit_code == 0
    fresh = json.loads(run(home, "search", "volcanoes", "--json").stdout)
    assert fresh["cache_hit"] is False and fresh["results"][0]["text"] != first["results"][0]["text"]


def _listed(home: Path) -> list[str]:
    result = run(home, "corpus", "list", "--json")
    assert result.exit_code == 0, result.output
    return [Path(s["path"]).name for s in json.loads(result.stdout)]


def test_corpus_commands_on_a_locked_database_name_the_file(
    home: Path, tmp_path: Path, fake_model: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the write lock: one Error line naming the corpus file, nothing lost."""
    from deepresearch import db

    monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 1.0)  # SQLite waits 30 s before it gives up
    (tmp_path / "a.md").write_text("# Lakes\n\nLake Baikal is the deepest lake on Earth.")
    (tmp_path / "b.md").write_text("# Rivers\n\nThe Amazon river carries the most water of any river.")
    assert run(home, "corpus", "add", str(tmp_path / "a.md")).exit_code == 0
    path = home / "deepresearch.db"
    other = db.connect(path)
    other.execute("begin immediate")  # a writer in another connection (e.g. a research run) holds the lock
    try:
        locked = ("the corpus database", str(path), "stayed locked by another process for 1s", "try again")
        one_error_line(run(home, "corpus", "add", str(tmp_path / "b.md")), *locked)
        one_error_line(run(home, "corpus", "remove", str(tmp_path / "a.md")), *locked)
        assert _listed(home) == ["a.md"]  # WAL: readers go on while the writer holds the lock
    finally:
        other.execute("rollback")
        other.close()
    assert _listed(home) == ["a.md"]
    assert run(home, "corpus", "add", str(tmp_path / "b.md")).exit_code == 0
    assert _listed(home) == ["a.md", "b.md"]
    found = json.loads(run(home, "corpus", "search", "Amazon river", "--mode", "bm25", "--json").stdout)
    assert Path(found["results"][0]["url"]).name == "b.md"


def test_corpus_commands_on_a_damaged_database_name_the_file(
    home: Path, tmp_path: Path, fake_model: FakeEmbedder
) -> None:
    """A damaged page, then a file that is no database at all: one Error line, the file left as it was."""
    from deepresearch.db import connect

    (tmp_path / "a.md").write_text("# Lakes\n\nLake Baikal is the deepest lake on Earth.")
    (tmp_path / "b.md").write_text("# Rivers\n\nThe Amazon river carries the most water of any river.")
    assert run(home, "corpus", "add", str(tmp_path / "a.md")).exit_code == 0
    path = home / "deepresearch.db"
    conn = connect(path)
    page = conn.execute("pragma page_size").fetchone()[0]
    root = conn.execute("select rootpage from sqlite_master where name = 'corpus_sources'").fetchone()[0]
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    with path.open("r+b") as file:
        file.seek((root - 1) * page)
        file.write(b"\xff" * 64)
    damaged = path.read_bytes()
    unreadable = ("the corpus database", str(path), "is not a readable SQLite database", "move it aside")
    one_error_line(run(home, "corpus", "list"), *unreadable)
    one_error_line(run(home, "corpus", "add", str(tmp_path / "b.md")), *unreadable)
    one_error_line(run(home, "corpus", "remove", "--all"), *unreadable)
    assert path.read_bytes() == damaged

    path.write_bytes(b"not a database " * 100)  # fails while connecting, before any corpus table is read
    one_error_line(run(home, "corpus", "search", "lake"), *unreadable)
    one_error_line(run(home, "kb", "stats"), "the knowledge base", str(path), "is not a readable SQLite database")
    assert path.read_bytes() == b"not a database " * 100


@pytest.mark.slow
def test_hybrid_with_real_model_finds_paraphrases_and_keywords(tmp_path: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    from deepresearch.config import CorpusConfig
    from deepresearch.db import connect
    from deepresearch.search.corpus import Corpus

    texts = {
        "heart": "Regular aerobic exercise lowers the risk of cardiovascular disease in adults.",
        "sleep": "Adolescents who sleep less than seven hours show worse memory consolidation.",
        "code": "Error code ZX-4471 appears when the flux capacitor firmware is outdated.",
        "coffee": "Caffeine intake above 400 mg per day is linked to anxiety symptoms.",
        "trees": "Urban tree cover reduces summer street temperatures by several degrees.",
        "bees": "Neonicotinoid pesticides impair the navigation of honey bees.",
    }
    for name, text in texts.items():
        (tmp_path / f"{name}.txt").write_text(text)
    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, real_embedder, CorpusConfig())
    assert corpus.add_paths(sorted(tmp_path.glob("*.txt"))).documents == 6

    def top(query: str, mode: str) -> str:
        return Path(corpus.search(query, 3, mode=mode)[0].url).stem

    paraphrase = "Does working out protect against heart attacks?"  # no shared content word
    assert corpus.search(paraphrase, 3, mode="bm25") == [] or top(paraphrase, "bm25") != "heart"
    assert top(paraphrase, "vector") == "heart" and top(paraphrase, "hybrid") == "heart"
    assert top("ZX-4471", "bm25") == "code" and top("ZX-4471", "hybrid") == "code"
    assert top("why are pollinators getting lost", "hybrid") == "bees"
    conn.close()


def test_keywords_only_status_embed_and_list_marks(home: Path, tmp_path: Path, fake_model: FakeEmbedder) -> None:
    """`add --keywords-only` → `status` shows the chunks waiting → `embed` adds them; `list` escapes
    control characters in file names and marks an interrupted (incomplete) source."""
    from deepresearch.db import connect

    odd = tmp_path / "we\nird\x1b]0;owned\x07.md"
    odd.write_text("# Odd\n\nA file name with a newline and a title-setting escape sequence.")
    plain = tmp_path / "plain.md"
    plain.write_text("# Plain\n\nKelp forests grow in cold water along rocky coasts.")
    result = run(home, "corpus", "add", str(odd), str(plain), "--keywords-only", "--json")
    assert result.exit_code == 0 and result.stderr == ""  # not a terminal: no progress drawn
    report = json.loads(result.stdout)
    assert report["chunks"] == 2 and report["vectors"] == 0 and report["vectors_pending"] == 2
    assert {"added", "replaced", "skipped", "errors", "documents", "seconds"} <= set(report)
    assert run(home, "corpus", "search", "kelp forests", "--mode", "bm25").stdout.startswith("1. Plain")
    assert run(home, "corpus", "status").stdout == (
        "2 files, 2 documents, 2 chunks\nvectors: 2 chunks wait for their vector — `deepresearch corpus embed`\n"
    )
    result = run(home, "corpus", "embed")
    assert result.exit_code == 0 and result.stdout == "embedded 2 chunks\n"
    status = json.loads(run(home, "corpus", "status", "--json").stdout)
    assert status["vectors_pending"] == 0 and status["incomplete_sources"] == 0
    assert status["embedding_model"] == "fake-embedder"
    conn = connect(home / "deepresearch.db")
    conn.execute("update corpus_sources set file_hash = null where path = ?", (str(plain),))
    conn.close()
    lines = run(home, "corpus", "list").stdout.splitlines()
    assert len(lines) == 2 and "\x1b" not in lines[1] and "\x07" not in lines[1]
    assert lines[1].endswith("we\\nird\\x1b]0;owned\\x07.md")
    assert lines[0].endswith(f"{plain}  (incomplete: interrupted — `corpus add` it again)")
    assert "1 files incomplete" in run(home, "corpus", "status").stdout
    result = run(home, "corpus", "add", str(plain))
    assert result.exit_code == 0 and "replaced 1" in result.stdout
    assert "incomplete" not in run(home, "corpus", "list").stdout


def test_corpus_add_reports_pages_marked_noindex_and_adds_them_on_request(
    home: Path, tmp_path: Path, fake_model: FakeEmbedder
) -> None:
    docs = tmp_path / "site"
    docs.mkdir()
    (docs / "page.html").write_text("<html><body><main><p>Lake Baikal is the deepest lake.</p></main></body></html>")
    stub = '<html><head><meta name="ROBOTS" content="noindex, follow"></head><body><p>Moved.</p></body></html>'
    (docs / "old.html").write_text(stub)
    result = run(home, "corpus", "add", str(docs))
    assert result.exit_code == 0, result.output  # a page that asks not to be indexed is no failure
    assert result.stdout.startswith("added 1, replaced 0, skipped 0, failed 0 files; 1 documents")
    assert "1 HTML pages marked noindex not indexed — `--include-noindex` adds them" in result.stderr
    result = run(home, "corpus", "add", str(docs), "--include-noindex", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == [str(docs / "old.html")] and report["not_indexed"] == []
