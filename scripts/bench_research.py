"""KB-first effect of the research loop: topic A, then a related topic B.

Baseline (same run): topic B on an empty knowledge base. With what A stored, B should issue
fewer backend searches (queries the fresh KB already answers are not searched again), and
A's facts must appear in B's planning prompt (rebuilt from the facts the run recalled). The
search cache is off in both, so every saved search is the KB's doing.

    python3 scripts/bench_research.py [--corpus docs/corpus] [--no-llm] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOPIC_A = "How does SQLite WAL mode handle readers, writers and checkpoints?"
TOPIC_B = "When does SQLite copy WAL pages back into the database with a checkpoint?"


def _run(home: Path, topic: str, use_llm: bool) -> dict:
    from deepresearch.research.loop import build_deps, options_from_config, run_research
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        opts = options_from_config(ws, use_cache=False)
        deps = build_deps(ws, opts)
        if not use_llm:
            deps.model = None
        started = time.perf_counter()
        result = run_research(ws, topic, opts, deps=deps)
        from deepresearch.research.runs import RunStore

        state = RunStore(ws.db).load_state(result.run_id)
    finally:
        ws.close()
    # The run keeps what the planner saw (the recalled facts), not the prompt text: rebuild its lines.
    from deepresearch.kb.lifecycle import age_tag
    from deepresearch.research.prompts import render_known

    prompt, _ = render_known(state.known, state.options.lifecycle, age_tag)
    return {
        "topic": topic,
        "backend_searches": int(result.counters.get("backend_searches", 0)),
        "kb_covered_queries": int(result.counters.get("kb_covered", 0)),
        "known_facts_recalled": result.known_facts,
        "known_facts_in_plan_prompt": sum(1 for line in prompt.splitlines() if line.startswith("- [K")),
        "facts_added": int(result.counters.get("facts_added", 0)),
        "queries": result.queries,
        "stop": result.stop_reason,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    """Run A then B on one KB, and B alone on an empty KB; print the counts side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "docs" / "corpus")
    parser.add_argument("--no-llm", action="store_true", help="Deterministic fallbacks only (no GGUF).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    tmp = Path(tempfile.mkdtemp(prefix="bench-research-"))
    try:
        warm, cold = tmp / "warm", tmp / "cold"
        ws = Workspace.open(warm)
        started = time.perf_counter()
        Corpus.from_workspace(ws).add_paths([args.corpus])
        ingest = time.perf_counter() - started
        ws.db.execute("pragma wal_checkpoint(truncate)")
        ws.close()
        cold.mkdir()
        shutil.copy(warm / "deepresearch.db", cold / "deepresearch.db")  # same corpus, empty KB
        a = _run(warm, TOPIC_A, not args.no_llm)
        b_warm = _run(warm, TOPIC_B, not args.no_llm)
        b_cold = _run(cold, TOPIC_B, not args.no_llm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "llm": not args.no_llm,
        "ingest_seconds": round(ingest, 1),
        "A": a,
        "B_after_A": b_warm,
        "B_empty_kb": b_cold,
        "fewer_searches": b_warm["backend_searches"] < b_cold["backend_searches"],
        "kb_facts_in_B_prompt": b_warm["known_facts_in_plan_prompt"],
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"corpus ingest {out['ingest_seconds']} s; LLM {'on' if out['llm'] else 'off'}")
    head = ("run", "searches", "kb-skipped", "recalled", "in prompt", "added", "s")
    print(f"{head[0]:<12}" + "".join(f"{h:>11}" for h in head[1:]) + "  stop")
    keys = (
        "backend_searches",
        "kb_covered_queries",
        "known_facts_recalled",
        "known_facts_in_plan_prompt",
        "facts_added",
        "seconds",
    )
    for name, r in (("A", a), ("B after A", b_warm), ("B empty KB", b_cold)):
        print(f"{name:<12}" + "".join(f"{r[k]:>11}" for k in keys) + f"  {r['stop']}")
    print(f"B after A issues fewer backend searches than B on an empty KB: {out['fewer_searches']}")


if __name__ == "__main__":
    main()
