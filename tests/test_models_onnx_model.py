"""The corrected embedding model in the cache: written once, reused, rebuilt when stale or broken."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from deepresearch.models import embed
from deepresearch.models.onnx_embed import CORRECTION_FILE, Correction, OnnxEmbedder
from deepresearch.models.onnx_graph import Node, fields, length_delimited
from deepresearch.models.onnx_model import corrected_model, corrected_weights, rewrite

SENTENCES = [
    "A man with a hard hat is dancing.",
    "SQLite in WAL mode lets readers continue while one writer appends to the log.",
    "Nvidia's sales of AI accelerator chips to data centers tripled in 2024.",
    "Die Katze schläft auf dem Sofa.",
    "GPU shipments",
]
CORRECTION = embed.SHIPPED_TOKENIZER / CORRECTION_FILE


def embedder(cache_dir, onnx_path=None):
    source, tokenizer = embed.onnx_files(None)
    return OnnxEmbedder(
        onnx_path or source, tokenizer, embed.DEFAULT_MODEL_ID, correction=Correction(CORRECTION, cache_dir)
    )


def cached_files(folder):
    return sorted(folder.glob("*.onnx")) if folder.is_dir() else []


@pytest.fixture(scope="module")
def reference_vectors():
    """The sentence-transformers (torch) vectors of SENTENCES."""
    from deepresearch.config import EmbeddingConfig

    return embed.get_embedder(EmbeddingConfig(backend="sentence-transformers")).embed_batch(SENTENCES)


def test_the_corrected_model_is_written_once_and_reused(tmp_path, reference_vectors):
    first = embedder(tmp_path / "cache")
    vectors = first.embed_batch(SENTENCES)
    (path,) = cached_files(tmp_path / "cache")
    assert path.name.startswith("model-corrected-") and first.correction == Correction(CORRECTION, tmp_path / "cache")
    stamp = (path.stat().st_ino, path.stat().st_mtime_ns)
    second = embedder(tmp_path / "cache")
    assert np.array_equal(second.embed_batch(SENTENCES), vectors)
    assert cached_files(tmp_path / "cache") == [path] and (path.stat().st_ino, path.stat().st_mtime_ns) == stamp
    cosine = (vectors * reference_vectors).sum(axis=1)
    assert cosine.min() >= 0.9999, cosine


def test_one_shot_and_bulk_sessions_give_the_same_vectors(tmp_path, reference_vectors):
    model = embedder(tmp_path)
    single = np.stack([model.embed(text) for text in SENTENCES])
    assert not model._optimized  # one text at a time: the plain graph
    bulk = model.embed_batch(SENTENCES * 4)  # ≥ BULK_TEXTS: the optimized graph
    assert model._optimized
    assert (single * bulk[: len(SENTENCES)]).sum(axis=1).min() >= 0.99999
    assert (bulk[: len(SENTENCES)] * reference_vectors).sum(axis=1).min() >= 0.9999


def test_a_changed_source_gets_its_own_cached_model(tmp_path):
    source, _ = embed.onnx_files(None)
    changed = tmp_path / "model.onnx"
    note = b"another build of the same weights"
    # ModelProto field 6 (doc_string): another file, the same int8 data the correction was made for
    changed.write_bytes(source.read_bytes() + length_delimited(6, len(note)) + note)
    cache = tmp_path / "cache"
    vectors = embedder(cache).embed_batch(SENTENCES)
    (first,) = cached_files(cache)
    assert np.array_equal(embedder(cache, changed).embed_batch(SENTENCES), vectors)
    (second,) = cached_files(cache)  # the copy of the older source is removed
    assert second != first


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_broken_cached_model_is_rebuilt(tmp_path, caplog, damage):
    cache = tmp_path / "cache"
    vectors = embedder(cache).embed_batch(SENTENCES)
    (path,) = cached_files(cache)
    size = path.stat().st_size
    data = path.read_bytes()
    path.write_bytes(data[: size // 2] if damage == "truncated" else os.urandom(4096))
    assert np.array_equal(embedder(cache).embed_batch(SENTENCES), vectors)
    assert "does not match the sha256 recorded when it was written; rebuilding it" in caplog.text
    assert path.read_bytes() == data


def test_an_unwritable_cache_builds_the_model_in_memory(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    cache = blocked / "cache"  # cannot be created, even by root
    model = corrected_model(embed.onnx_files(None)[0], CORRECTION, cache)
    assert isinstance(model, bytes)
    vectors = embedder(cache).embed_batch(SENTENCES)
    assert np.array_equal(vectors, embedder(tmp_path / "ok").embed_batch(SENTENCES))


def test_a_correction_for_other_int8_data_uses_the_file_as_it_is(tmp_path, caplog):
    source, _ = embed.onnx_files(None)
    weights = corrected_weights(source, CORRECTION)
    assert weights is not None and all(w.dtype == np.float16 for w in weights.values())
    data = bytearray(source.read_bytes())
    with np.load(CORRECTION) as npz:
        offset = json.loads(str(npz["meta"]))["tensors"][0]["offset"]
    data[offset] ^= 1  # one int8 weight differs from the one the correction was made for
    changed = tmp_path / "model.onnx"
    changed.write_bytes(bytes(data))
    assert corrected_model(changed, CORRECTION, tmp_path / "cache") is None
    assert "made for another ONNX file" in caplog.text
    model = embedder(tmp_path / "cache", changed)
    assert model.embed("GPU shipments").shape == (384,) and cached_files(tmp_path / "cache") == []


def test_rewrite_refuses_what_it_cannot_place():
    source, _ = embed.onnx_files(None)
    data = source.read_bytes()
    with pytest.raises(ValueError, match="not found in the ONNX graph: nowhere"):
        rewrite(data, {"nowhere": np.zeros((2, 2), dtype=np.float16)})
    with pytest.raises(ValueError, match="runs past its message"):
        rewrite(data[: len(data) // 2], {})


def test_the_rewritten_graph_looks_rows_up_first_and_fuses_gelu_and_attention(tmp_path):
    path = corrected_model(embed.onnx_files(None)[0], CORRECTION, tmp_path)
    data = path.read_bytes()
    (graph,) = [(s, e) for n, _, s, e in fields(data, 0, len(data)) if n == 7]
    nodes = [Node.parse(data[s:e]) for n, _, s, e in fields(data, *graph) if n == 1]
    ops = [node.op_type for node in nodes]
    # six layers: one MultiHeadAttention and one BiasGelu each; the exported pieces are gone
    assert ops.count("MultiHeadAttention") == 6 and ops.count("BiasGelu") == 6
    assert not {"IsNaN", "Where", "Softmax", "Erf", "Transpose", "Reshape"} & set(ops)
    attention = next(n for n in nodes if n.op_type == "MultiHeadAttention")
    assert attention.int_attributes()["num_heads"] == 12 and attention.inputs == attention.inputs[:3]  # no mask
    lookups = {node.inputs[0] for node in nodes if node.op_type == "Gather"}
    assert "inner.embeddings.word_embeddings.weight_q" in lookups  # int8 rows, not a dequantized table
    assert "inner.embeddings.word_embeddings.weight_scale" in lookups
    assert not any("inner.embeddings.word_embeddings.weight_q" in n.inputs for n in nodes if n.op_type == "Cast")


def test_batching_does_not_change_a_vector(tmp_path):
    """Batches hold texts of one length (the fused attention has no padding mask): a text alone and
    batched with longer texts agree."""
    model = embedder(tmp_path)
    texts = [*SENTENCES, " ".join(SENTENCES * 8)] * 3  # ≥ BULK_TEXTS: the optimized session
    batched = model.embed_batch(texts)
    for text, vector in zip(SENTENCES, batched, strict=False):
        assert (model.embed(text) @ vector) >= 0.99999


def gelu_graph(sqrt2: float, bias_shape: list[int]) -> tuple[list[Node], dict, dict]:
    """MatMul + bias, then x · ½(1 + erf(x / √2)) as the export writes it."""
    nodes = [
        Node(["x", "w"], ["mm"], "MatMul"),
        Node(["mm", "b"], ["xb"], "Add"),
        Node(["xb", "sqrt2"], ["d"], "Div"),
        Node(["d"], ["e"], "Erf"),
        Node(["e", "one"], ["e1"], "Add"),
        Node(["half", "e1"], ["h"], "Mul"),
        Node(["xb", "h"], ["y"], "Mul"),
    ]
    return nodes, {"b": bias_shape, "w": [4, 4]}, {"sqrt2": sqrt2, "one": 1.0, "half": 0.5}


def test_gelu_is_fused_only_where_the_whole_pattern_holds():
    from deepresearch.models.onnx_graph import fused_gelu

    nodes, shapes, scalars = gelu_graph(2**0.5, [4])
    assert [n.op_type for n in fused_gelu(nodes, shapes, scalars)] == ["MatMul", "BiasGelu"]
    for changed in (gelu_graph(1.5, [4]), gelu_graph(2**0.5, [1, 4])):  # another function; a 2-D bias
        assert fused_gelu(*changed) == changed[0]


def test_attention_is_fused_only_where_its_mask_is_the_key_padding_of_attention_mask():
    from deepresearch.models.onnx_graph import fused_attention

    def graph(mask_source: str) -> list[Node]:
        head_split = [Node([f"{t}_mm", f"{t}_b"], [f"{t}"], "Add") for t in "qkv"] + [
            Node([t], [f"{t}_heads"], "Transpose") for t in "qkv"
        ]
        return [
            *head_split,
            Node(["q_heads", "s"], ["q_s"], "Mul"),
            Node(["k_heads", "s"], ["k_s"], "Mul"),
            Node([mask_source], ["keep"], "Cast"),
            Node(["keep", "zero", "lowest"], ["mask_bias"], "Where"),
            Node(["q_s", "k_s"], ["scores"], "MatMul"),
            Node(["scores", "mask_bias"], ["masked"], "Add"),
            Node(["masked"], ["p"], "Softmax"),
            Node(["p", "v_heads"], ["ctx"], "MatMul"),
            Node(["ctx"], ["ctx_t"], "Transpose"),
            Node(["ctx_t", "shape"], ["out"], "Reshape"),
        ]

    shapes = {f"{t}_b": [384] for t in "qkv"}
    scalars = {"s": (1 / 32**0.5) ** 0.5, "zero": 0.0, "lowest": -3.4e38}
    fused = fused_attention(graph("attention_mask"), shapes, scalars)
    (attention,) = [n for n in fused if n.op_type == "MultiHeadAttention"]
    assert attention.inputs == ["q", "k", "v"] and attention.outputs == ["out"]  # unpadded batches need no mask
    assert attention.int_attributes()["num_heads"] == 12
    other = graph("causal_mask")
    assert fused_attention(other, shapes, scalars) == other
