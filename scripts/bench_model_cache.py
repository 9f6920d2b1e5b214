#!/usr/bin/env python3
"""What trusting the corrected ONNX model by its content costs (issue 21, item 5).

Usage: python scripts/bench_model_cache.py [--runs 7] [--other CHECKOUT] [--json]

In a throwaway $XDG_CACHE_HOME: builds the corrected model once, then times (best of `--runs`)
the load-time check of a verified file (`corrected_model`: the sources' cache key plus the
record's stat compare), the stat compare alone, and the full sha256 that runs only when the
file's stat differs from its record. With `--other`, also times cold `kb query` processes of
this checkout and of CHECKOUT (e.g. /work/main, without the check) in turn, each with its own
warm cache, and prints both medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def best_ms(fn: Callable[[], object], runs: int) -> float:
    """The fastest of `runs` calls of `fn`, in milliseconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(min(times) * 1000, 3)


def in_process(runs: int) -> dict[str, float]:
    """Milliseconds of each step of the check on a verified cached file."""
    from deepresearch.models import embed, onnx_model
    from deepresearch.models.onnx_embed import CORRECTION_FILE

    source, correction = embed.onnx_files(None)[0], embed.SHIPPED_TOKENIZER / CORRECTION_FILE
    cache = Path(tempfile.mkdtemp()) / "models"
    started = time.perf_counter()
    path = onnx_model.corrected_model(source, correction, cache)
    build = time.perf_counter() - started
    assert isinstance(path, Path)

    def full_hash() -> None:
        with path.open("rb") as handle:
            hashlib.file_digest(handle, "sha256")

    return {
        "build_s": round(build, 3),
        "size_mb": round(path.stat().st_size / 1e6, 1),
        "corrected_model_verified_ms": best_ms(lambda: onnx_model.corrected_model(source, correction, cache), runs),
        "sources_cache_key_ms": best_ms(lambda: onnx_model.cache_key(source, correction), runs),
        "stat_check_ms": best_ms(lambda: onnx_model.verified(path), runs),
        "rehash_when_stat_differs_ms": best_ms(full_hash, runs),
    }


def cold_queries(checkouts: dict[str, Path], runs: int) -> dict[str, float]:
    """Median wall seconds of a cold `kb query` per checkout, run in turn (warm caches, own workspaces)."""
    base = Path(tempfile.mkdtemp())
    argv: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name, checkout in checkouts.items():
        env = {**os.environ, "PYTHONPATH": str(checkout), "XDG_CACHE_HOME": str(base / f"cache-{name}")}
        cmd = [sys.executable, "-m", "deepresearch", "--home", str(base / f"ws-{name}")]
        add = [*cmd, "kb", "add", "SQLite WAL mode lets readers continue while a writer appends", "-s", "https://e.org"]
        subprocess.run(add, env=env, check=True, capture_output=True)  # also builds the cache
        argv[name] = ([*cmd, "kb", "query", "WAL readers"], env)
    times: dict[str, list[float]] = {name: [] for name in checkouts}
    for _ in range(runs):
        for name, (args, env) in argv.items():
            started = time.perf_counter()
            subprocess.run(args, env=env, check=True, capture_output=True)
            times[name].append(time.perf_counter() - started)
    return {f"kb_query_cold_s[{name}]": round(statistics.median(t), 3) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--other", type=Path, help="another checkout to pair cold `kb query` with")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
    out = in_process(args.runs)
    if args.other:
        out.update(cold_queries({"this": ROOT, "other": args.other}, args.runs))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:<34} {value}")


if __name__ == "__main__":
    main()
