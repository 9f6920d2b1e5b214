"""The evidence pool: every passage a run retrieved, ranked against the question.

A passage's rank fuses how well the searches ranked it (each query that found it adds a
reciprocal-rank share; the question's own search weighs most) with how similar its best
sentence is to the question (or to the hop query that found it). Sentences are embedded
once, when their passage first arrives, so re-ranking after each loop is cheap.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING

from deepresearch.research.state import Sentence
from deepresearch.text import content_words, split_sentences

if TYPE_CHECKING:
    from deepresearch.models.embed import Embedder
    from deepresearch.research.state import ResearchState, Source

RRF_K = 3.0
QUESTION_QUERY_WEIGHT = 1.0
HOP_QUERY_WEIGHT = 0.8
HOP_SIMILARITY_WEIGHT = 0.9  # a sentence matching its hop query counts a little less than one matching the question
EXTRA_PASSAGES = 4  # passages cited beyond those one search for the question found
_MARKUP_LINE = re.compile(r"^\s*(#{1,6}\s|[-*_=]{3,}\s*$|\|)", re.M)


def prose_sentences(text: str) -> list[str]:
    """Sentences fit to quote: headings, rules and table rows dropped; not too short or long."""
    kept = "\n".join(line for line in text.splitlines() if not _MARKUP_LINE.match(line))
    return [s for s in split_sentences(kept) if 20 <= len(s) <= 400 and len(content_words(s)) >= 3]


def rank_by_similarity(embedder: Embedder, query: str, items: list[str]) -> list[tuple[float, int]]:
    """(cosine, index) pairs, best first."""
    if not items:
        return []
    vectors = embedder.embed_batch([query, *items])
    scores = vectors[1:] @ vectors[0]
    return sorted(((float(s), i) for i, s in enumerate(scores)), reverse=True)


def index_sources(embedder: Embedder, topic: str, sources: list[Source]) -> list[Source]:
    """Copies of the sources with their sentences indexed: (text, similarity to the question, to
    its query). A source already indexed is returned as it is."""
    todo = [s for s in sources if not s.sentences]
    if not todo:
        return list(sources)
    texts: list[str] = []
    owners: list[tuple[str, str]] = []
    for source in todo:
        for sentence in prose_sentences(source.text) or [source.text[:400]]:
            owners.append((source.sid, sentence))
            texts.append(sentence)
    queries = list(dict.fromkeys([topic, *(s.query for s in todo)]))
    vectors = embedder.embed_batch(queries + texts)
    qvec = {q: vectors[i] for i, q in enumerate(queries)}
    sims = vectors[len(queries) :] @ qvec[topic]
    query_of = {s.sid: s.query for s in todo}
    indexed: dict[str, list[Sentence]] = {s.sid: [] for s in todo}
    for i, (sid, sentence) in enumerate(owners):
        query = query_of[sid]
        to_query = float(vectors[len(queries) + i] @ qvec[query]) if query != topic else float(sims[i])
        indexed[sid].append(Sentence(sentence, round(float(sims[i]), 4), round(to_query, 4)))
    return [dataclasses.replace(s, sentences=indexed[s.sid]) if s.sid in indexed else s for s in sources]


def sentence_relevance(sentence: Sentence, is_hop: bool) -> float:
    """How well one indexed sentence answers: similarity to the question, or to its hop query."""
    return max(sentence.to_question, HOP_SIMILARITY_WEIGHT * sentence.to_query if is_hop else 0.0)


def key_weights(state: ResearchState) -> dict[str, float]:
    """Stem → weight of the question's key words: rarer among the run's sentences = more telling
    (every passage on SQLite says "SQLite"; few say "readers")."""
    from deepresearch.research.queries import stems, topic_words

    key = stems(" ".join(topic_words(state.topic)))
    sentences = [stems(x.text) for s in state.sources for x in s.sentences]
    return {w: math.log(1 + len(sentences) / (1 + sum(w in x for x in sentences))) for w in key}


def question_share(text: str, weights: dict[str, float]) -> float:
    """The weighted share of the question's key words (`key_weights`) that `text` states."""
    from deepresearch.research.queries import stems

    total = sum(weights.values())
    stated = stems(text)
    return sum(w for k, w in weights.items() if k in stated) / total if total else 0.0


