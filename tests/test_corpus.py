"""Local corpus: ingestion of every file type, idempotence, replacement, bad input, retrieval."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepresearch.config import CorpusConfig
from deepresearch.db import connect
from deepresearch.errors import DimensionMismatch, InputError, NotFound, SearchError
from deepresearch.search.corpus import Corpus, fts_query, rrf_fuse
from deepresearch.search.ingest import chunk_text
from deepresearch.search.readers import TableSpec, html_to_text, read_html_file
from tests.fakes import FakeEmbedder

HTML_PAGE = """<!doctype html><html><head><title>Tidal locking explained</title>
<script>var tracking = "analytics beacon";</script><style>.x{color:red}</style></head>
<body>
<header><a href="/">Home</a> <a href="/about">About us</a></header>
<nav class="navbar"><ul><li><a href="/a">Astronomy menu</a></li>
<li><a href="/b">Subscribe now</a></li></ul></nav>
<div class="cookie-banner">We use cookies to improve your experience.</div>
<main><article><h1>Tidal locking</h1>
<p>The Moon is tidally locked to Earth, so the same hemisphere always faces our planet.</p>
<p>Tidal forces slowed the Moon's rotation until its rotation period matched its orbital period.</p>
</article></main>
<aside>Related: <a href="/c">Ten facts about Mars</a></aside>
<footer>Copyright 2024 Example Media. All rights reserved.</footer>
</body></html>"""


def make_pdf(path: Path, lines: list[str]) -> Path:
    """Write a minimal valid one-page PDF whose text layer holds `lines` (Helvetica)."""
    ops = ["BT", "/F1 12 Tf", "72 720 Td"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops += [f"({escaped}) Tj", "0 -16 Td"]
    ops.append("ET")
    content = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def make_blank_pdf(path: Path) -> Path:
    """A valid PDF with one empty page (no text layer), written by pypdf."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    with path.open("wb") as handle:
        writer.write(handle)
    return path


def duckdb_write(path: Path, rows: list[tuple[str, str, str, str]], fmt: str) -> Path:
    """Write rows (id, title, body, link) to Parquet or CSV with DuckDB itself."""
    import duckdb

    con = duckdb.connect()
    con.execute("create table t (id varchar, title varchar, body varchar, link varchar)")
    con.executemany("insert into t values (?, ?, ?, ?)", rows)
    option = "(format parquet)" if fmt == "parquet" else "(header, delimiter ',')"
    con.execute(f"copy t to '{path}' {option}")
    con.close()
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    conn = connect(tmp_path / "ws.db")
    yield Corpus(conn, FakeEmbedder(), CorpusConfig(chunk_words=40, chunk_overlap=8))
    conn.close()


def chunk_texts(corpus: Corpus) -> list[str]:
    return [r[0] for r in corpus.conn.execute("select text from corpus_chunks order by id")]


def counts(corpus: Corpus) -> tuple[int, int, int, int]:
    """(documents, chunks, fts rows, vectors) — they must always agree."""
    q = corpus.conn.execute
    return (
        q("select count(*) from corpus_documents").fetchone()[0],
        q("select count(*) from corpus_chunks").fetchone()[0],
        q("select count(*) from corpus_fts").fetchone()[0],
        q("select count(*) from corpus_vec").fetchone()[0],
    )


