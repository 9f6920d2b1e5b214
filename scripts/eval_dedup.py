#!/usr/bin/env python3
"""Merging, updates and contradictions: STS-B (English dev split) and RGB counterfactual facts.

    python scripts/eval_dedup.py ../shared/eval/paraphrase/stsb/stsb-en-dev.csv \
        [--rgb ../shared/eval/conflict/rgb_fact_dev.jsonl [--classify] [--rgb-items N]] [--json]

RGB (with --rgb): every `positive[i]` is stored in a fresh knowledge base through the real
write path (one batch, verified at T0), then every `positive_wrong[i]` (the same passage with
the answer swapped) is added one at a time as the newer fact (T1). A pair is linked when the
wrong fact superseded the positive one (an update), was flagged against it (a contradiction),
or reconfirmed it; any link between facts of different items is a wrong link. Reported: the
share of pairs linked, and wrong links among all cross-item fact pairs. With --classify the RGB
pass runs a second time with `kb.classify_with_model` on and the configured chat model (the
shipped GGUF by default), counting its calls and the merges and flags it decided.

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
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from deepresearch.config import EmbeddingConfig, KBConfig, LLMConfig
from deepresearch.facts import Fact, text_hash
from deepresearch.kb.merge import relation
from deepresearch.models.base import ChatModel, Completion, Message
from deepresearch.models.embed import get_embedder
from deepresearch.models.llm import get_chat_model
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


class CountingModel(ChatModel):
    """The configured chat model, counting its calls by kind (classification or fusion)."""

    def __init__(self, inner: ChatModel):
        self.inner, self.name, self.calls = inner, inner.name, {"classify": 0, "fuse": 0}

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Count, then ask the real model."""
        self.calls["classify" if schema and "relation" in schema.get("properties", {}) else "fuse"] += 1
        return self.inner.complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)


