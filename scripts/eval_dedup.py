#!/usr/bin/env python3
"""Merging, updates and contradictions: STS-B (English dev split) and RGB counterfactual facts.

    python scripts/eval_dedup.py ../shared/eval/paraphrase/stsb/stsb-en-dev.csv \
        [--rgb ../shared/eval/conflict/rgb_fact_dev.jsonl ../shared/eval/conflict/rgb_fact_zh.jsonl]
        [--classify [--model-items 6] [--model-pairs 30]] [--json]

RGB (with --rgb): every `positive[i]` is stored in a fresh knowledge base through the real
write path (one batch, verified at T0), then every `positive_wrong[i]` (the same passage with
the answer swapped) is added one at a time as the newer fact (T1). A pair is linked when the
wrong fact superseded the positive one (an update), was flagged against it (a contradiction),
or reconfirmed it; any link between facts of different items is a wrong link. Reported: the
share of pairs linked — on the dev split (the first --split of each file's items, where the
rule's misses were read) and the held-out rest — and wrong links among all cross-item fact pairs.

With --classify the same run also measures rule + model: `kb.classify_with_model` on with the
configured chat model (the shipped Qwen2.5-Coder-1.5B-Instruct by default, loaded once, 2
threads), whose second opinion is asked on the pairs the rule cannot decide (kb/updates.py
`undecided`). A call takes ~1 min on this shared machine, so the model pass covers the first
--model-items held-out items of each file (the rule alone is printed on the same items) and a
seeded sample of --model-pairs held-out undecided STS-B pairs, from which the write-path
precision with the model is estimated. The model's fusion prompt is refused in that pass (the
checked mechanical merge writes the merged text): the run measures the verdicts and their time.

Embeds both sentences of every pair with the configured embedding model (all-MiniLM-L6-v2),
reports the Spearman correlation of cosine vs. the gold score (published anchor: 0.82 on
the test split) and precision / recall / F1 of "gold score >= 4 means duplicate" at cosine
thresholds 0.70 … 0.975 — for the cosine alone and for the merge step's full gate
(cosine + `kb.merge.relation`, which refuses pairs about different times and, between facts
verified at the same time, anything that replaces a value), and for the write path with
updates: pairs at cosine >= kb.related_similarity that align and differ in one value are
updates too (`relation(..., near=False)`). Baseline in the same run: word-set Jaccard similarity.

A wrong merge corrupts a fact, so precision comes first: the suggested threshold is the
lowest one at which the write-path gate makes no harmful merge (gold < --related, i.e. not
even roughly the same claim) and reaches --min-precision (default 0.9, compared at two
decimals: the top thresholds hold only ~60 pairs, so the third decimal is one pair).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from deepresearch.config import EmbeddingConfig, KBConfig, LLMConfig
from deepresearch.errors import ModelError
from deepresearch.facts import Fact, text_hash
from deepresearch.kb.merge import kept_apart, relation
from deepresearch.kb.updates import undecided
from deepresearch.models.base import ChatModel, Completion, Message
from deepresearch.models.embed import get_embedder
from deepresearch.models.judge import ModelJudge
from deepresearch.models.llm import get_chat_model
from deepresearch.prompts import JUDGE_SCHEMA
from deepresearch.text import words

THRESHOLDS = [round(0.70 + 0.025 * i, 3) for i in range(12)]  # 0.70 … 0.975


def load_pairs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Sentence pairs and gold scores from the headerless `s1,s2,score` CSV."""
    left, right, gold = [], [], []
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh):
            if len(row) == 3:
                left.append(row[0])
                right.append(row[1])
                gold.append(float(row[2]))
    return left, right, np.array(gold)


def prf(scores: np.ndarray, positive: np.ndarray, threshold: float, related: np.ndarray) -> dict[str, float]:
    """Precision, recall, F1 and merge count of `scores >= threshold` against `positive`;
    `harmful` is the share of merges of pairs that are not even roughly the same claim."""
    predicted = scores >= threshold
    tp = int((predicted & positive).sum())
    precision = tp / predicted.sum() if predicted.sum() else 1.0
    recall = tp / positive.sum() if positive.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "threshold": threshold,
        "precision": round(float(precision), 4),
        "recall": round(float(recall), 4),
        "f1": round(float(f1), 4),
        "merged": int(predicted.sum()),
        "harmful": round(float((predicted & ~related).sum() / predicted.sum()) if predicted.sum() else 0.0, 4),
    }


def jaccard(a: str, b: str) -> float:
    """Word-set overlap: the no-model baseline."""
    x, y = set(words(a)), set(words(b))
    return len(x & y) / len(x | y) if x | y else 0.0


