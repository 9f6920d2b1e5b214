#!/usr/bin/env python3
"""Ingest throughput (chunks/s) of `corpus add` per embedding backend, paired in one run.

    python scripts/bench_ingest.py ../shared/eval/beir/scifact --docs 300 --rounds 2

The first --docs documents of corpus.jsonl go through `Corpus.add_paths` (what `corpus add
--id-col _id` runs: DuckDB read, 180-word chunks, FTS5, embeddings, vec0) into a fresh
workspace per backend and round. Backends alternate inside each round so machine load hits
them alike; each model is loaded before its clock starts. `bm25-only` is the same path
without embeddings (the cost of everything but the model). Prints medians and the ratio to
the sentence-transformers reference (the embedding path before the onnx backend).

    python scripts/bench_ingest.py ../shared/eval/beir/scifact --ceiling --rounds 3

--ceiling asks whether float32 can reach a target at all: in one process, alternating, it
times the embedding of 32 chunks that fill the 256-token cap (torch and onnx, ≈6.04 GFLOP per
chunk, 5.44 of them in the linear layers) and float32 matrix products at the linear layers'
shapes (8,192 tokens × 384 → 384/1536 and back) with numpy's BLAS and torch, on all threads.
The fastest GEMM rate bounds the chunks/s of any float32 runtime, even one whose other
operations cost nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from deepresearch.search.corpus import Corpus
from deepresearch.search.readers import TableSpec
from deepresearch.workspace import Workspace

REFERENCE = "sentence-transformers"


def candidates(threads: list[int]) -> dict[str, dict[str, object]]:
    """Label → config overrides (None backend = no embedder)."""
    out: dict[str, dict[str, object]] = {REFERENCE: {"embedding.backend": REFERENCE}}
    out["onnx (default threads)"] = {"embedding.backend": "onnx"}
    for n in threads:
        out[f"onnx threads={n}"] = {"embedding.backend": "onnx", "embedding.threads": n}
    out["bm25-only"] = {}
    return out


def run_once(root: Path, data: Path, overrides: dict[str, object]) -> tuple[int, float]:
    """(chunks, seconds) of one ingest into a fresh workspace under `root`."""
    ws = Workspace.open(Path(tempfile.mkdtemp(dir=root)), overrides=overrides)
    if overrides:
        corpus = Corpus.from_workspace(ws)
        assert corpus.embedder is not None
        corpus.embedder.embed("load the model before the clock starts")
    else:
        corpus = Corpus(ws.db, None, ws.config.search.corpus)
    report = corpus.add_paths([data], table=TableSpec(text_col="text", title_col="title", id_col="_id"))
    ws.close()
    if report.errors:
        raise SystemExit("; ".join(report.errors))
    return report.chunks, report.seconds


LINEAR_GFLOP = 6 * 256 * (4 * 384 * 384 + 2 * 384 * 1536) * 2 / 1e9  # six layers' linear products
CHUNK_GFLOP = LINEAR_GFLOP + 6 * 2 * 12 * 256 * 256 * 32 * 2 / 1e9  # plus attention scores and mixing


def ceiling(data_dir: Path, rounds: int) -> dict[str, float]:
    """Median GFLOP/s of the whole model (torch, onnx) and of float32 GEMMs at its shapes, alternating."""
    import numpy as np
    import torch

    from deepresearch.config import EmbeddingConfig
    from deepresearch.models.embed import get_embedder

    onnx, reference = (get_embedder(EmbeddingConfig(backend=b)) for b in ("onnx", REFERENCE))
    with (data_dir / "corpus.jsonl").open(encoding="utf-8") as source:
        docs = [json.loads(line) for line in itertools.islice(source, 400)]
    onnx.embed("load")
    tokenizer = onnx._tokenizer  # type: ignore[attr-defined]
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    full = [t for t in texts if len(tokenizer.encode(t).ids) == 256][:32]
    # (k, n, products per layer): query, key, value, attention output; FFN in; FFN out
    pairs = [
        (np.random.rand(8192, k).astype(np.float32), np.random.rand(k, n).astype(np.float32), count)
        for k, n, count in ((384, 384, 4), (384, 1536, 1), (1536, 384, 1))
    ]

    def layer_seconds(matmul: Any, operands: list[tuple[Any, Any, int]]) -> float:
        started = time.perf_counter()
        for a, b, count in operands:
            for _ in range(count):
                matmul(a, b)
        return time.perf_counter() - started

    tensors = [(torch.from_numpy(a), torch.from_numpy(b), c) for a, b, c in pairs]
    layer = LINEAR_GFLOP / 6 * 32  # one layer's linear work for 8,192 tokens
    rates: dict[str, list[float]] = {}
    for _ in range(rounds):
        for label, embedder in (("torch model", reference), ("onnx model", onnx)):
            embedder.embed_batch(full)
            started = time.perf_counter()
            embedder.embed_batch(full)
            rates.setdefault(label, []).append(len(full) * CHUNK_GFLOP / (time.perf_counter() - started))
        for label, matmul, operands in (("numpy GEMM", np.matmul, pairs), ("torch GEMM", torch.matmul, tensors)):
            rates.setdefault(label, []).append(layer / min(layer_seconds(matmul, operands) for _ in range(3)))
    return {label: statistics.median(r) for label, r in rates.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the paired ingests and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2], help="onnx thread counts to compare")
    parser.add_argument("--ceiling", action="store_true", help="model vs float32 GEMM GFLOP/s instead of ingests")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.ceiling:
        gflops = ceiling(args.data_dir, args.rounds)
        torch_rate = gflops["torch model"] / CHUNK_GFLOP
        best = max(gflops["numpy GEMM"], gflops["torch GEMM"])
        print(f"{CHUNK_GFLOP:.2f} GFLOP per 256-token chunk ({LINEAR_GFLOP:.2f} in linear layers), medians:")
        for label, rate in gflops.items():
            print(
                f"{label:<14}{rate:>6.0f} GFLOP/s"
                + (f"  {rate / CHUNK_GFLOP:5.1f} chunks/s" if "model" in label else "")
            )
        print(
            f"2.5× torch = {2.5 * torch_rate:.1f} chunks/s needs {2.5 * torch_rate * LINEAR_GFLOP:.0f} GFLOP/s in the"
            f" linear layers alone; the fastest float32 GEMM here bounds any float32 runtime at"
            f" {best / LINEAR_GFLOP:.1f} chunks/s = {best / LINEAR_GFLOP / torch_rate:.2f}× torch"
        )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "corpus.jsonl"
        with (args.data_dir / "corpus.jsonl").open(encoding="utf-8") as source:
            data.write_text("".join(itertools.islice(source, args.docs)), encoding="utf-8")
        rates: dict[str, list[float]] = {}
        chunks = 0
        for _ in range(args.rounds):
            for label, overrides in candidates(args.threads).items():
                chunks, seconds = run_once(root, data, overrides)
                rates.setdefault(label, []).append(chunks / seconds)
    medians = {label: statistics.median(r) for label, r in rates.items()}
    out = {
        "docs": args.docs,
        "chunks": chunks,
        "chunks_per_s": {k: round(v, 2) for k, v in medians.items()},
        "runs": {k: [round(x, 2) for x in v] for k, v in rates.items()},
        "ratio_to_reference": {k: round(v / medians[REFERENCE], 2) for k, v in medians.items()},
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.docs} SciFact documents → {chunks} chunks, {args.rounds} rounds (median chunks/s)")
    for label, rate in medians.items():
        print(f"{label:<26}{rate:>10.2f} chunks/s  {rate / medians[REFERENCE]:>6.2f}×  runs {out['runs'][label]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
