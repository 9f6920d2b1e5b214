"""Benchmark the knowledge base on real all-MiniLM-L6-v2 vectors of SciFact sentences.

    python3 scripts/bench_kb.py ../shared/eval/beir/scifact --sizes 10000 100000
    python3 scripts/bench_kb.py ../shared/eval/beir/scifact --bulk --sizes 100000 1000000

Sentences (and clauses) of the SciFact corpus are embedded once and cached under
--cache (resumable chunks, then one .npy), so reruns only measure the KB. Sizes beyond the
number of real vectors are filled with perturbed copies of real vectors (cosine ≈ 0.9 to
their original, renormalized) — near-duplicates make ranking harder, not easier.

A KB is built through the real write path (merging on), or with --bulk written straight
into the same tables in large transactions (the write path runs 10–60 facts/s on this
machine under load: 1M facts would take a day), with one reworded near-duplicate per
1,000 facts for `kb compress` to find. Reported per size, in one run: warm p50/p95 and
recall@10 against exact numpy search with the same filters for the compact copy, the RAM
matrix (up to 300k), the vec0 partition path and a plain vec0 table (baseline); cold one-shot
processes (`kb query` with a fixed query vector, the real `deepresearch kb query`, the same on
an empty workspace for the model's own start-up, `deepresearch --help`), peak RSS, file size;
then sweep, compress, check and stats times, with `kb check` after them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_kb_scale import (  # noqa: E402
    BULK,
    DAY,
    NOW,
    LookupEmbedder,
    bulk_build,
    cold_processes,
    maintenance,
)

from deepresearch.text import split_sentences  # noqa: E402

CHUNK = 1024


def corpus_texts(corpus: Path) -> list[str]:
    """Unique sentences (titles, sentences, then clauses) of a BEIR corpus.jsonl, ≥ 30 chars."""
    seen: set[str] = set()
    texts: list[str] = []
    docs = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]

    def add(text: str) -> None:
        text = text.strip()
        if len(text) >= 30 and text not in seen:
            seen.add(text)
            texts.append(text)

    for doc in docs:
        for sentence in [doc.get("title", "")] + split_sentences(doc.get("text", "")):
            add(sentence)
    for doc in docs:
        for sentence in split_sentences(doc.get("text", "")):
            for part in re.split(r"[,;:] ", sentence):
                add(part)
    return texts


def embed_cached(texts: list[str], cache: Path, label: str) -> np.ndarray:
    """Embed `texts` with the configured model, resuming from per-chunk files under `cache`.

    Chunk files are named by position only, so a smaller --max-real reuses them.
    """
    final = cache / f"{label}{len(texts)}.npy"
    if final.exists() and np.load(final, mmap_mode="r").shape[0] == len(texts):
        return np.load(final)
    from deepresearch.config import EmbeddingConfig
    from deepresearch.models.embed import get_embedder

    embedder = get_embedder(EmbeddingConfig())
    parts = []
    started = time.perf_counter()
    for i in range(0, len(texts), CHUNK):
        part_file = cache / f"{label}.{i // CHUNK:05d}.npy"
        if not part_file.exists():
            np.save(part_file, embedder.embed_batch(texts[i : i + CHUNK]))
            rate = (i + CHUNK) / (time.perf_counter() - started)
            print(
                f"  embedded {min(i + CHUNK, len(texts))}/{len(texts)} ({rate:.0f}/s incl. cached)",
                file=sys.stderr,
            )
        parts.append(np.load(part_file))
    matrix = np.concatenate(parts).astype(np.float32)
    np.save(final, matrix)
    return matrix


def measure_embedding(sample: list[str]) -> float:
    """Sentences per second of the real model on `sample`."""
    from deepresearch.config import EmbeddingConfig
    from deepresearch.models.embed import get_embedder

    embedder = get_embedder(EmbeddingConfig())
    embedder.embed_batch(sample[:16])
    started = time.perf_counter()
    embedder.embed_batch(sample)
    return len(sample) / (time.perf_counter() - started)


def dataset(size: int, texts: list[str], vectors: np.ndarray, rng: np.random.Generator):
    """`size` texts + unit vectors: the real ones first, then perturbed copies (cosine ≈ 0.9)."""
    from deepresearch.facts import normalize_text

    # the KB merges texts equal after normalization (case, spacing): keep one of each
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        first.setdefault(normalize_text(text), i)
    keep = sorted(first.values())
    texts, vectors = [texts[i] for i in keep], vectors[keep]
    n_real = min(size, len(texts))
    out_texts, out = list(texts[:n_real]), [vectors[:n_real]]
    copy = 0
    while sum(len(v) for v in out) < size:
        copy += 1
        take = min(size - sum(len(v) for v in out), n_real)
        noisy = vectors[:take] + rng.normal(0, 0.5 / np.sqrt(vectors.shape[1]), (take, vectors.shape[1]))
        out.append((noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))
        # a copy's text is another sentence's (tagged): 16–65 copies of one text that differ only
        # in a tag would be a KB of nothing but "updates" for compress to examine pair by pair
        out_texts += [f"{texts[(i + copy * 7919) % n_real]} [copy {copy}]" for i in range(take)]
    return out_texts, np.concatenate(out)


def exact_top(matrix: np.ndarray, query: np.ndarray, mask: np.ndarray, k: int = 10) -> list[int]:
    """Indices of the k most similar rows among `mask` (ground truth)."""
    scores = np.where(mask, matrix @ query, -np.inf)
    top = np.argpartition(-scores, k)[:k]
    return [int(i) for i in top[np.argsort(-scores[top])] if mask[i]]


def percentile_ms(times: list[float], q: float) -> float:
    return float(np.percentile(np.array(times) * 1000, q))


def cached_build(work):
    """(build.json path, its report) when `work` holds a finished build; else an emptied folder and None."""
    report_file = work / "build.json"
    if report_file.exists():
        return report_file, json.loads(report_file.read_text())
    work.mkdir(parents=True, exist_ok=True)
    for stale in work.glob("deepresearch.db*"):
        stale.unlink()
    return report_file, None


def build(size, texts, vectors, queries, qvecs, args):
    """The bench KB of `size` facts through the real write path (merging on), cached on disk.

    Returns (workspace folder, build report). The cache key is the size and --max-real, so a
    rerun measures queries without rebuilding (a 1M build takes a long time on 2 cores).
    """
    from deepresearch.config import KBConfig
    from deepresearch.db import connect
    from deepresearch.facts import CATEGORIES, Fact
    from deepresearch.kb.store import KnowledgeBase

    work = args.cache / f"kb-{size}-real{len(texts)}"
    report_file, cached = cached_build(work)
    if cached is not None:
        return work, cached
    rng = np.random.default_rng(42)
    fact_texts, matrix = dataset(size, texts, vectors, rng)
    cats = rng.integers(0, len(CATEGORIES), size)
    ages = rng.uniform(0, 200, size)
    conf = rng.uniform(0.3, 1.0, size)
    table = dict(zip(fact_texts, matrix, strict=False))
    table.update(zip(queries, qvecs, strict=False))
    embedder = LookupEmbedder(table)
    conn = connect(work / "deepresearch.db")
    store = KnowledgeBase(conn, embedder, KBConfig())
    counts = {"added": 0, "reconfirmed": 0, "merged": 0}
    started = time.perf_counter()
    for i in range(0, size, 2000):
        batch = [
            Fact(
                fact_texts[j],
                f"https://bench.example/{j}",
                category=CATEGORIES[cats[j]],
                confidence=float(conf[j]),
                created_at=NOW - ages[j] * DAY,
            )
            for j in range(i, min(size, i + 2000))
        ]
        result = store.add_facts(batch, now=NOW)
        counts["added"] += len(result.added)
        counts["reconfirmed"] += len(result.reconfirmed)
        counts["merged"] += len(result.merged)
        if (i // 2000) % 50 == 49:
            print(
                f"  built {i + 2000:,}/{size:,} ({(i + 2000) / (time.perf_counter() - started):,.0f}/s)",
                file=sys.stderr,
            )
    report = {
        "seconds": time.perf_counter() - started,
        **counts,
        "composed_vectors": embedder.composed,
        "synthetic_vectors": embedder.synthetic,
    }
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    report_file.write_text(json.dumps(report))
    return work, report


def build_bulk(size, texts, vectors, queries, qvecs, args):
    """The bench KB of `size` facts from the bulk loader (bench_kb_scale.py), cached on disk."""
    work = args.cache / f"bulk-{size}-real{len(texts)}"
    report_file, cached = cached_build(work)
    if cached is not None:
        return work, cached
    rng = np.random.default_rng(42)
    fact_texts, matrix = dataset(size, texts, vectors, rng)
    report = bulk_build(work, fact_texts, matrix, rng)
    report_file.write_text(json.dumps(report))
    return work, report


def kb_truth(conn) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(rids, vectors, lifecycle columns) as stored: exact search over them is the ground truth."""
    from deepresearch.facts import CATEGORIES
    from deepresearch.kb.engines import read_all_vectors

    rids, matrix = read_all_vectors(conn)
    meta = {r[0]: r[1:] for r in conn.execute("select rid, category, status, verified_at, confidence from facts")}
    rows = [meta[int(r)] for r in rids]
    cols = {
        "cat": np.array([CATEGORIES.index(r[0]) for r in rows]),
        "active": np.array([r[1] == "active" for r in rows]),
        "age": (NOW - np.array([r[2] for r in rows])) / DAY,
        "conf": np.array([r[3] for r in rows]),
    }
    return rids, matrix, cols


