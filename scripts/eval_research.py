"""Evaluate the research loop on multi-hop questions in HotpotQA's format.

Each item is {question, answer, supporting_facts: [[title, sentence_index], …],
context: [[title, [sentence, …]], …]}. All contexts of the selected items are written as
Markdown files and ingested as the corpus of a temporary workspace (via the corpus
module); then each question is researched and scored:

- support recall: share of gold supporting paragraphs among the report's cited sources
- answer found: the gold answer string occurs in the report or in the extracted facts
- citation validity: cited numbers that resolve to a source the run retrieved (or a KB fact's source);
  model-emitted ids that resolved to nothing were removed from the report and are counted apart
- wall time per question and the LLM's share of it (non-LLM overhead target: ≤ 15 %)

Baseline in the same run: the same pipeline with no model (every step on its deterministic
fallback), on a fresh KB.

    python3 scripts/eval_research.py ../shared/eval/multihop/hotpotqa_train.json --limit 5 [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def write_corpus(items: list[dict], folder: Path) -> dict[str, str]:
    """One Markdown file per distinct context paragraph; returns file URL → title."""
    folder.mkdir(parents=True, exist_ok=True)
    titles: dict[str, str] = {}
    for item in items:
        for title, sentences in item["context"]:
            name = re.sub(r"[^\w]+", "_", title).strip("_")[:80] or "untitled"
            path = folder / f"{name}.md"
            url = f"file://{path.resolve()}"
            if url not in titles:
                path.write_text(f"# {title}\n\n{''.join(sentences).strip()}\n", encoding="utf-8")
                titles[url] = title
    return titles


def score(item: dict, result, state, titles: dict[str, str]) -> dict:  # type: ignore[no-untyped-def]
    """The per-question figures."""
    gold = {t for t, _ in item["supporting_facts"]}
    cited = {titles.get(s["url"]) for s in result.sources}
    body = result.report.split("## Sources")[0]
    numbers = [int(n) for n in re.findall(r"\[(\d+)\](?!\()", body)]
    # Valid = the number is listed AND its URL was retrieved in this run or is a recalled KB fact's source.
    allowed = {s.url for s in state.sources} | {u for k in state.known for u in k.sources}
    urls = {s["n"]: s["url"] for s in result.sources}
    valid = sum(1 for n in numbers if urls.get(n) in allowed)
    removed = result.report_stats.get("invalid_citations_removed", 0)
    haystack = _norm(result.report + " " + " ".join(f["fact"] for f in result.facts))
    llm = result.counters.get("llm_seconds", 0.0)
    return {
        "question": item["question"],
        "support_recall": len(gold & cited) / len(gold) if gold else 0.0,
        "answer_found": _norm(item["answer"]) in haystack,
        "citations": len(numbers),
        "citation_validity": valid / len(numbers) if numbers else 1.0,
        "model_ids_removed": removed,
        "wall_seconds": result.elapsed_seconds,
        "llm_seconds": round(llm, 3),
        "llm_share": llm / result.elapsed_seconds if result.elapsed_seconds else 0.0,
        "backend_searches": int(result.counters.get("backend_searches", 0)),
        "stop": result.stop_reason,
    }


def evaluate(items: list[dict], corpus_db: Path, work: Path, use_llm: bool, loops: int, queries: int) -> list[dict]:
    """Research every item in a copy of the ingested workspace; return per-question scores."""
    from deepresearch.research.loop import build_deps, options_from_config, run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.workspace import Workspace

    home = work / ("llm" if use_llm else "baseline")
    home.mkdir(parents=True)
    shutil.copy(corpus_db, home / "deepresearch.db")
    ws = Workspace.open(home)
    rows = []
    try:
        opts = options_from_config(ws, loops=loops, queries=queries, use_cache=False)
        deps = build_deps(ws, opts)
        if not use_llm:
            deps.model = None
        for i, item in enumerate(items, 1):
            result = run_research(ws, item["question"], opts, deps=deps)
            rows.append(score(item, result, RunStore(ws.db).load_state(result.run_id), TITLES))
            r = rows[-1]
            print(
                f"[{'llm' if use_llm else 'base'} {i}/{len(items)}] recall {r['support_recall']:.2f} "
                f"answer {'yes' if r['answer_found'] else 'no '} valid {r['citation_validity']:.2f} "
                f"{r['wall_seconds']:.1f}s llm {r['llm_share']:.0%}  {item['question'][:60]}",
                file=sys.stderr,
            )
    finally:
        ws.close()
    return rows


def summary(rows: list[dict]) -> dict:
    """Means (and the median wall time) over questions."""
    wall = sum(r["wall_seconds"] for r in rows)
    llm = sum(r["llm_seconds"] for r in rows)
    return {
        "questions": len(rows),
        "support_recall": round(statistics.mean(r["support_recall"] for r in rows), 3),
        "answer_found": round(statistics.mean(float(r["answer_found"]) for r in rows), 3),
        "citation_validity": round(statistics.mean(r["citation_validity"] for r in rows), 3),
        "wall_seconds_mean": round(wall / len(rows), 2),
        "wall_seconds_median": round(statistics.median(r["wall_seconds"] for r in rows), 2),
        "llm_share": round(llm / wall, 3) if wall else 0.0,
        "non_llm_seconds_mean": round((wall - llm) / len(rows), 2),
        "backend_searches_mean": round(statistics.mean(r["backend_searches"] for r in rows), 2),
        "model_ids_removed_total": sum(r["model_ids_removed"] for r in rows),
    }


TITLES: dict[str, str] = {}


def main() -> None:
    """Ingest the contexts, research each question with and without the model, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="HotpotQA-format JSON (a list of items).")
    parser.add_argument("--limit", type=int, default=5, help="Questions to research (default 5).")
    parser.add_argument("--loops", type=int, default=1)
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--no-baseline", action="store_true", help="Skip the no-model baseline.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    items = json.loads(args.file.read_text(encoding="utf-8"))[: args.limit]
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    work = Path(tempfile.mkdtemp(prefix="eval-research-"))
    try:
        TITLES.update(write_corpus(items, work / "docs"))
        ws = Workspace.open(work / "corpus")
        started = time.perf_counter()
        Corpus.from_workspace(ws).add_paths([work / "docs"])
        ingest = time.perf_counter() - started
        ws.db.execute("pragma wal_checkpoint(truncate)")
        ws.close()
        db = work / "corpus" / "deepresearch.db"
        out = {
            "file": str(args.file),
            "documents": len(TITLES),
            "ingest_seconds": round(ingest, 1),
            "loops": args.loops,
            "queries": args.queries,
        }
        llm_rows = evaluate(items, db, work, True, args.loops, args.queries)
        out["llm"] = summary(llm_rows)
        if not args.no_baseline:
            out["baseline_no_llm"] = summary(evaluate(items, db, work, False, args.loops, args.queries))
        out["per_question"] = llm_rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return
    print(
        f"{out['documents']} documents ingested in {out['ingest_seconds']} s; loops {args.loops}, "
        f"queries {args.queries}"
    )
    keys = [
        "support_recall",
        "answer_found",
        "citation_validity",
        "wall_seconds_mean",
        "wall_seconds_median",
        "llm_share",
        "non_llm_seconds_mean",
        "backend_searches_mean",
        "model_ids_removed_total",
    ]
    print(
        f"{'':<24}" + "".join(f"{name:>16}" for name in ("with LLM", "baseline (none)")[: 1 + (not args.no_baseline)])
    )
    for key in keys:
        row = f"{key:<24}{out['llm'][key]:>16}"
        if "baseline_no_llm" in out:
            row += f"{out['baseline_no_llm'][key]:>16}"
        print(row)
    print(f"non-LLM overhead with LLM: {1 - out['llm']['llm_share']:.1%} of wall time (target ≤ 15%)")


if __name__ == "__main__":
    main()
