"""Evaluate fact extraction against the hand-labeled set, today's extraction next to the new one.

    python3 scripts/eval_extraction.py                      # tests/data/extraction_*.jsonl
    python3 scripts/eval_extraction.py --json /tmp/extraction.json

The labeled set (tests/data/extraction_labels.jsonl, built by
scripts/build_extraction_candidates.py) holds every sentence-level candidate of 357 sources —
SciFact abstract chunks, HotpotQA and MuSiQue paragraphs, SQLite, Node.js, Rust book, Cargo book, rustc book, Rust
Reference and Rustonomicon documentation chunks — each
labeled by hand: stands alone, is a claim, is complete (not cut), category. Sources are split (see SPLITS)
into tuning parts (dev, dev2, and blind3 since session 13's third round: looked at while the rules
were designed; their claims are the category classifier's examples), parts whose failures were
read in a later session (heldout, fresh, blind2, blind4, blind5, blind6, blind7, blind8: 43 sources, the Cargo
book's pages among them; blind9: 32 sources, the rustc book's pages among them; blind10: 43 sources, the Rust
Reference's pages among them, labeled and committed in session 18 before any of that session's code ran on it).
For each
extractor (`baseline` = scripts/extraction_baseline.py, the extraction before issue 25; `main` =
the extraction as of MAIN_COMMIT, run from git in a subprocess; `new` = deepresearch.models.extract,
each split's sources extracted with a stands-alone check (models/standalone.py) and a category classifier
fitted without that split's labels nor the excluded one's (build_standalone_weights.EXCLUDED, the split held
out: its models are the shipped ones): `loso_categorizers`)
and each split it prints:
- stored facts, and how many of them match a labeled candidate (coverage; exact text, or the
  same source sentence with ≥ 85% of the content words both ways);
- shares of the matched stored facts that stand alone, are claims, are complete, all three;
- good kept: stored facts with all three, over the labeled candidates with all three (the
  price of the rules; at most 5 facts per source are stored, so it cannot reach 1);
- category accuracy over the matched stored facts labeled as claims;
- facts stored per source and extraction seconds per source (mean; the embedding model is
  loaded before timing).
Then the categorizers alone over every labeled claim (not only the stored ones, each with its source's
title): cue words, the nearest-prototype rule, the softmax regression (each split's figure by a fit without
that split's claims), and with
`--model-categories GGUF` the chat model choosing from the category enum. `--judge` adds a `new+check` row per
split: `new` with the `check` model step (the configured chat model confirms each sentence the stands-alone check
keeps, models/standalone.py `ModelCheck`; its s/source includes the model's seconds). `--splits S…` extracts and
prints only those splits (the leave-one-split-out fits still use every other split; no categorizer table).
`--extractors` runs only some of baseline, main and new; `--threshold T…` sets the stands-alone check's threshold
(every fit's and the shipped model's; several give a `new@T` row each); `--pooled S…` adds a row over those splits;
`--by-kind` adds, under each row, the same figures over its prose sources (`S:prose`: SciFact, HotpotQA, MuSiQue) and
its documentation sources (`S:docs`).
`--issue-pages DIR` runs both extractions over every chunk of the issue's SQLite pages instead.

The old model comparison on HotpotQA (grounded share of model proposals per candidate GGUF)
remains: `--hotpotqa FILE --models NAME…`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction_labels import DATA, FLAGS, SPLITS, kind, labels_by_source, load_jsonl, match  # noqa: E402

# "main": the extraction as merged at the end of session 16 (blind6 in training, rule I, the release cue; session
# 16's figures used 7bb4e97; d81bb01 was main at the start of session 17, edc8c02 at its second round on issue 25:
# blind7 in training and session 17's first-round rules; 489119d is main at the start of session 18: blind8 in
# training, blind9 not; f896297 is main at the start of session 19: blind9 in training, blind10 not, threshold 0.5;
# ed32d30 is main at the start of session 20: blind10 in training, blind11 not, threshold 0.7; 0ed344c is main at
# the start of session 21: blind11 in training, blind12 not; ba51cea is main at the start of session 23: blind12 in
# training, blind13 and blind14 not; d00b811 is main at the start of session 36: blind13 … blind15 still not; 01988ea
# at the start of session 37; 1759be6 at the start of session 38: threshold 0.8, blind17 … blind22 not in training),
# run from this commit's package in a subprocess, so the new code is compared with it in the same run.
MAIN_COMMIT = "1759be6"
EXTRACTORS = ("baseline", "main", "new")


_MAIN_RUNNER = """
import json, sys, time
from deepresearch.models import extract
from deepresearch.models.categorize import default_categorizer
sources, max_facts = json.load(sys.stdin), int(sys.argv[1])
default_categorizer().categorize(["A warm-up sentence."])
out = {}
for s in sources:
    start = time.perf_counter()
    result = extract.extract_facts(s["text"], s["url"], topic=s["topic"], max_facts=max_facts, title=s["title"])
    out[s["id"]] = {"facts": [[f.fact, f.category] for f in result.facts], "seconds": time.perf_counter() - start}
