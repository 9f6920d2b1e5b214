"""Benchmark `kb sync milvus`: a real Milvus 2.3.5 server next to milvus-lite, on real MiniLM vectors.

    nice -n 10 python3 scripts/bench_sync.py ../shared/eval/beir/scifact --sizes 10000 100000

Facts are SciFact sentences with their all-MiniLM-L6-v2 vectors (cached by scripts/bench_kb.py's
helpers; the first --max-real sentences are embedded once), topped up to each size with copies
far from any real vector (see `distinct_dataset`), so merge candidates are those of real sentences.
For each size and each store: a full push from a workspace holding every fact, a no-op push, an
incremental push after 1 % of the facts were reconfirmed, a pull into an empty workspace (through
the write path of `kb add`: merge planning included), and a no-op pull. The server is PyPI
`milvus` 2.3.5 started on free loopback ports (tests/milvus_server.py), stopped at the end; the
local KB is built once per size with `add_facts(merge=False)` (its time is printed for reference).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_kb import LookupEmbedder, corpus_texts, dataset, embed_cached  # noqa: E402

from deepresearch.facts import CATEGORIES, Fact  # noqa: E402
from deepresearch.kb.store import KnowledgeBase  # noqa: E402
from deepresearch.kb.sync import sync_milvus  # noqa: E402
from deepresearch.workspace import Workspace  # noqa: E402
from tests.milvus_server import MilvusServer  # noqa: E402

NOW = 1_800_000_000.0
STORES = {"lite": "milvus-lite 3.2.2", "server": "Milvus 2.3.5 server"}


def timed(label: str, fn, count: int | None = None):  # type: ignore[no-untyped-def]
    """Run fn once, print seconds (and facts/s for count), return (result, seconds)."""
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    rate = f"  {count / seconds:8.0f} facts/s" if count else ""
    print(f"  {label:<46} {seconds:8.2f} s{rate}", flush=True)
    return result, seconds


def distinct_dataset(size: int, texts: list[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    """`size` facts: the real sentences first, then copies far from their base (cosine ≈ 0.5, below
    kb.related_similarity), each with the text of another sentence, tagged. bench_kb's copies sit at
    cosine ≈ 0.9 to their base, so every copy would have ~9 merge candidates with unrelated text:
    a worst case for the write path's merge rule, not the geometry of real distinct facts."""
    rng = np.random.default_rng(42)
    fact_texts, matrix = dataset(len(texts), texts, vectors, rng)  # the real ones, deduplicated
    n_real, out_texts, out = len(fact_texts), list(fact_texts[:size]), [matrix[:size]]
    copy = 0
    while len(out_texts) < size:
        copy += 1
        take = min(size - len(out_texts), n_real)
        noisy = matrix[:take] + rng.normal(0, np.sqrt(3 / matrix.shape[1]), (take, matrix.shape[1]))
        out.append((noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))
        out_texts += [f"{fact_texts[(i + copy * 7919) % n_real]} [copy {copy}]" for i in range(take)]
    return out_texts, np.concatenate(out)


def tenths():  # type: ignore[no-untyped-def]
    """A progress callback printing to stderr at every tenth of the total (long pulls)."""
    started, shown = time.perf_counter(), [0]

    def show(stage: str, done: int, total: int) -> None:
        if total and done * 10 // total > shown[0]:
            shown[0] = done * 10 // total
            seconds = time.perf_counter() - started
            print(f"    {stage} {done}/{total} after {seconds:.0f} s", file=sys.stderr, flush=True)

    return show


def build(work: Path, texts: list[str], embedder: LookupEmbedder) -> tuple[Workspace, KnowledgeBase]:
    """Workspace A with every fact, stored through the write path without merging."""
    ws = Workspace.open(work)
    kb = KnowledgeBase(ws.db, embedder, ws.config.kb)
    facts = [
        Fact(t, f"https://scifact.example/doc/{i}", category=CATEGORIES[i % len(CATEGORIES)],
             confidence=0.5 + (i % 50) / 100, research_topic="scifact", created_at=NOW - i)
        for i, t in enumerate(texts)
    ]  # fmt: skip

    def add() -> None:
        for start in range(0, len(facts), 5000):
            kb.add_facts(facts[start : start + 5000], now=NOW, merge=False)

    timed(f"local KB: add_facts, {len(facts)} facts (reference)", add, len(facts))
    return ws, kb


