"""Evaluate grounded fact extraction on HotpotQA paragraphs, per candidate model, in one run.

    python3 scripts/eval_extraction.py --hotpotqa ../shared/eval/multihop/hotpotqa_train.json \
        --passages 16 --models smollm2-135m-instruct gemma3-270m

For each model (shipped name or GGUF path) and for the extractive fallback alone (the
baseline), over the supporting paragraphs of the first questions (topic = the question):
- proposed/passage: facts the model proposed; grounded: share of those the source supports
  (is_grounded; repeats of a kept fact count as grounded) — the model's own precision;
- model facts/passage: distinct grounded model facts kept;
- facts/passage returned, and the model vs fallback share of them;
- returned grounded: share of returned facts passing is_grounded (must be 1.0);
- gold recall: share of HotpotQA supporting sentences covered by a returned fact;
- seconds per passage (median).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepresearch.config import LLMConfig  # noqa: E402
from deepresearch.grounding import is_grounded  # noqa: E402
from deepresearch.models.extract import extract_facts  # noqa: E402
from deepresearch.text import content_words  # noqa: E402
from deepresearch.text import stem as _stem  # noqa: E402


def load_passages(path: Path, limit: int) -> list[dict[str, Any]]:
    """Supporting paragraphs of the first questions: text, url, topic, gold sentences."""
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        gold: dict[str, set[int]] = {}
        for title, idx in item["supporting_facts"]:
            gold.setdefault(title, set()).add(idx)
        for title, sentences in item["context"]:
            if title not in gold:
                continue
            out.append(
                {
                    "title": title,
                    "text": "".join(sentences),
                    "url": "https://en.wikipedia.org/wiki/" + title.replace(" ", "_"),
                    "topic": item["question"],
                    "gold": [sentences[i] for i in sorted(gold[title]) if i < len(sentences)],
                }
            )
            if len(out) >= limit:
                return out
    return out


def covered(sentence: str, facts: list[str]) -> bool:
    """A gold sentence is covered when one fact holds ≥ 60% of its content words."""
    stems = {_stem(w) for w in content_words(sentence)}
    if not stems:
        return False
    return any(len(stems & {_stem(w) for w in content_words(f)}) / len(stems) >= 0.6 for f in facts)


def grounding_check_quality(passages: list[dict[str, Any]]) -> dict[str, float]:
    """How often is_grounded accepts a paragraph's own sentences and rejects corrupted ones.

    Corruptions: a number changed (+7), a name swapped for a name from another paragraph,
    and a whole sentence taken from another paragraph.
    """
    import re

    from deepresearch.text import split_sentences

    own = [(s, p["text"]) for p in passages for s in split_sentences(p["text"]) if len(s) >= 40]
    names = [n for p in passages for n in re.findall(r"\b[A-Z][a-z]{3,}\b", p["text"])]
    accepted = sum(is_grounded(s, text) for s, text in own)
    corrupted: list[tuple[str, str]] = []
    for i, (sentence, text) in enumerate(own):
        number = re.search(r"\b\d{2,4}\b", sentence)
        if number:
            changed = str(int(number.group()) + 7)
            corrupted.append((sentence[: number.start()] + changed + sentence[number.end() :], text))
        name = re.search(r"(?<=\s)[A-Z][a-z]{3,}\b", sentence)
        other = next((n for n in names[i * 7 % len(names) :] + names if n.lower() not in text.lower()), None)
        if name and other:
            corrupted.append((sentence[: name.start()] + other + sentence[name.end() :], text))
        foreign = own[(i + len(own) // 2) % len(own)]
        if foreign[1] != text:
            corrupted.append((foreign[0], text))
    rejected = sum(not is_grounded(s, text) for s, text in corrupted)
    return {
        "own_sentences": len(own),
        "own_accepted": accepted / len(own),
        "corrupted": len(corrupted),
        "corrupted_rejected": rejected / len(corrupted),
    }


def evaluate(name: str, model: Any, passages: list[dict[str, Any]], max_facts: int) -> dict[str, Any]:
    """Run extraction over all passages and aggregate the figures."""
    proposed = grounded_proposals = returned = from_model = returned_grounded = 0
    gold_total = gold_hit = 0
    seconds = []
    for i, p in enumerate(passages, 1):
        start = time.perf_counter()
        result = extract_facts(p["text"], p["url"], topic=p["topic"], model=model, max_facts=max_facts)
        seconds.append(time.perf_counter() - start)
        texts = [f.fact for f in result.facts]
        proposed += result.proposed
        grounded_proposals += result.proposed - sum(
            1 for _, why in result.rejections if why != "duplicate of another fact"
        )
        returned += len(texts)
        from_model += result.methods.count("model")
        returned_grounded += sum(
            is_grounded(t, p["text"]) and f.source_url == p["url"] for t, f in zip(texts, result.facts, strict=True)
        )
        gold_total += len(p["gold"])
        gold_hit += sum(covered(s, texts) for s in p["gold"])
        print(
            f"  [{name}] {i}/{len(passages)} {p['title'][:40]!r}: {len(texts)} facts "
            f"({result.methods.count('model')} model), {result.proposed} proposed, {seconds[-1]:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    n = len(passages)
    return {
        "model": name,
        "passages": n,
        "proposed_per_passage": proposed / n,
        "proposal_grounded_fraction": grounded_proposals / proposed if proposed else None,
        "facts_per_passage": returned / n,
        "model_share": from_model / returned if returned else 0.0,
        "fallback_share": (returned - from_model) / returned if returned else 0.0,
        "model_facts_per_passage": from_model / n,
        "returned_grounded_fraction": returned_grounded / returned if returned else None,
        "gold_sentence_recall": gold_hit / gold_total if gold_total else None,
        "seconds_per_passage_median": statistics.median(seconds),
    }


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def run(args: argparse.Namespace) -> None:
    """Evaluate the baseline and every model on the HotpotQA paragraphs, print a table."""
    from deepresearch.models.llm import get_chat_model

    passages = load_passages(args.hotpotqa, args.passages)
    check = grounding_check_quality(passages)
    print(
        f"grounding check: accepts {check['own_accepted']:.2f} of {check['own_sentences']} source sentences, "
        f"rejects {check['corrupted_rejected']:.2f} of {check['corrupted']} corrupted ones "
        "(number changed, name swapped, sentence from another paragraph)"
    )
    rows = [evaluate("fallback only (baseline)", None, passages, args.max_facts)]
    for name in args.models:
        model = get_chat_model(LLMConfig(model_path=name))
        rows.append(evaluate(name, model, passages, args.max_facts))
    columns = [
        ("model", "model"),
        ("proposed/p", "proposed_per_passage"),
        ("grounded", "proposal_grounded_fraction"),
        ("model facts/p", "model_facts_per_passage"),
        ("facts/p", "facts_per_passage"),
        ("model share", "model_share"),
        ("fallback share", "fallback_share"),
        ("returned grounded", "returned_grounded_fraction"),
        ("gold recall", "gold_sentence_recall"),
        ("s/passage", "seconds_per_passage_median"),
    ]
    print(f"{len(passages)} HotpotQA supporting paragraphs, max_facts={args.max_facts}")
    print("| " + " | ".join(c for c, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(_fmt(row[k]) for _, k in columns) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