def eval_rgb(
    path: Path, *, classify: bool = False, limit: int | None = None, split: float = 0.5, config: KBConfig | None = None
) -> dict[str, Any]:
    """Store RGB positives, then each counterfactual as the newer fact; count links (see the docstring).

    `classify`: kb.classify_with_model on, with the configured chat model (one call per candidate pair).
    `split`: the share of items (from the start) reported as the dev split, the rest as held-out."""
    import tempfile

    from deepresearch.db import connect
    from deepresearch.kb.store import KnowledgeBase

    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = items[:limit] if limit else items
    pairs = [(it["id"], p, w) for it in items for p, w in zip(it["positive"], it["positive_wrong"], strict=False)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "rgb.db")
        kb_config = (config or KBConfig()).model_copy(update={"classify_with_model": classify})
        kb = KnowledgeBase(conn, get_embedder(EmbeddingConfig()), kb_config)
        model = CountingModel(get_chat_model(LLMConfig())) if classify else None
        kb.merge_model = model
        owners: dict[str, set[int]] = {}  # fact id → the items whose text it holds
        t0, t1 = 1_700_000_000.0, 1_700_086_400.0
        stored = kb.add_facts([Fact(p, f"https://rgb.example/{n}/{i}") for n, (i, p, _) in enumerate(pairs)], now=t0)
        for item, text, _ in pairs:
            digest = text_hash(" ".join(text.split()))
            row = conn.execute("select id from facts where text_hash = ?", (digest,)).fetchone()
            owners.setdefault(row[0] if row else "", set()).add(item)
        cross = sum(1 for a, b, _ in stored.flagged if owners.get(a, set()) != owners.get(b, set()))
        for merge in stored.merged:  # positives merged with each other on the way in
            joined = [owners.get(o, set()) for o in merge.old_ids]
            cross += sum(1 for a in joined for b in joined if a != b) // 2
            owners.setdefault(merge.new_id or "", set()).update(*joined)
        counts: dict[str, int] = {"superseded": 0, "flagged": 0, "same_text": 0}
        by_model = {"merges": sum(m.method == "model" for m in stored.merged), "flags": 0}
        linked, unlinked, linked_items = 0, [], []
        for n, (item, _, wrong) in enumerate(pairs):
            result = kb.add_facts([Fact(wrong, f"https://rgb.example/wrong/{n}", verified_at=t1)], now=t1)
            by_model["merges"] += sum(m.method == "model" for m in result.merged)
            by_model["flags"] += sum(r.startswith("model:") for _, _, r in result.flagged)
            touched: list[tuple[str, str]] = [("superseded", i) for m in result.merged for i in m.old_ids]
            touched += [("flagged", other) for _, other, _ in result.flagged]
            if not touched:
                touched = [("same_text", i) for i in result.reconfirmed]
            hit = False
            for how, other in touched:
                theirs = owners.get(other, set())
                cross += len(theirs - {item})
                if item in theirs and not hit:
                    hit, linked = True, linked + 1
                    counts[how] += 1
                    linked_items.append(item)
            if not hit:
                unlinked.append((item, wrong[:100]))
            for new in [*result.added, *(m.new_id for m in result.merged if m.new_id)]:
                owners.setdefault(new, set()).update({item}, *(owners.get(o, set()) for _, o in touched))
        conn.close()
    sizes = [sum(1 for p in pairs if p[0] == it["id"]) for it in items]
    cut = round(len(items) * split)  # items before it: the dev split the rule was tuned on
    dev_ids = {it["id"] for it in items[:cut]}
    splits = {
        name: {
            "items": len(ids),
            "pairs": sum(1 for p in pairs if p[0] in ids),
            "linked": sum(1 for i in linked_items if i in ids),
        }
        for name, ids in (("dev", dev_ids), ("held_out", {it["id"] for it in items} - dev_ids))
    }
    for part in splits.values():
        part["linked_share"] = round(part["linked"] / part["pairs"], 4) if part["pairs"] else 0.0
    cross_pairs = sum(a * b for i, a in enumerate(sizes) for b in sizes[i + 1 :]) * 4  # (pos|wrong) × (pos|wrong)
    return {
        "items": len(items),
        "pairs": len(pairs),
        "linked": linked,
        "linked_share": round(linked / len(pairs), 4),
        **counts,
        "cross_links": cross,
        "cross_pairs": cross_pairs,
        "cross_share": round(cross / cross_pairs, 6),
        "seconds": round(time.perf_counter() - started, 1),
        "splits": splits,
        "unlinked": unlinked,  # (item, the counterfactual's start) of the pairs not linked
        **({"model_calls": model.calls, "model_decided": by_model} if model is not None else {}),
    }


def _print_rgb(out: dict[str, Any]) -> None:
    """One paragraph per RGB run: linked (all, dev, held-out), how, cross-item links."""
    for key, value in out.items():
        if not key.startswith("rgb"):
            continue
        rgb: dict[str, Any] = value
        title = key.replace("rgb_classify ", "RGB, model classification on: ").replace("rgb ", "RGB ")
        dev, held = rgb["splits"]["dev"], rgb["splits"]["held_out"]
        print(
            f"\n{title}: {rgb['pairs']} pairs from {rgb['items']} items: linked {rgb['linked_share']:.3f}"
            f" (dev {dev['linked_share']:.3f} = {dev['linked']}/{dev['pairs']} of items 0-{dev['items'] - 1},"
            f" held-out {held['linked_share']:.3f} = {held['linked']}/{held['pairs']});"
            f" superseded {rgb['superseded']}, flagged {rgb['flagged']}, same text {rgb['same_text']};"
            f" cross-item links {rgb['cross_links']} of {rgb['cross_pairs']} cross-item pairs"
            f" ({rgb['cross_share']:.5f}); {rgb['seconds']} s"
        )
        if "model_calls" in rgb:
            print(f"  model calls {rgb['model_calls']}; merges/flags the model decided {rgb['model_decided']}")