print(json.dumps(out))
"""


def run_main(sources: list[dict[str, Any]], max_facts: int, commit: str = MAIN_COMMIT) -> dict[str, Any]:
    """Stored facts per source of the extraction as of `commit` (its package from git, in a subprocess)."""
    import subprocess
    import tempfile
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", commit, "deepresearch"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        done = subprocess.run(
            [sys.executable, "-c", _MAIN_RUNNER, str(max_facts)], input=json.dumps(sources), capture_output=True,
            text=True, check=True, cwd=tmp, env={**__import__("os").environ, "PYTHONPATH": tmp},
        )  # fmt: skip
    runs = json.loads(done.stdout)
    return {
        sid: {"facts": [SimpleNamespace(fact=f, category=c) for f, c in run["facts"]], "seconds": run["seconds"]}
        for sid, run in runs.items()
    }


class CachedEmbedder:
    """The embedder with every text's vector kept: the per-split fits embed the same sentences."""

    def __init__(self, inner: Any):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.cache: dict[str, Any] = {}

    def embed_batch(self, texts: list[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        self.cache.update(zip(todo, self.inner.embed_batch(todo), strict=True) if todo else [])
        return np.asarray([self.cache[t] for t in texts]).reshape(len(texts), self.dimension)


def split_examples(
    sources: list[dict[str, Any]], labels: list[dict[str, Any]], split: str
) -> list[tuple[str, str, str]]:
    """The category classifier's examples as the shipped ones are built (build_standalone_weights), without `split`."""
    import build_standalone_weights as bsw
    from extraction_labels import category_examples

    by_id = {s["id"]: s for s in sources}
    return [
        (category, text, title) for category, text, title in category_examples(by_id, labels, (*bsw.EXCLUDED, split))
    ]


def loso_categorizers(sources: list[dict[str, Any]], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split, a categorizer (category classifier and stands-alone model, models/standalone.py) fitted
    on the labeled candidates of the other splits as the shipped one is (build_standalone_weights), never on
    the excluded split (build_standalone_weights.EXCLUDED: its are the shipped ones): so each split is scored by
    models not trained on it."""
    import build_standalone_weights as bsw

    from deepresearch.models import standalone
    from deepresearch.models.categorize import LinearCategorizer, default_categorizer

    embedder = CachedEmbedder(default_categorizer().embedder)  # type: ignore[attr-defined]
    by_id = {s["id"]: s for s in sources}
    rows = [r for r in bsw.labeled_rows(by_id, labels, bsw.TRAIN_ON) if r["split"] not in bsw.EXCLUDED]
    rows = rows + bsw.without_titles(rows) if bsw.TITLE_DROPOUT else rows  # as the shipped fit (`bsw.fit`)
    vectors, features = bsw.inputs(rows, embedder)
    out = {}
    for split in SPLITS:
        keep = [i for i, r in enumerate(rows) if r["split"] != split]
        model = standalone.train(
            vectors[keep], [features[i] for i in keep], [rows[i]["good"] for i in keep], embedder.model_id,
            bsw.THRESHOLD, c=bsw.C,
        )  # fmt: skip
        examples = split_examples(sources, labels, split)
        out[split] = LinearCategorizer(embedder, standalone=model, examples=examples)  # type: ignore[arg-type]
    return out


def timed_categorizers(sources: list[dict[str, Any]], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """`loso_categorizers`, fitted (and the embedding model loaded) before timing, then embedding uncached."""
    categorizers = loso_categorizers(sources, labels)
    for categorizer in categorizers.values():
        categorizer.categorize(["A warm-up sentence."])
        categorizer.embedder = categorizer.standalone.embedder = categorizer.embedder.inner  # timed uncached
    return categorizers


def run_extractor(
    name: str,
    sources: list[dict[str, Any]],
    max_facts: int,
    labels: list[dict[str, Any]],
    check: Any = None,
    categorizers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Stored facts per source (with seconds) for one extractor (`new`: with `categorizers`, the leave-one-split-out
    checks of `timed_categorizers`, fitted on `sources` when not given; `check`, a models/standalone.py
    `ModelCheck`, confirms what the learned check keeps: the `check` model step)."""
    if name == "main":
        return run_main(sources, max_facts)
    if name == "baseline":
        import extraction_baseline as module

        def call(s: dict[str, Any]) -> Any:
            return module.extract_facts(s["text"], s["url"], topic=s["topic"], max_facts=max_facts)
    else:
        from deepresearch.models import extract as new_module
        from deepresearch.models.standalone import ModelChecked

        fitted = categorizers if categorizers is not None else timed_categorizers(sources, labels)

        def call(s: dict[str, Any]) -> Any:
            categorizer = fitted[s["split"]]
            return new_module.extract_facts(
                s["text"], s["url"], topic=s["topic"], max_facts=max_facts, title=s["title"],
                categorizer=categorizer if check is None else ModelChecked(categorizer, check),
            )  # fmt: skip

    out = {}
    for source in sources:
        start = time.perf_counter()
        result = call(source)
        out[source["id"]] = {"facts": result.facts, "seconds": time.perf_counter() - start}
    return out


def figures(runs: dict[str, Any], sources: list[dict[str, Any]], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """The shares, accuracy, coverage and rates over `sources`."""
    by_source = labels_by_source(labels)
    stored = matched = cat_total = cat_right = 0
    flags = dict.fromkeys(FLAGS, 0)
    all_three = 0
    seconds = 0.0
    unmatched: list[str] = []
    for source in sources:
        run = runs[source["id"]]
        seconds += run["seconds"]
        for fact in run["facts"]:
            stored += 1
            found = match(fact.fact, by_source.get(source["id"], []))
            if found is None or found["standalone"] is None:
                unmatched.append(fact.fact)
                continue
            matched += 1
            for flag in FLAGS:
                flags[flag] += bool(found[flag])
            all_three += all(found[f] for f in FLAGS)
            if found["claim"] and found["category"]:
                cat_total += 1
                cat_right += fact.category == found["category"]
    n = len(sources)
    good = sum(all(r[f] for f in FLAGS) for s in sources for r in by_source.get(s["id"], []))
    return {
        "good_available": good,
        "good_stored_share": all_three / good if good else None,
        "sources": n,
        "stored": stored,
        "coverage": matched / stored if stored else None,
        **{flag: flags[flag] / matched if matched else None for flag in FLAGS},
        "all_three": all_three / matched if matched else None,
        "category_accuracy": cat_right / cat_total if cat_total else None,
        "category_n": cat_total,
        "facts_per_source": stored / n if n else 0.0,
        "seconds_per_source": seconds / n if n else 0.0,
        "unmatched": unmatched,
    }


def by_title(categorizer: Any, claims: list[dict[str, Any]], titles: dict[str, str]) -> list[str]:
    """Each claim's category, the claims of one source together under its title."""
    chosen: dict[str, str] = {}
    for source in dict.fromkeys(r["source"] for r in claims):
        ids = [r["id"] for r in claims if r["source"] == source]
        facts = [r["fact"] for r in claims if r["source"] == source]
        chosen |= dict(zip(ids, categorizer.categorize(facts, titles[source]), strict=True))
    return [chosen[r["id"]] for r in claims]


def _candidates(model_path: str | None) -> list[Any]:
    """The categorizers compared: cue words, nearest prototype, the linear classifier (each with
    and without its unsure rule), and with `model_path` the chat model through the category enum."""
    from deepresearch.models.categorize import (
        LinearCategorizer,
        ModelCategorizer,
        PrototypeCategorizer,
        RuleCategorizer,
        default_categorizer,
    )

    shipped = default_categorizer()
    candidates: list[Any] = [RuleCategorizer()]
    if isinstance(shipped, LinearCategorizer):
        embedder: Any = CachedEmbedder(shipped.embedder)  # the linear one is fitted once per split
        candidates += [PrototypeCategorizer(embedder, margin=0.0), PrototypeCategorizer(embedder)]
        candidates += [LinearCategorizer(embedder, margin=0.0), LinearCategorizer(embedder)]
    if model_path:
        from deepresearch.config import LLMConfig
        from deepresearch.models.llm import get_chat_model

        config = LLMConfig(model_path=model_path, temperature=0.0)  # threads: the default (half the cores)
        candidates.append(ModelCategorizer(get_chat_model(config)))
    return candidates


def categorizer_accuracy(
    labels: list[dict[str, Any]], sources: list[dict[str, Any]], model_path: str | None = None, model_sample: int = 0
) -> list[dict[str, Any]]:
    """Category accuracy of each categorizer over every labeled claim, per split, each claim with its source's
    title (the linear classifier fitted without the split's claims; with `model_path`, also the chat model)."""
    from deepresearch.models.categorize import LinearCategorizer

    titles = {s["id"]: s["title"] for s in sources}
    rows = []
    for categorizer in _candidates(model_path):
        for split in SPLITS:
            claims = [r for r in labels if r["split"] == split and r["claim"] and r["category"]]
            if categorizer.name == "model" and model_sample:  # every k-th claim: CPU is scarce
                claims = claims[:: max(1, len(claims) // model_sample)][:model_sample]
            start = time.perf_counter()
            if categorizer.name == "linear":  # the same margin, fitted without this split's claims
                examples = split_examples(sources, labels, split)
                chosen = by_title(LinearCategorizer(categorizer.embedder, categorizer.margin, examples), claims, titles)
            else:
                chosen = by_title(categorizer, claims, titles)
            if categorizer.name == "model":
                print(f"  model categories ({split}): {(time.perf_counter() - start) / len(claims):.2f} s/fact")
            right = sum(c == r["category"] for c, r in zip(chosen, claims, strict=True))
            label = categorizer.name + (
                f" (unsure margin {categorizer.margin})" if hasattr(categorizer, "margin") else ""
            )
            rows.append({"categorizer": label, "split": split, "claims": len(claims), "accuracy": right / len(claims)})
    return rows


def chunk_edges(folder: Path, pages: int, size: int = 180, overlap: int = 30) -> dict[str, Any]:
    """On real chunk boundaries (HTML pages read and cut by the corpus code), how often the first
    sentence of a chunk that starts mid-sentence still looks like a sentence start (and would be
    kept), and how many true sentence starts the rule drops."""
    import re

    from deepresearch.models.claims import opens_on_a_keyword, starts_like_sentence
    from deepresearch.search.readers import read_html_file

    counts = {"chunks": 0, "true_start": 0, "mid_sentence": 0, "mid_kept": 0, "start_dropped": 0}
    # session 13: of the kept starts, those opening on a keyword (dropped in a window of words)
    counts |= {"keyword_mid": 0, "keyword_true": 0}
    for path in sorted(folder.glob("*.html"))[:pages]:
        try:
            _, text = read_html_file(path)
        except Exception:  # noqa: BLE001 - a page without text is no boundary
            continue
        spans = [m.span() for m in re.finditer(r"\S+", text)]
        for first in range(size - overlap, len(spans), size - overlap):
            before = text[: spans[first][0]]
            true_start = not before.strip() or "\n\n" in before[-4:] or bool(re.search(r"[.!?:][\"')\]]*\s*$", before))
            kept = starts_like_sentence(text[spans[first][0] :][:200])
            counts["chunks"] += 1
            counts["true_start"] += true_start
            counts["mid_sentence"] += not true_start
            counts["mid_kept"] += kept and not true_start
            counts["start_dropped"] += true_start and not kept
            keyword = kept and opens_on_a_keyword(text[spans[first][0] :][:200])
            counts["keyword_mid"] += keyword and not true_start
            counts["keyword_true"] += keyword and true_start
    return counts


# The issue's examples of facts no one would keep (issue 25), as patterns over stored facts.
ISSUE_PAGES = ("wal.html", "flextypegood.html", "pragma.html", "isolation.html")
ISSUE_PATTERNS = (
    r"^(?:To avoid that|In that case|Hence|Of course|Presumably|Yes,|See the|Int sqlite3|PRAGMA schema)|"
    r"with the addition that\.$|fully in the\.$"
)


def issue_pages(folder: Path) -> list[dict[str, Any]]:
    """Every chunk (180/30 words) of the SQLite pages the issue's examples come from, through
    today's and the new extraction: facts stored, their categories, how many match the issue's
    bad patterns, seconds per chunk."""
    import re
    from collections import Counter

    import extraction_baseline as baseline

    from deepresearch.models import extract
    from deepresearch.models.categorize import default_categorizer
    from deepresearch.search.ingest import chunk_text
    from deepresearch.search.readers import read_html_file

    default_categorizer()  # loaded (and fitted) before timing
    chunks = []
    for page in ISSUE_PAGES:
        title, text = read_html_file(folder / page)
        chunks += [(title, page, chunk) for chunk in chunk_text(text, 180, 30)]
    rows = []
    for name in ("baseline", "new"):
        categories: Counter[str] = Counter()
        bad = 0
        start = time.perf_counter()
        for title, page, chunk in chunks:
            if name == "baseline":
                result = baseline.extract_facts(chunk, page, topic=title, max_facts=5)
            else:
                result = extract.extract_facts(chunk, page, topic=title, max_facts=5, title=title)
            categories.update(f.category for f in result.facts)
            bad += sum(bool(re.search(ISSUE_PATTERNS, f.fact)) for f in result.facts)
        seconds = (time.perf_counter() - start) / len(chunks)
        rows.append({"name": name, "chunks": len(chunks), "facts": sum(categories.values()), "bad": bad,
                     "categories": dict(categories), "seconds_per_chunk": round(seconds, 3)})  # fmt: skip
    return rows


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def model_check(model_path: str | None) -> Any:
    """The `check` model step's judge on the configured chat model (`--model`: another GGUF), loaded once."""
    from deepresearch.config import load_config
    from deepresearch.models.llm import get_chat_model
    from deepresearch.models.standalone import ModelCheck

    llm = load_config().llm
    llm = llm.model_copy(update={"model_path": model_path}) if model_path else llm
    return ModelCheck(get_chat_model(llm))


def set_threshold(categorizers: dict[str, Any], threshold: float) -> None:
    """The stands-alone check's threshold for every leave-one-split-out fit and for the shipped model."""
    from deepresearch.models.standalone import shipped_model

    for model in [*(c.standalone.model for c in categorizers.values()), shipped_model()]:
        if model is not None:
            model.threshold = threshold


def extract_runs(
    args: argparse.Namespace, every: list[dict[str, Any]], sources: list[dict[str, Any]], labels: list[dict[str, Any]]
) -> tuple[dict[str, Any], Any]:
    """Stored facts per extractor of `--extractors` (`new` once per `--threshold`: `new@T` when there are several),
    and `new+check` with `--judge` (at the first threshold); the model check, or None."""
    wanted = "new" in args.extractors or args.judge
    fitted = timed_categorizers(every, labels) if wanted else {}  # once for every `new` row and `new+check`
    runs = {}
    for name in args.extractors:
        for threshold in (args.threshold or [None]) if name == "new" else [None]:
            if threshold is not None:
                set_threshold(fitted, threshold)
            label = f"new@{threshold:g}" if threshold is not None and len(args.threshold) > 1 else name
            runs[label] = run_extractor(name, sources, args.max_facts, labels, categorizers=fitted)
    check = None
    if args.judge:
        if args.threshold:
            set_threshold(fitted, args.threshold[0])
        check = model_check(args.model)
        runs["new+check"] = run_extractor("new", sources, args.max_facts, labels, check, fitted)
    return runs, check


def labeled_main(args: argparse.Namespace) -> None:
    every, labels = load_jsonl(args.sources), load_jsonl(args.labels)
    splits = tuple(args.splits or SPLITS)
    if set(args.pooled or []) - set(splits):
        raise SystemExit(f"--pooled {' '.join(sorted(set(args.pooled) - set(splits)))}: not among --splits")
    sources = [s for s in every if s["split"] in splits]  # the fits still use every split but the scored one
    runs, check = extract_runs(args, every, sources, labels)
    columns = [
        ("extraction", "name"), ("split", "split"), ("sources", "sources"), ("stored", "stored"),
        ("labeled", "coverage"), ("stands alone", "standalone"), ("claim", "claim"), ("complete", "complete"),
        ("all three", "all_three"), ("good kept", "good_stored_share"), ("category acc", "category_accuracy"),
        ("facts/source", "facts_per_source"), ("s/source", "seconds_per_source"),
    ]  # fmt: skip
    rows = []
    pooled = {"pooled": args.pooled} if args.pooled else {}
    for split in (*splits, *pooled, "all"):
        chosen = [s for s in sources if split == "all" or s["split"] in pooled.get(split, [split])]
        for part in ("", "prose", "docs") if args.by_kind else ("",):
            part_of = [s for s in chosen if not part or kind(s) == part]
            label = f"{split}:{part}" if part else split
            for name, run in runs.items():
                rows.append({"name": name, "split": label, **figures(run, part_of, labels)})
    print(f"{len(sources)} sources, {len(labels)} labeled candidates, max_facts={args.max_facts}")
    print("| " + " | ".join(c for c, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(_fmt(row[k]) for _, k in columns) + " |")
    if check is not None:
        unusable = check.calls - check.kept - check.dropped
        print(f"new+check: {check.calls} model calls, {check.seconds / max(1, check.calls):.2f} s each (the first"
              f" evaluates the system prompt), {check.dropped} no, {unusable} unusable")  # fmt: skip
    cats = [] if args.splits else categorizer_accuracy(labels, sources, args.model_categories, args.model_sample)
    print("\ncategorizers over every labeled claim")
    print("| categorizer | split | claims | accuracy |\n|---|---|---|---|")
    for c in cats:
        print(f"| {c['categorizer']} | {c['split']} | {c['claims']} | {c['accuracy']:.2f} |")
    for row in rows:
        if row["unmatched"] and row["split"] not in ("all", "pooled") and ":" not in row["split"]:
            print(f"\nnot in the labeled set ({row['name']}, {row['split']}):", *row["unmatched"], sep="\n  ")
    if args.json:
        args.json.write_text(json.dumps({"extraction": rows, "categorizers": cats}, indent=2, default=str))
    if args.stored:
        write_stored(args.stored, runs, sources, labels)


def write_stored(path: Path, runs: dict[str, Any], sources: list[dict[str, Any]], labels: list[dict[str, Any]]) -> None:
    """Every stored fact, a JSON line each: extraction, split, source, corpus, the fact, its category and its labels
    (null when the labeled set does not hold it) — what a review of the misses or a second labeler starts from."""
    by_source = labels_by_source(labels)
    lines = []
    for name, run in runs.items():
        for source in sources:
            for fact in run[source["id"]]["facts"]:
                found = match(fact.fact, by_source.get(source["id"], []))
                labeled = {k: found[k] for k in (*FLAGS, "category")} if found else None
                row = {"extraction": name, "split": source["split"], "source": source["id"], "corpus": source["corpus"]}
                lines.append({**row, "fact": fact.fact, "category": fact.category, "labels": labeled})
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    print(f"{len(lines)} stored facts written to {path}")


def main() -> None:
    """Parse arguments; the labeled-set evaluation, or the older HotpotQA model comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=Path, default=DATA / "extraction_sources.jsonl")
    parser.add_argument("--labels", type=Path, default=DATA / "extraction_labels.jsonl")
    parser.add_argument("--max-facts", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--stored", type=Path, help="also write every stored fact with its labels, as JSONL")
    parser.add_argument(
        "--judge", action="store_true", help="also a `new+check` row: `new` with the chat model's stands-alone check"
    )
    parser.add_argument("--splits", nargs="+", choices=SPLITS, help="only these splits (no categorizer table)")
    parser.add_argument("--extractors", nargs="+", choices=EXTRACTORS, default=list(EXTRACTORS), help="rows to run")
    parser.add_argument(
        "--threshold", nargs="+", type=float, default=[],
        help="the stands-alone check's threshold(s) for `new` (every fit and the shipped model; default: "
        "build_standalone_weights.THRESHOLD, the shipped file's); with several, a `new@T` row per threshold",
    )  # fmt: skip
    parser.add_argument("--pooled", nargs="+", choices=SPLITS, help="also a `pooled` row over these splits")
    parser.add_argument(
        "--exclude", nargs="*", choices=SPLITS,
        help="splits no fit trains on (default: build_standalone_weights.EXCLUDED); with none, every split trains the "
        "others' fits (how a join of held-out splits is measured, session 36)",
    )  # fmt: skip
    parser.add_argument(
        "--by-kind", action="store_true",
        help="also the rows of each split's prose sources (SciFact, HotpotQA, MuSiQue) and documentation sources apart",
    )  # fmt: skip
    parser.add_argument("--model", help="(--judge) GGUF name or path (default: the configured chat model)")
    parser.add_argument("--model-categories", help="also measure this GGUF choosing from the category enum")
    parser.add_argument("--model-sample", type=int, default=0, help="(--model-categories) claims per split; 0 = all")
    parser.add_argument("--chunk-edges", type=Path, help="only measure the start rule on chunks of these HTML pages")
    parser.add_argument("--pages", type=int, default=200, help="(--chunk-edges) pages to read")
    parser.add_argument(
        "--issue-pages", type=Path, help="only run both extractions on every chunk of the issue's pages"
    )
    parser.add_argument("--hotpotqa", type=Path, help="run the model comparison on this hotpotqa_train.json")
    parser.add_argument("--passages", type=int, default=16, help="(--hotpotqa) supporting paragraphs to use")
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "gemma3-270m"])
    args = parser.parse_args()
    if args.exclude is not None:
        import build_standalone_weights as bsw

        bsw.EXCLUDED = tuple(args.exclude)
    if args.chunk_edges:
        counts = chunk_edges(args.chunk_edges, args.pages)
        print(json.dumps(counts))
        mid, start = counts["mid_sentence"], counts["true_start"]
        print(f"mid-sentence chunk starts kept as sentence starts: {counts['mid_kept'] / mid:.3f} of {mid}")
        print(f"true sentence starts dropped: {counts['start_dropped'] / start:.3f} of {start}")
        keyword = counts["keyword_mid"] + counts["keyword_true"]
        print(f"kept starts opening on a keyword: {keyword}, mid-sentence {counts['keyword_mid'] / keyword:.3f}")
        return
    if args.issue_pages:
        for row in issue_pages(args.issue_pages):
            print(json.dumps(row))
        return
    if args.hotpotqa:
        import eval_extraction_models

        eval_extraction_models.run(args)
    else:
        labeled_main(args)


if __name__ == "__main__":
    main()
