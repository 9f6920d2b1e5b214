"""The merge pass of the write path: which incoming facts merge into (or contradict) which.

Planning happens before the write lock is taken (model calls may run here); the write
path (kb/write.py) then applies the plan inside its transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.facts import Fact
from deepresearch.indexing import match_any
from deepresearch.kb import lifecycle
from deepresearch.kb import repository as repo
from deepresearch.kb.align import PUNCT, UNSPACED_RUN, known_word, proper, segment, unspaced
from deepresearch.kb.classify import decide
from deepresearch.kb.engines import Context
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.merge import Decision, merged_fact
from deepresearch.kb.repository import select_facts
from deepresearch.text import content_words

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel

CANDIDATES = 8  # nearest stored facts compared with each new one
LEXICAL_CANDIDATES = 4  # and the stored facts sharing the most words with it


@dataclass
class Action:
    """The plan for one incoming fact: insert it, merge it into `target`, or insert and flag."""

    kind: str  # insert | merge | flag
    target: str | int | None = None  # stored fact id, or index of an earlier fact of the batch
    fact: Fact | None = None  # the merged fact (merge)
    decision: Decision | None = None


def neighbours(
    ctx: Context, matrix: np.ndarray, threshold: float, k: int = 3, *, bulk: bool = False
) -> list[list[tuple[int, float]]]:
    """For each row of `matrix`, stored active facts (rid, cosine) with cosine >= threshold, from
    the vector engine `engine_for` picks (as recall does)."""
    count = repo.max_rid(ctx.conn)
    if not count:
        return [[] for _ in range(len(matrix))]
    engine = ctx.engines.engine_for(count, ctx.one_shot, bulk=bulk)
    active = Filter(lifecycle.visibility("off", ctx.config), 0.0, 0.0, ctx.config)
    found = engine.search_batch(np.asarray(matrix, dtype=np.float32), active, k)
    return [[(rid, score) for rid, score in hits if score >= threshold] for hits in found]


def lexical_neighbours(conn: Any, text: str, k: int = LEXICAL_CANDIDATES) -> list[int]:
    """Active facts holding the words of `text`'s frame (FTS5 trigrams, best BM25 first): the pairs
    the rule can align even where the embedding model puts them apart — a swapped name moves
    MiniLM's cosine to ~0.5, and it does not read Chinese at all (unrelated Chinese facts score ≈ 1).
    All anchor terms must match (AND), so the query stays selective in a large knowledge base."""
    anchors = anchor_terms(text)
    if not anchors:
        return []
    expr = match_any(anchors, joiner=" AND ")
    return repo.fts_active(conn, expr, k) if expr else []


def anchor_terms(text: str, n: int = 3) -> list[str]:
    """Terms a fact with one changed value still shares with `text`: its `n` longest lower-case
    words without digits (a changed value is a number, a date or a capitalized name); in
    Chinese/Japanese, `n` three-character pieces of common words spread over the text."""
    if unspaced(text):
        grams = [g for run in _plain_runs(text) for g in _trigrams(run)]
        step = max(1, len(grams) // n)
        return grams[::step][:n]
    capitalized = {w.strip(PUNCT).lower() for w in text.split() if w.strip(PUNCT)[:1].isupper()}
    found = [
        w
        for w in dict.fromkeys(content_words(text))
        if len(w) >= 4 and not any(c.isdigit() for c in w) and w not in capitalized and re.fullmatch(r"[\w'-]+", w)
    ]
    return sorted(found, key=len, reverse=True)[:n]


def _plain_runs(text: str) -> list[str]:
    """Runs of Chinese/Japanese characters outside names and numbers (jieba's common words)."""
    runs: list[str] = []
    for run in UNSPACED_RUN.findall(text):
        current = ""
        for word in segment(run):
            if known_word(word) and not proper(word):
                current += word
            else:
                runs.append(current)
                current = ""
        runs.append(current)
    return [r for r in runs if len(r) >= 3]


def _trigrams(run: str) -> list[str]:
    return [run[i : i + 3] for i in range(len(run) - 2)]


def plan_batch(
    ctx: Context, facts: list[Fact], matrix: np.ndarray, model: ChatModel | None = None, *, bulk: bool = False
) -> list[Action]:
    """Decide, before any write lock is taken, how each (new, cleaned) fact joins the KB.

    One KNN pass for the batch plus the batch's own similarity matrix; earlier facts of the
    batch are merge candidates for later ones, and every merge result can absorb more.
    Candidates are the `CANDIDATES` nearest active facts at cosine >= kb.related_similarity;
    below kb.duplicate_similarity only an aligned value change links them (kb/merge.py).
    """
    conn, config = ctx.conn, ctx.config
    threshold, near = config.related_similarity, config.duplicate_similarity
    found = neighbours(ctx, matrix, threshold, k=CANDIDATES, bulk=bulk)
    for hits, fact in zip(found, facts, strict=True):  # the rule aligns words: so do candidates
        vector_hits = {rid for rid, _ in hits}
        hits += [(rid, threshold) for rid in lexical_neighbours(conn, fact.fact) if rid not in vector_hits]
    rows, stored_facts = select_facts(conn, "rid", sorted({rid for hits in found for rid, _ in hits}))
    stored: dict[int, Fact] = {r[0]: f for r, f in zip(rows, stored_facts, strict=True)}
    inner = np.asarray(matrix, dtype=np.float32) @ np.asarray(matrix, dtype=np.float32).T
    current: dict[str | int, Fact] = {f.id: f for f in stored.values()}
    redirect: dict[str | int, str | int] = {}

    def head(key: str | int) -> str | int:
        while key in redirect:
            key = redirect[key]
        return key

    actions: list[Action] = []
    for j, fact in enumerate(facts):
        current[j] = fact
        candidates: list[tuple[str | int, float]] = [
            (stored[rid].id, score) for rid, score in found[j] if rid in stored
        ]
        candidates += [(i, float(inner[i, j])) for i in range(j) if inner[i, j] >= threshold]
        action = Action("insert")
        seen: set[str | int] = set()
        for key, score in sorted(candidates, key=lambda c: -c[1]):
            target = head(key)
            if target == j or target in seen:
                continue
            seen.add(target)
            decision = decide(current[target], fact, model, near=score >= near, classify=config.classify_with_model)
            if decision.kind in ("duplicate", "update") and decision.text:
                merged = merged_fact([current[target], fact], decision.text)
                action = Action("merge", target, merged, decision)
                current[j], redirect[target] = merged, j
                break
            if decision.kind == "contradiction":
                action = Action("flag", target, None, decision)
                break
        actions.append(action)
    return actions
