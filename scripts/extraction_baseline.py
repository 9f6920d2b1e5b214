from __future__ import annotations

"""Frozen copy of deepresearch/models/extract.py as of commit 2477481 (before issue 25): the baseline
"today" extraction that scripts/eval_extraction.py compares the new one with. Do not edit."""
# ruff: noqa
# mypy: ignore-errors
"""Grounded fact extraction: model proposals checked against the source, extractive fallback.

`extract_facts(text, url, topic=, model=)` asks the model for atomic facts (JSON under a
schema), keeps only those the source supports (`is_grounded`), and fills up with the
deterministic extractive fallback: self-contained source sentences that carry names or
numbers, trimmed to one claim and categorized by `classify_category`. Without a model, or
when its output is unusable, the fallback alone answers — so extraction never returns
echoed prompts, repeated URLs or invented numbers, whatever the model does.
"""


import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from deepresearch.errors import ModelError
from deepresearch.facts import CATEGORIES, DEFAULT_CATEGORY, Fact, normalize_category, text_hash
from deepresearch.grounding import (
    CAPITALIZED,
    MAX_FACT_CHARS,
    MIN_FACT_CHARS,
    URL,
    SourceIndex,
    block_sentences,
    grounding_problem,
)
from deepresearch.prompts import EXTRACT_FACTS, extract_schema
from deepresearch.text import content_words, has_cjk, normalize_space, split_sentences, stem

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

FALLBACK_CONFIDENCE = 0.6
MODEL_CONFIDENCE_CAP = 0.9

_ANAPHOR_START = re.compile(
    r"^(he|she|it|its|they|them|their|his|her|this|these|those|that|such|both|which|who|here|"
    r"the latter|the former|the other|another|also|as a result|in turn|in it|in this|in these|at the time|"
    r"afterwards|later|then|there he|there she)\b",
    re.IGNORECASE,
)
_CONNECTOR_START = re.compile(
    r"^(however|moreover|furthermore|in addition|additionally|also|meanwhile|still|thus|therefore|"
    r"and|but|so|yet|in fact|notably|indeed|overall)\s*,?\s+",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"^\s*(?:[#>*\-+•]+|\d+[.)])\s+")
_REPEATED_NAME = re.compile(r"\b([A-Z][\w'’\-]*)(?: \1\b)+")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_PARENS = re.compile(r"\s*\([^()]*\)")
_EMPTY_PAREN_LEAD = re.compile(r"\(\s*[;,]\s*")  # Wikipedia "( ; born …)" after removed IPA
_EMPTY_PARENS = re.compile(r"\s*\(\s*\)")


@dataclass
class ExtractionResult:
    """Facts from one source, how each was found, and what was rejected."""

    facts: list[Fact]
    methods: list[str]  # 'model' | 'fallback', one per fact
    rejected: int  # model proposals that failed the grounding check
    method: str  # 'model' | 'fallback' | 'mixed' | 'none'
    proposed: int = 0  # facts the model proposed (before the grounding check)
    rejections: list[tuple[str, str]] = field(default_factory=list)  # (fact, reason)
    seconds: float = 0.0
    error: str | None = None  # why the model was not used, when it failed


# --- category rules -----------------------------------------------------------------------