class JudgeOnly(ChatModel):
    """The chat model as the eval uses it: answers the second-opinion prompt (timed and counted),
    refuses the fusion prompt (ModelError: the checked mechanical merge writes the text), so the
    run measures what the model's verdicts change and what they cost, not the fusion's."""

    def __init__(self, inner: ChatModel):
        self.inner, self.name = inner, inner.name
        self.calls, self.seconds, self.fusions_refused = 0, 0.0, 0
        self.verdicts: dict[str, int] = {}

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Time a judge call; refuse anything else."""
        if schema != JUDGE_SCHEMA:
            self.fusions_refused += 1
            raise ModelError("fusion is left to the mechanical merge in this evaluation")
        started = time.perf_counter()
        try:
            answer = self.inner.complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        finally:
            self.calls, self.seconds = self.calls + 1, self.seconds + time.perf_counter() - started
        verdict = str(answer.data.get("relation") if isinstance(answer.data, dict) else None)
        self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1
        return answer

    def summary(self) -> dict[str, Any]:
        """Calls, seconds, seconds per call."""
        per = self.seconds / self.calls if self.calls else 0.0
        return {
            "calls": self.calls,
            "seconds": round(self.seconds, 1),
            "seconds_per_pair": round(per, 1),
            "verdicts": self.verdicts,
        }


def load_items(path: Path) -> list[dict[str, Any]]:
    """The RGB items of a JSONL file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _store_positives(kb: Any, pairs: list[tuple[int, str, str]], t0: float) -> tuple[dict[str, set[int]], int]:
    """Every positive in one batch at T0: (fact id → the items whose text it holds, cross-item links)."""
    stored = kb.add_facts([Fact(p, f"https://rgb.example/{n}/{i}") for n, (i, p, _) in enumerate(pairs)], now=t0)
    owners: dict[str, set[int]] = {}
    for item, text, _ in pairs:
        digest = text_hash(" ".join(text.split()))
        row = kb.conn.execute("select id from facts where text_hash = ?", (digest,)).fetchone()
        owners.setdefault(row[0] if row else "", set()).add(item)
    cross = sum(1 for a, b, _ in stored.flagged if owners.get(a, set()) != owners.get(b, set()))
    for merge in stored.merged:  # positives merged with each other on the way in
        joined = [owners.get(o, set()) for o in merge.old_ids]
        cross += sum(1 for a in joined for b in joined if a != b) // 2
        owners.setdefault(merge.new_id or "", set()).update(*joined)
    return owners, cross


def _add_counterfactuals(
    kb: Any, pairs: list[tuple[int, str, str]], owners: dict[str, set[int]], t1: float
) -> dict[str, Any]:
    """Each counterfactual alone at T1: which pairs linked (superseded, flagged, same text), cross-item links."""
    counts: dict[str, int] = {"superseded": 0, "flagged": 0, "same_text": 0, "cross": 0, "flagged_by_second_opinion": 0}
    linked_items, unlinked = [], []
    for n, (item, _, wrong) in enumerate(pairs):
        result = kb.add_facts([Fact(wrong, f"https://rgb.example/wrong/{n}", verified_at=t1)], now=t1)
        counts["flagged_by_second_opinion"] += sum(r.startswith("second opinion") for _, _, r in result.flagged)
        touched: list[tuple[str, str]] = [("superseded", i) for m in result.merged for i in m.old_ids]
        touched += [("flagged", other) for _, other, _ in result.flagged]
        if not touched:
            touched = [("same_text", i) for i in result.reconfirmed]
        hit = False
        for how, other in touched:
            theirs = owners.get(other, set())
            counts["cross"] += len(theirs - {item})
            if item in theirs and not hit:
                hit = True
                counts[how] += 1
                linked_items.append(item)
        if not hit:
            unlinked.append((item, wrong[:100]))
        for new in [*result.added, *(m.new_id for m in result.merged if m.new_id)]:
            owners.setdefault(new, set()).update({item}, *(owners.get(o, set()) for _, o in touched))
    return {**counts, "linked_items": linked_items, "unlinked": unlinked}


