#!/usr/bin/env python3
"""Convert MuSiQue items (the original JSON list or JSONL) to the eval format of scripts/eval_research.py.

    python scripts/convert_musique.py musique_dev.json -o dev_eval.json \
        [--after ../shared/eval/multihop/musique_train.json]

MuSiQue item: {id, paragraphs: [{idx, title, paragraph_text, is_supporting}, …], question,
question_decomposition, answer, answer_aliases, answerable}. Eval item (the format of
musique_train.json): {_id, question, answer, answer_aliases, type, supporting_facts, context}, where
`type` is the id's prefix (2hop, 3hop1, 4hop2 …), `supporting_facts` is [[title, 0], …] for each
supporting paragraph in paragraph order (two paragraphs may share a title: both are listed) and
`context` is [[title, [paragraph_text]], …] for every paragraph, in order.

Unanswerable items (MuSiQue-Full's `answerable: false`) have no gold answer and are skipped (counted
on stderr). With --after, the items of an eval-format file come first and the converted items are
appended, so a corpus built from all paragraphs keeps the earlier items' distractors and the new
questions start at index len(after); an id or question text that is already there is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load_items(path: Path) -> list[dict]:
    """A JSON list of items, or JSONL (one item per line)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def convert_item(item: dict) -> dict:
    """One MuSiQue item in the eval format."""
    paragraphs = sorted(item["paragraphs"], key=lambda p: p["idx"])
    return {
        "_id": item["id"],
        "question": item["question"],
        "answer": item["answer"],
        "answer_aliases": list(item.get("answer_aliases", [])),
        "type": item["id"].split("__", 1)[0],
        "supporting_facts": [[p["title"], 0] for p in paragraphs if p["is_supporting"]],
        "context": [[p["title"], [p["paragraph_text"]]] for p in paragraphs],
    }


def convert(items: list[dict]) -> tuple[list[dict], int]:
    """The answerable items converted, and how many unanswerable ones were skipped."""
    kept = [convert_item(item) for item in items if item.get("answerable", True)]
    return kept, len(items) - len(kept)


def append_new(before: list[dict], new: list[dict]) -> list[dict]:
    """`before` followed by `new`; ValueError if a new id or question text is already in `before`."""
    ids = {item["_id"] for item in before}
    questions = {item["question"].strip().lower() for item in before}
    clashes = [i["_id"] for i in new if i["_id"] in ids or i["question"].strip().lower() in questions]
    if clashes:
        raise ValueError(f"{len(clashes)} item(s) already in the --after file: {', '.join(clashes[:5])}")
    return [*before, *new]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("file", type=Path, help="MuSiQue items: a JSON list or JSONL.")
    parser.add_argument("-o", "--output", type=Path, required=True, help="Eval-format JSON to write.")
    parser.add_argument("--after", type=Path, help="Eval-format JSON whose items come first.")
    args = parser.parse_args(argv)
    try:
        items, skipped = convert(load_items(args.file))
        before = json.loads(args.after.read_text(encoding="utf-8")) if args.after else []
        out = append_new(before, items)
    except KeyError as exc:
        print(
            f"Error: an item has no {exc} field; give MuSiQue items (id, paragraphs, question, answer).",
            file=sys.stderr,
        )
        return 1
    except (OSError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    args.output.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    print(
        f"{len(items)} converted ({skipped} unanswerable skipped), {len(out)} written to {args.output}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