def main() -> int:
    """Run the evaluation and print the table (or JSON)."""
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
        help="RGB pass with kb.classify_with_model on and the configured chat model (one call per candidate pair)",
    )
    parser.add_argument("--rgb-items", type=int, help="only the first N RGB items")
    parser.add_argument(
        "--related-similarity", type=float, help="kb.related_similarity for this run (default: the configured one)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    left, right, gold = load_pairs(args.csv)
    positive, related = gold >= args.positive, gold >= args.related
    started = time.perf_counter()
    embedder = get_embedder(EmbeddingConfig())
    a, b = embedder.embed_batch(left), embedder.embed_batch(right)
    seconds = time.perf_counter() - started
    cosine = (a * b).sum(axis=1)
    overlap = np.array([jaccard(x, y) for x, y in zip(left, right, strict=True)])
    rows = [prf(cosine, positive, t, related) for t in THRESHOLDS]
    # The merge step's own gate on top of the cosine: same-time pairs merge only when nothing
    # is replaced (else: flagged contradiction); on write the newer fact may replace values.
    kinds = [
        (
            relation(Fact(x, "s:", verified_at=1), Fact(y, "s:", verified_at=1))[0],
            relation(Fact(x, "s:", verified_at=1), Fact(y, "s:", verified_at=2))[0],
        )
        for x, y in zip(left, right, strict=True)
    ]
    same_time = np.array([k[0] == "duplicate" for k in kinds])
    on_write = np.array([k[1] in ("duplicate", "update") for k in kinds])
    config = KBConfig() if args.related_similarity is None else KBConfig(related_similarity=args.related_similarity)
    band = config.related_similarity
    # below the threshold, pairs at cosine >= band that align and change one value are updates
    updates = np.array(
        [
            band <= c
            and relation(Fact(x, "s:", verified_at=1), Fact(y, "s:", verified_at=2), near=False)[0] == "update"
            for x, y, c in zip(left, right, cosine, strict=True)
        ]
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
    base = [prf(overlap, positive, t, related) for t in (0.5, 0.6, 0.7, 0.8, 0.9)]
    write = gated["write (newer may update)"]
    ok = [r for r in write if r["harmful"] == 0 and round(r["precision"], 2) >= args.min_precision]
    chosen = ok[0]["threshold"] if ok else THRESHOLDS[-1]
    out = {
        "pairs": len(gold),
        "duplicates": int(positive.sum()),
        "model": embedder.model_id,
        "embed_seconds": round(seconds, 1),
        "spearman_cosine": round(float(spearmanr(cosine, gold).statistic), 4),
        "spearman_jaccard_baseline": round(float(spearmanr(overlap, gold).statistic), 4),
        "cosine": rows,
        "jaccard_baseline": base,
        "gated": gated,
        "chosen_threshold": chosen,
    }
    for path in args.rgb:
        out[f"rgb {path.name}"] = eval_rgb(path, limit=args.rgb_items, split=args.split, config=config)
        if args.classify:
            out[f"rgb_classify {path.name}"] = eval_rgb(
                path, classify=True, limit=args.rgb_items, split=args.split, config=config
            )
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    print(
        f"{out['pairs']} pairs, {out['duplicates']} with score >= {args.positive} ({out['model']},"
        f" embedded in {out['embed_seconds']} s)"
    )
    print(
        f"Spearman cosine vs gold: {out['spearman_cosine']}  (anchor 0.82 on test);"
        f" Jaccard baseline: {out['spearman_jaccard_baseline']}"
    )
    for title, table in (("cosine", rows), *gated.items(), ("jaccard baseline", base)):
        print(f"\n{title}\n{'':<17} precision  recall     F1  merged  harmful(<{args.related:g})")
        for r in table:
            print(
                f"  >= {r['threshold']:<12} {r['precision']:>9.3f} {r['recall']:>7.3f} {r['f1']:>6.3f}"
                f" {r['merged']:>7} {r['harmful']:>8.3f}"
            )
    _print_rgb(out)
    precision = next(r for r in gated[f"write with value updates from cosine {band}"] if r["threshold"] == 0.95)
    print(
        f"\nSTS-B write-path precision (cosine 0.95, value updates from {band}): {precision['precision']:.3f}"
        f" ({precision['merged']} merges, harmful {precision['harmful']:.3f})"
    )
    print(
        f"\nsuggested kb.duplicate_similarity: {chosen} (lowest threshold where the write-path gate"
        f" makes no merge of pairs scored < {args.related:g} and precision >= {args.min_precision})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
