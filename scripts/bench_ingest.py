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

    python scripts/bench_ingest.py --folder /tmp/sqlite-doc/usr/share/doc/sqlite3 --today /tmp/main-code

--folder times `corpus add` of a real folder (issue 24) for today's code (a checkout of main
at --today, e.g. `git archive main | tar -x -C /tmp/main-code`) and this tree, each in its own
process, both at once (same load, same cores): seconds until a keyword search from a second connection first
answers, until the text of every file is in, until every vector is in, chunks/s, peak RSS, and
the embedding rate against the float32 bound (numpy GEMM at the model's linear shapes, timed
in the same run, for this folder's mean chunk length in tokens).

    python scripts/bench_ingest.py --text-mb 10 50 200 --source ../shared/eval/beir/scifact --today /tmp/main-code

--text-mb (issue 21 item 2) writes one text file per size from SciFact abstracts and times
`corpus add` of it: the text phase (`--keywords-only`, to the end) and the full pipeline cut
after --vector-seconds (text and embedding running together, then interrupted: the source
must be listed incomplete), peak RSS of each; today's code reads the text phase only up to
--today-max-mb (it holds the whole file, a list of every word's span and every chunk).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from deepresearch.search.corpus import Corpus
from deepresearch.search.readers import SUPPORTED, TableSpec
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
        if hasattr(corpus.embedder, "embed_documents"):  # this tree: the corpus model (int8), built once
            corpus.embedder.embed_documents(["load the corpus model before the clock starts"])
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


def watch(
    ws: Workspace, args: argparse.Namespace, files: int, started: float, done: threading.Event, first: dict[str, float]
) -> None:
    """A second reader, as `corpus search --mode bm25` in another terminal would be: when the first
    keyword search answers (`first["t"]`) and when every file's text is in (`first["all_text"]`)."""
    from deepresearch.db import connect

    conn = connect(ws.db_path, migrate=False)
    reader = Corpus(conn, None, ws.config.search.corpus)
    while not done.is_set() and not reader.search(args.query, 1, mode="bm25"):
        time.sleep(0.05)
    first.setdefault("t", time.perf_counter() - started)
    finished = "select count(*) from corpus_sources where file_hash is not null"
    while not done.is_set() and conn.execute(finished).fetchone()[0] < files:
        time.sleep(0.2)  # every file's text in (today: its vectors too), seen from outside
    first.setdefault("all_text", time.perf_counter() - started)
    conn.close()


def child(args: argparse.Namespace) -> int:
    """One `corpus add` of `args.child` in this process (whatever code PYTHONPATH holds); prints JSON."""
    ws = Workspace.open(Path(tempfile.mkdtemp(prefix="bench-ingest-")))
    corpus = Corpus.from_workspace(ws) if args.vectors else Corpus(ws.db, None, ws.config.search.corpus)
    if args.vectors:
        assert corpus.embedder is not None
        corpus.embedder.embed("load the model before the clock starts")
        if hasattr(corpus.embedder, "embed_documents"):  # this tree: the corpus model (int8), built once
            corpus.embedder.embed_documents(["load the corpus model before the clock starts"])
    first: dict[str, float] = {}
    done = threading.Event()
    files = 1 if args.child.is_file() else sum(1 for p in args.child.rglob("*") if p.suffix in SUPPORTED)
    started = time.perf_counter()

    poller = threading.Thread(target=watch, args=(ws, args, files, started, done, first), daemon=True)
    poller.start()
    if args.seconds:
        signal.signal(signal.SIGALRM, signal.default_int_handler)  # raises KeyboardInterrupt
        signal.alarm(args.seconds)
    out: dict[str, Any] = {"interrupted": False}
    try:
        report = corpus.add_paths([args.child], **({"embed": False} if args.keywords_only else {}))
        out |= {"text_seconds": getattr(report, "text_seconds", None), "errors": len(report.errors)}
    except KeyboardInterrupt:
        out["interrupted"] = True
    total = time.perf_counter() - started
    signal.alarm(0)
    done.set()
    poller.join()
    q = ws.db.execute
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out |= {
        "seconds": round(total, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "first_keyword_seconds": round(first["t"], 2) if "t" in first else None,
        "all_text_seconds": round(first["all_text"], 2) if "all_text" in first else None,
        "chunks": q("select count(*) from corpus_chunks").fetchone()[0],
        "vectors": q("select count(*) from corpus_vec").fetchone()[0] if args.vectors else 0,
        "sources_incomplete": q("select count(*) from corpus_sources where file_hash is null").fetchone()[0],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),  # before the sample below
    }
    if args.tokens:
        tokenizer = corpus.embedder._tokenizer  # type: ignore[union-attr]
        sample = "select d.title, c.text from corpus_chunks c join corpus_documents d on d.id = c.doc_id limit 3000"
        rows = q(sample).fetchall()
        lengths = [len(e.ids) for e in tokenizer.encode_batch([f"{t}\n{x}" for t, x in rows])]
        out["mean_tokens"] = round(sum(lengths) / max(1, len(lengths)), 1)
    print(json.dumps(out))
    ws.close()
    return 0


def start(code: Path, target: Path, *flags: str) -> subprocess.Popen[str]:
    """Start `child` on `target` in a fresh process importing deepresearch from `code`, with a model
    cache of its own (two versions sharing one would each remove the other's corrected model)."""
    cache = Path(tempfile.gettempdir()) / f"bench-ingest-models-{hashlib.sha256(str(code).encode()).hexdigest()[:10]}"
    cache.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(code), "XDG_CACHE_HOME": str(cache)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(target), *flags]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(child: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON line a child printed (its stderr on failure)."""
    out, err = child.communicate()
    if child.returncode:
        raise SystemExit(f"child failed ({' '.join(map(str, child.args))}):\n{err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def spawn(code: Path, target: Path, *flags: str) -> dict[str, Any]:
    """Run `child` on `target` to the end (see `start`)."""
    return result(start(code, target, *flags))


def gemm_rate(rounds: int = 3) -> float:
    """GFLOP/s of numpy float32 GEMMs at the model's linear-layer shapes (the float32 bound)."""
    import numpy as np

    shapes = ((384, 384, 4), (384, 1536, 1), (1536, 384, 1))
    pairs = [
        (np.random.rand(8192, k).astype(np.float32), np.random.rand(k, n).astype(np.float32), c) for k, n, c in shapes
    ]
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for a, b, count in pairs:
            for _ in range(count):
                np.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return LINEAR_GFLOP / 6 * 32 / best


def bench_folder(folder: Path, today: Path, rounds: int, seconds: int = 0, alone: bool = False) -> dict[str, Any]:
    """Today's ingest and this tree's on one folder (cut after `seconds` if not 0): both at once, or
    (`alone`) one after the other, the order alternating between rounds."""
    ours = Path(__file__).resolve().parent.parent
    runs: dict[str, list[dict[str, Any]]] = {"today": [], "new": []}
    flags = ("--vectors", "--tokens", "--seconds", str(seconds))
    for round_ in range(rounds):
        if alone:
            # One at a time: at once, a process whose idle threads spin (today's) takes a larger
            # share of a busy machine than one whose threads sleep; alternating the order evens
            # out a load that drifts.
            for label in ("today", "new") if round_ % 2 == 0 else ("new", "today"):
                runs[label].append(spawn(today if label == "today" else ours, folder, *flags))
            continue
        # Both at once: on a machine shared with other jobs they then see the same load (and
        # share the same cores), so their ratio holds even when absolute times do not.
        children = {"today": start(today, folder, *flags), "new": start(ours, folder, *flags)}
        for label, child in children.items():
            runs[label].append(result(child))
    gflops = gemm_rate()
    out: dict[str, Any] = {"folder": str(folder), "load": os.getloadavg(), "gemm_gflops": round(gflops, 1)}
    for label, results in runs.items():
        last = results[-1]
        tokens = last.get("mean_tokens") or runs["new"][-1].get("mean_tokens") or 256
        bound = gflops / (LINEAR_GFLOP / 256 * tokens)
        rate = last["vectors"] / last["seconds"]  # embedded chunks per second of the run
        out[label] = {
            **{k: last[k] for k in ("seconds", "cpu_seconds", "first_keyword_seconds", "all_text_seconds")},
            "peak_rss_mb": last["peak_rss_mb"],
            "chunks": last["chunks"],
            "vectors": last["vectors"],
            "vector_chunks_per_s": round(rate, 2),
            "vectors_per_cpu_s": round(last["vectors"] / last["cpu_seconds"], 2),
            "float32_bound_chunks_per_s": round(bound, 1),
            "share_of_bound": round(rate / bound, 3),
            "mean_tokens": tokens,
            "interrupted": last["interrupted"],
            "median_seconds": statistics.median(r["seconds"] for r in results),
            "runs": results,
        }
    return out


def write_text_file(path: Path, source: Path, megabytes: int) -> None:
    """One plain-text file of about `megabytes` MB: SciFact abstracts (title, text) repeated."""
    with (source / "corpus.jsonl").open(encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle]
    with path.open("w", encoding="utf-8") as out:
        size = 0
        for n in itertools.count():
            doc = docs[n % len(docs)]
            block = f"{doc['title']}\n\n{doc['text']}\n\n"
            out.write(block)
            size += len(block.encode("utf-8"))
            if size >= megabytes * 1_000_000:
                return


def bench_text(args: argparse.Namespace) -> dict[str, Any]:
    """Peak RSS and time of `corpus add` of one big text file per size (text phase; vectors cut short)."""
    ours = Path(__file__).resolve().parent.parent
    out: dict[str, Any] = {"load": os.getloadavg(), "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.text_mb:
            path = Path(tmp) / f"text-{mb}mb.txt"
            write_text_file(path, args.source, mb)
            row = {
                "new_text": spawn(ours, path, "--keywords-only", "--query", args.query),
                "new_with_vectors": spawn(
                    ours, path, "--vectors", "--seconds", str(args.vector_seconds), "--query", args.query
                ),
            }
            if args.today and mb <= args.today_max_mb:
                row["today_text"] = spawn(args.today, path, "--query", args.query)
            out["sizes"][mb] = row
            print(json.dumps({mb: row}), file=sys.stderr, flush=True)  # partial results as they come
            path.unlink()
    return out


def print_ceiling(data_dir: Path, rounds: int) -> None:
    """Print the model's and the float32 GEMMs' GFLOP/s (see `ceiling`) and what they bound."""
    gflops = ceiling(data_dir, rounds)
    torch_rate = gflops["torch model"] / CHUNK_GFLOP
    best = max(gflops["numpy GEMM"], gflops["torch GEMM"])
    print(f"{CHUNK_GFLOP:.2f} GFLOP per 256-token chunk ({LINEAR_GFLOP:.2f} in linear layers), medians:")
    for label, rate in gflops.items():
        print(
            f"{label:<14}{rate:>6.0f} GFLOP/s" + (f"  {rate / CHUNK_GFLOP:5.1f} chunks/s" if "model" in label else "")
        )
    print(
        f"2.5× torch = {2.5 * torch_rate:.1f} chunks/s needs {2.5 * torch_rate * LINEAR_GFLOP:.0f} GFLOP/s in the"
        f" linear layers alone; the fastest float32 GEMM here bounds any float32 runtime at"
        f" {best / LINEAR_GFLOP:.1f} chunks/s = {best / LINEAR_GFLOP / torch_rate:.2f}× torch"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the paired ingests and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, nargs="?")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2], help="onnx thread counts to compare")
    parser.add_argument("--ceiling", action="store_true", help="model vs float32 GEMM GFLOP/s instead of ingests")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--folder", type=Path, help="time today's ingest and this one on a real folder")
    parser.add_argument("--today", type=Path, help="a checkout of main (today's code) to compare with")
    parser.add_argument("--text-mb", type=int, nargs="*", help="sizes of one big text file to ingest (MB)")
    parser.add_argument("--source", type=Path, help="--text-mb: BEIR folder whose abstracts fill the file")
    parser.add_argument("--vector-seconds", type=int, default=120, help="--text-mb: cut the full pipeline here")
    parser.add_argument("--today-max-mb", type=int, default=50, help="--text-mb: largest file for today's code")
    parser.add_argument("--query", default="sqlite", help="what the keyword poller searches for")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--vectors", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--keywords-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, default=0, help="--folder: cut both ingests after this long")
    parser.add_argument("--alone", action="store_true", help="--folder: one ingest at a time, order alternating")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        return child(args)
    if args.folder or args.text_mb:
        if args.folder:
            result = bench_folder(args.folder, args.today, args.rounds, args.seconds, args.alone)
        else:
            result = bench_text(args)
        print(json.dumps(result, indent=2))
        return 0
    if args.ceiling:
        print_ceiling(args.data_dir, args.rounds)
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
