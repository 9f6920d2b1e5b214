"""Evaluate the research loop on multi-hop questions (HotpotQA / MuSiQue format) against one search.

Each item is {question, answer, [answer_aliases], supporting_facts: [[title, …], …],
context: [[title, [sentence, …] | text], …]}. The paragraphs are written as one JSONL file
(one row per distinct title + text: two MuSiQue paragraphs can share a title) and ingested
with the corpus module into a workspace; `--corpus all` ingests every paragraph of the file, not
only those of the selected questions. The ingested DB is cached in `--cache-dir` (keyed by
the file, the corpus choice and the embedding model), so reruns do not re-embed.

Modes, each on its own copy of the ingested workspace, CLI defaults (config file defaults):
- model:    the research loop with the configured chat model (the shipped GGUF by default)
- none:     the same loop with no model (every step on its deterministic path)
- baseline: the top 5 documents of one `corpus search` for the question
- model-all (on request): every step asks the model, to measure each step's acceptance rate

Figures per mode: support recall of cited sources (gold supporting paragraphs, matched by
title), gold answer (or an alias) in the Answer section, gold answer anywhere in the report,
citation validity (cited numbers that resolve to a source the run retrieved or a KB fact's
source), answer precision (the share of the Answer section's citations — one per sentence —
whose source is a gold supporting paragraph, by title), median wall seconds; for the model
mode also the per-step model acceptance rates and how often the model's answer choice / the
scored choice holds the gold answer.

    python3 scripts/eval_research.py ../shared/eval/multihop/musique_train.json --corpus all --limit 30 \
        --cache-dir /tmp/eval-cache [--modes model,none,baseline] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODES = ("model", "none", "baseline", "model-all")
BASELINE_TOP = 5


def norm(text: str) -> str:
    """Case-, accent- and punctuation-folded text with single spaces (and spaces at both ends)."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return " " + " ".join(re.sub(r"[^\w\s]", " ", text).split()) + " "


def contains_answer(text: str, answers: list[str]) -> bool:
    """True if a gold answer (or alias) occurs in `text` as whole words (folded)."""
    hay = norm(text)
    return any(norm(a).strip() and norm(a) in hay for a in answers)


def answers_of(item: dict) -> list[str]:
    """The gold answer and its aliases."""
    return [item["answer"], *item.get("answer_aliases", [])]


def paragraphs(item: dict) -> list[tuple[str, str]]:
    """(title, text) of an item's context paragraphs."""
    return [(t, "".join(s).strip() if isinstance(s, list) else str(s).strip()) for t, s in item["context"]]


def write_corpus(items: list[dict], path: Path) -> dict[str, str]:
    """One JSONL row per distinct (title, text) with a stable URL; returns URL → title.

    One tabular file is ingested in batches (hundreds of chunks per embedding call) instead
    of a thousand one-chunk files.
    """
    titles: dict[str, str] = {}
    rows = []
    for item in items:
        for title, text in paragraphs(item):
            digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:8]
            slug = re.sub(r"[^\w]+", "_", title).strip("_")[:70] or "untitled"
            url = f"eval://{slug}_{digest}"
            if url not in titles:
                titles[url] = title
                rows.append({"url": url, "title": title, "text": text})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return titles


def ingest(data: list[dict], args: argparse.Namespace, work: Path) -> tuple[Path, dict[str, str], float]:
    """The ingested corpus DB (from the cache when present), URL → title, ingest seconds (0 if cached)."""
    from deepresearch.config import load_config
    from deepresearch.search.corpus import Corpus
    from deepresearch.search.readers import TableSpec
    from deepresearch.workspace import Workspace

    items = data if args.corpus == "all" else data[args.start : args.start + args.limit]
    model_id = load_config().embedding.model
    key = hashlib.sha1(
        f"{args.file.resolve()}|{args.file.stat().st_size}|{args.corpus}|{len(items)}|{model_id}".encode()
    ).hexdigest()[:12]
    cache = (args.cache_dir or work) / f"corpus-{key}"
    docs = cache / "corpus.jsonl"
    db = cache / "deepresearch.db"
    titles = write_corpus(items, docs)  # cheap, and gives the same URLs as the cached DB
    if db.exists():
        return db, titles, 0.0
    home = cache / "ingest"
    shutil.rmtree(home, ignore_errors=True)
    ws = Workspace.open(home)
    started = time.perf_counter()
    try:
        Corpus.from_workspace(ws).add_paths([docs], table=TableSpec(text_col="text", title_col="title", url_col="url"))
        ws.db.execute("pragma wal_checkpoint(truncate)")
    finally:
        ws.close()
    seconds = time.perf_counter() - started
    shutil.move(str(home / "deepresearch.db"), db)
    shutil.rmtree(home, ignore_errors=True)
    return db, titles, seconds


