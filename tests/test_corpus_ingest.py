"""Issue 24 and issue 21 (2, 7): text first and vectors behind it, streamed large files in bounded
memory, interrupted ingests marked and resumed, the same chunks and vectors as a one-phase ingest."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepresearch.config import CorpusConfig
from deepresearch.db import connect
from deepresearch.search import ingest, readers
from deepresearch.search.chunking import chunk_text, iter_chunks
from deepresearch.search.corpus import Corpus
from tests.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parent.parent


def _old_chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """chunk_text as it was before streaming (every word span of the text in one list)."""
    import re

    spans = [m.span() for m in re.finditer(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{1,2}|\S+", text)]
    if not spans:
        return []
    step = max(1, size - min(overlap, size - 1))
    chunks, start = [], 0
    while True:
        end = min(len(spans), start + size)
        chunks.append(text[spans[start][0] : spans[end - 1][1]].strip())
        if end >= len(spans):
            return chunks
        start += step


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["ab", "c.", "芯", "片", " ", "\n", "\t", "销量"]), max_size=150).map("".join),
    st.integers(1, 12),
    st.integers(0, 14),
    st.lists(st.integers(0, 300), max_size=8),
)
def test_streamed_chunks_equal_one_shot_chunks(text: str, size: int, overlap: int, cuts: list[int]) -> None:
    """Chunks of text cut into arbitrary pieces (mid-word, mid-CJK-run) are the one-shot chunks."""
    bounds = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    expected = _old_chunk_text(text, size, overlap)
    assert list(iter_chunks(pieces, size, overlap)) == expected
    assert chunk_text(text, size, overlap) == expected


class GatedEmbedder(FakeEmbedder):
    """A FakeEmbedder whose first call waits until the test opens the gate (a slow model)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.threads: set[str] = set()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.threads.add(threading.current_thread().name)
        assert self.gate.wait(30), "the test never opened the gate"
        return super().embed_batch(texts)


def _stored_vectors(conn: Any, ids: list[int]) -> np.ndarray:
    rows = [conn.execute("select embedding from corpus_vec where rowid = ?", (i,)).fetchone() for i in ids]
    return np.stack([np.frombuffer(r[0], np.float32) for r in rows])


def _notes(folder: Path, count: int) -> list[Path]:
    folder.mkdir(exist_ok=True)
    subjects = ["volcanoes erupt lava", "penguins swim fast", "glaciers carve valleys", "deserts hold sand"]
    paths = []
    for i in range(count):
        subject = subjects[i % len(subjects)]
        path = folder / f"{i:02d}.md"
        path.write_text(f"# Note {i} on {subject}\n\n" + f"{subject} in note {i}. " * 60, encoding="utf-8")
        paths.append(path)
    return paths


def test_text_is_searchable_before_its_vectors_exist(tmp_path: Path) -> None:
    """Keyword search (another connection) answers while the embedder has not returned once."""
    db = tmp_path / "ws.db"
    conn = connect(db)
    embedder = GatedEmbedder()
    corpus = Corpus(conn, embedder, CorpusConfig(chunk_words=40, chunk_overlap=8))
    _notes(tmp_path / "notes", 6)
    seen: dict[str, Any] = {}

    def on_file(event: Any) -> None:
        if event.files_done == event.files_total:  # all text in; the embedder is still held
            reader = connect(db)
            hits = Corpus(reader, None, corpus.config).search("penguins swim", 3, mode="bm25")
            seen["hits"] = [h.title for h in hits]
            seen["vectors"] = reader.execute("select count(*) from corpus_vec").fetchone()[0]
            seen["pending"] = Corpus(reader, None, corpus.config).vectors_pending()
            reader.close()
            embedder.gate.set()

    report = corpus.add_paths([tmp_path / "notes"], progress=on_file)
    assert seen["hits"] and all("penguins" in t for t in seen["hits"])
    assert seen["vectors"] == 0 and seen["pending"] == report.chunks
    assert embedder.threads == {"corpus-embed"}  # embedded off the main thread
    assert report.vectors == report.chunks and report.vectors_pending == 0
    assert report.text_seconds <= report.seconds
    assert "penguins" in corpus.search("penguins swim fast", 1, mode="vector")[0].title
    conn.close()