# Cue patterns per category (English and Chinese); each matching pattern scores 1, a
# strong cue 2 more.
# fmt: off
_CATEGORY_RULES: dict[str, list[str]] = {
    "market_data": [
        r"market share", r"\bshares? of\b", r"\bprices?d?\b", r"\brevenues?\b", r"\bsales\b", r"\bsold\b",
        r"\bstock\b", r"\bvaluation\b", r"\bvalued at\b", r"\bmarket cap", r"\b(?:was|is|are) ranked\b",
        r"\branked (?:no\.|#|first|second|third|\d)", r"\brankings?\b",
        r"\bgrowth\b", r"\bgrew\b", r"\bprofit", r"\bearnings\b", r"\bshipments?\b", r"\bunits\b",
        r"\$\s?\d", r"€\s?\d", r"\d\s?%", r"\bpercent\b", r"\b(?:million|billion|trillion)\b",
        r"\bbox office\b", r"\bgross(?:ed)?\b",
        r"市场", r"份额", r"价格", r"营收", r"收入", r"销量", r"出货", r"增长", r"排名",
    ],
    "product_info": [
        r"\bversion\b", r"\bv\d", r"\breleased?\b", r"\blaunch(?:ed|es)?\b", r"\bfeatures?\b", r"\bspecs?\b",
        r"\bspecifications?\b", r"\bsupports?\b", r"\bmodels?\b", r"\bdevices?\b", r"\bproducts?\b",
        r"\bapp\b", r"\bsoftware\b", r"\bupdate\b", r"\bgames?\b", r"\balbums?\b", r"\bsingles?\b",
        r"\bfilms?\b", r"\bnovels?\b", r"\bseries\b", r"\bpublished\b", r"\bGB\b", r"\bGHz\b", r"\bcores?\b",
        r"发布", r"版本", r"功能", r"产品", r"型号", r"规格",
    ],
    "strategy": [
        r"\bplans?\b", r"\bplanned\b", r"\bstrateg", r"\binvest", r"\bpartner", r"\bacqui", r"\bmerger\b",
        r"\bmerged?\b", r"\bexpan", r"\btarget", r"\bwill\b", r"\bintends?\b", r"\bagreement\b", r"\bdeal\b",
        r"\bjoint venture\b", r"\bfund(?:ing|ed)\b", r"\balliance\b",
        r"计划", r"战略", r"投资", r"合作", r"收购",
    ],
    "technology": [
        r"\balgorithms?\b", r"\bprotocols?\b", r"\barchitectures?\b", r"\bstandards?\b", r"\bmethods?\b",
        r"\bprinciples?\b", r"\btechniques?\b", r"\btechnolog", r"\bsystems?\b", r"\bbased on\b", r"\buses\b",
        r"\bcomputes?\b", r"\bmechanism\b", r"\btheory\b", r"\bequations?\b", r"\bchips?\b", r"\bnetworks?\b",
        r"\bencryption\b", r"\bscientific\b", r"\bchemical\b", r"\bphysics\b",
        r"\b(?:file )?formats?\b", r"\bindex(?:es)?\b", r"\bqueries\b", r"\bvectors?\b", r"\bdatabases?\b",
        r"\bfunctions?\b", r"\bextensions?\b", r"\btokenizers?\b", r"\btables?\b", r"\bsumm?(?:s|ing)?\b",
        r"\bscores?\b", r"\bcalculat", r"\bembeddings?\b",
        r"技术", r"协议", r"架构", r"标准", r"算法", r"原理",
    ],
    "historical": [
        # "created"/"built"/"formed" alone describe how things work ("a table is created with …");
        # only a date makes them history.
        r"\bborn\b", r"\bdied\b", r"\bfounded\b", r"\bestablished\b",
        r"\b(?:formed|created|built) in (?:1[0-9]|20)\d\d\b", r"\bwar\b", r"\bbattle\b", r"\bcentury\b",
        r"\bhistor", r"\bdynasty\b", r"\belected\b",
        r"\bappointed\b", r"\bwon\b", r"\bawarded\b", r"\bopened\b", r"\bwas (?:a|an|the)\b",
        r"\bin (?:1[0-9]|20)\d\d\b", r"\bfrom (?:1[0-9]|20)\d\d\b",
        r"成立", r"创立", r"出生", r"去世", r"历史", r"年",
    ],
}
_STRONG_CUES: dict[str, str] = {
    "market_data": r"market share|市场份额|\$\s?\d|\d\s?%",
    "historical": r"\b(?:born|died|founded|established)\b|成立|出生|去世",
    "technology": r"\b(?:algorithm|protocol|architecture)s?\b",
}
# fmt: on
_COMPILED_RULES = {c: [re.compile(p, re.IGNORECASE) for p in pats] for c, pats in _CATEGORY_RULES.items()}
_COMPILED_STRONG = {c: re.compile(p, re.IGNORECASE) for c, p in _STRONG_CUES.items()}


def classify_category(text: str) -> str:
    """Rule-based category: the category whose cue words match most; no cue → strategy."""
    scores = {c: sum(1 for rule in rules if rule.search(text)) for c, rules in _COMPILED_RULES.items()}
    for category, rule in _COMPILED_STRONG.items():
        scores[category] += 2 if rule.search(text) else 0
    best = max(scores.values())
    if best == 0:
        return DEFAULT_CATEGORY
    # Ties go to the shorter-lived category: a price that is also "historical" should be re-checked.
    return next(c for c in CATEGORIES if scores[c] == best)


# --- extractive fallback -------------------------------------------------------------------