def eval_rgb(
    items: list[dict[str, Any]], dev_ids: set[int], *, model: ChatModel | None = None, config: KBConfig | None = None
) -> dict[str, Any]:
    """Store RGB positives, then each counterfactual as the newer fact; count links (see the docstring).

    `model`: kb.classify_with_model on with this chat model (its second opinion on the pairs the
    rule cannot decide). `dev_ids`: the items of the dev split (the rest are held-out)."""
    import tempfile

    from deepresearch.db import connect
    from deepresearch.kb.store import KnowledgeBase

    pairs = [(it["id"], p, w) for it in items for p, w in zip(it["positive"], it["positive_wrong"], strict=False)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "rgb.db")
        kb_config = (config or KBConfig()).model_copy(update={"classify_with_model": model is not None})
        kb = KnowledgeBase(conn, get_embedder(EmbeddingConfig()), kb_config)
        kb.merge_model = model
        owners, cross = _store_positives(kb, pairs, 1_700_000_000.0)
        found = _add_counterfactuals(kb, pairs, owners, 1_700_086_400.0)
        conn.close()
    linked_items = found.pop("linked_items")
    splits = {}
    for name, ids in (("dev", dev_ids), ("held_out", {it["id"] for it in items} - dev_ids)):
        part: dict[str, float] = {"items": len(ids & {it["id"] for it in items})}
        part["pairs"] = sum(1 for p in pairs if p[0] in ids)
        part["linked"] = sum(1 for i in linked_items if i in ids)
        part["linked_share"] = round(part["linked"] / part["pairs"], 4) if part["pairs"] else 0.0
        splits[name] = part
    sizes = [sum(1 for p in pairs if p[0] == it["id"]) for it in items]
    cross_pairs = sum(a * b for i, a in enumerate(sizes) for b in sizes[i + 1 :]) * 4  # (pos|wrong) × (pos|wrong)
    cross += found.pop("cross")
    return {
        "items": len(items),
        "pairs": len(pairs),
        "linked": len(linked_items),
        "linked_share": round(len(linked_items) / len(pairs), 4) if pairs else 0.0,
        **found,
        "cross_links": cross,
        "cross_pairs": cross_pairs,
        "cross_share": round(cross / cross_pairs, 6) if cross_pairs else 0.0,
        "seconds": round(time.perf_counter() - started, 1),
        "splits": splits,
    }


def _print_rgb(title: str, rgb: dict[str, Any]) -> None:
    """One paragraph per RGB run: linked (all, dev, held-out), how, cross-item links."""
    dev, held = rgb["splits"]["dev"], rgb["splits"]["held_out"]
    print(
        f"\n{title}: {rgb['pairs']} pairs from {rgb['items']} items: linked {rgb['linked_share']:.3f}"
        f" (dev {dev['linked_share']:.3f} = {dev['linked']}/{dev['pairs']},"
        f" held-out {held['linked_share']:.3f} = {held['linked']}/{held['pairs']});"
        f" superseded {rgb['superseded']}, flagged {rgb['flagged']}, same text {rgb['same_text']};"
        f" cross-item links {rgb['cross_links']} of {rgb['cross_pairs']} cross-item pairs"
        f" ({rgb['cross_share']:.5f}); {rgb['seconds']} s"
    )
    if "model" in rgb:
        print(f"  flagged on the model's second opinion {rgb['flagged_by_second_opinion']}; model {rgb['model']}")


def stsb_undecided(left: list[str], right: list[str], cosine: np.ndarray, band: float) -> list[int]:
    """STS-B pairs whose write-path outcome a second opinion could change: cosine in
    [band, 0.95) (at 0.95 the cosine path decides), distinct by the rule for want of a verdict
    (not kept apart as claims about different times or subjects), and `undecided`."""
    return [
        i
        for i, (x, y, c) in enumerate(zip(left, right, cosine, strict=True))
        if band <= c < 0.95
        and relation(Fact(x, "s:", verified_at=1), Fact(y, "s:", verified_at=2), near=False)[0] == "distinct"
        and kept_apart(x, y) is None
        and undecided(x, y)
    ]