def run_size(size, texts, vectors, queries, qvecs, embed_rate, args) -> None:
    """Build (or reuse) a KB of `size` facts and print every figure for it."""
    from deepresearch.config import KBConfig
    from deepresearch.db import connect
    from deepresearch.facts import CATEGORIES
    from deepresearch.kb.codes import CodeIndex
    from deepresearch.kb.store import KnowledgeBase

    work, built = (build_bulk if args.bulk else build)(size, texts, vectors, queries, qvecs, args)
    db = work / "deepresearch.db"
    conn = connect(db)
    table = dict(zip(queries, qvecs, strict=False))
    print(f"\n### {size:,} facts\n")
    if built.get("bulk"):
        print(
            f"bulk load (facts, sources, history, FTS, vec0 rows, code log; {BULK:,} per transaction):"
            f" {size / built['seconds']:,.0f} facts/s ({built['seconds']:,.0f} s); compact copy built in"
            f" {built['codes_seconds']:.1f} s"
        )
    else:
        store_rate = size / built["seconds"]
        print(
            f"add throughput (real write path, merging on): storage only {store_rate:,.0f} facts/s"
            f" (facts + sources + history + FTS + vec0 rows + merge planning);"
            f" with embedding ≈ {1 / (1 / store_rate + 1 / embed_rate):,.0f} facts/s"
        )
        print(
            f"write outcomes: {built['added']:,} added, {built['reconfirmed']:,} reconfirmed,"
            f" {built['merged']:,} merges (merged texts embedded: {built['composed_vectors']:,} composed"
            f" from their parts' vectors, {built['synthetic_vectors']:,} hash-seeded)"
        )
    print(f"file size: {db.stat().st_size / 2**20:,.1f} MiB ({_table_sizes(conn)})")
    rids, matrix, col = kb_truth(conn)
    id_to_rid = dict(conn.execute("select id, rid from facts"))
    config = KBConfig()
    ttl = np.array([config.categories[c].ttl_days or np.inf for c in CATEGORIES])
    lam = np.array([config.categories[c].decay for c in CATEGORIES])
    ages, cats, conf, active = col["age"], col["cat"], col["conf"], col["active"]
    decayed = np.where(ages > ttl[cats], 0.0, conf * np.maximum(0.1, np.exp(-lam[cats] * ages)))
    scenarios = {
        "unfiltered (mode off)": ({"mode": "off"}, active),
        "lifecycle: per-category TTL + decay": ({"mode": "lifecycle"}, active & (ages <= ttl[cats])),
        "lifecycle + category=technology": (
            {"mode": "lifecycle", "category": "technology"},
            active & (ages <= ttl[cats]) & (cats == CATEGORIES.index("technology")),
        ),
        "freshness medium + decayed conf ≥ 0.5": (
            {"mode": "freshness", "min_confidence": 0.5},
            active & (ages <= 30) & (decayed >= 0.5),
        ),
    }
    n_q = len(queries) if size <= 20000 else min(len(queries), 100)
    truth = {
        name: [[int(rids[i]) for i in exact_top(matrix, qvecs[q], mask)] for q in range(n_q)]
        for name, (_, mask) in scenarios.items()
    }
    started = time.perf_counter()
    CodeIndex().refresh(conn)
    codes_load = time.perf_counter() - started
    compact = KnowledgeBase(conn, LookupEmbedder(table), KBConfig(ram_index_min_facts=0, bit_index_min_facts=0))
    engines = [("KB compact copy (sign codes + exact re-rank)", compact, n_q)]
    if size <= 300000:  # the float matrix is 1.5 GiB at 1M: not a candidate there
        ram = KnowledgeBase(conn, LookupEmbedder(table), KBConfig(ram_index_min_facts=0))
        started = time.perf_counter()
        ram.indexes.ram.refresh(conn)
        print(f"RAM matrix: cold load {(time.perf_counter() - started) * 1000:,.0f} ms,"
              f" {ram.indexes.ram.matrix.nbytes / 2**20:,.0f} MiB RAM")  # fmt: skip
        engines.append(("KB RAM matrix (exact)", ram, n_q))
    slow_q = n_q if size <= 200000 else min(n_q, 20)  # vec0 scans every row: ≈ 1 s a query at 1M
    vec = KnowledgeBase(conn, LookupEmbedder(table), KBConfig(ram_index_min_facts=10**12))
    engines.append(("KB vec0 partition+metadata", vec, slow_q))
    print("\n| engine | scenario | queries | p50 ms | p95 ms | recall@10 |\n|---|---|---|---|---|---|")
    for engine, kb, count in engines:
        for name, (kwargs, _) in scenarios.items():
            times, recalls = [], []
            for q in range(count):
                t0 = time.perf_counter()
                hits = kb.query(queries[q], top_k=10, now=NOW, **kwargs).hits
                times.append(time.perf_counter() - t0)
                want = truth[name][q]
                got = [id_to_rid[h.id] for h in hits]
                recalls.append(len(set(got) & set(want)) / max(1, len(want)))
            print(
                f"| {engine} | {name} | {count} | {percentile_ms(times, 50):.1f} | {percentile_ms(times, 95):.1f} |"
                f" {np.mean(recalls):.3f} |"
            )
    codes = compact.indexes.codes
    print(f"compact copy: cold load {codes_load * 1000:,.0f} ms, {_nbytes(codes) / 2**20:,.1f} MiB RAM")
    base = baseline(work, matrix, qvecs[:slow_q], truth["unfiltered (mode off)"], rids)
    print(f"| baseline: plain vec0 float32 | unfiltered (incl. superseded) | {slow_q} | {base[0]:.1f} |"
          f" {base[1]:.1f} | {base[2]:.3f} |")  # fmt: skip
    del engines, compact, vec, matrix
    conn.close()
    cold_processes(work, queries, qvecs)
    if not args.skip_maintenance:
        maintenance(db, size, table)
    if not args.keep:
        shutil.rmtree(work)