def gold_titles(item: dict) -> set[str]:
    """Titles of the supporting paragraphs (MuSiQue: a shared title matches any paragraph of it)."""
    return {t for t, *_ in item["supporting_facts"]}


def score_run(item: dict, result: Any, state: Any, titles: dict[str, str]) -> dict:
    """Per-question figures of one research run."""
    gold = gold_titles(item)
    cited = {titles.get(s["url"]) for s in result.sources}
    body = result.report.split("\n## Sources")[0]
    answer_section = body.split("## Answer", 1)[-1].split("\n## ", 1)[0]
    numbers = [int(n) for n in re.findall(r"\[(\d+)\](?!\()", body)]
    allowed = {s.url for s in state.sources} | {u for k in state.known for u in k.sources}
    urls = {s["n"]: s["url"] for s in result.sources}
    valid = sum(1 for n in numbers if urls.get(n) in allowed)
    in_answer = [int(n) for n in re.findall(r"\[(\d+)\](?!\()", answer_section)]
    on_gold = sum(1 for n in in_answer if titles.get(urls.get(n, "")) in gold)
    stats = result.report_stats
    golds = answers_of(item)
    choice = stats.get("answer_choice") or {}
    return {
        "question": item["question"],
        "support_recall": len(gold & cited) / len(gold) if gold else 0.0,
        "answer_in_answer": contains_answer(answer_section, golds),
        "answer_anywhere": contains_answer(body, golds),
        "citations": len(numbers),
        "citation_validity": valid / len(numbers) if numbers else 1.0,
        "answer_precision": on_gold / len(in_answer) if in_answer else None,
        "answer_sentences": len(in_answer),
        "wall_seconds": result.elapsed_seconds,
        "llm_seconds": round(result.counters.get("llm_seconds", 0.0), 3),
        "backend_searches": int(result.counters.get("backend_searches", 0)),
        "loops": result.loops,
        "stop": result.stop_reason,
        "model_steps": stats.get("model_steps", {}),
        "scored_choice_gold": contains_answer(choice.get("scored", ""), golds) if choice else None,
        "model_choice_gold": contains_answer(choice["model"], golds) if choice.get("model") else None,
    }


