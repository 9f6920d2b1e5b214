"""Evaluate the research loop on multi-hop questions (HotpotQA / MuSiQue format) against one search.

Each item is {question, answer, [answer_aliases], supporting_facts: [[title, …], …],
context: [[title, [sentence, …] | text], …]}. The paragraphs are written as one JSONL file
(one row per distinct title + text: two MuSiQue paragraphs can share a title) and ingested
with the corpus module into a workspace; `--corpus all` ingests every paragraph of the file, not
only those of the selected questions. The ingested DB is cached in `--cache-dir` (keyed by
the file, the corpus choice and the embedding model), so reruns do not re-embed.

Modes (CLI defaults otherwise):
- extractive: the research loop with no model (every step on its deterministic path)
- reader:     the answer step with a model reading the evidence, once per `--models` entry
              (a shipped model name or a GGUF path; `--threads` llama threads). The search loop
              does not use the model (`research.model_steps: [answer]`), so each reader mode
              re-runs the answer and report steps on a copy of the extractive run's checkpoint
              (`--resume` from the answer step): same evidence, and the wall time counted is the
              loop's plus the reader's.
- baseline:   the top 5 documents of one `corpus search` for the question
- model-all (on request): every step asks the model (the first `--models` entry), to measure
  each step's acceptance rate

Figures per mode: headline exact match and F1 (SQuAD normalization; an abstention scores 0),
wrong-headline rate (answered with F1 < 0.5), abstention rate, support recall (gold supporting
paragraphs among the cited sources, by title) and citation precision (cited sources that are
gold supporting paragraphs), citation validity (cited numbers that resolve to a source the run
retrieved or a KB fact's source), gold answer in the Answer section / anywhere in the report,
answer precision (the Answer section's citations on a gold paragraph), median wall seconds and
mean model seconds per question.

Develop on one slice (`--start 0 --limit 40`), report on another (`--start 40 --limit 60`).
`--only 3,17,40` re-reads some questions of a run (a change that acts only on them) with its kept runs and corpus.

    python3 scripts/eval_research.py ../shared/eval/multihop/musique_train.json --corpus all --start 40 \
        --limit 60 --cache-dir /tmp/eval-cache --modes extractive,reader,baseline \
        --models smollm2-135m-instruct,gemma3-270m,qwen2.5-coder-1.5b-instruct [--json]
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

MODES = ("extractive", "reader", "baseline", "model-all")
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


def headline_scores(headline: str | None, golds: list[str]) -> tuple[float, float]:
    """(exact match, F1) of the headline against the best gold answer or alias (SQuAD); 0 when abstaining."""
    from collections import Counter

    from deepresearch.research.reader import normalize_answer

    if not headline:
        return 0.0, 0.0
    guess = normalize_answer(headline).split()
    em, f1 = 0.0, 0.0
    for gold in golds:
        truth = normalize_answer(gold).split()
        em = max(em, float(guess == truth))
        common = sum((Counter(guess) & Counter(truth)).values())
        if common:
            precision, recall = common / len(guess), common / len(truth)
            f1 = max(f1, 2 * precision * recall / (precision + recall))
    return em, f1


def headline_figures(headline: str | None, golds: list[str]) -> dict[str, Any]:
    """Exact match, F1, wrong (answered with F1 < 0.5) and abstained for one headline."""
    em, f1 = headline_scores(headline, golds)
    return {"em": em, "f1": f1, "abstained": headline is None, "wrong": headline is not None and f1 < 0.5}


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

    items = data if args.corpus == "all" else [data[i] for i in args.indexes]
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


def hop_figures(found: dict, headline: str | None, golds: list[str]) -> dict:
    """The hop read's entity and query, both reads, and the scores the first read alone would have had."""
    hop = found.get("hop") or {}
    first = hop["first_read"] if hop else headline  # without the hop read: the first read's answer
    em, f1 = headline_scores(first, golds)
    return {
        "em_no_hop": em,
        "f1_no_hop": f1,
        "wrong_no_hop": bool(first) and f1 < 0.5,
        "hopped": bool(hop),
        "hop_entity": hop.get("entity"),
        "hop_query": hop.get("query"),
        "first_read": hop.get("first_read"),
        "second_read": hop.get("second_read"),
    }