def _nbytes(codes) -> int:
    return sum(
        a.nbytes for a in (codes.rids, codes.bits, codes.category, codes.status, codes.verified, codes.confidence)
    )


def _table_sizes(conn) -> str:
    try:
        rows = conn.execute(
            "select case when name like 'fact_vec%' then 'vectors' when name like 'fact_fts%' then 'fts'"
            " else 'facts+sources+history+indexes' end, sum(pgsize) from dbstat group by 1 order by 2 desc"
        ).fetchall()
    except Exception:  # dbstat is optional in SQLite builds
        return "per-table sizes unavailable"
    return ", ".join(f"{name} {size / 2**20:,.1f} MiB" for name, size in rows)


def baseline(work: Path, matrix: np.ndarray, qvecs: np.ndarray, truth: list[list[int]], rids: np.ndarray):
    """Plain vec0 float32 cosine table, no filters: p50/p95 ms and recall@10."""
    from deepresearch.db import connect

    (work / "baseline.db").unlink(missing_ok=True)
    conn = connect(work / "baseline.db", migrate=False)
    conn.execute(f"create virtual table base using vec0(embedding float[{matrix.shape[1]}] distance_metric=cosine)")
    conn.execute("begin")
    conn.executemany(
        "insert into base (rowid, embedding) values (?, ?)",
        ((int(rids[i]), matrix[i].tobytes()) for i in range(len(matrix))),
    )
    conn.execute("commit")
    times, recalls = [], []
    for q, want in zip(qvecs, truth, strict=False):
        t0 = time.perf_counter()
        rows = conn.execute("select rowid from base where embedding match ? and k = 10", (q.tobytes(),)).fetchall()
        times.append(time.perf_counter() - t0)
        recalls.append(len({r[0] for r in rows} & set(want)) / len(want))
    conn.close()
    return percentile_ms(times, 50), percentile_ms(times, 95), float(np.mean(recalls))


