"""Measure the chat model as a yes/no judge of "does this sentence stand alone?" (issue 25, session 18).

    PYTHONPATH=$PWD nice -n 10 python3 scripts/eval_standalone_judge.py --variants v1 v2 v3 --splits tune
    PYTHONPATH=$PWD nice -n 10 python3 scripts/eval_standalone_judge.py --variants v2 --splits report

The pool is what the stands-alone check sees: every candidate the rules and the fallback's name-or-number filter
pass (`extract.fallback_facts` without its limit), matched to its label (good = stands alone, claim, complete),
with the check's probability from a fit without its split (`eval_extraction.loso_categorizers`, so the check is
scored leave-one-split-out). The model (the default chat GGUF, temperature 0, one JSON field constrained to
yes/no) judges each non-grammar candidate of the pool under a prompt variant; verdicts are cached on disk
(`--cache`), so a run that stops resumes. Printed, per split group: precision / recall over the pool of the check
at 0.5, the judge alone, both (AND), and the judge deciding only inside a band of the check's probability; then
the stored facts of `eval_extraction.py`'s `new` extraction with each decision (the same code, the check's
decision replaced), and seconds per judged sentence.
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

from extraction_labels import DATA, FLAGS, labels_by_source, load_jsonl, match  # noqa: E402

from deepresearch.prompts import STANDALONE_CHECK, STANDALONE_EXAMPLES, STANDALONE_SCHEMA, Prompt  # noqa: E402

TUNE = ("dev", "dev2", "heldout", "fresh", "blind2", "blind3", "blind4", "blind5")
REPORT = ("blind6", "blind7", "blind8", "blind9")
# v3 is the shipped prompt (the `check` model step); v1 is its text without the examples, v2 adds the sentence before.
_PLAIN = STANDALONE_CHECK.system.replace(STANDALONE_EXAMPLES, "")
VARIANTS = {
    "v1": Prompt("standalone_v1", _PLAIN, STANDALONE_CHECK.user),
    "v2": Prompt("standalone_v2", _PLAIN, "Title: $title\nSentence before it: $previous\nSentence: $sentence"),
    "v3": STANDALONE_CHECK,
}


def previous_sentence(text: str, sentence: str) -> str:
    """The source's sentence before `sentence` ('(none)' when it opens the passage or is not found)."""
    from deepresearch.text import normalize_space, split_sentences

    flat = normalize_space(text)
    where = flat.find(normalize_space(sentence)[:40])
    before = split_sentences(flat[:where]) if where > 0 else []
    return before[-1][-300:] if before else "(none)"


def pool(sources: list[dict[str, Any]], labels: list[dict[str, Any]], categorizers: dict[str, Any]) -> list[dict]:
    """Every candidate the rules pass, with its label (None when unlabeled), check probability and context."""
    from deepresearch.models.extract import fallback_facts
    from deepresearch.models.standalone import grammar_stands_alone

    by_source = labels_by_source(labels)
    rows = []
    for source in sources:
        texts = fallback_facts(source["text"], source["topic"], limit=100, title=source["title"])
        check = categorizers[source["split"]].standalone
        probabilities = check.probabilities(texts, source["text"], source["title"]) if texts else []
        for text, p in zip(texts, probabilities, strict=True):
            found = match(text, by_source.get(source["id"], []))
            rows.append({
                "split": source["split"], "title": source["title"], "text": text, "p": p,
                "grammar": grammar_stands_alone(text), "previous": previous_sentence(source["text"], text),
                "good": None if found is None else all(found[f] for f in FLAGS),
            })  # fmt: skip
    return rows