def _question_answers(parts: list[dict]) -> list[list[str]]:
    """[question, answer] of each part of a chain."""
    return [[p["question"], p["answer"]] for p in parts]


def score_run(item: dict, result: Any, state: Any, titles: dict[str, str]) -> dict:
    """Per-question figures of one research run."""
    gold = gold_titles(item)
    cited = {titles.get(s["url"]) for s in result.sources if s.get("origin") == "retrieved"}
    body = result.report.split("\n## Sources")[0]
    answer_section = body.split("## Answer", 1)[-1].split("\n## ", 1)[0]
    numbers = [int(n) for n in re.findall(r"\[(\d+)\](?!\()", body)]
    allowed = {s.url for s in state.sources} | {u for k in state.known for u in k.sources}
    urls = {s["n"]: s["url"] for s in result.sources}
    valid = sum(1 for n in numbers if urls.get(n) in allowed)
    in_answer = [int(n) for n in re.findall(r"\[(\d+)\](?!\()", answer_section)]
    on_gold = sum(1 for n in in_answer if titles.get(urls.get(n, "")) in gold)
    golds = answers_of(item)
    found = state.short_answer or {}
    guess = found.get("unconfirmed")
    # Without the extractive confidence rule the unconfirmed candidate would have been the headline.
    em_all, f1_all = headline_scores(result.short_answer or guess, golds)
    # With reader.READ_AFTER_BROKEN_CHAIN the whole reading after a broken chain would have been.
    broken = (found.get("reader_rejected") or {}).get("chain_broke")
    em_broken, f1_broken = headline_scores(result.short_answer or broken, golds)
    return {
        "question": item["question"],
        "run_id": result.run_id,
        "gold": item["answer"],
        "headline": result.short_answer,
        "method": found.get("method"),
        "confidence": found.get("confidence"),
        "type": item.get("type"),
        **headline_figures(result.short_answer, golds),
        "em_no_rule": em_all,
        "f1_no_rule": f1_all,
        "wrong_no_rule": bool(result.short_answer or guess) and f1_all < 0.5,
        "abstained_no_rule": not (result.short_answer or guess),
        "chain_broke": broken,
        "em_with_broken": em_broken,
        "f1_with_broken": f1_broken,
        "wrong_with_broken": bool(result.short_answer or broken) and f1_broken < 0.5,
        "abstained_with_broken": not (result.short_answer or broken),
        **hop_figures(found, result.short_answer, golds),
        "read_in_parts": bool(result.answer_parts),
        "parts": _question_answers(result.answer_parts),
        "parts_read": _question_answers(found.get("parts_read") or []),  # a broken chain's hops
        "score": found.get("score"),
        "reader_rejected": found.get("reader_rejected"),
        "support_recall": len(gold & cited) / len(gold) if gold else 0.0,
        "citation_precision": len(gold & cited) / len(cited) if cited else None,
        "cited_sources": len(cited),
        "answer_in_answer": contains_answer(answer_section, golds),
        "answer_anywhere": contains_answer(body, golds),
        "citations": len(numbers),
        "citation_validity": valid / len(numbers) if numbers else 1.0,
        "answer_precision": on_gold / len(in_answer) if in_answer else None,
        "wall_seconds": result.elapsed_seconds,
        "model_seconds": round(
            sum(c.get("seconds", 0.0) for c in result.report_stats.get("model_steps", {}).values()), 3
        ),
        "backend_searches": int(result.counters.get("backend_searches", 0)),
        "loops": result.loops,
        "stop": result.stop_reason,
        "model_steps": result.report_stats.get("model_steps", {}),
    }


def baseline_row(item: dict, corpus: Any, titles: dict[str, str]) -> dict:
    """The top BASELINE_TOP documents of one corpus search, scored as cited sources."""
    started = time.perf_counter()
    hits = corpus.search(item["question"], BASELINE_TOP)
    wall = time.perf_counter() - started
    gold = gold_titles(item)
    cited = {titles.get(h.url) for h in hits}
    return {
        "question": item["question"],
        "support_recall": len(gold & cited) / len(gold),
        "citation_precision": len(gold & cited) / len(cited) if cited else None,
        "cited_sources": len(cited),
        "answer_anywhere": contains_answer("\n".join(h.text for h in hits), answers_of(item)),
        "citations": len(hits),
        "citation_validity": 1.0,
        "wall_seconds": round(wall, 3),
    }


