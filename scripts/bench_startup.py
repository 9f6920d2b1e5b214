"""CLI start-up time: `deepresearch --help`/`--version` against a bare interpreter baseline.

Usage: python scripts/bench_startup.py [--runs 15]
Prints the median wall time of each command and which heavy modules `--help` imported.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "deepresearch --version": [sys.executable, "-m", "deepresearch", "--version"],
    "deepresearch --help": [sys.executable, "-m", "deepresearch", "--help"],
    "deepresearch kb --help": [sys.executable, "-m", "deepresearch", "kb", "--help"],
}
HEAVY = ("torch", "llama_cpp", "sentence_transformers", "numpy", "duckdb")


def median_seconds(argv: list[str], runs: int) -> float:
    """Median wall time of `runs` executions of `argv`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def heavy_imports() -> list[str]:
    """Heavy modules loaded while rendering `--help`."""
    code = (
        "import sys; sys.argv=['deepresearch','--help']\n"
        "from deepresearch.cli.main import app\n"
        "try: app()\nexcept SystemExit: pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307 - our own repr output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    base = None
    for label, argv in COMMANDS.items():
        seconds = median_seconds(argv, args.runs)
        base = base or seconds
        print(f"{label:<28} median {seconds * 1000:7.1f} ms  ({seconds / base:4.1f}× baseline)")
    print(f"heavy modules imported by --help: {heavy_imports() or 'none'}")


if __name__ == "__main__":
    main()
