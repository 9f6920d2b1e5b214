"""Grounding: is a claim supported by its source text? One check shared by fact extraction and
the research report (answer and summary sentences must pass the same test as stored facts).

Lexical by design: a claim's names and numbers must occur in the source, and its content
words must be found in one passage of at most two adjacent sentences.
"""

from __future__ import annotations

import re

from deepresearch.text import content_words, has_cjk, normalize_space, numbers, split_sentences, stem, words

MAX_FACT_CHARS = 300
MIN_FACT_CHARS = 20
# Share of a fact's content words that must occur in the source, and in one passage of at
# most two adjacent sentences (so a fact cannot stitch words from all over the document).
MIN_SOURCE_COVERAGE = 0.85
MIN_WINDOW_COVERAGE = 0.7

URL = re.compile(r"https?://|www\.", re.IGNORECASE)
CAPITALIZED = re.compile(r"\b[A-Z][\w'’\-]*[A-Za-z0-9]\b")
_BLOCK_LINE = re.compile(r"\n[ \t]*((?:[#>*\-+•]+|\d+[.)])[ \t]+)")


def block_sentences(text: str) -> list[str]:
    """Sentences, with each Markdown list item or heading line on its own."""
    return split_sentences(_BLOCK_LINE.sub(r"\n\n\1", text))


class SourceIndex:
    """Word, number and per-sentence indexes of one source text."""

    def __init__(self, text: str):
        self.text = normalize_space(text)
        self.sentences = block_sentences(text) or [self.text]
        self.sentence_stems = [{stem(w) for w in words(s)} for s in self.sentences]
        self.stems = set().union(*self.sentence_stems) if self.sentence_stems else set()
        self.numbers = {n.rstrip("%") for n in numbers(self.text)}
        self.lower = self.text.lower()


_VERB_HINT = re.compile(
    r"\b(is|are|was|were|be|been|has|have|had|can|could|will|would|may|might|must|does|did|do|"
    r"became|become|won|made|led|took|began|held|grew|sold|rose|fell|left|ran|became|\w{2,}(?:ed|es|s))\b"
)


def looks_like_claim(fact: str) -> bool:
    """A sentence with a verb-like word in lower case, not a title or a name list."""
    tokens = fact.split()
    return len(tokens) >= 5 and bool(_VERB_HINT.search(" ".join(t for t in tokens if not t[:1].isupper())))


def grounding_problem(fact_text: str, source: str | SourceIndex, topic: str = "") -> str | None:
    """Why `fact_text` is not supported by the source (None when it is grounded)."""
    src = source if isinstance(source, SourceIndex) else SourceIndex(source)
    fact = normalize_space(fact_text)
    if len(fact) < MIN_FACT_CHARS:
        return "too short to be a claim"
    if len(fact) > MAX_FACT_CHARS + 100:
        return "too long to be one fact"
    if URL.search(fact):
        return "contains a URL"
    if fact.endswith("?"):
        return "a question, not a claim"
    stems = [stem(w) for w in content_words(fact)]
    if len(stems) < (4 if has_cjk(fact) else 3):
        return "too few content words"
    if not has_cjk(fact) and not looks_like_claim(fact):
        return "a phrase, not a claim"
    missing_numbers = {n.rstrip("%") for n in numbers(fact)} - src.numbers
    if missing_numbers:
        return f"numbers not in source: {sorted(missing_numbers)[:3]}"
    if not has_cjk(fact):
        names = {w.lower() for w in CAPITALIZED.findall(fact)}
        missing_names = sorted(n for n in names if n not in src.lower and stem(n) not in src.stems)
        if missing_names:
            return f"names not in source: {missing_names[:3]}"
    coverage = sum(s in src.stems for s in stems) / len(stems)
    if coverage < MIN_SOURCE_COVERAGE:
        return f"only {coverage:.0%} of its words are in the source"
    windows = src.sentence_stems + [a | b for a, b in zip(src.sentence_stems, src.sentence_stems[1:], strict=False)]
    best = max(sum(s in window for s in stems) / len(stems) for window in windows)
    if best < MIN_WINDOW_COVERAGE:
        return f"no source passage supports it (best {best:.0%})"
    if topic and set(stems) <= {stem(w) for w in content_words(topic)}:
        return "only repeats the topic"
    return None


def is_grounded(fact_text: str, source_text: str) -> bool:
    """True if the source supports the fact: its names and numbers occur there and its words
    are found in one source passage (sentence or two adjacent sentences)."""
    return grounding_problem(fact_text, source_text) is None
