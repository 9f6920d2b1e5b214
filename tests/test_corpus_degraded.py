"""Issue 13 (1, 3, 8): corpus writes without sqlite-vec (`DEEPRESEARCH_DISABLE_VEC=1`) never leave
an old vector under a reused chunk id, `corpus remove` works degraded, the next run with
sqlite-vec re-embeds what they changed, and `kb check` checks the corpus and the file — through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes import FakeEmbedder

runner = CliRunner()
NV = "DEEPRESEARCH_DISABLE_VEC"


@pytest.fixture
def fake(use_embedder) -> FakeEmbedder:  # type: ignore[no-untyped-def]
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def cli(home: Path, *args: str, code: int = 0) -> str:
    from deepresearch.cli.main import app

    result = runner.invoke(app, ["--home", str(home), *args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.stdout


def _write(path: Path, subject: str) -> Path:
    path.write_text(f"# {subject}\n\n" + f"{subject} is the topic of this note. " * 30, encoding="utf-8")
    return path


def _top(home: Path, query: str) -> str:
    data = json.loads(cli(home, "corpus", "search", query, "--mode", "vector", "--json"))
    return str(data["results"][0]["url"])


def test_degraded_rewrite_never_keeps_the_old_vector(home: Path, tmp_path: Path, fake, monkeypatch) -> None:
    """A rewritten document ingested degraded reused the old rowid and kept the old vector."""
    a = _write(tmp_path / "a.md", "volcanoes erupt lava")
    b = _write(tmp_path / "b.md", "penguins swim fast")
    c = _write(tmp_path / "c.md", "penguins swim slowly")
    cli(home, "corpus", "add", str(a), str(b), str(c))
    assert _top(home, "penguins swim fast") == b.absolute().as_uri()
    _write(b, "glaciers carve valleys")
    monkeypatch.setenv(NV, "1")
    cli(home, "corpus", "add", str(b))
    cli(home, "kb", "check")  # degraded: vectors not checked is a note, not a failure
    monkeypatch.delenv(NV)
    # The next run with sqlite-vec re-embeds what the degraded write changed, before searching:
    # the rewritten document no longer ranks first for its old subject.
    assert _top(home, "penguins swim fast") == c.absolute().as_uri()
    assert _top(home, "glaciers carve valleys") == b.absolute().as_uri()
    assert _top(home, "volcanoes erupt lava") == a.absolute().as_uri()
    cli(home, "kb", "check")


def test_degraded_remove_then_add_and_remove_all(home: Path, tmp_path: Path, fake, monkeypatch) -> None:
    """`NV corpus remove` then `corpus add` failed for good (UNIQUE on corpus_vec); `NV remove --all` crashed."""
    a = _write(tmp_path / "a.md", "volcanoes erupt lava")
    b = _write(tmp_path / "b.md", "penguins swim fast")
    cli(home, "corpus", "add", str(a), str(b))
    monkeypatch.setenv(NV, "1")
    cli(home, "corpus", "remove", str(b))
    monkeypatch.delenv(NV)
    c = _write(tmp_path / "c.md", "deserts hold little water")
    cli(home, "corpus", "add", str(c))
    assert _top(home, "deserts hold little water") == c.absolute().as_uri()
    cli(home, "kb", "check")
    monkeypatch.setenv(NV, "1")
    cli(home, "corpus", "remove", "--all")
    cli(home, "corpus", "add", str(b))
    monkeypatch.delenv(NV)
    assert _top(home, "penguins swim fast") == b.absolute().as_uri()
    cli(home, "kb", "check")


def test_kb_check_finds_corpus_problems_and_a_damaged_file(home: Path, tmp_path: Path, fake) -> None:
    """`kb check` never looked at the corpus, and said ok while PRAGMA integrity_check failed."""
    from deepresearch.db import connect

    cli(home, "corpus", "add", str(_write(tmp_path / "a.md", "volcanoes erupt lava")))
    conn = connect(home / "deepresearch.db")
    conn.execute("delete from corpus_vec")
    conn.close()
    out = cli(home, "kb", "check", code=1)
    assert "corpus chunks without a vector" in out
    cli(home, "corpus", "add", str(tmp_path / "a.md"))  # the next ingest re-embeds them
    cli(home, "kb", "check")
    # A damaged page anywhere in the file (here: a table kb check reads no rows of) is a problem.
    conn = connect(home / "deepresearch.db")
    page = conn.execute("pragma page_size").fetchone()[0]
    root = conn.execute("select rootpage from sqlite_master where name = 'corpus_sources'").fetchone()[0]
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    with (home / "deepresearch.db").open("r+b") as db:
        db.seek((root - 1) * page)
        db.write(b"\xff" * 64)
    out = cli(home, "kb", "check", code=1)
    assert "the database file is damaged" in out


def test_degraded_kb_check_exits_0(home: Path, fake, monkeypatch) -> None:
    """`NV kb check` always exited 1."""
    cli(home, "kb", "add", "Degraded checks still pass when all agrees.", "--source", "https://e.org")
    monkeypatch.setenv(NV, "1")
    out = cli(home, "kb", "check")
    assert out.startswith("note: vectors not checked") and "ok:" in out
    degraded = json.loads(cli(home, "kb", "check", "--json"))
    assert degraded == {"ok": True, "problems": [], "vectors_not_checked": f"disabled by {NV}"}
    monkeypatch.delenv(NV)
    assert json.loads(cli(home, "kb", "check", "--json"))["vectors_not_checked"] is None