def test_every_file_type_ingests_and_is_searchable(corpus: Corpus, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Saturn notes\n\nSaturn's rings are made mostly of water ice.\n")
    (docs / "plain.txt").write_text("Jupiter has a great red spot, a storm larger than Earth.\n")
    (docs / "page.html").write_text(HTML_PAGE)
    make_pdf(
        docs / "paper.pdf",
        [
            "Neutron stars are the collapsed cores of massive stars.",
            "A teaspoon of neutron star material weighs billions of tonnes.",
        ],
    )
    duckdb_write(
        docs / "table.parquet",
        [
            ("p1", "Venus", "Venus has a runaway greenhouse effect.", "https://ex.org/venus"),
            ("p2", "Mercury", "Mercury has almost no atmosphere.", "https://ex.org/mercury"),
        ],
        "parquet",
    )
    duckdb_write(
        docs / "table.csv",
        [("c1", "Comets", "Comets grow tails of gas and dust near the Sun.", "https://ex.org/comets")],
        "csv",
    )
    (docs / "rows.jsonl").write_text(
        json.dumps({"_id": "j1", "title": "Pluto", "text": "Pluto was reclassified as a dwarf planet in 2006."}) + "\n"
    )
    report = corpus.add_paths([docs], table=TableSpec(text_col=None, url_col=None))
    # The CSV/Parquet text column is called "body": guessed; url column "link": guessed.
    assert report.errors == []
    assert sorted(Path(p).name for p in report.added) == sorted(p.name for p in docs.iterdir())
    assert counts(corpus)[0] == 8

    expect = {
        "water ice rings": (docs / "notes.md").as_uri(),
        "great red spot storm": (docs / "plain.txt").as_uri(),
        "tidally locked hemisphere": (docs / "page.html").as_uri(),
        "teaspoon neutron star": (docs / "paper.pdf").as_uri(),
        "runaway greenhouse": "https://ex.org/venus",
        "comet tails dust": "https://ex.org/comets",
        "dwarf planet reclassified": (docs / "rows.jsonl").as_uri() + "#j1",
    }
    for query, url in expect.items():
        for mode in ("bm25", "hybrid"):
            results = corpus.search(query, 3, mode=mode)
            assert results and results[0].url == url, (query, mode, [r.url for r in results])
            assert results[0].backend == "corpus" and results[0].text and results[0].snippet


def test_html_boilerplate_is_dropped() -> None:
    title, text = html_to_text(HTML_PAGE)
    assert title == "Tidal locking explained"
    assert "same hemisphere always faces" in text and "orbital period" in text
    for junk in (
        "analytics beacon",
        "Astronomy menu",
        "Subscribe",
        "cookies",
        "Ten facts about Mars",
        "Copyright",
        "About us",
    ):
        assert junk not in text


def test_html_without_main_drops_link_lists() -> None:
    page = (
        "<html><body><div><a href=/1>Home</a> | <a href=/2>Products</a> | <a href=/3>Contact</a></div>"
        "<div><p>Photosynthesis converts light into chemical energy in plants.</p></div></body></html>"
    )
    _, text = html_to_text(page)
    assert text == "Photosynthesis converts light into chemical energy in plants."


# The shape of an mdBook page (The Rust Programming Language, Cargo's book…): a page-state class on
# <html> that reads like a sidebar, a sidebar <nav>, a menu bar, a hidden search box, a keyboard help
# popup outside <main>, and headings that are links to themselves.
MDBOOK_PAGE = """<!DOCTYPE HTML><html lang="en" class="light sidebar-visible" dir="ltr">
<head><title>Installation - The Rust Programming Language</title>
<script>const path_to_root = "";</script></head>
<body>
<div id="mdbook-help-container"><div id="mdbook-help-popup">
<h2 class="mdbook-help-title">Keyboard shortcuts</h2><p>Press S or / to search in the book</p></div></div>
<div id="mdbook-body-container">
<input type="checkbox" id="mdbook-sidebar-toggle-anchor" class="hidden">
<nav id="mdbook-sidebar" class="sidebar" aria-label="Table of contents">
<ol class="chapter"><li><a href="ch01-00.html">Getting Started</a></li>
<li><a href="ch02-00.html">Programming a Guessing Game</a></li></ol></nav>
<div id="mdbook-page-wrapper" class="page-wrapper"><div class="page">
<div id="mdbook-menu-bar" class="menu-bar sticky">
<button id="mdbook-theme-toggle" class="icon-button">Change theme</button>
<h1 class="menu-title">The Rust Programming Language</h1></div>
<div id="mdbook-search-wrapper" class="hidden"><form id="mdbook-searchbar-outer">
<input type="search" placeholder="Search this book ..."></form></div>
<div id="mdbook-content" class="content"><main>
<h2 id="installation"><a class="header" href="#installation">Installation</a></h2>
<p>The first step is to install Rust through <code>rustup</code>, a command line tool.</p>
<h3 id="linux"><a class="header" href="#linux">Installing rustup on Linux or macOS</a></h3>
<pre><code>$ curl --proto '=https' --tlsv1.2 https://sh.rustup.rs -sSf | sh</code></pre>
</main>
<nav class="nav-wrapper" aria-label="Page navigation">
<a rel="prev" href="ch01-00.html" title="Previous chapter">Previous</a></nav>
</div></div></div></div>
<script src="book.js"></script>
</body></html>"""


def test_mdbook_page_keeps_its_main_text_and_drops_the_sidebar(tmp_path: Path) -> None:
    page = tmp_path / "ch01-01-installation.html"
    page.write_text(MDBOOK_PAGE)
    title, text = read_html_file(page)
    assert title == "Installation - The Rust Programming Language"
    assert text.split("\n\n") == [
        "Installation",
        "The first step is to install Rust through rustup, a command line tool.",
        "Installing rustup on Linux or macOS",
        "$ curl --proto '=https' --tlsv1.2 https://sh.rustup.rs -sSf | sh",
    ]
    # An mdBook redirect stub or a page whose <main> is empty is still an empty page.
    stub = tmp_path / "ch17-00-oop.html"
    stub.write_text(MDBOOK_PAGE.split("<main>")[0] + "<main></main></div></div></div></div></body></html>")
    with pytest.raises(InputError, match="empty page"):
        read_html_file(stub)


def test_html_wrapper_named_like_a_menu_keeps_the_main_region() -> None:
    page = (
        '<html><body class="nav-open"><div class="menu-layout"><div class="menu"><p>Products and pricing</p></div>'
        '<div role="main"><p>Photosynthesis converts light into chemical energy.</p></div></div>'
        '<div class="sidebar"><p>Sign up for our newsletter today.</p></div></body></html>'
    )
    assert html_to_text(page)[1] == "Photosynthesis converts light into chemical energy."


def test_pages_marked_noindex_are_skipped_by_ingest_unless_asked_for(corpus: Corpus, tmp_path: Path) -> None:
    docs = tmp_path / "book"
    docs.mkdir()
    (docs / "ch01.html").write_text(MDBOOK_PAGE)
    # mdBook's print-all copy of the book (and its redirect stubs) ask indexers to skip them.
    marked = MDBOOK_PAGE.replace("<head>", '<head><meta name="robots" content="noindex">', 1)
    (docs / "print.html").write_text(marked.replace("</main>", "<p>Chapter two: hello, world.</p></main>"))
    report = corpus.add_paths([docs])
    assert report.added == [str(docs / "ch01.html")] and report.documents == 1
    assert report.not_indexed == [str(docs / "print.html")] and not report.errors  # skipped, not failed
    again = corpus.add_paths([docs / "print.html"], include_noindex=True)
    assert again.added == [str(docs / "print.html")] and not again.not_indexed
    assert read_html_file(docs / "print.html")[1].endswith("hello, world.")  # a direct read reads it


def test_duplicate_ingest_adds_nothing(corpus: Corpus, tmp_path: Path) -> None:
    note = tmp_path / "a.md"
    note.write_text("Photosynthesis converts light into chemical energy.")
    first = corpus.add_paths([note])
    before = counts(corpus)
    again = corpus.add_paths([note])
    assert first.added == [str(note)] and again.skipped == [str(note)] and again.documents == 0
    copy = tmp_path / "copy.md"
    copy.write_text(note.read_text())
    dup = corpus.add_paths([copy])
    assert dup.duplicates == 1 and dup.documents == 0 and dup.skipped == [str(copy)]
    assert counts(corpus) == before


def test_reingest_of_changed_file_replaces_its_chunks(corpus: Corpus, tmp_path: Path) -> None:
    note = tmp_path / "a.md"
    note.write_text("The old claim: the bridge opened in 1990. " * 20)
    corpus.add_paths([note])
    assert corpus.search("bridge opened 1990", 1, mode="bm25")
    note.write_text("The corrected claim: the tunnel opened in 1994.")
    report = corpus.add_paths([note])
    assert report.replaced == [str(note)] and report.removed_documents == 1
    assert all("1990" not in t for t in chunk_texts(corpus))
    assert corpus.search("bridge 1990", 5, mode="bm25") == []
    assert corpus.search("tunnel 1994", 1, mode="vector")[0].url == note.as_uri()
    docs, chunks, fts, vectors = counts(corpus)
    assert docs == 1 and chunks == fts == vectors == 1


def test_reingest_of_table_replaces_changed_rows_only(corpus: Corpus, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [{"id": str(i), "text": f"Row {i} talks about topic{i} and nothing else."} for i in range(5)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    corpus.add_paths([path])
    ids_before = dict(corpus.conn.execute("select doc_key, id from corpus_documents"))
    rows[1]["text"] = "Row 1 now talks about volcanoes."
    del rows[4]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    report = corpus.add_paths([path])
    assert report.replaced == [str(path)] and report.documents == 1 and report.removed_documents == 2
    ids_after = dict(corpus.conn.execute("select doc_key, id from corpus_documents"))
    assert sorted(ids_after) == ["0", "1", "2", "3"]
    assert ids_after["0"] == ids_before["0"] and ids_after["1"] != ids_before["1"]  # unchanged rows kept
    assert corpus.search("volcanoes", 1, mode="bm25")[0].url.endswith("#1")
    assert counts(corpus)[1:] == (4, 4, 4)


def test_bad_inputs_give_one_message_each_and_the_rest_ingests(corpus: Corpus, tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text("Glaciers store about 69 percent of the world's fresh water.")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02\xffGARBAGE" * 50)
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    notext = make_blank_pdf(tmp_path / "scan.pdf")
    broken_pdf = tmp_path / "broken.pdf"
    broken_pdf.write_bytes(b"this is not a pdf at all")
    csv = duckdb_write(tmp_path / "t.csv", [("1", "T", "Some text", "https://x")], "csv")
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "gone.md")
    odd = tmp_path / "image.png"
    odd.write_bytes(b"\x89PNG\r\n")
    paths = [binary, empty, notext, broken_pdf, csv, dangling, odd, tmp_path / "missing.txt", good]
    report = corpus.add_paths(paths, table=TableSpec(text_col="content"))
    assert report.added == [str(good)]
    assert len(report.errors) == 8, report.errors
    by_file = {Path(message.split(":")[0]).name: message for message in report.errors}
    assert "binary" in by_file["blob.txt"]
    assert "empty file" in by_file["empty.md"]
    assert "no extractable text" in by_file["scan.pdf"] and "OCR" in by_file["scan.pdf"]
    assert "not a readable PDF" in by_file["broken.pdf"]
    assert "no column 'content'" in by_file["t.csv"] and "id, title, body, link" in by_file["t.csv"]
    assert "--text-col" in by_file["t.csv"]
    assert "not a regular file" in by_file["dangling.md"]
    assert "unsupported file type .png" in by_file["image.png"]
    assert "no such file" in by_file["missing.txt"]
    # Failed files leave nothing behind.
    assert [r[0] for r in corpus.conn.execute("select path from corpus_sources")] == [str(good)]


def test_unreadable_file_is_reported(corpus: Corpus, tmp_path: Path) -> None:
    locked = tmp_path / "locked.md"
    locked.write_text("secret")
    locked.chmod(0)
    report = corpus.add_paths([locked])
    if os.geteuid() == 0:  # root reads anything: the permission check cannot fire, the file ingests
        assert report.added == [str(locked)]
    else:
        assert report.errors and "permission denied" in report.errors[0]


def test_cjk_keyword_search_matches_inside_words(corpus: Corpus, tmp_path: Path) -> None:
    zh = tmp_path / "zh.md"
    zh.write_text("2024年AI芯片销量大幅增长，GPU出货量创新高。")
    other = tmp_path / "other.md"
    other.write_text("今天的天气很好，我们去公园散步。")
    corpus.add_paths([zh, other])
    for query in ("GPU出货量", "芯片", "芯片销量"):
        results = corpus.search(query, 2, mode="bm25")
        assert results and results[0].url == zh.as_uri(), query


def test_chunking_overlaps_and_covers_all_words() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    chunks = chunk_text(text, 40, 10)
    assert [c.split()[0] for c in chunks] == ["w0", "w30", "w60"]
    assert chunks[-1].split()[-1] == "w99"
    assert all(len(c.split()) <= 40 for c in chunks)
    assert chunk_text("", 40, 10) == []
    cjk = chunk_text("芯片" * 100, 20, 5)  # 200 chars = 100 two-char units
    assert len(cjk) > 1 and all(len(c) <= 40 for c in cjk)


def test_fts_query_quotes_operators() -> None:
    assert fts_query('NEAR("a" OR b) AND -c*') == '"near" OR "b" OR "c"'
    assert fts_query("the of and") is None


def test_rrf_fuse_rewards_agreement() -> None:
    bm25 = [(1, 11, 9.0), (2, 21, 5.0), (3, 31, 1.0)]
    vector = [(3, 32, 0.9), (2, 22, 0.8)]
    fused = rrf_fuse([(1.0, bm25), (1.0, vector)], 60)
    # Docs found by both lists beat doc 1, which only BM25 ranks first; each doc keeps the
    # chunk of the list that ranked it higher.
    assert [chunk for chunk, _ in fused] == [32, 21, 11]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)


def test_remove_and_list(corpus: Corpus, tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("alpha document about lakes")
    b.write_text("beta document about rivers")
    corpus.add_paths([a, b])
    assert [(s.path, s.documents) for s in corpus.sources()] == [(str(a), 1), (str(b), 1)]
    assert corpus.remove([a]) == 1
    assert counts(corpus) == (1, 1, 1, 1)
    with pytest.raises(NotFound, match="corpus list"):
        corpus.remove([a])
    assert corpus.remove(all_sources=True) == 1
    assert corpus.sources() == [] and corpus.search("rivers", 3, mode="bm25") == []


def test_embedding_model_change_fails_closed(corpus: Corpus, tmp_path: Path) -> None:
    note = tmp_path / "a.md"
    note.write_text("some text about oceans")
    corpus.add_paths([note])
    other = Corpus(corpus.conn, FakeEmbedder(model_id="another-model"), corpus.config)
    with pytest.raises(DimensionMismatch, match="corpus remove --all"):
        other.search("oceans", 3, mode="vector")
    assert other.search("oceans", 3, mode="bm25")  # keyword search needs no model
    resized = Corpus(corpus.conn, FakeEmbedder(dimension=64, model_id="fake-embedder"), corpus.config)
    with pytest.raises(DimensionMismatch, match=r"\(384-d\) but the configured model is fake-embedder \(64-d\)"):
        resized.search("oceans", 3, mode="vector")  # same model name, other dimension: fails closed too


def test_embedder_is_loaded_only_for_vectors(tmp_path: Path) -> None:
    calls = []

    def factory() -> FakeEmbedder:
        calls.append(1)
        return FakeEmbedder()

    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, factory, CorpusConfig())
    assert corpus.search("anything", 3, mode="bm25") == [] and calls == []
    note = tmp_path / "a.md"
    note.write_text("lazy loading")
    corpus.add_paths([note])
    assert calls == [1]
    conn.close()


def test_progress_callback_reports_files(corpus: Corpus, tmp_path: Path) -> None:
    events = []
    for i in range(3):
        (tmp_path / f"{i}.txt").write_text(f"file number {i}")
    corpus.add_paths([tmp_path], glob="*.txt", progress=events.append)
    assert [e.files_done for e in events] == [1, 2, 3]
    assert events[-1].files_total == 3 and events[-1].chunks == 3


def test_without_sqlite_vec_keyword_search_works_and_vectors_backfill_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    conn = connect(tmp_path / "ws.db")
    assert conn.vec_version is None
    degraded = Corpus(conn, FakeEmbedder(), CorpusConfig())
    note = tmp_path / "a.md"
    note.write_text("Coral reefs bleach when the sea is too warm.")
    assert degraded.add_paths([note]).added == [str(note)]
    assert degraded.search("coral bleaching", 1)[0].url == note.as_uri()  # hybrid falls back to BM25
    with pytest.raises(SearchError, match="--mode bm25"):
        degraded.search("coral", 1, mode="vector")
    conn.close()
    monkeypatch.delenv("DEEPRESEARCH_DISABLE_VEC")
    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, FakeEmbedder(), CorpusConfig())
    other = tmp_path / "b.md"
    other.write_text("Kelp forests grow in cold water.")
    corpus.add_paths([other])  # the next ingest embeds what was stored without vectors
    assert counts(corpus) == (2, 2, 2, 2)
    assert corpus.search("coral reefs warm sea", 1, mode="vector")[0].url == note.as_uri()
    conn.close()


def test_table_without_text_rows_is_an_error(corpus: Corpus, tmp_path: Path) -> None:
    header_only = tmp_path / "h.csv"
    header_only.write_text("id,text\n")
    blank = tmp_path / "blank.jsonl"
    blank.write_text(json.dumps({"id": "1", "text": "   "}) + "\n")
    report = corpus.add_paths([header_only, blank])
    assert len(report.errors) == 2 and all("no rows with text in column 'text'" in e for e in report.errors)
    assert corpus.sources() == []