def _clean_sentence(sentence: str) -> str | None:
    """One self-contained claim from a sentence, or None if it cannot stand alone."""
    s = _LINK.sub(r"\1", sentence)
    s = _MARKUP.sub("", s).strip().strip("*_`")
    s = _EMPTY_PARENS.sub("", _EMPTY_PAREN_LEAD.sub("(", s))
    s = _CONNECTOR_START.sub("", s)
    if not s or _ANAPHOR_START.match(s) or URL.search(s) or s.endswith(("?", ":")):
        return None
    first = s.split(maxsplit=1)[0]
    if re.fullmatch(r"[a-z]+[,;:]?", first):  # "and the cat…" → "And…"; never "sqlite-vec" → "Sqlite-vec"
        s = s[0].upper() + s[1:]
    if len(s) > MAX_FACT_CHARS and ";" in s:
        s = s.split(";")[0].rstrip() + "."
    if len(s) > MAX_FACT_CHARS:
        s = _PARENS.sub("", s)
    if not (MIN_FACT_CHARS <= len(s) <= MAX_FACT_CHARS):
        return None
    if not has_cjk(s) and len(s.split()) < 6:
        return None
    if not s.endswith((".", "!", "。", "！", '"', "”")):
        s += "."
    return s


def _has_name_or_number(sentence: str) -> tuple[bool, bool]:
    body = sentence.split(" ", 1)[1] if " " in sentence else ""
    return bool(re.search(r"\d", sentence)), bool(CAPITALIZED.search(body)) or has_cjk(sentence)


def fallback_facts(text: str, topic: str = "", limit: int = 5) -> list[str]:
    """Extractive facts: self-contained sentences with names or numbers, most topical first."""
    topic_stems = {stem(w) for w in content_words(topic)}
    candidates: list[tuple[float, int, str]] = []
    seen: set[str] = set()
    for position, sentence in enumerate(block_sentences(text)):
        claim = _clean_sentence(sentence)
        if claim is None or text_hash(claim) in seen:
            continue
        has_number, has_name = _has_name_or_number(claim)
        if not (has_number or has_name):
            continue
        seen.add(text_hash(claim))
        stems = {stem(w) for w in content_words(claim)}
        overlap = len(stems & topic_stems) / len(topic_stems) if topic_stems else 0.0
        score = 2.0 * overlap + 0.5 * has_number + 0.3 * has_name + 0.5 / (1 + position)
        candidates.append((score, position, claim))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    return [claim for _, _, claim in candidates[:limit]]


# --- model extraction ----------------------------------------------------------------------


def _clip_source(text: str, max_chars: int) -> str:
    """The start of the source, cut at a sentence end, small enough for a small context window."""
    text = normalize_space(text)
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    end = max(cut.rfind(". "), cut.rfind("。"))
    return cut[: end + 1] if end > max_chars // 2 else cut


_ITEM = re.compile(r"\{[^{}]*\}")


def _model_proposals(model: ChatModel, text: str, topic: str, max_facts: int, max_chars: int) -> list[dict]:
    """Fact items the model proposes, each valid under the item schema.

    One constrained call, no retry: small models often fill the array until max_tokens
    and cut the JSON off, so the complete items of a truncated answer are salvaged one by
    one instead of paying for a second generation (the fallback covers the rest).
    """
    from deepresearch.models.llm import PromptTooLong, parse_json

    schema = extract_schema(max_facts)
    messages = EXTRACT_FACTS.messages(
        topic=topic or "(none given)", text=_clip_source(text, max_chars), max_facts=max_facts
    )
    try:
        completion = model.complete(messages, schema=schema, max_tokens=50 * max_facts + 20, temperature=0.0)
    except PromptTooLong as exc:
        log.info("extraction prompt too long, using the fallback: %s", exc)
        return []
    data = completion.data if completion.data is not None else parse_json(completion.text)
    if isinstance(data, dict) and isinstance(data.get("facts"), list):
        items = data["facts"]
    else:
        items = [parse_json(m) for m in _ITEM.findall(completion.text)]
    # Only the fact text must be there: a loose category or confidence is normalized later
    # (the llama-cpp grammar enforces them anyway; HTTP servers may not).
    return [item for item in items[:max_facts] if isinstance(item, dict) and isinstance(item.get("fact"), str)]


def _similar(a: set[str], b: set[str]) -> bool:
    return bool(a and b) and len(a & b) / min(len(a), len(b)) >= 0.8


def _confidence(value: object) -> float:
    try:
        conf = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return FALLBACK_CONFIDENCE
    if conf != conf:  # NaN: Python's json accepts it
        return FALLBACK_CONFIDENCE
    if conf > 1:
        conf = conf / 100 if conf <= 100 else 1.0  # "90" meant 90 %
    return min(max(conf, 0.05), MODEL_CONFIDENCE_CAP)


