"""Soak the knowledge base with concurrent processes on one workspace, then prove nothing was lost.

    python3 scripts/soak.py --seconds 600            # the 10-minute run in docs/BENCHMARKS.md
    python3 scripts/soak.py --seconds 20 --embedder hash   # a quick smoke run

For `--seconds`, at the same time on one SQLite file:
- `--writers` processes (default 4) add research-like batches of facts (`add_facts`, as a
  research run does): new facts, exact repeats (reconfirm) and near-duplicates (merge on write),
  in categories with short and long TTLs; each logs every id it was told was stored;
- a sweep loop expires facts (`kb sweep`, with a clock a week ahead so short-TTL facts expire);
- a compress loop merges near-duplicates across the KB (`kb compress --no-model`);
- a reader recalls facts (`kb query`) and reads `kb stats`.

Afterwards it checks: every id any writer was told was stored still exists (lost rows = 0),
no process saw "database is locked", `PRAGMA integrity_check` is ok and `kb check` finds
nothing. It prints one JSON summary and exits 1 if any check failed. Every process is
bounded: one that outlives the deadline by `--grace` seconds is killed and counted as hung.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = 86400.0
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Tyrell", "Cyberdyne"]
PRODUCTS = ["GPUs", "NPUs", "SSDs", "routers", "batteries", "sensors", "modems", "displays"]
REGIONS = ["Europe", "Asia", "North America", "Africa", "South America", "Oceania"]
CATEGORIES = ["market_data", "product_info", "technology", "strategy", "historical"]


def _open_kb(home: str, embedder: str) -> Any:
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    kb = KnowledgeBase.from_workspace(ws)
    if embedder == "hash":
        from bench_merge import HashEmbedder  # scripts/ is on sys.path: this script's folder

        kb = KnowledgeBase(ws.db, HashEmbedder(), ws.config.kb)
    return kb


def _fact_text(rng: random.Random, writer: int, seq: int) -> str:
    company, product, region = rng.choice(COMPANIES), rng.choice(PRODUCTS), rng.choice(REGIONS)
    units = rng.randint(1, 900)
    return (
        f"{company} shipped {units} thousand {product} to {region} in quarter {seq % 4 + 1}"
        f" according to field report w{writer}-{seq}."
    )


def _classify(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return "locked" if "locked" in text.lower() or "busy" in text.lower() else text[:300]


def writer(home: str, embedder: str, index: int, deadline: float, batch: int, out: str) -> None:
    """Add research-like batches until the deadline; log every id the KB reported as stored."""
    from deepresearch.facts import Fact

    rng = random.Random(index)
    kb = _open_kb(home, embedder)
    log: dict[str, Any] = {"role": f"writer{index}", "ids": [], "batches": 0, "latency": [], "errors": []}
    recent: list[str] = []
    seq = 0
    while time.time() < deadline:
        facts = []
        for _ in range(batch):
            roll = rng.random()
            if roll < 0.1 and recent:  # an exact repeat: reconfirms the stored fact
                text = rng.choice(recent)
            elif roll < 0.2 and recent:  # a near-duplicate: merges on write
                text = rng.choice(recent).replace("according to", "as stated in")
            else:
                seq += 1
                text = _fact_text(rng, index, seq)
                recent = (recent + [text])[-50:]
            facts.append(
                Fact(
                    fact=text,
                    source_url=f"https://example.org/w{index}/{seq}",
                    research_topic="soak",
                    category=rng.choice(CATEGORIES),
                )
            )
        started = time.perf_counter()
        try:
            result = kb.add_facts(facts)
        except Exception as exc:  # counted, never fatal: the soak measures how often this happens
            log["errors"].append(_classify(exc))
            continue
        log["latency"].append(time.perf_counter() - started)
        log["ids"].extend(result.added + result.reconfirmed)
        log["batches"] += 1
    kb.conn.close()
    Path(out).write_text(json.dumps(log))


def _loop(home: str, embedder: str, deadline: float, out: str, role: str, pause: float, step: Any) -> None:
    """Run `step(kb, log)` every `pause` seconds until the deadline, timing each call and counting errors."""
    kb = _open_kb(home, embedder)
    log: dict[str, Any] = {"role": role, "runs": 0, "latency": [], "errors": []}
    while time.time() < deadline:
        started = time.perf_counter()
        try:
            step(kb, log)
            log["runs"] += 1
            log["latency"].append(time.perf_counter() - started)
        except Exception as exc:  # counted, never fatal
            log["errors"].append(_classify(exc))
        time.sleep(pause)
    kb.conn.close()
    Path(out).write_text(json.dumps(log))


def _sweep_step(kb: Any, log: dict[str, Any]) -> None:
    # A clock a week ahead: short-TTL facts (market_data, 7 days) expire while writers add.
    log["expired"] = log.get("expired", 0) + kb.sweep(now=time.time() + 8 * DAY, batch=50).expired


def _compress_step(kb: Any, log: dict[str, Any]) -> None:
    # `kb compress --no-model`: the mechanical fusion, no chat model.
    log["merges"] = log.get("merges", 0) + len(kb.compress(None).merges)


_READER_RNG = random.Random(99)


def _read_step(kb: Any, log: dict[str, Any]) -> None:
    kb.query(f"{_READER_RNG.choice(PRODUCTS)} shipped to {_READER_RNG.choice(REGIONS)}", top_k=5)
    if log["runs"] % 10 == 0:
        kb.stats()


def sweeper(home: str, embedder: str, deadline: float, out: str) -> None:
    """`kb sweep` in a loop."""
    _loop(home, embedder, deadline, out, "sweep", 0.2, _sweep_step)


def compressor(home: str, embedder: str, deadline: float, out: str) -> None:
    """`kb compress --no-model` in a loop."""
    _loop(home, embedder, deadline, out, "compress", 2.0, _compress_step)


def reader(home: str, embedder: str, deadline: float, out: str) -> None:
    """`kb query` (and now and then `kb stats`) in a loop."""
    _loop(home, embedder, deadline, out, "reader", 0.05, _read_step)


def _guarded(target: Any, *args: Any) -> None:
    try:
        target(*args)
    except BaseException:
        Path(args[-1]).write_text(json.dumps({"role": target.__name__, "crash": traceback.format_exc()}))
        raise


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)) * 1000, 1) if values else None


def verify(home: str, logs: list[dict[str, Any]]) -> dict[str, Any]:
    """Lost rows, integrity_check and kb check after every process has stopped."""
    from deepresearch.db import connect
    from deepresearch.kb.maintenance import check
    from deepresearch.workspace import Workspace

    conn = connect(Path(home) / "deepresearch.db")
    reported = {i for log in logs for i in log.get("ids", [])}
    stored = {row[0] for row in conn.execute("select id from facts")}
    statuses = dict(conn.execute("select status, count(*) from facts group by status").fetchall())
    integrity = conn.execute("pragma integrity_check").fetchone()[0]
    conn.close()
    ws = Workspace.open(home)
    problems = check(ws.db)
    ws.close()
    cli = subprocess.run(
        [sys.executable, "-m", "deepresearch", "--home", home, "kb", "check"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return {
        "kb_check_cli": f"exit {cli.returncode}: {(cli.stdout + cli.stderr).strip()[:300]}",
        "reported_ids": len(reported),
        "lost_rows": len(reported - stored),
        "facts_by_status": statuses,
        "integrity_check": integrity,
        "kb_check_problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="How long the load runs.")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8, help="Facts per research-like add batch.")
    parser.add_argument("--embedder", choices=["real", "hash"], default="real", help="real = all-MiniLM-L6-v2.")
    parser.add_argument("--home", type=Path, default=None, help="Workspace (default: a fresh temporary folder).")
    parser.add_argument("--grace", type=float, default=120.0, help="Seconds past the deadline before a kill.")
    args = parser.parse_args()

    home = str(args.home or Path(tempfile.mkdtemp(prefix="soak-")) / "ws")
    # Create the schema once before the processes race for it.
    _open_kb(home, args.embedder).conn.close()
    ctx = mp.get_context("spawn")
    logs_dir = Path(tempfile.mkdtemp(prefix="soak-logs-"))
    start = time.time()
    deadline = start + args.seconds
    jobs: list[tuple[Any, tuple[Any, ...]]] = [
        (writer, (home, args.embedder, i, deadline, args.batch, str(logs_dir / f"writer{i}.json")))
        for i in range(args.writers)
    ]
    jobs += [
        (sweeper, (home, args.embedder, deadline, str(logs_dir / "sweep.json"))),
        (compressor, (home, args.embedder, deadline, str(logs_dir / "compress.json"))),
        (reader, (home, args.embedder, deadline, str(logs_dir / "reader.json"))),
    ]
    procs = [ctx.Process(target=_guarded, args=(target, *job_args)) for target, job_args in jobs]
    for proc in procs:
        proc.start()
    hung = 0
    for proc in procs:
        proc.join(max(0.0, deadline + args.grace - time.time()))
        if proc.is_alive():
            hung += 1
            proc.kill()
            proc.join()
    wall = time.time() - start
    logs = [json.loads(p.read_text()) for p in sorted(logs_dir.glob("*.json"))]
    crashes = [log["crash"] for log in logs if "crash" in log]
    errors = [e for log in logs for e in log.get("errors", [])]
    writers = [log for log in logs if log["role"].startswith("writer")]
    by_role = {log["role"]: log for log in logs}
    added_latency = [x for log in writers for x in log.get("latency", [])]
    summary = {
        "seconds": round(wall, 1),
        "embedder": args.embedder,
        "writers": args.writers,
        "batch": args.batch,
        "write_batches": sum(log.get("batches", 0) for log in writers),
        "facts_per_second": round(sum(len(log.get("ids", [])) for log in writers) / wall, 1),
        "write_batch_ms_p50_p95": [_pct(added_latency, 50), _pct(added_latency, 95)],
        "sweeps": by_role.get("sweep", {}).get("runs"),
        "expired": by_role.get("sweep", {}).get("expired"),
        "compress_runs": by_role.get("compress", {}).get("runs"),
        "compress_merges": by_role.get("compress", {}).get("merges"),
        "queries": by_role.get("reader", {}).get("runs"),
        "query_ms_p50_p95": [
            _pct(by_role.get("reader", {}).get("latency", []), 50),
            _pct(by_role.get("reader", {}).get("latency", []), 95),
        ],
        "database_is_locked": sum(1 for e in errors if e == "locked"),
        "other_errors": sorted({e for e in errors if e != "locked"})[:10],
        "crashed_processes": len(crashes),
        "hung_processes": hung,
        **verify(home, logs),
        "home": home,
    }
    print(json.dumps(summary, indent=2))
    for crash in crashes:
        print(crash, file=sys.stderr)
    failed = (
        summary["lost_rows"]
        or summary["database_is_locked"]
        or summary["other_errors"]
        or crashes
        or hung
        or summary["integrity_check"] != "ok"
        or summary["kb_check_problems"]
        or not summary["kb_check_cli"].startswith("exit 0")
        or len(logs) != len(procs)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
