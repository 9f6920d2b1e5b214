#!/usr/bin/env python3
"""Measure the activation maxima the int8 corpus embedder is built from (models/onnx_int8.py).

    python scripts/make_int8_calibration.py /work/shared/eval/beir/hotpotqa_train100_hipporag \\
        [--docs 400] [--out FILE]
    # default FILE: deepresearch/models/data/all-MiniLM-L6-v2/int8-activations.npz

Runs the corrected float model (onnx_model.corrected_model) on the first `--docs` documents
(title + text) of a BEIR corpus.jsonl, one text at a time, with every matrix product's input
added as a graph output, and stores each input's largest absolute value per channel (float16),
with the sha256 of the ONNX file they were measured on. Use a corpus that is neither the one
retrieval is evaluated on (SciFact) nor the STS-B sentences: the shipped file was measured on
HotpotQA paragraphs (Wikipedia).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from deepresearch.models.embed import SHIPPED_TOKENIZER, onnx_files
from deepresearch.models.onnx_embed import CORRECTION_FILE, import_onnxruntime
from deepresearch.models.onnx_graph import encode_varint, fields, length_delimited
from deepresearch.models.onnx_int8 import CALIBRATION_FILE, Graph, linears
from deepresearch.models.onnx_model import corrected_model


def with_outputs(model: bytes) -> tuple[bytes, list[str]]:
    """The model with the input of every matrix product added as a float graph output."""
    pieces, names = [], []
    for number, first, start, end in fields(model, 0, len(model)):
        if number != 7:
            pieces.append(model[first:end])
            continue
        graph = Graph.parse(model, start, end)
        names = sorted({linear.matmul.inputs[0] for linear in linears(graph)})
        for name in names:  # ValueInfoProto: name 1, type 2 = TypeProto{tensor_type 1 = {elem_type 1: float}}
            tensor = length_delimited(1, 2) + encode_varint(1 << 3) + encode_varint(1)
            encoded = name.encode()
            info = length_delimited(1, len(encoded)) + encoded + length_delimited(2, len(tensor)) + tensor
            graph.other.append(length_delimited(12, len(info)) + info)
            graph.outputs.append(name)
        body = graph.encode({})
        pieces.append(length_delimited(7, len(body)) + body)
    return b"".join(pieces), names


def maxima(corpus: Path, docs: int) -> tuple[dict[str, np.ndarray], str]:
    """(largest |activation| per channel by input name, sha256 of the ONNX file)."""
    from tokenizers import Tokenizer

    onnx_path, tokenizer_path = onnx_files(None)
    with tempfile.TemporaryDirectory() as cache:
        source = corrected_model(onnx_path, SHIPPED_TOKENIZER / CORRECTION_FILE, Path(cache))
        assert source is not None, "the correction does not fit the installed ONNX file"
        model = source if isinstance(source, bytes) else source.read_bytes()
    model, names = with_outputs(model)
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    found: dict[str, np.ndarray] = {}
    with corpus.joinpath("corpus.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(docs), handle, strict=False)]
    inputs = [i.name for i in session.get_inputs()]
    for row in rows:
        encoding = tokenizer.encode(f"{row.get('title', '')}\n{row['text']}".strip())
        ids = np.array([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        for name, value in zip(names, session.run(names, {k: feeds[k] for k in inputs}), strict=True):
            peak = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            found[name] = np.maximum(found[name], peak) if name in found else peak
    with onnx_path.open("rb") as handle:
        return found, hashlib.file_digest(handle, "sha256").hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a BEIR folder holding corpus.jsonl")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--out", type=Path, default=SHIPPED_TOKENIZER / CALIBRATION_FILE)
    args = parser.parse_args()
    found, digest = maxima(args.corpus, args.docs)
    meta = {"onnx_sha256": digest, "corpus": args.corpus.name, "docs": args.docs}
    arrays = {name: value.astype(np.float16) for name, value in found.items()}
    np.savez_compressed(args.out, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]
    print(f"wrote {args.out}: {len(arrays)} inputs, {sum(a.size for a in arrays.values())} channels")


if __name__ == "__main__":
    main()
