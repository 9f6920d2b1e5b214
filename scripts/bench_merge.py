#!/usr/bin/env python3
"""Cost of near-duplicate merging on the write path: add_facts with merge on vs off.

    python scripts/bench_merge.py [--facts 5000 25000] [--batches 40] [--batch 5]

A KB of N random facts (a deterministic hashing embedder stands in for the model, so only
the KNN + planning cost is measured), then batches of new facts — half of them near
duplicates of stored ones — added with `merge=True` and, as the baseline in the same run,
with `merge=False`. N >= kb.ram_index_min_facts (20000) uses the RAM matrix product.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import Fact
from deepresearch.kb.store import KnowledgeBase
from deepresearch.models.embed import Embedder

WORDS = "alpha beta gamma delta market chip sales revenue growth share price launch model data".split()


class HashEmbedder(Embedder):
    """Bag-of-words hashing vectors: texts sharing words are similar (no model load)."""

    model_id = "bench-hash"
    dimension = 384

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """One L2-normalized vector per text."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for token in text.lower().split():
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
                out[i, h % self.dimension] += 1.0 if h >> 63 else -1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


def text(i: int) -> str:
    """A synthetic fact with a unique word pattern."""
    rng = np.random.default_rng(i)
    return f"Company{i} reported " + " ".join(rng.choice(WORDS, 8)) + f" in region{i % 97}."


def run(n: int, batches: int, size: int, merge: bool) -> tuple[list[float], int]:
    """Per-batch seconds and the number of merges."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "kb.db")
        kb = KnowledgeBase(conn, HashEmbedder(), KBConfig())
        for start in range(0, n, 2000):
            facts = [Fact(text(i), f"https://b.example/{i}") for i in range(start, min(n, start + 2000))]
            kb.add_facts(facts, now=1e9, merge=False)
        seconds, merges = [], 0
        for b in range(batches):
            facts = []
            for j in range(size):
                i = n + b * size + j
                # every other fact repeats a stored one with one word added: a near duplicate
                body = text(i % n) + " indeed" if j % 2 else text(i)
                facts.append(Fact(body, f"https://new.example/{i}"))
            started = time.perf_counter()
            merges += len(kb.add_facts(facts, now=1e9 + 3600 * (b + 1), merge=merge).merged)
            seconds.append(time.perf_counter() - started)
        conn.close()
    return seconds, merges


def compress_seconds(n: int) -> tuple[float, int, int]:
    """Seconds of a dry-run `kb compress` over N facts (5 % near duplicates), clusters, merges."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "kb.db")
        kb = KnowledgeBase(conn, HashEmbedder(), KBConfig())
        texts = [text(i) if i % 20 else text(i + 1) + " indeed" for i in range(n)]
        for start in range(0, n, 2000):
            batch = [Fact(t, f"https://b.example/{start + i}") for i, t in enumerate(texts[start : start + 2000])]
            kb.add_facts(batch, now=1e9 + start, merge=False)
        started = time.perf_counter()
        result = kb.compress(dry_run=True)
        conn.close()
    return time.perf_counter() - started, result.clusters, len(result.merges)


def main() -> int:
    """Print p50/p95 per batch with merging on and off."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, nargs="+", default=[5000, 25000])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch", type=int, default=5)
    args = parser.parse_args()
    print(f"{'facts':>7} {'merge':>6} {'p50 ms/batch':>13} {'p95':>7} {'merges':>7}")
    for n in args.facts:
        for merge in (False, True):
            seconds, merges = run(n, args.batches, args.batch, merge)
            ms = sorted(s * 1000 for s in seconds)
            p95 = ms[int(0.95 * (len(ms) - 1))]
            print(f"{n:>7} {str(merge):>6} {statistics.median(ms):>13.1f} {p95:>7.1f} {merges:>7}")
    print(f"\n{'facts':>7} {'compress --dry-run s':>21} {'clusters':>9} {'merges':>7}")
    for n in args.facts:
        seconds, clusters, merges = compress_seconds(n)
        print(f"{n:>7} {seconds:>21.1f} {clusters:>9} {merges:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