def extract_facts(
    text: str,
    source_url: str,
    *,
    topic: str = "",
    model: ChatModel | None = None,
    max_facts: int = 5,
    max_chars: int = 3000,
) -> ExtractionResult:
    """Up to `max_facts` grounded facts from `text`, each carrying the real `source_url`.

    Model proposals that pass `is_grounded` come first; the extractive fallback fills the
    rest. A model that fails (ModelError) or yields nothing usable leaves the fallback alone.
    """
    start = time.perf_counter()
    source = SourceIndex(text)
    result = ExtractionResult(facts=[], methods=[], rejected=0, method="none")
    kept: list[tuple[str, str, float, str]] = []  # (text, category, confidence, method)
    kept_stems: list[set[str]] = []

    def keep(claim: str, category: str, confidence: float, method: str) -> bool:
        stems = {stem(w) for w in content_words(claim)}
        if any(_similar(stems, other) for other in kept_stems):
            return False
        kept.append((claim, category, confidence, method))
        kept_stems.append(stems)
        return True

    if model is not None and source.text and max_facts > 0:
        try:
            proposals = _model_proposals(model, text, topic, max_facts, max_chars)
        except ModelError as exc:
            log.info("fact extraction fell back to extractive sentences: %s", exc)
            result.error = str(exc)
            proposals = []
        result.proposed = len(proposals)
        for item in proposals:
            claim = normalize_space(str(item.get("fact") or "")).strip(" \"'“”-*•")
            claim = _REPEATED_NAME.sub(r"\1", claim)  # "Acme Acme Corp" (heading + sentence)
            problem = grounding_problem(claim, source, topic)
            if problem is None and _ANAPHOR_START.match(claim):
                problem = "not self-contained (starts with a pronoun)"
            if problem is None and not keep(
                claim,
                _model_category(item.get("category"), claim),
                _confidence(item.get("confidence")),
                "model",
            ):
                problem = "duplicate of another fact"
            if problem is not None:
                result.rejected += 1
                result.rejections.append((claim[:200], problem))
                log.info("rejected fact from %s (%s): %.120r", source_url, problem, claim)
            if len(kept) >= max_facts:
                break
    if len(kept) < max_facts:
        for claim in fallback_facts(text, topic, limit=max_facts * 2):
            if len(kept) >= max_facts:
                break
            if grounding_problem(claim, source, topic) is None:
                keep(claim, classify_category(claim), FALLBACK_CONFIDENCE, "fallback")
    result.facts = [
        Fact(fact=claim, source_url=source_url, research_topic=topic, category=category, confidence=confidence)
        for claim, category, confidence, _ in kept
    ]
    result.methods = [method for *_, method in kept]
    result.method = _overall_method(result.methods)
    result.seconds = time.perf_counter() - start
    return result


def _overall_method(methods: list[str]) -> str:
    kinds = set(methods)
    return "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def _model_category(value: object, claim: str) -> str:
    """A strong cue (born, founded, market share, %) decides; else the model's known category; else rules."""
    strong = [c for c, rule in _COMPILED_STRONG.items() if rule.search(claim)]
    if len(strong) == 1:
        return strong[0]  # small models mislabel even "founded in 1990"
    if isinstance(value, str) and normalize_category(value) == value.strip().lower().replace(" ", "_"):
        return normalize_category(value)
    return classify_category(claim)


def _chunks(text: str, chunk_chars: int) -> list[str]:
    """Paragraph groups of at most ~chunk_chars (long paragraphs split at sentence ends)."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if len(paragraph) <= chunk_chars:
            pieces.append(paragraph)
        else:
            pieces.extend(split_sentences(paragraph))
    chunks: list[str] = []
    current = ""
    for piece in filter(None, pieces):
        if current and len(current) + len(piece) + 2 > chunk_chars:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def extract_document(
    text: str,
    source_url: str,
    *,
    topic: str = "",
    model: ChatModel | None = None,
    max_facts: int = 5,
    chunk_chars: int = 1500,
    progress: Callable[[int, int], None] | None = None,
) -> ExtractionResult:
    """Facts from a whole document: `extract_facts` over paragraph chunks, duplicates dropped."""
    total = ExtractionResult(facts=[], methods=[], rejected=0, method="none")
    seen: set[str] = set()
    chunks = _chunks(text, chunk_chars)
    for i, chunk in enumerate(chunks, 1):
        part = extract_facts(chunk, source_url, topic=topic, model=model, max_facts=max_facts)
        for fact, method in zip(part.facts, part.methods, strict=True):
            if text_hash(fact.fact) not in seen:
                seen.add(text_hash(fact.fact))
                total.facts.append(fact)
                total.methods.append(method)
        total.rejected += part.rejected
        total.proposed += part.proposed
        total.rejections += part.rejections
        total.seconds += part.seconds
        if part.error:  # the backend is down: do not wait for its retries on every chunk
            total.error, model = total.error or part.error, None
        if progress is not None:
            progress(i, len(chunks))
    total.method = _overall_method(total.methods)
    return total