def sentence_score(state: ResearchState, source: Source, sentence: Sentence, weights: dict[str, float]) -> float:
    """How well one indexed sentence answers the question: meaning (similarity to the question or
    its hop query) plus wording (the weighted share of the question's key words it states)."""
    return sentence_relevance(sentence, source.query != state.topic) + question_share(sentence.text, weights)


def _scored_sentences(state: ResearchState, passages: list[str]) -> list[tuple[float, str, str]]:
    """(score, sentence, sid) of every sentence of the passages, best first."""
    by_sid = state.source_by_sid()
    weights = key_weights(state)
    return sorted(
        (
            (sentence_score(state, by_sid[sid], x, weights), x.text, sid)
            for sid in passages
            for x in by_sid[sid].sentences
        ),
        key=lambda item: -item[0],
    )


def top_sentence_score(state: ResearchState, passages: list[str]) -> float:
    """The score of the best sentence across the passages (0 when they have none)."""
    scored = _scored_sentences(state, passages)
    return scored[0][0] if scored else 0.0


def best_sentences(state: ResearchState, passages: list[str], n: int, floor: float = 0.0) -> list[tuple[str, str]]:
    """(sentence, sid) of the `n` best sentences across the passages that score at least `floor`,
    at most two from one passage."""
    out: list[tuple[str, str]] = []
    for score, sentence, sid in _scored_sentences(state, passages):
        if score < floor or len(out) == n:
            break
        if sum(1 for _, s in out if s == sid) < 2 and sentence not in {t for t, _ in out}:
            out.append((sentence, sid))
    return out


def ranked_pool(state: ResearchState) -> list[tuple[str, float]]:
    """(sid, score) of every retrieved passage, best first."""
    retrieval: dict[str, float] = {}
    for sid, query, rank in state.retrievals:
        weight = QUESTION_QUERY_WEIGHT if query == state.topic else HOP_QUERY_WEIGHT
        retrieval[sid] = retrieval.get(sid, 0.0) + weight / (RRF_K + rank)
    similarity = {
        s.sid: max((sentence_relevance(x, s.query != state.topic) for x in s.sentences), default=0.0)
        for s in state.sources
    }
    by_similarity = sorted(similarity, key=lambda sid: -similarity[sid])
    score = {sid: retrieval.get(sid, 0.0) + 1.0 / (RRF_K + i + 1) for i, sid in enumerate(by_similarity)}
    return sorted(score.items(), key=lambda item: -item[1])


def cited_passages(state: ResearchState, extra: int = EXTRA_PASSAGES) -> list[str]:
    """The passages the answer and report rely on: all that one search for the question found,
    then the best-ranked others, in pool order."""
    from_question = {sid for sid, query, _ in state.retrievals if query == state.topic}
    ranked = [sid for sid, _ in ranked_pool(state)]
    others = [sid for sid in ranked if sid not in from_question][:extra]
    keep = from_question | set(others)
    return [sid for sid in ranked if sid in keep]


def chain_text(state: ResearchState, sid: str) -> str:
    """A passage's text with the passages whose names led to it (the hops before it)."""
    by_sid = state.source_by_sid()
    parts, current, guard = [], by_sid.get(sid), 0
    while current is not None and guard < 6:
        parts.append(current.title + " " + current.text)
        parent = state.hops.get(current.query, {}).get("parent")
        current, guard = by_sid.get(parent) if parent else None, guard + 1
    return " ".join(parts)


def name_of(title: str) -> str:
    """The name part of a title: "Laie, Hawaii" → "Laie", "Eddie Irvine (driver)" → "Eddie Irvine"."""
    return re.split(r"[,(]", title, maxsplit=1)[0].strip()


def _title_head(title: str) -> str:
    """The name part of a title, lower-cased."""
    return name_of(title).lower()


def support_text(state: ResearchState, sid: str, passages: list[str]) -> str:
    """What backs a passage: its hop chain plus the cited passages linked to it by name (either
    one names the other's title), i.e. the documents a multi-hop answer rests on together."""
    by_sid = state.source_by_sid()
    text = chain_text(state, sid)
    lowered = text.lower()
    head = _title_head(by_sid[sid].title) if by_sid[sid].title else ""
    linked = []
    for other in passages:
        source = by_sid[other]
        if other == sid or not source.title:
            continue
        other_head = _title_head(source.title)
        if (len(other_head) > 2 and other_head in lowered) or (len(head) > 2 and head in source.text.lower()):
            linked.append(source.title + " " + source.text)
    return " ".join([text, *linked])
