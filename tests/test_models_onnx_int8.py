"""The int8 corpus model (models/onnx_int8.py): built offline from the shipped files, cached and
reused, rebuilt when damaged; its vectors close to the float model's and independent of their
batch; queries and facts stay float."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from deepresearch.config import EmbeddingConfig
from deepresearch.models import embed, onnx_model
from deepresearch.models.onnx_embed import CORRECTION_FILE, Correction, OnnxEmbedder
from deepresearch.models.onnx_graph import fields
from deepresearch.models.onnx_int8 import CALIBRATION_FILE, INT8_FORMAT, Graph

CORRECTION = embed.SHIPPED_TOKENIZER / CORRECTION_FILE
ACTIVATIONS = embed.SHIPPED_TOKENIZER / CALIBRATION_FILE
SAMPLE = Path(__file__).resolve().parents[1] / "docs" / "corpus"
TEXTS = [
    "A man with a hard hat is dancing.",
    "SQLite in WAL mode lets readers continue while one writer appends to the log.",
    "Die Katze schläft auf dem Sofa.",
    "GPU shipments",
    *(path.read_text(encoding="utf-8")[:1500] for path in sorted(SAMPLE.glob("*.md"))),  # 256-token chunks
]
# Measured (docs/BENCHMARKS.md, session 13): cosine to the float model ≥ 0.9985 on SciFact
# abstracts and HotpotQA paragraphs; the bound leaves room for other CPUs' int8 kernels.
MIN_COSINE = 0.997


def _embedder(cache_dir, activations=ACTIVATIONS):  # type: ignore[no-untyped-def]
    source, tokenizer = embed.onnx_files(None)
    correction = Correction(CORRECTION, cache_dir, activations)
    return OnnxEmbedder(source, tokenizer, embed.DEFAULT_MODEL_ID, correction=correction)


def _int8_file(cache):  # type: ignore[no-untyped-def]
    (path,) = sorted(cache.glob("model-int8-*.onnx"))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):  # type: ignore[no-untyped-def]
    """(cache folder, the int8 vectors of TEXTS, their float vectors, the embedder)."""
    cache = tmp_path_factory.mktemp("int8") / "cache"
    embedder = _embedder(cache)
    return cache, embedder.embed_documents(TEXTS), embedder.embed_batch(TEXTS), embedder


def test_the_int8_model_is_built_from_the_shipped_files_cached_and_reused(tmp_path, caplog) -> None:
    cache = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="deepresearch.models.onnx_model"):
        first = _embedder(cache).embed_documents(TEXTS)
    path = _int8_file(cache)
    source = embed.onnx_files(None)[0]
    key = onnx_model.cache_key(source, CORRECTION, ACTIVATIONS, salt=f"int8 {INT8_FORMAT}")
    assert path.name == f"model-int8-{key}.onnx"  # keyed by the ONNX file, correction, calibration, format
    assert path.with_name(path.name + onnx_model.RECORD_SUFFIX).is_file()
    assert f"wrote the embedding model {path}" in caplog.text
    written = path.stat()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="deepresearch.models.onnx_model"):
        again = _embedder(cache).embed_documents(TEXTS)
    assert "wrote the embedding model" not in caplog.text  # reused, not rebuilt
    assert path.stat().st_mtime_ns == written.st_mtime_ns and path.stat().st_ino == written.st_ino
    assert np.array_equal(again, first)


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_a_damaged_int8_model_is_rebuilt(tmp_path, built, caplog, damage) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(built[0], cache)
    path = _int8_file(cache)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        del data[len(data) // 2 :]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert np.array_equal(_embedder(cache).embed_documents(TEXTS), built[1])
    assert "does not match the sha256 recorded" in caplog.text and "rebuilding it" in caplog.text
    assert path.read_bytes() == _int8_file(built[0]).read_bytes()


def test_int8_vectors_are_close_to_the_float_model_and_differ_from_it(built) -> None:
    _, int8, floats, _ = built
    cosine = (int8 * floats).sum(axis=1)
    assert cosine.min() >= MIN_COSINE, cosine
    assert not np.allclose(int8, floats, atol=1e-4)  # the integer products are really used
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)


def test_a_vector_does_not_depend_on_its_batch(built) -> None:
    """One activation scale per tensor: the int8 model runs one text per batch, so a text's vector
    is the same alone, in any company and in any order."""
    _, int8, _, embedder = built
    for index in (0, 5, len(TEXTS) - 1):
        assert np.array_equal(embedder.embed_documents([TEXTS[index]])[0], int8[index])
    assert np.array_equal(embedder.embed_documents(TEXTS[::-1]), int8[::-1])


def test_queries_and_facts_stay_float(built, tmp_path) -> None:
    floats = _embedder(tmp_path / "float-only", activations=None).embed_batch(TEXTS)
    np.testing.assert_allclose(built[3].embed_batch(TEXTS), floats, atol=2e-5)
    assert np.array_equal(built[3].embed(TEXTS[0]), built[3].embed_batch(TEXTS[:1])[0])


def test_corpus_precision_float_embeds_documents_with_the_float_model() -> None:
    chosen = embed.EMBEDDERS.get("onnx")(EmbeddingConfig(corpus_precision="float"))
    assert chosen.correction is not None and chosen.correction.activations is None  # type: ignore[attr-defined]
    np.testing.assert_allclose(chosen.embed_documents(TEXTS[:4]), chosen.embed_batch(TEXTS[:4]), atol=2e-5)
    default = embed.EMBEDDERS.get("onnx")(EmbeddingConfig())
    assert default.correction.activations == ACTIVATIONS  # type: ignore[attr-defined]


def test_a_calibration_of_another_onnx_file_leaves_documents_float(tmp_path, caplog) -> None:
    with np.load(ACTIVATIONS, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays.pop("meta")))
    other = tmp_path / CALIBRATION_FILE
    np.savez(other, meta=np.array(json.dumps({**meta, "onnx_sha256": "0" * 64})), **arrays)  # type: ignore[arg-type]
    embedder = _embedder(tmp_path / "cache", activations=other)
    np.testing.assert_allclose(embedder.embed_documents(TEXTS[:3]), embedder.embed_batch(TEXTS[:3]), atol=2e-5)
    assert "measured on another ONNX file" in caplog.text
    assert not list((tmp_path / "cache").glob("model-int8-*"))


def test_the_int8_graph_has_integer_products_on_every_matrix(built) -> None:
    raw = _int8_file(built[0]).read_bytes()
    (start, end) = next((s, e) for n, _, s, e in fields(raw, 0, len(raw)) if n == 7)
    graph = Graph.parse(raw, start, end)
    ops = [node.op_type for node in graph.nodes]
    assert ops.count("DynamicQuantizeMatMul") == 36  # 6 layers × (q, k, v, attention out, FFN in, FFN out)
    assert ops.count("MatMul") == 6  # the float outlier channels of each FFN-out input
    scaled = [n for n in graph.nodes if n.op_type == "Mul" and n.inputs[1].endswith("_int8_in")]
    assert len(scaled) == 18  # a SmoothQuant divisor per LayerNorm output read (12), a mask per GELU (6)
    with np.load(ACTIVATIONS, allow_pickle=False) as data:
        assert {n.inputs[0] for n in graph.nodes if n.op_type == "DynamicQuantizeMatMul"} <= {
            *(f"{name}_int8" for name in data.files),
            *(name for name in data.files),
        }