def run_mode(mode: str, items: list[dict], db: Path, work: Path, titles: dict[str, str]) -> list[dict]:
    """Research (or search, for the baseline) every item in a fresh copy of the ingested workspace."""
    from deepresearch.research.loop import run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.research.wiring import build_deps, options_from_config
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    home = work / mode
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copy(db, home / "deepresearch.db")
    ws = Workspace.open(home)
    rows: list[dict] = []
    try:
        if mode == "baseline":
            corpus = Corpus.from_workspace(ws)
        else:
            opts = options_from_config(ws)
            deps = build_deps(ws, opts)
            if mode == "none":
                deps.model = None
            elif mode == "model-all":  # every step asks the model: measures each step's acceptance
                from deepresearch.models.llm import get_chat_model
                from deepresearch.research.model_io import MODEL_STEPS

                deps.model = deps.model or get_chat_model(ws.config.llm)
                deps.model_steps = MODEL_STEPS
        for i, item in enumerate(items, 1):
            if mode == "baseline":
                started = time.perf_counter()
                hits = corpus.search(item["question"], BASELINE_TOP)
                wall = time.perf_counter() - started
                text = "\n".join(h.text for h in hits)
                gold = gold_titles(item)
                row = {
                    "question": item["question"],
                    "support_recall": len(gold & {titles.get(h.url) for h in hits}) / len(gold),
                    "answer_in_answer": None,
                    "answer_anywhere": contains_answer(text, answers_of(item)),
                    "citations": len(hits),
                    "citation_validity": 1.0,
                    "wall_seconds": round(wall, 3),
                }
            else:
                result = run_research(ws, item["question"], opts, deps=deps)
                store = RunStore(ws.db)
                row = score_run(item, result, store.load_state(result.run_id), titles)
                record = store.get(result.run_id)
                row["step_seconds"] = {}
                for step in record.steps if record else []:
                    row["step_seconds"][step["step"]] = round(
                        row["step_seconds"].get(step["step"], 0) + step["seconds"], 2
                    )
            rows.append(row)
            print(
                f"[{mode} {i}/{len(items)}] recall {row['support_recall']:.2f} "
                f"answer {'-' if row['answer_in_answer'] is None else 'yes' if row['answer_in_answer'] else 'no '} "
                f"anywhere {'yes' if row['answer_anywhere'] else 'no '} valid {row['citation_validity']:.2f} "
                f"{row['wall_seconds']:.1f}s  {item['question'][:70]}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        ws.close()
    return rows


def summarize(rows: list[dict]) -> dict:
    """Means over questions, the median wall time, per-step model acceptance and choice accuracy."""

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        return round(statistics.mean(values), 3) if values else None

    out: dict[str, Any] = {
        "questions": len(rows),
        "support_recall": mean("support_recall"),
        "answer_in_answer": mean("answer_in_answer"),
        "answer_anywhere": mean("answer_anywhere"),
        "citation_validity": mean("citation_validity"),
        "answer_precision": mean("answer_precision"),
        "answer_sentences_mean": mean("answer_sentences"),
        "wall_seconds_median": round(statistics.median(r["wall_seconds"] for r in rows), 2),
        "llm_seconds_mean": mean("llm_seconds"),
        "loops_mean": mean("loops"),
        "backend_searches_mean": mean("backend_searches"),
    }
    steps: dict[str, dict[str, int]] = {}
    for r in rows:
        for step, counts in (r.get("model_steps") or {}).items():
            total = steps.setdefault(step, {"calls": 0, "accepted": 0})
            total["calls"] += int(counts.get("calls", 0))
            total["accepted"] += int(counts.get("accepted", 0))
    out["model_acceptance"] = {
        step: {**c, "rate": round(c["accepted"] / c["calls"], 3) if c["calls"] else None} for step, c in steps.items()
    }
    seconds: dict[str, float] = {}
    for r in rows:
        for step, value in (r.get("step_seconds") or {}).items():
            seconds[step] = seconds.get(step, 0.0) + value / len(rows)
    out["step_seconds_mean"] = {k: round(v, 2) for k, v in seconds.items()}
    out["scored_choice_gold"] = mean("scored_choice_gold")
    out["model_choice_gold"] = mean("model_choice_gold")
    return out


def main() -> None:
    """Ingest the paragraphs, run every mode on the selected questions, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="HotpotQA/MuSiQue-format JSON (a list of items).")
    parser.add_argument("--limit", type=int, default=10, help="Questions to research (default 10).")
    parser.add_argument("--start", type=int, default=0, help="Index of the first question (default 0).")
    parser.add_argument(
        "--corpus", choices=("all", "questions"), default="all", help="Ingest all paragraphs or the selected ones."
    )
    parser.add_argument("--modes", default=",".join(MODES[:3]), help=f"Comma-separated subset of {', '.join(MODES)}.")
    parser.add_argument("--cache-dir", type=Path, default=None, help="Keep the ingested corpus DB here.")
    parser.add_argument("--json", action="store_true", help="Print everything (with per-question rows) as JSON.")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
    data = json.loads(args.file.read_text(encoding="utf-8"))
    items = data[args.start : args.start + args.limit]
    work = Path(tempfile.mkdtemp(prefix="eval-research-"))
    try:
        db, titles, ingest_seconds = ingest(data, args, work)
        out: dict[str, Any] = {
            "file": str(args.file),
            "questions": f"{args.start}..{args.start + len(items) - 1}",
            "documents": len(set(titles)),
            "ingest_seconds": round(ingest_seconds, 1),
        }
        per_question = {}
        for mode in modes:
            rows = run_mode(mode, items, db, work, titles)
            out[mode] = summarize(rows)
            per_question[mode] = rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({**out, "per_question": per_question}, indent=2, ensure_ascii=False))
        return
    print(
        f"{out['file']}: questions {out['questions']}, {out['documents']} documents"
        f" (ingest {out['ingest_seconds']} s, 0 = cached)"
    )
    keys = ["support_recall", "answer_in_answer", "answer_anywhere", "citation_validity", "answer_precision"]
    keys += ["answer_sentences_mean", "wall_seconds_median"]
    keys += ["loops_mean", "backend_searches_mean", "scored_choice_gold", "model_choice_gold"]
    print(f"{'':<24}" + "".join(f"{m:>12}" for m in modes))
    for key in keys:
        cells = "".join(f"{'—' if out[m].get(key) is None else out[m][key]:>12}" for m in modes)
        print(f"{key:<24}{cells}")
    for mode in modes:
        if out[mode].get("step_seconds_mean"):
            print(f"{mode} mean seconds per step: {out[mode]['step_seconds_mean']}")
        for step, c in out[mode].get("model_acceptance", {}).items():
            print(f"{mode} model step {step}: {c['accepted']}/{c['calls']} accepted ({c['rate']})")


if __name__ == "__main__":
    main()
