"""Evaluate `research` on factual questions about an ingested documentation set: the reader on documents.

    deepresearch --home WS corpus add DOCS_DIR
    python3 scripts/eval_docqa.py QUESTIONS.jsonl --home WS [--start 0 --limit 45] [--json OUT]

Each line of QUESTIONS is {id, question, answer, aliases, page}: `page` is the answer's page, relative to DOCS_DIR
(matched as the end of a source's URL). Each question is one `deepresearch --home WS research QUESTION --json
--no-kb-write` process: the user's path with the workspace's configuration, model load included, and nothing written
to the KB, so no question recalls another's facts. Set `DEEPRESEARCH__…` variables to change an option for every run.

Figures: headline exact match and F1 (SQuAD normalization, against the answer and its aliases; an abstention scores
0), wrong-headline rate (answered with F1 < 0.5), abstention rate, the answer's page among the cited sources, and
among one `corpus search`'s top 5 (the baseline), the gold answer anywhere in the report, median wall seconds and
mean model seconds per question. `--json` writes the figures and every question's row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_research import BASELINE_TOP, contains_answer, headline_figures  # noqa: E402


def _cli(home: Path, *args: str) -> tuple[dict[str, Any] | None, float, str]:
    """(parsed --json output or None, wall seconds, stderr's last line) of one `deepresearch` process."""
    start = time.perf_counter()
    done = subprocess.run(["deepresearch", "--home", str(home), *args, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    try:
        return json.loads(done.stdout), wall, ""
    except json.JSONDecodeError:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return None, wall, lines[-1] if lines else f"exit {done.returncode}"


def _on_page(urls: list[str], page: str) -> bool:
    return any(url.endswith("/" + page.lstrip("/")) for url in urls)


def question_row(item: dict[str, Any], home: Path) -> dict[str, Any]:
    """One question: the research run's headline, scores and cited pages, and one search's top 5."""
    golds = [item["answer"], *item.get("aliases", [])]
    result, wall, error = _cli(home, "research", item["question"], "--no-kb-write")
    found, _, _ = _cli(home, "corpus", "search", item["question"], "-n", str(BASELINE_TOP))
    top = [hit.get("url", "") for hit in (found or {}).get("results", [])]
    if result is None:
        return {"id": item["id"], "question": item["question"], "gold": item["answer"], "error": error, "wall": wall,
                "baseline_page": _on_page(top, item["page"])}  # fmt: skip
    headline = result.get("short_answer")
    cited = [s["url"] for s in result.get("sources", [])]
    return {
        "id": item["id"],
        "question": item["question"],
        "gold": item["answer"],
        "headline": headline,
        **headline_figures(headline, golds),
        "page_cited": _on_page(cited, item["page"]),
        "baseline_page": _on_page(top, item["page"]),
        "in_report": contains_answer(result.get("report", ""), golds),
        "cited": len(cited),
        "wall": round(wall, 2),
        "model_seconds": round(float(result.get("counters", {}).get("llm_seconds", 0.0)), 2),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ran = [r for r in rows if "error" not in r]

    def share(key: str, among: list[dict[str, Any]] = ran) -> float | None:
        return round(sum(float(r[key]) for r in among) / len(among), 3) if among else None

    return {
        "questions": len(rows),
        "errors": len(rows) - len(ran),
        "em": share("em"),
        "f1": share("f1"),
        "wrong": share("wrong"),
        "abstained": share("abstained"),
        "page_cited": share("page_cited"),
        "baseline_page": share("baseline_page", rows),
        "in_report": share("in_report"),
        "median_wall": round(statistics.median(r["wall"] for r in ran), 1) if ran else None,
        "mean_model_seconds": round(statistics.fmean(r["model_seconds"] for r in ran), 1) if ran else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", type=Path, help="JSONL: {id, question, answer, aliases, page} a line")
    parser.add_argument("--home", type=Path, required=True, help="workspace whose corpus holds the documentation")
    parser.add_argument("--start", type=int, default=0, help="index of the first question (default 0)")
    parser.add_argument("--limit", type=int, default=None, help="questions to run (default all)")
    parser.add_argument("--json", type=Path, help="also write the figures and per-question rows here")
    args = parser.parse_args()
    if not args.questions.is_file():
        raise SystemExit(f"Error: {args.questions}: no such file")
    if not (args.home / "deepresearch.db").is_file():
        raise SystemExit(f"Error: {args.home}: no workspace; run `deepresearch --home {args.home} corpus add DIR`")
    items = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = items[args.start : None if args.limit is None else args.start + args.limit]
    rows = []
    for i, item in enumerate(items, 1):
        row = question_row(item, args.home)
        rows.append(row)
        shown = row.get("error") or f"{row['headline']!r} (gold {row['gold']!r}) em={row['em']:.0f} f1={row['f1']:.2f}"
        print(f"[{i}/{len(items)}] {item['id']} {row['wall']:.1f}s {shown}", file=sys.stderr, flush=True)
    figures = summarize(rows)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "rows": rows}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