class Judge:
    """The chat model's yes/no under one prompt variant, cached on disk by (variant, title,
    sentence, and the GGUF when not the default)."""

    def __init__(self, variant: str, cache: Path, model_path: str | None):
        self.variant, self.cache_path, self.model_path = variant, cache, model_path
        self.cache: dict[str, bool | None] = {}
        if cache.exists():
            for line in cache.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                self.cache[entry["key"]] = entry["yes"]
        self.model: Any = None
        self.calls, self.seconds, self.malformed = 0, 0.0, 0

    def key(self, title: str, sentence: str) -> str:
        """The cache key; another GGUF (`--model`) keeps its own verdicts."""
        return json.dumps([self.variant, title, sentence] + ([self.model_path] if self.model_path else []))

    def __call__(self, title: str, sentence: str, previous: str) -> bool | None:
        """True / False, or None when the model's answer was unusable (the check's decision stands)."""
        from deepresearch.models.llm import complete_json

        key = self.key(title, sentence)
        if key in self.cache:
            return self.cache[key]
        if self.model is None:
            from deepresearch.config import LLMConfig
            from deepresearch.models.llm import get_chat_model

            self.model = get_chat_model(LLMConfig(model_path=self.model_path, temperature=0.0))
        slots = {"title": title or "(none)", "sentence": sentence, "previous": previous}
        prompt = VARIANTS[self.variant]
        messages = prompt.messages(**{k: v for k, v in slots.items() if k in prompt.slots})
        started = time.perf_counter()
        data = complete_json(self.model, messages, STANDALONE_SCHEMA, max_tokens=8)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        answer = data.get("alone") if isinstance(data, dict) else None
        verdict = answer if isinstance(answer, bool) else None
        self.malformed += verdict is None
        self.cache[key] = verdict
        with self.cache_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, "yes": verdict}) + "\n")
        return verdict


def decide(p: float, grammar: bool, verdict: Any, mode: str, threshold: float = 0.5) -> bool:
    """Keep a candidate? `verdict` is a callable giving the judge's yes/no (None = no usable answer)."""
    if grammar:
        return True  # grammar's exemption stands, unjudged (as the check's)
    if mode == "check":
        return p >= threshold
    if mode == "and":
        if p < threshold:
            return False
        v = verdict()
        return p >= threshold if v is None else v
    if mode == "judge":
        v = verdict()
        return p >= threshold if v is None else v
    low, high = (float(x) for x in mode.removeprefix("band").split("-"))  # "band0.3-0.7"
    if p >= high or p < low:
        return p >= high
    v = verdict()
    return p >= threshold if v is None else v


def pool_table(rows: list[dict[str, Any]], judge: Judge, modes: list[str], groups: dict[str, tuple]) -> None:
    """Precision / recall / kept over the labeled pool, per split group and mode."""
    print(f"\n{judge.variant}: pool precision / recall / kept (judged calls so far {judge.calls})")
    print("| group | pool | good | " + " | ".join(modes) + " |\n|---|---|---|" + "---|" * len(modes))
    for name, splits in groups.items():
        chosen = [r for r in rows if r["split"] in splits and r["good"] is not None]
        good = sum(r["good"] for r in chosen)
        cells = []
        for mode in modes:
            kept = [r for r in chosen if decide(r["p"], r["grammar"], _lazy(judge, r), mode)]
            hits = sum(r["good"] for r in kept)
            cells.append(f"{hits / max(1, len(kept)):.3f} / {hits / max(1, good):.3f} / {len(kept)}")
        print(f"| {name} | {len(chosen)} | {good} | " + " | ".join(cells) + " |")


def _lazy(judge: Judge, row: dict[str, Any]) -> Any:
    return lambda: judge(row["title"], row["text"], row["previous"])


def judge_pool(rows: list[dict[str, Any]], judge: Judge, splits: tuple[str, ...]) -> None:
    """Judge every non-grammar candidate of `splits` (cached ones cost nothing)."""
    todo = [r for r in rows if r["split"] in splits and not r["grammar"]]
    start, before = time.perf_counter(), judge.calls
    for i, row in enumerate(todo, 1):
        judge(row["title"], row["text"], row["previous"])
        if i % 25 == 0:
            done = judge.calls - before
            rate = judge.seconds / max(1, judge.calls)
            print(f"  {judge.variant}: {i}/{len(todo)} ({done} new, {rate:.2f} s each)", file=sys.stderr, flush=True)
    new = judge.calls - before
    if new:
        print(f"{judge.variant}: {new} judged in {time.perf_counter() - start:.0f} s,"
              f" {judge.seconds / judge.calls:.2f} s per judged sentence, {judge.malformed} unusable")  # fmt: skip