def test_keywords_only_then_embed_and_partial_hybrid(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`embed=False` leaves every chunk pending; hybrid still ranks them by BM25 and says so;
    `embed_pending` finishes them with the vectors a direct embedding gives."""
    from deepresearch.search import corpus_index

    monkeypatch.setattr(corpus_index, "SEARCH_FILL_LIMIT", 1)  # a search embeds no backlog this size
    conn = connect(tmp_path / "ws.db")
    embedder = FakeEmbedder()
    corpus = Corpus(conn, embedder, CorpusConfig(chunk_words=40, chunk_overlap=8))
    paths = _notes(tmp_path / "notes", 4)
    report = corpus.add_paths(paths[:2])  # embedded
    assert report.vectors_pending == 0
    report = corpus.add_paths(paths[2:], embed=False)  # text only
    assert report.vectors == 0 and report.vectors_pending == report.chunks > 0
    assert corpus.status().vectors_pending == report.chunks
    with caplog.at_level("WARNING"):
        hits = corpus.search("glaciers carve valleys", 2, mode="hybrid")
    assert hits[0].title.startswith("Note 2 ")  # no vector yet, first by BM25
    assert "have no vector yet" in caplog.text and "corpus embed" in caplog.text
    assert corpus.embed_pending() == report.chunks and corpus.vectors_pending() == 0
    rows = conn.execute(
        "select c.id, d.title, c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id order by c.id"
    ).fetchall()
    stored = _stored_vectors(conn, [r[0] for r in rows])
    np.testing.assert_allclose(stored, embedder.embed_batch([f"{t}\n{x}" for _, t, x in rows]), atol=1e-6)
    conn.close()


def test_large_text_file_is_streamed_with_the_same_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text file above STREAM_BYTES (lowered here) is read in 1 KiB pieces: same title and chunks
    as the whole-file path, written in several transactions, and a re-add is skipped."""
    words = " ".join(f"w{i}" + ("\n\n" if i % 37 == 0 else "") for i in range(6000))
    text = "Title line of the big file\n" + words + " 芯片销量 " * 50
    big = tmp_path / "big.txt"
    big.write_text(text, encoding="utf-8")
    config = CorpusConfig(chunk_words=40, chunk_overlap=8)

    def ingest_with(stream_bytes: int, db: str) -> tuple[list[tuple[Any, ...]], Corpus]:
        monkeypatch.setattr(ingest, "STREAM_BYTES", stream_bytes)
        corpus = Corpus(connect(tmp_path / db), FakeEmbedder(), config)
        assert corpus.add_paths([big]).added == [str(big)]
        rows = corpus.conn.execute(
            "select c.id, c.seq, c.text, d.title from corpus_chunks c join corpus_documents d on d.id = c.doc_id"
            " order by c.id"
        ).fetchall()
        return rows, corpus

    whole, _ = ingest_with(1 << 30, "whole.db")
    monkeypatch.setattr(readers, "PIECE_BYTES", 1024)
    monkeypatch.setattr(ingest, "STREAM_CHUNKS", 7)
    streamed, corpus = ingest_with(1024, "streamed.db")
    assert streamed == whole and len(whole) > 100
    assert corpus.add_paths([big]).skipped == [str(big)]
    assert corpus.vectors_pending() == 0 and corpus.sources()[0].complete
    conn = corpus.conn
    assert conn.execute("select count(*) from corpus_fts where corpus_fts match '芯片'").fetchone()[0] > 0
    conn.close()


def test_interrupted_stream_is_marked_incomplete_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted inside a streamed file: the source is listed incomplete (not a silent partial
    count), its partial document is never taken for the whole, and the next add finishes it."""
    monkeypatch.setattr(ingest, "STREAM_BYTES", 1024)
    monkeypatch.setattr(readers, "PIECE_BYTES", 512)
    monkeypatch.setattr(ingest, "STREAM_CHUNKS", 5)
    big = tmp_path / "big.md"
    big.write_text("# Big\n\n" + " ".join(f"token{i}" for i in range(3000)), encoding="utf-8")
    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, FakeEmbedder(), CorpusConfig(chunk_words=40, chunk_overlap=8))

    def interrupt(event: Any) -> None:
        if event.chunks >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        corpus.add_paths([big], progress=interrupt)
    [source] = corpus.sources()
    assert not source.complete and 0 < source.chunks < 100
    assert corpus.status().incomplete_sources == 1
    report = corpus.add_paths([big])
    assert report.replaced == [str(big)] and report.vectors_pending == 0
    [source] = corpus.sources()
    assert source.complete and source.documents == 1
    assert source.chunks == len(chunk_text(big.read_text(), 40, 8))
    assert corpus.add_paths([big]).skipped == [str(big)]
    conn.close()


def test_interrupted_vectors_resume_where_they_stopped(tmp_path: Path) -> None:
    """Interrupted while embedding: what was stored stays, the next add embeds only the rest."""
    conn = connect(tmp_path / "ws.db")
    embedder = FakeEmbedder()
    corpus = Corpus(conn, embedder, CorpusConfig(chunk_words=20, chunk_overlap=4))
    paths = _notes(tmp_path / "notes", 30)  # > EMBED_POOL chunks: more than one pool

    def interrupt(event: Any) -> None:
        if event.done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        corpus.add_paths(paths, vector_progress=interrupt)
    pending = corpus.vectors_pending()
    assert 0 < pending < corpus.count_chunks()
    report = corpus.add_paths(paths)
    assert report.skipped == [str(p) for p in paths] and report.vectors == pending
    assert corpus.vectors_pending() == 0
    conn.close()


def test_streamed_ingest_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """Python allocations while ingesting a 6 MB text file stay bounded by one piece (≈7.5 MiB, the
    same for an 18 MB file); the whole-file path held the text, a list of every word's span
    (≈17 bytes per byte of text) and every chunk at once."""
    paragraph = "Coral reefs bleach when the sea stays too warm for weeks, and recovery takes years. " * 8
    big = tmp_path / "big.txt"
    with big.open("w", encoding="utf-8") as out:
        for i in range(6 * 1024 * 1024 // len(paragraph)):
            out.write(f"{i} {paragraph}\n")
    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, None, CorpusConfig())  # text only: this measures reading, chunking, writing
    tracemalloc.start()
    report = corpus.add_paths([big])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert report.added == [str(big)] and report.chunks > 7_000
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    conn.close()


def test_same_chunk_ids_and_vectors_as_a_one_phase_ingest(tmp_path: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    """The shipped sample corpus through the real model: chunk ids in file order and each file's
    vectors as one call of the corpus path over its chunks (`embed_documents`, the int8 model by
    default: what a one-phase ingest with the same embedder stores) — equal."""
    folder = ROOT / "docs" / "corpus"
    config = CorpusConfig()
    conn = connect(tmp_path / "ws.db")
    corpus = Corpus(conn, real_embedder, config)
    report = corpus.add_paths([folder])
    assert not report.errors and report.vectors == report.chunks
    expected: list[tuple[int, str]] = []
    vectors = []
    for path in sorted(folder.glob("**/*")):
        if path.suffix not in readers.SUPPORTED:
            continue
        doc = readers.read_file(path)
        texts = [f"{doc.title}\n{c}" for c in chunk_text(doc.text, config.chunk_words, config.chunk_overlap)]
        expected += [(len(expected) + 1 + n, t) for n, t in enumerate(texts)]
        vectors.append(real_embedder.embed_documents(texts))
    rows = conn.execute(
        "select c.id, d.title || char(10) || c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id"
        " order by c.id"
    ).fetchall()
    assert [(int(i), t) for i, t in rows] == expected
    stored = _stored_vectors(conn, [i for i, _ in expected])
    np.testing.assert_allclose(stored, np.concatenate(vectors), atol=2e-5)
    conn.close()


def test_onnx_embedder_tokenizes_in_bounded_slices(real_embedder, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A call with more texts than TOKENIZE_TEXTS gives the vectors of one call; a huge text is cut
    before the tokenizer (its 256-token window is unchanged)."""
    from deepresearch.models import onnx_embed

    assert isinstance(real_embedder, onnx_embed.OnnxEmbedder)  # the default backend: a missing one is a failure
    texts = [f"sentence {i} about " + "tidal locking " * (i % 9) for i in range(40)]
    whole = real_embedder.embed_batch(texts)
    monkeypatch.setattr(onnx_embed, "TOKENIZE_TEXTS", 7)
    np.testing.assert_allclose(real_embedder.embed_batch(texts), whole, atol=2e-5)
    huge = "The Moon is tidally locked to Earth. " * 200_000  # 7.4 MB
    np.testing.assert_allclose(real_embedder.embed_batch([huge]), real_embedder.embed_batch([huge[:30_000]]), atol=2e-5)