def stsb_with_model(
    left: list[str], right: list[str], gold: np.ndarray, undecided_ids: list[int], model: JudgeOnly, sample: int
) -> dict[str, Any]:
    """The model's second opinion on a seeded sample of the held-out half of the undecided STS-B
    pairs (the shuffled list's first half is where the prompt was tried): merges it adds, and how
    many of them are duplicates (gold >= 4) or harmful (gold < 3)."""
    order = list(undecided_ids)
    random.Random(0).shuffle(order)
    held_out = order[len(order) // 2 :]
    judge = ModelJudge(model)
    merged = good = harmful = 0
    for i in held_out[:sample]:
        kind = relation(
            Fact(left[i], "s:", verified_at=1), Fact(right[i], "s:", verified_at=2), near=False, judge=judge
        )
        if kind[0] in ("duplicate", "update"):
            merged, good, harmful = merged + 1, good + (gold[i] >= 4), harmful + (gold[i] < 3)
    return {
        "undecided": len(undecided_ids),
        "held_out": len(held_out),
        "asked": min(sample, len(held_out)),
        "merged": merged,
        "duplicates": int(good),
        "harmful": int(harmful),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="stsb-en-dev.csv (sentence1,sentence2,score)")
    parser.add_argument("--positive", type=float, default=4.0, help="gold score counted as duplicate")
    parser.add_argument("--related", type=float, default=3.0, help="gold score below which a merge is harmful")
    parser.add_argument("--min-precision", type=float, default=0.9)
    parser.add_argument(
        "--rgb",
        type=Path,
        nargs="+",
        default=[],
        help="rgb_fact_dev.jsonl (English), rgb_fact_zh.jsonl (Chinese): linking of counterfactual pairs on write",
    )
    parser.add_argument(
        "--split",
        type=float,
        default=0.5,
        help="share of each RGB file's items (from the start) reported as the dev split; the rest is held-out",
    )
    parser.add_argument(
        "--classify",
        action="store_true",
        help="also rule + model: kb.classify_with_model on with the configured chat model (loaded once, 2 threads)",
    )
    parser.add_argument(
        "--model-items", type=int, default=6, help="held-out RGB items per file in the rule + model pass"
    )
    parser.add_argument(
        "--model-pairs", type=int, default=30, help="held-out undecided STS-B pairs put to the model (a sample)"
    )
    parser.add_argument("--rgb-items", type=int, help="only the first N RGB items")
    parser.add_argument(
        "--related-similarity", type=float, help="kb.related_similarity for this run (default: the configured one)"
    )
    parser.add_argument("--json", action="store_true")
    return parser


def eval_stsb(args: argparse.Namespace, config: KBConfig) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """Cosine, the merge gate and the write path on STS-B; also (left, right, gold, cosine)."""
    left, right, gold = load_pairs(args.csv)
    positive, related = gold >= args.positive, gold >= args.related
    started = time.perf_counter()
    embedder = get_embedder(EmbeddingConfig())
    a, b = embedder.embed_batch(left), embedder.embed_batch(right)
    seconds = time.perf_counter() - started
    cosine = (a * b).sum(axis=1)
    overlap = np.array([jaccard(x, y) for x, y in zip(left, right, strict=True)])
    # The merge step's own gate on top of the cosine: same-time pairs merge only when nothing
    # is replaced (else: flagged contradiction); on write the newer fact may replace values.
    facts = [
        (Fact(x, "s:", verified_at=1), Fact(y, "s:", verified_at=1), Fact(y, "s:", verified_at=2))
        for x, y in zip(left, right, strict=True)
    ]
    same_time = np.array([relation(o, n)[0] == "duplicate" for o, n, _ in facts])
    on_write = np.array([relation(o, n)[0] in ("duplicate", "update") for o, _, n in facts])
    band = config.related_similarity
    # below the threshold, pairs at cosine >= band that align and change one value are updates
    updates = np.array(
        [band <= c and relation(o, n, near=False)[0] == "update" for (o, _, n), c in zip(facts, cosine, strict=True)]
    )
    gated = {
        "compress (same time: duplicates only)": [
            prf(np.where(same_time, cosine, -1), positive, t, related) for t in THRESHOLDS
        ],
        "write (newer may update)": [prf(np.where(on_write, cosine, -1), positive, t, related) for t in THRESHOLDS],
        f"write with value updates from cosine {band}": [
            prf(np.where(on_write & (cosine >= t) | updates & (cosine < t), 1.0, -1), positive, 0.5, related)
            | {"threshold": t}
            for t in THRESHOLDS
        ],
    }
    ok = [
        r
        for r in gated["write (newer may update)"]
        if r["harmful"] == 0 and round(r["precision"], 2) >= args.min_precision
    ]
    out = {
        "pairs": len(gold),
        "duplicates": int(positive.sum()),
        "model": embedder.model_id,
        "embed_seconds": round(seconds, 1),
        "spearman_cosine": round(float(spearmanr(cosine, gold).statistic), 4),
        "spearman_jaccard_baseline": round(float(spearmanr(overlap, gold).statistic), 4),
        "cosine": [prf(cosine, positive, t, related) for t in THRESHOLDS],
        "jaccard_baseline": [prf(overlap, positive, t, related) for t in (0.5, 0.6, 0.7, 0.8, 0.9)],
        "gated": gated,
        "chosen_threshold": ok[0]["threshold"] if ok else THRESHOLDS[-1],
    }
    return out, (left, right, gold, cosine)


def run_rgb(args: argparse.Namespace, config: KBConfig, inner: ChatModel | None) -> dict[str, Any]:
    """Per RGB file: the rule alone on every item; with a model, the rule alone and rule + model
    on the first `--model-items` held-out items (the model's time limits how many)."""
    out: dict[str, Any] = {}
    for path in args.rgb:
        items = load_items(path)[: args.rgb_items]
        cut = round(len(items) * args.split)  # items before it: the dev split the rule was tuned on
        dev_ids = {it["id"] for it in items[:cut]}
        out[f"RGB {path.name}, rule alone"] = eval_rgb(items, dev_ids, config=config)
        if inner is None:
            continue
        subset = items[cut : cut + args.model_items]
        where = f"held-out items {cut}-{cut + len(subset) - 1}"
        out[f"RGB {path.name}, rule alone, {where}"] = eval_rgb(subset, set(), config=config)
        model = JudgeOnly(inner)
        found = eval_rgb(subset, set(), model=model, config=config)
        out[f"RGB {path.name}, rule + model, {where}"] = found | {"model": model.summary()}
    return out


def _print_stsb(out: dict[str, Any], args: argparse.Namespace, band: float) -> None:
    print(
        f"{out['pairs']} pairs, {out['duplicates']} with score >= {args.positive} ({out['model']},"
        f" embedded in {out['embed_seconds']} s)"
    )
    print(
        f"Spearman cosine vs gold: {out['spearman_cosine']}  (anchor 0.82 on test);"
        f" Jaccard baseline: {out['spearman_jaccard_baseline']}"
    )
    for title, table in (
        ("cosine", out["cosine"]),
        *out["gated"].items(),
        ("jaccard baseline", out["jaccard_baseline"]),
    ):
        print(f"\n{title}\n{'':<17} precision  recall     F1  merged  harmful(<{args.related:g})")
        for r in table:
            print(
                f"  >= {r['threshold']:<12} {r['precision']:>9.3f} {r['recall']:>7.3f} {r['f1']:>6.3f}"
                f" {r['merged']:>7} {r['harmful']:>8.3f}"
            )


def _print_precision(out: dict[str, Any], band: float) -> None:
    """STS-B write-path precision at cosine 0.95: the rule alone, and rule + model estimated from its sample."""
    rule = next(r for r in out["gated"][f"write with value updates from cosine {band}"] if r["threshold"] == 0.95)
    good = round(rule["precision"] * rule["merged"])
    print(
        f"\nSTS-B write-path precision (cosine 0.95, value updates from {band}), rule alone:"
        f" {rule['precision']:.3f} ({rule['merged']} merges, harmful {rule['harmful']:.3f})"
    )
    model = out.get("stsb_model")
    if model and model["asked"]:
        scale = model["undecided"] / model["asked"]  # the sample stands for every undecided pair
        merged, dup = rule["merged"] + model["merged"] * scale, good + model["duplicates"] * scale
        print(
            f"STS-B rule + model: of {model['asked']} sampled held-out undecided pairs (of {model['undecided']})"
            f" the model merged {model['merged']} ({model['duplicates']} duplicates, {model['harmful']} harmful);"
            f" estimated write-path precision {dup / merged:.3f} ({merged:.0f} merges); model {model['time']}"
        )


def main() -> int:
    """Run the evaluation and print the tables (or JSON)."""
    args = _parser().parse_args()
    config = KBConfig() if args.related_similarity is None else KBConfig(related_similarity=args.related_similarity)
    out, (left, right, gold, cosine) = eval_stsb(args, config)
    inner = get_chat_model(LLMConfig(n_threads=2)) if args.classify else None  # loaded once for the whole run
    out.update(run_rgb(args, config, inner))
    if inner is not None:
        model = JudgeOnly(inner)
        undecided_ids = stsb_undecided(left, right, cosine, config.related_similarity)
        out["stsb_model"] = stsb_with_model(left, right, gold, undecided_ids, model, args.model_pairs)
        out["stsb_model"]["time"] = model.summary()
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    _print_stsb(out, args, config.related_similarity)
    for key, value in out.items():
        if key.startswith("RGB"):
            _print_rgb(key, value)
    _print_precision(out, config.related_similarity)
    print(
        f"\nsuggested kb.duplicate_similarity: {out['chosen_threshold']} (lowest threshold where the write-path"
        f" gate makes no merge of pairs scored < {args.related:g} and precision >= {args.min_precision})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