def stored(
    sources: list[dict[str, Any]], labels: list[dict[str, Any]], categorizers: dict[str, Any], judge: Judge, mode: str
) -> dict[str, Any]:
    """Stored facts per source of the `new` extraction with the check's decision replaced by `mode`."""
    from deepresearch.models.extract import extract_facts

    previous: dict[str, str] = {}

    def keep_for(check: Any) -> Any:
        def keep(sentences: list[str], passage: str, title: str) -> list[str]:
            probabilities = check.probabilities(sentences, passage, title)
            out = []
            for s, p in zip(sentences, probabilities, strict=True):
                prev = previous.get(s) or previous_sentence(passage, s)
                if decide(p, _grammar(s), lambda s=s, prev=prev: judge(title, s, prev), mode):
                    out.append(s)
            return out

        return keep

    runs = {}
    for source in sources:
        check = categorizers[source["split"]].standalone
        check.keep = keep_for(check)
        result = extract_facts(
            source["text"], source["url"], topic=source["topic"], max_facts=5, title=source["title"],
            categorizer=categorizers[source["split"]],
        )  # fmt: skip
        runs[source["id"]] = {"facts": result.facts, "seconds": 0.0}
    return runs


def _grammar(sentence: str) -> bool:
    from deepresearch.models.standalone import grammar_stands_alone

    return grammar_stands_alone(sentence)


def stored_table(
    sources: list[dict[str, Any]], labels: list[dict[str, Any]], categorizers: dict[str, Any], judge: Judge,
    modes: list[str], groups: dict[str, tuple],
) -> dict[str, Any]:  # fmt: skip
    """eval_extraction's figures of the stored facts per mode and split group (good kept vs the check's)."""
    import eval_extraction as ev

    runs = {mode: stored(sources, labels, categorizers, judge, mode) for mode in modes}
    print(f"\n{judge.variant}: stored facts (eval_extraction `new`, the check's decision replaced)")
    print("| group | mode | stored | good | all three | good kept vs check | stands alone | category acc |")
    print("|---|---|---|---|---|---|---|---|")
    out: dict[str, Any] = {}
    for name, splits in groups.items():
        chosen = [s for s in sources if s["split"] in splits]
        base_good = None
        for mode in modes:
            f = ev.figures(runs[mode], chosen, labels)
            good = round((f["all_three"] or 0) * (f["stored"] * (f["coverage"] or 0)))
            base_good = good if base_good is None else base_good
            out[f"{name}/{mode}"] = {**f, "good": good}
            print(f"| {name} | {mode} | {f['stored']} | {good} | {f['all_three']:.3f} | {good / max(1, base_good):.3f}"
                  f" | {f['standalone']:.3f} | {f['category_accuracy']:.3f} |")  # fmt: skip
    return out


def main() -> None:
    """Parse arguments; build the pool; judge it under each variant; print the tables."""
    import eval_extraction as ev

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=["v1"], choices=sorted(VARIANTS))
    parser.add_argument("--splits", choices=("tune", "report", "all"), default="tune")
    parser.add_argument("--modes", nargs="+", default=["check", "judge", "and", "band0.3-0.7"])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/f18/verdicts.jsonl"))
    parser.add_argument("--model", help="GGUF path (default: the configured chat model)")
    parser.add_argument("--no-stored", action="store_true", help="only the pool's precision / recall")
    parser.add_argument("--limit", type=int, default=0, help="judge at most this many candidates (timing)")
    args = parser.parse_args()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    # never blind10 or later (blind10 was held out when the judge was measured, session 18)
    splits = {"tune": TUNE, "report": REPORT, "all": TUNE + REPORT}[args.splits]
    groups = {"tune": {"dev … blind5": TUNE}, "report": {"blind6 … blind9": REPORT}}.get(
        args.splits, {"dev … blind5": TUNE, "blind6 … blind9": REPORT, "dev … blind9": TUNE + REPORT}
    )
    sources, labels = load_jsonl(DATA / "extraction_sources.jsonl"), load_jsonl(DATA / "extraction_labels.jsonl")
    categorizers = ev.loso_categorizers(sources, labels)
    sources = [s for s in sources if s["split"] in splits]
    rows = pool(sources, labels, categorizers)
    for variant in args.variants:
        judge = Judge(variant, args.cache, args.model)
        print(f"pool: {len(rows)} candidates, {sum(not r['grammar'] for r in rows)} to judge", flush=True)
        if args.limit:
            rows_now = [r for r in rows if not r["grammar"]][: args.limit]
            judge_pool(rows_now, judge, splits)
            continue
        judge_pool(rows, judge, splits)
        pool_table(rows, judge, args.modes, groups)
        if not args.no_stored:
            stored_table(sources, labels, categorizers, judge, args.modes, groups)


if __name__ == "__main__":
    main()