def reader_deps(ws: Any, model: str, threads: int | None, steps: tuple[str, ...]) -> Any:
    """Deps of the workspace with the chat model `model` (name or path) on `threads` threads (None: the
    product's rule), asked for `steps`."""
    from deepresearch.models.llm import get_chat_model
    from deepresearch.research.wiring import build_deps, options_from_config

    deps = build_deps(ws, options_from_config(ws))
    llm = ws.config.llm.model_copy(update={"model_path": model, "n_threads": threads})
    deps.model, deps.model_steps = get_chat_model(llm), steps
    return deps


def reread(ws: Any, run_id: str, deps: Any) -> tuple[Any, Any]:
    """Re-run the answer and report steps of a finished run (a copy of its checkpoint) with `deps`."""
    from deepresearch.facts import new_id
    from deepresearch.research.loop import run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.research.state import ResearchState

    store = RunStore(ws.db)
    data = store.load_state(run_id).to_dict()
    data.update(run_id=new_id(), step="answer", report="", answer="", report_stats={}, short_answer={})
    store.create(ResearchState.from_dict(data))
    result = run_research(ws, resume=data["run_id"], deps=deps)
    return result, store.load_state(result.run_id)


def _log(mode: str, i: int, n: int, row: dict) -> None:
    head = "—" if "headline" not in row else (row["headline"] or "(abstained)")
    print(
        f"[{mode} {i}/{n}] recall {row['support_recall']:.2f} prec {row['citation_precision'] or 0:.2f}"
        f" f1 {row.get('f1', 0):.2f} {row['wall_seconds']:.1f}s  {head[:30]!r} / {row.get('gold', '')[:30]!r}"
        f"  {row['question'][:60]}",
        file=sys.stderr,
        flush=True,
    )


