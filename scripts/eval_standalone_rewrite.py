"""Measure the chat model rewriting a sentence the rules reject for a leading reference (issue 25, session 18).

    PYTHONPATH=$PWD nice -n 10 python3 scripts/eval_standalone_rewrite.py /tmp/f18/rewrites.json

Every sentence of dev … blind5's sources that the rules reject only for a leading reference ("It …", "He …": a
pronoun whose subject is not certain; "The band …": a definite subject named before) is given to the default chat
model with the title and the sentence before it; a rewrite is accepted only when every content word of it appears
in the sentence, the sentence before or the title, and the rules then pass it. Prints each row (JSON) and writes
them to the given file for labeling by hand; measured, not shipped (docs/BENCHMARKS.md, session 18).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_standalone_judge import previous_sentence  # noqa: E402
from extraction_labels import DATA, load_jsonl  # noqa: E402

from deepresearch.config import LLMConfig  # noqa: E402
from deepresearch.models.claims import (  # noqa: E402
    PRONOUN_START,
    claim_problem,
    inner_pronoun_problem,
    passage_candidates,
    standalone_problem,
)
from deepresearch.models.llm import complete_json, get_chat_model  # noqa: E402
from deepresearch.prompts import Prompt  # noqa: E402
from deepresearch.text import content_words, stem  # noqa: E402

TUNE = ("dev", "dev2", "heldout", "fresh", "blind2", "blind3", "blind4", "blind5")
LEADING = ("a pronoun whose subject is not certain", "a definite subject the source named before")
REWRITE = Prompt(
    "rewrite_standalone",
    "You make a sentence copied out of a document understandable without the document. Replace its leading"
    " pronoun ('it', 'he', 'they', …) or its leading 'the …' reference with the full name it refers to, taken"
    " from the title or the sentence before. Change nothing else and add nothing else. Answer with JSON only:"
    ' {"sentence": "..."}',
    "Title: $title\nSentence before it: $previous\nSentence: $sentence",
)
SCHEMA = {"type": "object", "properties": {"sentence": {"type": "string"}}, "required": ["sentence"]}


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def main(out_path: str) -> None:
    model = get_chat_model(LLMConfig(temperature=0.0))
    sources = [s for s in load_jsonl(DATA / "extraction_sources.jsonl") if s["split"] in TUNE]
    rows, seconds, calls = [], 0.0, 0
    for s in sources:
        for cand in passage_candidates(s["text"], s["title"]):
            if cand.problem not in LEADING:
                continue
            prev = previous_sentence(s["text"], cand.sentence)
            started = time.perf_counter()
            data = complete_json(
                model,
                REWRITE.messages(title=s["title"], previous=prev, sentence=cand.text),
                SCHEMA,
                max_tokens=40 + len(cand.text) // 3,
            )
            seconds += time.perf_counter() - started
            calls += 1
            text = (data or {}).get("sentence", "").strip() if isinstance(data, dict) else ""
            extra = stems(text) - stems(cand.text) - stems(prev) - stems(s["title"])
            problem = None
            if not text or text == cand.text:
                problem = "no rewrite"
            elif extra:
                problem = "new words: " + " ".join(sorted(extra))
            else:
                problem = claim_problem(text) or standalone_problem(text) or inner_pronoun_problem(text, None)
                if problem is None and PRONOUN_START.match(text):
                    problem = "still opens on a pronoun"
            rows.append(
                {
                    "source": s["id"],
                    "split": s["split"],
                    "title": s["title"],
                    "previous": prev,
                    "sentence": cand.text,
                    "rewrite": text,
                    "problem": problem,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print(
        f"{calls} rewrites, {seconds / max(1, calls):.2f} s each, {sum(r['problem'] is None for r in rows)} accepted,"
        f" {len(sources)} sources",
        file=sys.stderr,
    )
    Path(out_path).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
