#!/usr/bin/env python3
"""Do the onnx vectors match the sentence-transformers reference? Cosine per sentence, top-10, speed.

    python scripts/eval_embeddings.py --stsb ../shared/eval/paraphrase/stsb/stsb-en-dev.csv \\
        --scifact ../shared/eval/beir/scifact --reference-workspace WS [--onnx NAME=FILE ...] [--json]

Every unique STS-B dev sentence is embedded by the reference (sentence-transformers, torch)
and by each ONNX candidate (the default `onnx` backend, the same int8 file without its
weight correction, the int8 model the corpus is embedded with (`embed_documents`,
`embedding.corpus_precision: int8`), plus any `--onnx NAME=FILE`, all with the same tokenizer);
the script prints the per-sentence cosine to the reference and to the default onnx float model
(min, 0.1th percentile, mean, share ≥ 0.999)
and each backend's STS-B Spearman against the gold scores. With --reference-workspace (a
workspace where `eval_retrieval.py` ingested SciFact with `--embedding-backend
sentence-transformers`), the stored chunk vectors are the reference corpus and each
candidate re-embeds the same chunk texts; for every SciFact test query the exact top-10
chunks of each backend are compared: share of identical top-10 sets, mean overlap, and for
differing sets how far the swapped chunks were from the reference's 10th score (a swap
between near-ties is noise, not a different model). Throughput is measured on the same texts
in the same run (alternating backends).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from deepresearch.config import EmbeddingConfig
from deepresearch.db import connect
from deepresearch.models.base import Embedder
from deepresearch.models.embed import DEFAULT_MODEL_ID, get_embedder, onnx_files
from deepresearch.models.onnx_embed import CORRECTION_FILE, Correction, OnnxEmbedder
from deepresearch.models.onnx_int8 import CALIBRATION_FILE


def stsb(path: Path) -> tuple[list[str], list[tuple[int, int, float]]]:
    """Unique sentences and (index a, index b, gold score) pairs of an STS-B csv (a,b,score)."""
    index: dict[str, int] = {}
    pairs = []
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle):
            if len(row) < 3:
                continue
            a, b = (index.setdefault(s, len(index)) for s in row[:2])
            pairs.append((a, b, float(row[2])))
    return list(index), pairs


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(values: list[float]) -> np.ndarray:
        order = np.argsort(values, kind="stable")
        out = np.empty(len(values))
        sorted_values = np.asarray(values)[order]
        start = 0
        while start < len(values):
            end = start
            while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
                end += 1
            out[order[start : end + 1]] = (start + end) / 2
            start = end + 1
        return out

    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def agreement(ref: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    """Per-row cosine between two sets of unit vectors."""
    cos = (ref * other).sum(axis=1)
    return {
        "min": round(float(cos.min()), 5),
        "p0.1": round(float(np.percentile(cos, 0.1)), 5),
        "mean": round(float(cos.mean()), 6),
        "share_ge_0.999": round(float((cos >= 0.999).mean()), 4),
    }


def int8_correction() -> Correction:
    """The shipped correction and activation maxima (the int8 corpus model of models/onnx_int8.py)."""
    folder = onnx_files(None)[1].parent
    return Correction(folder / CORRECTION_FILE, activations=folder / CALIBRATION_FILE)


def top10(corpus: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-10 rows of `corpus` per query (by cosine) and the full score matrix."""
    scores = queries @ corpus.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    return top, scores


def compare_top10(ref_top: np.ndarray, ref_scores: np.ndarray, top: np.ndarray) -> dict[str, Any]:
    """Identical sets, mean overlap, and how close to the reference's cut-off the swapped chunks were."""
    same, overlap, gaps = 0, [], []
    for q in range(len(ref_top)):
        a, b = set(ref_top[q].tolist()), set(top[q].tolist())
        overlap.append(len(a & b) / 10)
        if a == b:
            same += 1
            continue
        tenth = ref_scores[q, ref_top[q][-1]]
        # reference score distance from the 10th place of every chunk that entered or left
        gaps.append(max(abs(float(ref_scores[q, c] - tenth)) for c in a ^ b))
    return {
        "queries": len(ref_top),
        "identical_sets": round(same / len(ref_top), 4),
        "mean_overlap": round(float(np.mean(overlap)), 4),
        "differing": len(gaps),
        "max_gap_of_swapped": round(max(gaps), 5) if gaps else 0.0,
        "median_gap_of_swapped": round(statistics.median(gaps), 5) if gaps else 0.0,
    }