def _saved_runs(kept: Path | None) -> dict[int, tuple[str, dict]]:
    """Question index → (run id, scored row) of the extractive runs kept in `--runs-dir`."""
    path = kept / "runs.json" if kept is not None else None
    if path is None or not path.exists():
        return {}
    return {int(k): (v["run_id"], v["row"]) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def _save_runs(kept: Path | None, saved: dict[int, tuple[str, dict]]) -> None:
    if kept is not None:
        data = {str(k): {"run_id": run_id, "row": row} for k, (run_id, row) in sorted(saved.items())}
        (kept / "runs.json").write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")


def _warn_other_options(store: Any, run_ids: list[str], now: Any) -> None:
    """Say so when kept runs were made with other research options (`now`: today's config's): a reader re-reads a
    run with the options its checkpoint carries (an environment override reaches only runs made afresh). One run
    tells: every kept run of a folder was made with one config."""
    from dataclasses import asdict

    if not run_ids:
        return
    kept, today = asdict(store.load_state(run_ids[0]).options), asdict(now)
    other = {k: (kept.get(k), v) for k, v in today.items() if kept.get(k) != v}
    if other:
        print(f"warning: the kept runs were made with other options (kept, now): {other}", file=sys.stderr)


def extractive_runs(ws: Any, args: argparse.Namespace, items: list[dict], titles: dict[str, str], rows: dict) -> list:
    """The run id of each question's extractive run (kept ones from `--runs-dir` re-used); rows["extractive"]."""
    from deepresearch.research.loop import run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.research.wiring import build_deps, options_from_config

    options = options_from_config(ws)
    deps = build_deps(ws, options)
    deps.model = None
    saved = _saved_runs(args.runs_dir)
    kept = [saved[index][0] for index in args.indexes if index in saved]
    _warn_other_options(RunStore(ws.db), kept, options)
    runs = []
    for i, item in enumerate(items, 1):
        index = args.indexes[i - 1]
        if index not in saved:
            result = run_research(ws, item["question"], options, deps=deps)
            row = score_run(item, result, RunStore(ws.db).load_state(result.run_id), titles)
            saved[index] = (result.run_id, row)
            _save_runs(args.runs_dir, saved)
        runs.append(saved[index][0])
        rows.setdefault("extractive", []).append(saved[index][1])
        _log("extractive", i, len(items), saved[index][1])
    return runs


def _copy_corpus(db: Path, work: Path, kept: Path | None) -> None:
    """A copy of the ingested corpus per workspace (the loop's kept in `kept` once made)."""
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
    for name in ("loop", "baseline", "model-all"):
        home = kept / "loop" if kept is not None and name == "loop" else work / name
        if kept is not None and name == "loop" and (home / "deepresearch.db").exists():
            continue
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        shutil.copy(db, home / "deepresearch.db")


def run_modes(
    modes: list[str],
    models: list[str],
    args: argparse.Namespace,
    items: list[dict],
    db: Path,
    work: Path,
    titles: dict[str, str],
) -> dict[str, list[dict]]:
    """Every mode on every item: the extractive loop once per question, each reader re-reading it."""
    from deepresearch.research.loop import run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.research.wiring import options_from_config
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    rows: dict[str, list[dict]] = {}
    kept = args.runs_dir  # extractive runs saved there are re-used (the loop's workspace, run ids, rows)
    _copy_corpus(db, work, kept)
    ws = Workspace.open(kept / "loop" if kept is not None else work / "loop")
    try:
        if "extractive" in modes or "reader" in modes:
            runs = extractive_runs(ws, args, items, titles, rows)
            for model in models if "reader" in modes else []:
                mode = f"reader:{Path(model).name[:40]}"
                deps = reader_deps(ws, model, args.threads, ("answer",))
                for i, (item, run_id) in enumerate(zip(items, runs, strict=True), 1):
                    result, state = reread(ws, run_id, deps)
                    rows.setdefault(mode, []).append(score_run(item, result, state, titles))
                    _log(mode, i, len(items), rows[mode][-1])
                    (work / "rows.json").write_text(json.dumps(rows, ensure_ascii=False, default=str))
    finally:
        ws.close()
    if "baseline" in modes:
        ws = Workspace.open(work / "baseline")
        try:
            corpus = Corpus.from_workspace(ws)
            rows["baseline"] = [baseline_row(item, corpus, titles) for item in items]
        finally:
            ws.close()
    if "model-all" in modes:  # every step asks the model: measures each step's acceptance
        from deepresearch.research.model_io import MODEL_STEPS

        ws = Workspace.open(work / "model-all")
        try:
            deps = reader_deps(ws, models[0], args.threads, MODEL_STEPS)
            for i, item in enumerate(items, 1):
                result = run_research(ws, item["question"], options_from_config(ws), deps=deps)
                rows.setdefault("model-all", []).append(
                    score_run(item, result, RunStore(ws.db).load_state(result.run_id), titles)
                )
                _log("model-all", i, len(items), rows["model-all"][-1])
        finally:
            ws.close()
    return rows


def summarize(rows: list[dict]) -> dict:
    """Means over questions, the median wall time and per-step model acceptance."""

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        return round(statistics.mean(values), 3) if values else None

    out: dict[str, Any] = {"questions": len(rows)}
    for key in SUMMARY_KEYS:
        if key != "wall_seconds_median":
            out[key] = mean(key)
    out["wall_seconds_median"] = round(statistics.median(r["wall_seconds"] for r in rows), 2)
    methods: dict[str, int] = {}
    for r in rows:
        if r.get("method"):
            methods[r["method"]] = methods.get(r["method"], 0) + 1
    out["methods"] = methods
    steps: dict[str, dict[str, float]] = {}
    for r in rows:
        for step, counts in (r.get("model_steps") or {}).items():
            total = steps.setdefault(step, {"calls": 0, "accepted": 0})
            total["calls"] += int(counts.get("calls", 0))
            total["accepted"] += int(counts.get("accepted", 0))
    out["model_acceptance"] = {
        step: {**c, "rate": round(c["accepted"] / c["calls"], 3) if c["calls"] else None} for step, c in steps.items()
    }
    return out


SUMMARY_KEYS = [
    "em",
    "f1",
    "wrong",
    "abstained",
    "support_recall",
    "citation_precision",
    "cited_sources",
    "citation_validity",
    "answer_in_answer",
    "answer_anywhere",
    "answer_precision",
    "wall_seconds_median",
    "model_seconds",
    "em_no_rule",
    "f1_no_rule",
    "wrong_no_rule",
    "abstained_no_rule",
    "em_with_broken",
    "f1_with_broken",
    "wrong_with_broken",
    "abstained_with_broken",
    "hopped",
    "read_in_parts",
    "em_no_hop",
    "f1_no_hop",
    "wrong_no_hop",
    "loops",
    "backend_searches",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="HotpotQA/MuSiQue-format JSON (a list of items).")
    parser.add_argument("--limit", type=int, default=10, help="Questions to research (default 10).")
    parser.add_argument("--start", type=int, default=0, help="Index of the first question (default 0).")
    parser.add_argument(
        "--only", type=lambda v: [int(i) for i in v.split(",")],
        help="Comma-separated question indexes, instead of --start/--limit: a subset of a run, re-read with its "
        "kept runs (--runs-dir) and corpus (--cache-dir).",
    )  # fmt: skip
    parser.add_argument(
        "--corpus", choices=("all", "questions"), default="all", help="Ingest all paragraphs or the selected ones."
    )
    parser.add_argument("--modes", default=",".join(MODES[:3]), help=f"Comma-separated subset of {', '.join(MODES)}.")
    parser.add_argument(
        "--models",
        default="qwen2.5-coder-1.5b-instruct",
        help="Comma-separated chat models (shipped names or GGUF paths); default: the shipped default.",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama.cpp threads of the reader (default: the product's rule, the physical cores idle at each call).",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="Keep the ingested corpus DB here.")
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="Keep the runs' workspaces here (default: deleted)."
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help="Keep the extractive runs here and re-use them on later calls (same file): readers re-read them.",
    )
    parser.add_argument("--json", action="store_true", help="Print everything (with per-question rows) as JSON.")
    return parser


def selected(count: int, args: argparse.Namespace) -> list[int]:
    """The indexes of the questions to research: `--only`'s, else `--limit` from `--start`."""
    if args.only and not all(0 <= i < count for i in args.only):
        raise ValueError(f"--only: the file's question indexes run from 0 to {count - 1}")
    return args.only or list(range(args.start, min(count, args.start + args.limit)))


def main() -> None:
    """Ingest the paragraphs, run every mode on the selected questions, print the figures."""
    parser = _parser()
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    models = [m for m in args.models.split(",") if m]
    if not set(modes) <= set(MODES):
        parser.error(f"--modes takes {', '.join(MODES)}")
    data = json.loads(args.file.read_text(encoding="utf-8"))
    try:
        args.indexes = selected(len(data), args)
    except ValueError as err:
        parser.error(str(err))
    items = [data[i] for i in args.indexes]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="eval-research-"))
    try:
        db, titles, ingest_seconds = ingest(data, args, work)
        out: dict[str, Any] = {
            "file": str(args.file),
            "questions": ",".join(map(str, args.only)) if args.only else f"{args.start}..{args.start + len(items) - 1}",
            "documents": len(set(titles)),
            "ingest_seconds": round(ingest_seconds, 1),
        }
        per_question = run_modes(modes, models, args, items, db, work, titles)
        for mode, rows in per_question.items():
            out[mode] = summarize(rows)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({**out, "per_question": per_question}, indent=2, ensure_ascii=False))
        return
    print(
        f"{out['file']}: questions {out['questions']}, {out['documents']} documents"
        f" (ingest {out['ingest_seconds']} s, 0 = cached)"
    )
    shown = list(per_question)
    print(f"{'':<22}" + "".join(f"{m[:26]:>28}" for m in shown))
    for key in SUMMARY_KEYS:
        cells = "".join(f"{'—' if out[m].get(key) is None else out[m][key]:>28}" for m in shown)
        print(f"{key:<22}{cells}")
    for mode in shown:
        if out[mode].get("methods"):
            print(f"{mode} answers by method: {out[mode]['methods']}")
        for step, c in out[mode].get("model_acceptance", {}).items():
            print(f"{mode} model step {step}: {c['accepted']}/{c['calls']} accepted ({c['rate']})")


if __name__ == "__main__":
    main()