def main() -> None:
    """Parse arguments, prepare vectors, run the benchmark for each size."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("beir_dir", type=Path, help="BEIR dataset folder with corpus.jsonl and queries.jsonl")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--max-real", type=int, default=60000, help="real sentence vectors to embed at most")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "deepresearch-bench-kb")
    parser.add_argument("--embed-only", action="store_true", help="only fill the vector cache")
    parser.add_argument("--keep", action="store_true", help="keep each built KB under --cache for reruns")
    parser.add_argument("--bulk", action="store_true", help="write facts straight into the tables (100k, 1M)")
    parser.add_argument("--skip-maintenance", action="store_true", help="queries and cold processes only")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    texts = corpus_texts(args.beir_dir / "corpus.jsonl")[: args.max_real]
    queries = [
        json.loads(line)["text"] for line in (args.beir_dir / "queries.jsonl").read_text().splitlines()[: args.queries]
    ]
    qvecs = embed_cached(queries, args.cache, "queries")
    vectors = embed_cached(texts, args.cache, "corpus")
    if args.embed_only:
        return
    embed_rate = measure_embedding(texts[:256])
    print(f"real vectors: {len(texts)} SciFact sentences/clauses; queries: {len(queries)} SciFact claims")
    print(f"embedding throughput (all-MiniLM-L6-v2, this machine now): {embed_rate:.0f} sentences/s")
    for size in args.sizes:
        run_size(size, texts, vectors, queries, qvecs, embed_rate, args)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
