#!/usr/bin/env python3
"""Retrieval quality of the local corpus on any BEIR-format folder, through the project's
own `corpus add` path, plus ingestion throughput and search latency against a BM25-only
baseline in the same run.

    python scripts/eval_retrieval.py ../shared/eval/beir/scifact --mode all [--json]

DATA_DIR holds corpus.jsonl (_id, title, text), queries.jsonl (_id, text) and
qrels/<split>.tsv. The corpus is ingested into a temporary workspace (or --workspace DIR,
reused when the file is unchanged). Hybrid fusion weights and the RRF constant are tuned
on --tune-split (default train) when that qrels file exists, never on the test split.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from deepresearch.search.corpus import MODES, Corpus, rrf_fuse
from deepresearch.search.ingest import IngestProgress
from deepresearch.search.readers import TableSpec
from deepresearch.workspace import Workspace

K_GRID = (1, 5, 10, 20, 40, 60, 100)
WEIGHT_GRID = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)  # vector weight; BM25 weight stays 1


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id → {doc id: relevance} from a BEIR qrels TSV (header line skipped)."""
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if n == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue
        if len(parts) >= 3 and int(parts[2]) > 0:
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with graded relevance (BEIR / pytrec_eval convention)."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    """Share of relevant documents among the top k."""
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def doc_id(url: str) -> str:
    """The BEIR _id of a tabular row URL (file:///…/corpus.jsonl#<id>)."""
    return unquote(urlsplit(url).fragment)


def _progress(event: IngestProgress) -> None:
    rate = event.chunks / event.seconds if event.seconds else 0.0
    print(
        f"\r  ingest: {event.documents} docs, {event.chunks} chunks, {rate:.1f} chunks/s",
        end="",
        file=sys.stderr,
        flush=True,
    )


def ingest(corpus: Corpus, data_dir: Path) -> dict[str, float]:
    """Ingest corpus.jsonl the way `corpus add --id-col _id` does; return counts and throughput."""
    spec = TableSpec(text_col="text", title_col="title", id_col="_id")
    report = corpus.add_paths([data_dir / "corpus.jsonl"], table=spec, progress=_progress)
    print(file=sys.stderr)
    if report.errors:
        raise SystemExit("ingest failed: " + "; ".join(report.errors))
    return {
        "documents": report.documents,
        "chunks": report.chunks,
        "seconds": round(report.seconds, 2),
        "chunks_per_s": round(report.chunks / report.seconds, 1) if report.chunks else None,
        "skipped_unchanged": bool(report.skipped),
    }


def rankings(corpus: Corpus, queries: dict[str, str], ids: list[str], depth: int) -> dict[str, dict[str, list]]:
    """Per query, the document rankings of BM25 and vector (doc id, chunk id, score), for tuning."""
    out: dict[str, dict[str, list]] = {}
    for qid in ids:
        out[qid] = {
            "bm25": corpus._doc_ranking(corpus.bm25_chunks(queries[qid], depth)),
            "vector": corpus._doc_ranking(corpus.vector_chunks(queries[qid], depth)),
        }
    return out


def tune(
    runs: dict[str, dict[str, list]], qrels: dict[str, dict[str, int]], key_of: dict[int, str], default: tuple
) -> dict:
    """Grid-search RRF k and the vector weight for the best mean nDCG@10 on the tuning split."""
    grid = {}
    for k in sorted({*K_GRID, default[0]}):
        for weight in sorted({*WEIGHT_GRID, default[1]}):
            scores = []
            for qid, lists in runs.items():
                fused = rrf_fuse(((1.0, lists["bm25"]), (weight, lists["vector"])), k)
                scores.append(ndcg_at([key_of[c] for c, _ in fused], qrels[qid]))
            grid[(k, weight)] = statistics.fmean(scores)
    (k, weight), score = max(grid.items(), key=lambda item: item[1])
    return {
        "ndcg@10": round(score, 4),
        "rrf_k": k,
        "vector_weight": weight,
        "bm25_weight": 1.0,
        "config_default_ndcg@10": round(grid[default], 4),
        "queries": len(runs),
    }


def paired(ours: dict[str, float], theirs: dict[str, float], rounds: int = 10000) -> dict[str, float]:
    """Mean per-query nDCG@10 difference (ours − theirs) with a 95 % paired bootstrap interval over
    the queries (the run-to-run noise of a mean over these queries, not of the model)."""
    import random

    diffs = [ours[q] - theirs[q] for q in ours if q in theirs]
    rng = random.Random(13)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return {
        "queries": len(diffs),
        "mean_difference": round(statistics.fmean(diffs), 4),
        "ci95": [round(means[int(0.025 * rounds)], 4), round(means[int(0.975 * rounds)], 4)],
        "queries_changed": sum(1 for d in diffs if abs(d) > 1e-9),
    }


def evaluate(corpus: Corpus, mode: str, queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict:
    """nDCG@10, R@100 and search latency of one mode through `Corpus.search` (the product path)."""
    ndcg, recall, latency = [], [], []
    for qid, relevant in qrels.items():
        started = time.perf_counter()
        results = corpus.search(queries[qid], 100, mode=mode)
        latency.append((time.perf_counter() - started) * 1000)
        ranked = [doc_id(r.url) for r in results]
        ndcg.append(ndcg_at(ranked, relevant))
        recall.append(recall_at(ranked, relevant))
    top5 = []  # the research loop's default: 5 results per query
    for qid in qrels:
        started = time.perf_counter()
        corpus.search(queries[qid], 5, mode=mode)
        top5.append((time.perf_counter() - started) * 1000)
    return {
        "per_query_ndcg@10": dict(zip(qrels, ndcg, strict=True)),
        "ndcg@10": round(statistics.fmean(ndcg), 4),
        "recall@100": round(statistics.fmean(recall), 4),
        "p50_ms": round(statistics.median(latency), 2),
        "p50_ms_top5": round(statistics.median(top5), 2),
        "queries": len(qrels),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation and print the figures (text or --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    parser.add_argument("--split", default="test")
    parser.add_argument("--tune-split", default="train", help="qrels split used to tune hybrid fusion")
    parser.add_argument("--workspace", type=Path, help="reuse this workspace folder (default: a temp dir)")
    parser.add_argument(
        "--embedding-backend", help="embedding.backend for the full ingest (default: the config's, auto)"
    )
    parser.add_argument(
        "--corpus-precision", choices=("int8", "float"), help="embedding.corpus_precision (default: the config's)"
    )
    parser.add_argument("--per-query", type=Path, help="write each mode's per-query nDCG@10 to this JSON file")
    parser.add_argument("--paired", type=Path, help="a --per-query file of another run: paired differences")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    data = args.data_dir
    queries = {}
    for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    qrels = load_qrels(data / "qrels" / f"{args.split}.tsv")
    modes = list(MODES) if args.mode == "all" else [args.mode]
    needs_vectors = args.mode != "bm25"
    out: dict = {"data_dir": str(data), "split": args.split, "queries": len(qrels)}

    with tempfile.TemporaryDirectory() as tmp:
        # Baseline: the same ingest path without embeddings (FTS5 only).
        base_ws = Workspace.open(Path(tmp) / "bm25only")
        base = Corpus(base_ws.db, None, base_ws.config.search.corpus)
        print("BM25-only baseline ingest …", file=sys.stderr)
        out["ingest_bm25_only"] = ingest(base, data)
        ws = Workspace.open(
            args.workspace or Path(tmp) / "full",
            overrides={
                "embedding.backend": args.embedding_backend,
                "embedding.corpus_precision": args.corpus_precision,
            },
        )
        corpus = Corpus.from_workspace(ws) if needs_vectors else base
        if needs_vectors:
            print(f"full ingest (chunks + FTS5 + embeddings) into {ws.home} …", file=sys.stderr)
            out["ingest_full"] = ingest(corpus, data)
        out["chunks_in_corpus"] = corpus.count_chunks()

        if "hybrid" in modes:
            tune_path = data / "qrels" / f"{args.tune_split}.tsv"
            if tune_path.exists() and args.tune_split != args.split:
                print(f"tuning hybrid fusion on {args.tune_split} …", file=sys.stderr)
                tune_qrels = {q: r for q, r in load_qrels(tune_path).items() if q in queries}
                key_of = {
                    c: k
                    for c, k in corpus.conn.execute(
                        "select c.id, d.doc_key from corpus_chunks c join corpus_documents d on d.id = c.doc_id"
                    )
                }
                runs = rankings(corpus, queries, list(tune_qrels), 300)
                default = (
                    corpus.config.rrf_k,
                    corpus.config.vector_weight / (corpus.config.bm25_weight or 1.0),
                )
                out["tuned_on_" + args.tune_split] = tune(runs, tune_qrels, key_of, default)
            out["hybrid_config"] = {
                "rrf_k": corpus.config.rrf_k,
                "bm25_weight": corpus.config.bm25_weight,
                "vector_weight": corpus.config.vector_weight,
            }
        out["modes"] = {}
        for mode in modes:
            print(f"searching: {mode} …", file=sys.stderr)
            out["modes"][mode] = evaluate(corpus, mode, queries, qrels)
        tuned = out.get("tuned_on_" + args.tune_split)
        if tuned and (tuned["rrf_k"], tuned["vector_weight"]) != (
            corpus.config.rrf_k,
            corpus.config.vector_weight,
        ):
            corpus.config = corpus.config.model_copy(
                update={"rrf_k": tuned["rrf_k"], "vector_weight": tuned["vector_weight"], "bm25_weight": 1.0}
            )
            out["modes"]["hybrid_tuned"] = evaluate(corpus, "hybrid", queries, qrels)
        base_ws.close()
        ws.close()
    per_query = {mode: row.pop("per_query_ndcg@10") for mode, row in out["modes"].items()}
    if args.per_query:
        args.per_query.write_text(json.dumps(per_query), encoding="utf-8")
    if args.paired:
        other = json.loads(args.paired.read_text(encoding="utf-8"))
        out["paired_vs_" + args.paired.name] = {m: paired(per_query[m], other[m]) for m in per_query if m in other}

    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{data.name} ({args.split}: {len(qrels)} queries, {out['chunks_in_corpus']} chunks)")
    print(f"{'mode':<14}{'nDCG@10':>9}{'R@100':>9}{'p50 ms (top100)':>17}{'p50 ms (top5)':>15}")
    for mode, row in out["modes"].items():
        print(
            f"{mode:<14}{row['ndcg@10']:>9.4f}{row['recall@100']:>9.4f}{row['p50_ms']:>17.2f}{row['p50_ms_top5']:>15.2f}"
        )
    for key in ("ingest_bm25_only", "ingest_full"):
        if key in out:
            print(f"{key}: {out[key]}")
    for key in ("hybrid_config", "tuned_on_" + args.tune_split):
        if key in out:
            print(f"{key}: {out[key]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
