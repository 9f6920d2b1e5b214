#!/usr/bin/env python3
"""Cold start of real commands, each a new process, paired with `deepresearch --help` in the same run.

Usage: python scripts/bench_startup.py [--runs 7] [--json]

Builds a throwaway workspace (the facts below in the KB, docs/corpus ingested), then runs,
`--runs` times in turn: `--help`, `kb query`, `corpus search`, `search --no-cache` and
`research` (timed to its first progress line on stderr, then stopped). Prints the median
wall time of each, its ratio to the median `--help` of the same run, the peak RSS of
`kb query`, and which heavy modules `--help` and `kb query` import.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sentence_transformers", "transformers", "llama_cpp", "duckdb", "pyarrow", "numpy")
FACTS = [
    "SQLite in WAL mode lets readers continue while a single writer appends to the log.",
    "A WAL checkpoint copies committed pages from the log back into the database file.",
    "FTS5 ranks full-text matches with BM25 by default.",
    "sqlite-vec stores vectors in vec0 virtual tables and answers KNN queries by full scan.",
    "Reciprocal rank fusion adds 1/(k + rank) over the rankings it combines.",
    "all-MiniLM-L6-v2 maps sentences to 384-dimensional vectors.",
]


def cli(home: Path, *args: str) -> list[str]:
    """argv of one deepresearch command on the benchmark workspace."""
    return [sys.executable, "-m", "deepresearch", "--home", str(home), *args]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one run of `argv` to completion."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return seconds, usage.ru_maxrss


def first_progress_line(argv: list[str]) -> float:
    """Seconds until `argv` prints its first line on stderr; the process is stopped after it."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    seconds = time.perf_counter() - started
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if not line:
        raise SystemExit(f"{' '.join(argv)} printed no progress line")
    return seconds


def heavy_modules(home: Path, args: list[str]) -> list[str]:
    """Heavy modules loaded by running the command `args` in-process."""
    code = (
        "import sys\n"
        f"sys.argv = ['deepresearch', '--home', {str(home)!r}, *{args!r}]\n"
        "from deepresearch.cli.main import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stderr.strip().splitlines()[-1].replace("'", '"'))


def build_workspace(home: Path) -> None:
    """The KB facts and the shipped sample corpus, through the CLI (the default embedding backend)."""
    for n, fact in enumerate(FACTS):
        subprocess.run(
            cli(home, "kb", "add", fact, "--source", f"https://bench.example/{n}"), check=True, capture_output=True
        )
    subprocess.run(cli(home, "corpus", "add", str(ROOT / "docs" / "corpus")), check=True, capture_output=True)


def main() -> None:
    """Build the workspace, run the commands in turn, print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--compare-backend", help="also time kb query with this embedding.backend (e.g. sentence-transformers)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "ws"
        build_workspace(home)
        commands = {
            "deepresearch --help": cli(home, "--help"),
            "kb query": cli(home, "kb", "query", "WAL readers writers"),
            "corpus search": cli(home, "corpus", "search", "WAL readers writers"),
            "search (no cache)": cli(home, "search", "WAL readers writers", "--no-cache"),
        }
        other = f"kb query ({args.compare_backend})"
        other_env = dict(os.environ, DEEPRESEARCH__EMBEDDING__BACKEND=args.compare_backend or "")
        if args.compare_backend:
            commands[other] = commands["kb query"]
        research = cli(home, "research", "How does WAL let readers and writers work together?", "--no-kb-write")
        times: dict[str, list[float]] = {name: [] for name in [*commands, "research: first progress line"]}
        rss: list[int] = []
        for _ in range(args.runs):
            for name, argv in commands.items():
                seconds, peak = timed(argv, other_env if name == other else None)
                times[name].append(seconds)
                if name == "kb query":
                    rss.append(peak)
            times["research: first progress line"].append(first_progress_line(research))
        heavy = {
            "--help": heavy_modules(home, ["--help"]),
            "kb query": heavy_modules(home, ["kb", "query", "WAL readers writers"]),
        }
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["deepresearch --help"]
    out = {
        "runs": args.runs,
        "median_s": {k: round(v, 3) for k, v in medians.items()},
        "ratio_to_help": {k: round(v / base, 1) for k, v in medians.items()},
        "kb_query_peak_rss_mib": round(statistics.median(rss) / 1024, 1),
        "heavy_modules": heavy,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{args.runs} runs, each command a new process, paired with --help in the same run")
    for name, seconds in medians.items():
        print(f"{name:<32} median {seconds * 1000:7.0f} ms  ({seconds / base:4.1f}× --help)")
    print(f"kb query peak RSS: {out['kb_query_peak_rss_mib']} MiB (median)")
    for name, found in heavy.items():
        print(f"heavy modules imported by {name}: {found or 'none'}")


if __name__ == "__main__":
    main()