class Documents(Embedder):
    """An embedder's corpus path (`embed_documents`: the onnx backend's int8 model) as a candidate."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model_id = inner.model_id

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)


def throughput(embedders: dict[str, Embedder], texts: list[str], rounds: int) -> dict[str, float]:
    """Median texts/s per backend, alternating backends each round (same machine load for all)."""
    runs: dict[str, list[float]] = {name: [] for name in embedders}
    for _ in range(rounds):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_batch(texts)
            runs[name].append(len(texts) / (time.perf_counter() - started))
    return {name: round(statistics.median(r), 1) for name, r in runs.items()}


def main(argv: list[str] | None = None) -> int:
    """Compare the backends and print the figures (text or --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stsb", type=Path, required=True)
    parser.add_argument("--scifact", type=Path, help="BEIR SciFact folder (queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--reference-workspace", type=Path, help="workspace with SciFact ingested by the reference")
    parser.add_argument("--onnx", action="append", default=[], metavar="NAME=FILE", help="another ONNX file")
    parser.add_argument("--threads", type=int, default=None, help="onnx threads (default: config default)")
    parser.add_argument("--speed-chunks", type=int, default=64, help="SciFact chunks in the throughput test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    reference = get_embedder(EmbeddingConfig(backend="sentence-transformers"))
    default = get_embedder(EmbeddingConfig(backend="onnx"))
    candidates: dict[str, Embedder] = {"onnx (default)": default}
    source, tokenizer = onnx_files(None)
    if getattr(default, "correction", None):  # the same int8 file without its weight correction
        candidates["onnx int8, no correction"] = OnnxEmbedder(source, tokenizer, DEFAULT_MODEL_ID, threads=args.threads)
    candidates["onnx, corpus documents (corpus_precision: int8)"] = Documents(
        OnnxEmbedder(source, tokenizer, DEFAULT_MODEL_ID, threads=args.threads, correction=int8_correction())
    )
    for spec in args.onnx:
        name, _, file = spec.partition("=")
        candidates[name] = OnnxEmbedder(Path(file), tokenizer, DEFAULT_MODEL_ID, threads=args.threads)
    for embedder in candidates.values():
        if args.threads and hasattr(embedder, "threads"):
            embedder.threads = args.threads
    out: dict[str, Any] = {"stsb": {}, "scifact_top10": {}, "throughput": {}}

    sentences, pairs = stsb(args.stsb)
    print(f"STS-B dev: {len(sentences)} unique sentences, {len(pairs)} pairs", file=sys.stderr)
    gold = [score for _, _, score in pairs]
    ref_vectors = reference.embed_batch(sentences)
    out["stsb"]["sentence-transformers (reference)"] = {
        "spearman": round(spearman([float(ref_vectors[a] @ ref_vectors[b]) for a, b, _ in pairs], gold), 4)
    }
    float_vectors = default.embed_batch(sentences)
    for name, embedder in candidates.items():
        vectors = embedder.embed_batch(sentences)
        row = agreement(ref_vectors, vectors)
        row["to_onnx_default"] = agreement(float_vectors, vectors)
        row["spearman"] = round(spearman([float(vectors[a] @ vectors[b]) for a, b, _ in pairs], gold), 4)
        out["stsb"][name] = row

    chunk_texts: list[str] = []
    if args.scifact and args.reference_workspace:
        conn = connect(args.reference_workspace / "deepresearch.db", migrate=False)
        stored = conn.execute("select value from meta where key = 'corpus.embedding_model'").fetchone()
        rows = conn.execute(
            """select c.id, d.title, c.text, v.embedding from corpus_chunks c
               join corpus_documents d on d.id = c.doc_id join corpus_vec v on v.rowid = c.id order by c.id"""
        ).fetchall()
        chunk_texts = [f"{title}\n{text}" if title else text for _, title, text, _ in rows]
        corpus_ref = np.stack([np.frombuffer(blob, dtype=np.float32) for *_, blob in rows])
        queries = {}
        for line in (args.scifact / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            queries[str(item["_id"])] = item["text"]
        test_ids = sorted({line.split("\t")[0] for line in (args.scifact / "qrels" / "test.tsv").open()} & set(queries))
        texts = [queries[q] for q in test_ids]
        print(
            f"SciFact: {len(rows)} stored chunks ({stored[0] if stored else '?'}), {len(texts)} queries",
            file=sys.stderr,
        )
        ref_top, ref_scores = top10(corpus_ref, reference.embed_batch(texts))
        # the reference re-embedding its own chunks now: the noise floor of "same model, another run"
        out["scifact_top10"]["reference vs its stored vectors (queries re-embedded)"] = compare_top10(
            ref_top, ref_scores, top10(corpus_ref, reference.embed_batch(texts))[0]
        )
        for name, embedder in candidates.items():
            print(f"embedding {len(chunk_texts)} chunks with {name} …", file=sys.stderr)
            corpus = embedder.embed_batch(chunk_texts)
            out["scifact_top10"][name] = compare_top10(
                ref_top, ref_scores, top10(corpus, embedder.embed_batch(texts))[0]
            )
            out["scifact_top10"][name]["chunk_cosine"] = agreement(corpus_ref, corpus)

    speed_set = {"sentence-transformers (reference)": reference, **candidates}
    out["throughput"]["stsb sentences/s"] = throughput(speed_set, sentences[:512], args.rounds)
    if chunk_texts:
        out["throughput"]["scifact chunks/s"] = throughput(speed_set, chunk_texts[: args.speed_chunks], args.rounds)

    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for section, rows in out.items():
        print(f"## {section}")
        for name, row in rows.items():
            print(f"{name}: {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