def measure(uri: str, label: str, kb: KnowledgeBase, texts: list[str], embedder, work: Path) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Push and pull figures for one store; facts/s of the full push and the full pull."""
    n, name = len(texts), f"bench_{len(texts)}"  # a collection per size: one server serves them all
    print(f" {label}: {uri}", flush=True)
    report, push_s = timed("push: full", lambda: sync_milvus(kb, uri, name, now=NOW), n)
    assert report.pushed == n, report.summary()
    report, _ = timed("push: nothing changed", lambda: sync_milvus(kb, uri, name, now=NOW))
    assert report.pushed == 0, report.summary()
    changed = max(1, n // 100)
    kb.add_facts([Fact(t, "https://mirror.example/again") for t in texts[:changed]], now=NOW + 60)
    report, _ = timed(f"push: incremental ({changed} reconfirmed)", lambda: sync_milvus(kb, uri, name, now=NOW + 60))
    assert report.pushed == changed, report.summary()
    ws = Workspace.open(work)
    target = KnowledgeBase(ws.db, embedder, ws.config.kb)
    pull = lambda: sync_milvus(target, uri, name, direction="pull", now=NOW + 120, progress=tenths())  # noqa: E731
    report, pull_s = timed("pull: all into an empty workspace", pull, n)
    print(f"    {report.summary()}")
    assert report.pulled + report.updated + report.reconfirmed == n and not target.check(), report.summary()
    report, _ = timed("pull: nothing new", lambda: sync_milvus(target, uri, name, direction="pull", now=NOW + 180))
    assert report.pulled == 0, report.summary()
    ws.close()
    return {"push": n / push_s, "pull": n / pull_s}


def main() -> None:
    """Run the benchmark for each size and print one line per figure, then a summary table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scifact", type=Path, help="BEIR SciFact folder (../shared/eval/beir/scifact)")
    parser.add_argument("--sizes", "--facts", type=int, nargs="+", default=[10000], help="fact counts to measure")
    parser.add_argument("--max-real", type=int, default=10000, help="real sentence vectors to embed at most")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "deepresearch-bench-kb")
    parser.add_argument("--stores", nargs="+", choices=sorted(STORES), default=["lite", "server"])
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    os.environ.pop("MILVUS_TOKEN", None)  # the bench server runs without authorization

    texts = corpus_texts(args.scifact / "corpus.jsonl")[: args.max_real]
    vectors = embed_cached(texts, args.cache, "corpus")[: len(texts)]
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    server = MilvusServer(work / "server")
    start_s = timed("Milvus 2.3.5 server start (until it answers)", server.start)[1] if "server" in args.stores else 0
    rows = []
    try:
        for size in args.sizes:
            fact_texts, matrix = distinct_dataset(size, texts, vectors)
            embedder = LookupEmbedder(dict(zip(fact_texts, matrix, strict=True)))
            print(f"{size} facts, 384-d MiniLM vectors ({min(size, len(texts))} real)", flush=True)
            _, kb = build(work / f"a{size}", fact_texts, embedder)
            for store in args.stores:
                uri = server.uri if store == "server" else str(work / f"lite{size}.db")
                figures = measure(uri, STORES[store], kb, fact_texts, embedder, work / f"{store}{size}")
                rows.append((size, STORES[store], figures))
    finally:
        server.stop()
    print(f"\nserver start: {start_s:.1f} s\n| facts | store | push facts/s | pull facts/s |\n|---|---|---|---|")
    for size, name, figures in rows:
        print(f"| {size:,} | {name} | {figures['push']:,.0f} | {figures['pull']:,.0f} |")


if __name__ == "__main__":
    main()
