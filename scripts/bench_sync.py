"""Benchmark `kb sync milvus` against milvus-lite on real all-MiniLM-L6-v2 vectors.

    python3 scripts/bench_sync.py ../shared/eval/beir/scifact --facts 5000

Facts are SciFact sentences; their vectors come from the cache scripts/bench_kb.py fills
(computed once if missing), so the figures measure the sync, not the model. Reported in one
run: a full push, a no-op push, an incremental push after 1 % of the facts changed, a pull
into an empty workspace, and as baseline the file interchange path the KB already has
(`kb export` jsonl + `kb import` into an empty workspace). Both sides use the same model id,
so the pull stores the remote vectors; a workspace with another model re-embeds every pulled
fact, and the real model's rate here is measured on a sample to give that cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_kb import LookupEmbedder, corpus_texts, embed_cached, measure_embedding  # noqa: E402

from deepresearch.facts import CATEGORIES, Fact  # noqa: E402
from deepresearch.kb.store import KnowledgeBase  # noqa: E402
from deepresearch.kb.sync import sync_milvus  # noqa: E402
from deepresearch.workspace import Workspace  # noqa: E402


def open_kb(path: Path, embedder: LookupEmbedder) -> tuple[Workspace, KnowledgeBase]:
    """A fresh workspace and its KB with the lookup embedder."""
    ws = Workspace.open(path)
    return ws, KnowledgeBase(ws.db, embedder, ws.config.kb)


def timed(label: str, fn, count: int | None = None):  # type: ignore[no-untyped-def]
    """Run fn once, print seconds (and facts/s for count), return its result."""
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    rate = f"  {count / seconds:8.0f} facts/s" if count else ""
    print(f"{label:<44} {seconds:7.2f} s{rate}")
    return result


def main() -> None:
    """Run the benchmark and print one line per figure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scifact", type=Path, help="BEIR SciFact folder (../shared/eval/beir/scifact)")
    parser.add_argument("--facts", type=int, default=5000)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "deepresearch-bench-kb")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)

    texts = corpus_texts(args.scifact / "corpus.jsonl")[: args.facts]
    vectors = embed_cached(texts, args.cache, "corpus")[: len(texts)]
    embedder = LookupEmbedder(dict(zip(texts, vectors, strict=True)))
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    uri = str(work / "milvus.db")
    now = time.time()
    facts = [
        Fact(
            text,
            f"https://scifact.example/doc/{i}",
            category=CATEGORIES[i % len(CATEGORIES)],
            confidence=0.5 + (i % 50) / 100,
            research_topic="scifact",
            created_at=now - i,
        )
        for i, text in enumerate(texts)
    ]
    n = len(facts)
    print(f"{n} facts, 384-d MiniLM vectors, milvus-lite at {uri}")
    ws_a, kb_a = open_kb(work / "a", embedder)
    timed("add_facts into the local KB (reference)", lambda: kb_a.add_facts(facts, now=now), n)

    # baseline: the file interchange path
    export = work / "facts.jsonl"
    timed("baseline: kb export jsonl", lambda: kb_a.export(export), n)
    ws_b, kb_b = open_kb(work / "b", embedder)
    timed("baseline: kb import jsonl (empty workspace)", lambda: kb_b.import_jsonl(export, now=now), n)

    from pymilvus import MilvusClient

    client = timed("milvus-lite server start + connect", lambda: MilvusClient(uri=uri))
    report = timed("push: full", lambda: sync_milvus(kb_a, uri, now=now), n)
    assert report.pushed == n, report
    report = timed("push: nothing changed", lambda: sync_milvus(kb_a, uri, now=now))
    assert report.pushed == 0
    changed = max(1, n // 100)
    ids = [r[0] for r in kb_a.conn.execute("select id from facts order by rid limit ?", (changed,))]
    kb_a.add_facts([Fact(t, "https://mirror.example/again") for t in texts[:changed]], now=now + 60)
    report = timed(f"push: incremental ({changed} reconfirmed)", lambda: sync_milvus(kb_a, uri, now=now + 60))
    assert report.pushed == changed and len(ids) == changed, report

    ws_c, kb_c = open_kb(work / "c", embedder)
    report = timed(
        "pull: all into an empty workspace",
        lambda: sync_milvus(kb_c, uri, direction="pull", now=now + 120),
        n,
    )
    assert report.pulled == n and not kb_c.check(), report
    print(f"  remote vectors reused: {report.reused_vectors}, embedded here: {report.embedded}")
    report = timed("pull: nothing new", lambda: sync_milvus(kb_c, uri, direction="pull", now=now + 180))
    assert report.pulled == 0
    rate = measure_embedding(texts[:256])
    print(f"real MiniLM here: {rate:.0f} sentences/s → re-embedding {n} pulled facts ≈{n / rate:.0f} s")
    size = sum(p.stat().st_size for p in Path(uri).rglob("*") if p.is_file())
    print(f"milvus-lite directory: {size / 1e6:.1f} MB")
    client.close()
    for ws in (ws_a, ws_b, ws_c):
        ws.close()


if __name__ == "__main__":
    main()
