"""Grounded fact extraction: model proposals checked against the source, extractive fallback.

`extract_facts(text, url, topic=, model=)` asks the model for atomic facts (JSON under a
schema), keeps only those the source supports (`is_grounded`), and fills up with the
deterministic extractive fallback: whole, standalone claims of the source that carry names
or numbers (models/claims.py: nothing cut at a chunk edge, no unresolved reference, no
opinion, pointer, question or code), then — when the categorizer is the embedding classifier and
the source has a title — the learned stands-alone check on the same embeddings
(models/standalone.py). Categories come from `models/categorize.py` (a linear classifier on the
embeddings, cue words without an embedding model). Without a model, or
when its output is unusable, the fallback alone answers — so extraction never returns
echoed prompts, repeated URLs or invented numbers, whatever the model does.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deepresearch.errors import ModelError
from deepresearch.facts import Fact, normalize_category, text_hash
from deepresearch.grounding import (
    CAPITALIZED,
    MAX_FACT_CHARS,
    MIN_FACT_CHARS,
    URL,
    SourceIndex,
    grounding_problem,
)
from deepresearch.models.categorize import COMPILED_STRONG, Categorizer, default_categorizer
from deepresearch.models.claims import (
    PRONOUN_START,
    claim_problem,
    ends_like_sentence,
    passage_claims,
    standalone_problem,
)
from deepresearch.prompts import EXTRACT_FACTS, extract_schema
from deepresearch.text import content_words, has_cjk, normalize_space, split_sentences, stem

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

FALLBACK_CONFIDENCE = 0.6
MODEL_CONFIDENCE_CAP = 0.9
MODEL_SOURCE_CHARS = 3000  # the model reads at most this much of a passage (cut at a sentence end)

_REPEATED_NAME = re.compile(r"\b([A-Z][\w'’\-]*)(?: \1\b)+")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_PARENS = re.compile(r"\s*\([^()]*\)")


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


# --- extractive fallback -------------------------------------------------------------------


def _fit(claim: str) -> str | None:
    """The claim within the length limits (parentheticals dropped when too long), or None."""
    if len(claim) > MAX_FACT_CHARS:
        claim = normalize_space(_PARENS.sub("", claim))
    if not (MIN_FACT_CHARS <= len(claim) <= MAX_FACT_CHARS):
        return None
    return claim


# A code identifier names something as a capitalized word does (API documentation names things so): a dotted name
# (`module.exports`), a call (`stream.read(`), snake_case, camelCase, a quoted key (`"exports"`).
_IDENTIFIER = re.compile(r"\w\.\w|\w\(|\b\w+_\w+\b|[\"'][\w.\-/]+[\"']|\b[A-Z]?[a-z]+[A-Z]\w*")


def _has_name_or_number(sentence: str) -> tuple[bool, bool]:
    body = sentence.split(" ", 1)[1] if " " in sentence else ""
    named = bool(CAPITALIZED.search(body)) or has_cjk(sentence) or bool(_IDENTIFIER.search(sentence))
    return bool(re.search(r"\d", sentence)), named


def fallback_facts(text: str, topic: str = "", limit: int = 5, *, title: str = "") -> list[str]:
    """Extractive facts: whole, standalone claims of the passage (models/claims.py) that carry
    names or numbers, most topical first."""
    topic_stems = {stem(w) for w in content_words(topic)}
    candidates: list[tuple[float, int, str]] = []
    seen: set[str] = set()
    for position, sentence in enumerate(passage_claims(_LINK.sub(r"\1", text), title)):
        claim = _fit(sentence)
        if claim is None or URL.search(claim) or text_hash(claim) in seen:
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


def model_claim_problem(claim: str, source: SourceIndex, topic: str) -> str | None:
    """Why a model-written fact cannot be stored: not grounded, not a claim, not standalone, or
    ending where a cut sentence would ("… with the addition that.")."""
    problem = grounding_problem(claim, source, topic)
    if problem is None and not ends_like_sentence(claim if claim.endswith((".", "!", "。")) else claim + "."):
        problem = "ends like a cut sentence"
    if problem is None and PRONOUN_START.match(claim):
        problem = "not self-contained (starts with a pronoun)"
    return problem or claim_problem(claim) or standalone_problem(claim)


def _model_facts(
    model: ChatModel, text: str, source: SourceIndex, result: ExtractionResult, keep: Callable[..., bool], **how: Any
) -> None:
    """Ask the model for facts and keep (through `keep`) those that pass `model_claim_problem`."""
    try:
        proposals = _model_proposals(model, text, how["topic"], how["max_facts"], how["max_chars"])
    except ModelError as exc:
        log.info("fact extraction fell back to extractive sentences: %s", exc)
        result.error = str(exc)
        proposals = []
    result.proposed = len(proposals)
    for item in proposals:
        claim = normalize_space(str(item.get("fact") or "")).strip(" \"'“”-*•")
        claim = _REPEATED_NAME.sub(r"\1", claim)  # "Acme Acme Corp" (heading + sentence)
        problem = model_claim_problem(claim, source, how["topic"])
        if problem is None and not keep(
            claim, _model_category(item.get("category"), claim), _confidence(item.get("confidence")), "model"
        ):
            problem = "duplicate of another fact"
        if problem is not None:
            result.rejected += 1
            result.rejections.append((claim[:200], problem))
            log.info("rejected fact from %s (%s): %.120r", how["source_url"], problem, claim)
        if how["full"]():
            break


def extract_facts(
    text: str,
    source_url: str,
    *,
    topic: str = "",
    model: ChatModel | None = None,
    max_facts: int = 5,
    title: str = "",
    categorizer: Categorizer | None = None,
) -> ExtractionResult:
    """Up to `max_facts` grounded facts from `text`, each carrying the real `source_url`.

    Model proposals that pass `model_claim_problem` come first; the extractive fallback (whole,
    standalone claims of the passage; `title` names its subject when known) fills the rest. A
    model that fails (ModelError) or yields nothing usable leaves the fallback alone. Categories
    not given by the model come from `categorizer` (default: `default_categorizer()`).
    """
    start = time.perf_counter()
    source = SourceIndex(text)
    result = ExtractionResult(facts=[], methods=[], rejected=0, method="none")
    kept: list[list[Any]] = []  # [text, category or None, confidence, method]
    kept_stems: list[set[str]] = []

    def keep(claim: str, category: str | None, confidence: float, method: str) -> bool:
        stems = {stem(w) for w in content_words(claim)}
        if len(kept) >= max_facts or any(_similar(stems, other) for other in kept_stems):
            return False
        kept.append([claim, category, confidence, method])
        kept_stems.append(stems)
        return True

    if model is not None and source.text and max_facts > 0:
        how = {"topic": topic, "max_facts": max_facts, "max_chars": MODEL_SOURCE_CHARS, "source_url": source_url}
        how["full"] = lambda: len(kept) >= max_facts
        _model_facts(model, text, source, result, keep, **how)
    for claim in _checked_fallback(text, topic, max_facts * 2, title, categorizer) if len(kept) < max_facts else []:
        if grounding_problem(claim, source, topic) is None:
            keep(claim, None, FALLBACK_CONFIDENCE, "fallback")
        if len(kept) >= max_facts:
            break  # a lazy check (the chat model's, models/standalone.py) is asked no more than needed
    _categorize(kept, categorizer, title)
    result.facts = [
        Fact(fact=claim, source_url=source_url, research_topic=topic, category=category, confidence=confidence)
        for claim, category, confidence, _ in kept
    ]
    result.methods = [method for *_, method in kept]
    result.method = _overall_method(result.methods)
    result.seconds = time.perf_counter() - start
    return result


def _checked_fallback(text: str, topic: str, limit: int, title: str, categorizer: Categorizer | None) -> Iterable[str]:
    """The fallback's claims that the learned stands-alone check (models/standalone.py, carried by an
    embedding categorizer) also keeps; the rules alone without one."""
    claims = fallback_facts(text, topic, limit=limit, title=title)
    check = getattr(categorizer or default_categorizer(), "standalone", None) if claims else None
    return check.keep(claims, text, title) if check is not None else claims


def _categorize(kept: list[list[Any]], categorizer: Categorizer | None, title: str) -> None:
    """Fill the categories the model did not give, in one batch (the source's title helps the classifier)."""
    todo = [k for k in kept if k[1] is None]
    if todo:
        chosen = (categorizer or default_categorizer()).categorize([k[0] for k in todo], title)
        for k, category in zip(todo, chosen, strict=True):
            k[1] = category


def _overall_method(methods: list[str]) -> str:
    kinds = set(methods)
    return "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def _model_category(value: object, claim: str) -> str | None:
    """A strong cue (born, founded, market share, %) decides; else the model's known category; else None."""
    strong = [c for c, rule in COMPILED_STRONG.items() if rule.search(claim)]
    if len(strong) == 1:
        return strong[0]  # small models mislabel even "founded in 1990"
    if isinstance(value, str) and normalize_category(value) == value.strip().lower().replace(" ", "_"):
        return normalize_category(value)
    return None  # the categorizer decides


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
