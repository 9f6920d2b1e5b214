#!/usr/bin/env python3
"""Ingest throughput (chunks/s) of `corpus add` per embedding backend, paired in one run.

    python scripts/bench_ingest.py ../shared/eval/beir/scifact --docs 300 --rounds 2

The first --docs documents of corpus.jsonl go through `Corpus.add_paths` (what `corpus add
--id-col _id` runs: DuckDB read, 180-word chunks, FTS5, embeddings, vec0) into a fresh
workspace per backend and round. Backends alternate inside each round so machine load hits
them alike; each model is loaded before its clock starts. `bm25-only` is the same path
without embeddings (the cost of everything but the model). Prints medians and the ratio to
the sentence-transformers reference (the embedding path before the onnx backend).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    """Run the paired ingests and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2], help="onnx thread counts to compare")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
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
