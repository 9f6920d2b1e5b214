"""Prompt templates of the research loop (`Prompt`s with named `$slots`) and the JSON schemas they ask for.

Sources appear in prompts under short ids ([S1], [K1]) instead of long URLs: fewer
tokens, and a small model cannot garble a URL it never sees. The ids are mapped back to
the real URLs in stored facts and in the report. The prompts of fact extraction and fact
merging sit below the models and the KB, in `deepresearch/prompts.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from deepresearch.prompts import Prompt

if TYPE_CHECKING:
    from deepresearch.research.state import Known

PLAN = Prompt(
    "plan",
    "You plan search queries for a research question. Answer with JSON only.",
    """Research question: $topic

What the knowledge base already knows:
$known
$mode_note

Write at most $n short search queries that:
- do not repeat what the fresh known facts already cover,
- re-check stale facts and fast-changing ones (market_data, product_info),
- cover aspects of the question the known facts miss,
- cross-check facts that contradict each other.
Answer as JSON: {"rationale": "one sentence", "queries": ["query", ...]}""",
)

MODE_NOTE_OFF = "Do not search these again."
MODE_NOTE_AGED = "Older facts may be outdated — prefer re-checking them."
NO_KNOWN = "(nothing yet)"

PLAN_SCHEMA = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string"},
        "queries": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["rationale", "queries"],
}

REFLECT = Prompt(
    "reflect",
    "You review research progress. Answer with JSON only.",
    """Research question: $topic

Queries already searched: $done

Findings so far:
$findings

Is this enough to answer the question? If not, name the knowledge gap and up to $n new
search queries that differ from the ones already searched.
Answer as JSON: {"sufficient": true|false, "knowledge_gap": "…", "follow_up_queries": ["…"]}""",
)

REFLECT_SCHEMA = {
    "type": "object",
    "properties": {
        "sufficient": {"type": "boolean"},
        "knowledge_gap": {"type": "string"},
        "follow_up_queries": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sufficient", "knowledge_gap", "follow_up_queries"],
}

# The reader: system and instructions first, so the prompt prefix is the same across runs (llama.cpp
# reuses the cached prefix instead of evaluating it again); then the question, the evidence, and the
# question again. Read with the question in mind, the 1.5B reader answers better: on HotpotQA dev6,
# re-read from the same saved states, exact match 0.31 → 0.43 with the gate off (docs/BENCHMARKS.md,
# session 23). Every call of a run shares the prefix up to the evidence.
READER = Prompt(
    "reader",
    "You answer research questions from the given evidence only. Answer with JSON only.",
    """Read the evidence passages, then answer the question at the end.
- "answer": the shortest exact words copied from the evidence that answer the question (a name,
  date, number or short phrase, not a sentence); "yes" or "no" for a yes/no question; one of the
  two named options for an either-or question; "" when the evidence does not state the answer.
- "sources": the ids of the passages the answer rests on (for a question that needs two facts,
  both passages).

Question: $question

Evidence:
$evidence

Question: $question
Answer as JSON: {"answer": "...", "sources": ["S1"]}""",
)


def reader_messages(question: str, evidence: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Messages asking the model for a short answer and its passage ids; evidence = (id, title, text)."""
    lines = "\n".join(f"[{pid}] {title + ': ' if title else ''}{text}" for pid, title, text in evidence)
    return READER.messages(evidence=lines, question=question)


def reader_schema(ids: list[str], max_chars: int = 80) -> dict[str, Any]:
    """{"answer": short string, "sources": [evidence ids]}: ids an enum, so every one resolves."""
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "maxLength": max_chars},
            "sources": {"type": "array", "items": {"type": "string", "enum": ids}, "maxItems": 3},
        },
        "required": ["answer", "sources"],
    }


# The hop read (bridge questions): the same prefix (system, instructions, evidence), another
# question at the end — the cached prefix is reused, only the tail is evaluated.
HOP_QUESTION = """

Question: {question}
This question may need one more fact the evidence lacks: a fact about a person, place, work or
organization that the evidence names. Give that entity exactly as the evidence writes it, and the
missing fact as a short question about it.
Answer as JSON: {{"entity": "...", "question": "..."}}"""


def hop_messages(question: str, evidence: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Messages asking which entity named in the evidence needs one more search, and for what."""
    messages = reader_messages(question, evidence)
    body = messages[-1]["content"]
    messages[-1]["content"] = body.rsplit("\n\nQuestion: ", 1)[0] + HOP_QUESTION.format(question=question)
    return messages


def hop_schema(max_chars: int = 60) -> dict[str, Any]:
    """{"entity": a name the evidence states, "question": the missing fact about it}."""
    return {
        "type": "object",
        "properties": {
            "entity": {"type": "string", "maxLength": max_chars},
            "question": {"type": "string", "maxLength": 2 * max_chars},
        },
        "required": ["entity", "question"],
    }


def short_source(url: str) -> str:
    """A few tokens that name a source: the file name or the host, never the full URL."""
    parsed = urlparse(url)
    if parsed.scheme in ("file", "zim"):
        tail = parsed.path.rstrip("/").rsplit("/", 1)[-1]
        return tail or url
    return parsed.netloc or url[:40]


def render_known(known: list[Known], mode: str, age_tag) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Known facts as planner lines ([K1] fact (category, confidence, age, source)) and the mode note."""
    if not known:
        return NO_KNOWN, ""
    lines = []
    for i, k in enumerate(known, 1):
        parts = [k.category, f"confidence {k.confidence:.2f}"]
        if mode != "off":  # mode `off` shows no age tags: facts are timeless there
            parts.append(f"verified {age_tag(k.age_days)}")
        if k.sources:
            parts.append(f"source {short_source(k.sources[0])}")
        lines.append(f"- [K{i}] {k.fact} ({', '.join(parts)})")
    return "\n".join(lines), MODE_NOTE_OFF if mode == "off" else MODE_NOTE_AGED


def plan_messages(topic: str, known_text: str, mode_note: str, n: int) -> list[dict[str, str]]:
    """Messages for the planning step."""
    return PLAN.messages(topic=topic, known=known_text, mode_note=mode_note, n=n)


def reflect_messages(topic: str, done: list[str], findings: str, n: int) -> list[dict[str, str]]:
    """Messages for the reflection step."""
    return REFLECT.messages(topic=topic, done="; ".join(done) or "(none)", findings=findings or "(none)", n=n)
