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
from deepresearch.kb.index import FACT_VEC, Filter, one_blas_thread
from deepresearch.kb.merge import Decision, merged_fact
from deepresearch.kb.repository import select_facts
from deepresearch.text import content_words

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.kb.codes import Indexes
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
    conn: Any, config: KBConfig, indexes: Indexes, matrix: np.ndarray, threshold: float, k: int = 3
) -> list[list[tuple[int, float]]]:
    """For each row of `matrix`, stored active facts (rid, cosine) with cosine >= threshold."""
    count = repo.max_rid(conn)
    if not count:
        return [[] for _ in range(len(matrix))]
    if count >= config.bit_index_min_facts:  # the compact copy: no float matrix of a big KB in RAM
        indexes.codes.refresh(conn)
        active = Filter(lifecycle.visibility("off", config), 0.0, 0.0, config)
        found = (indexes.codes.search(conn, v, active, k) for v in np.asarray(matrix, dtype=np.float32))
        return [[(rid, score) for rid, score in hits if score >= threshold] for hits in found]
    if count >= config.ram_index_min_facts:  # one matrix product for the whole batch
        ram = indexes.ram
        ram.refresh(conn)
        active = ram.status == "active"
        with one_blas_thread():
            scores = ram.matrix @ np.asarray(matrix, dtype=np.float32).T
        out = []
        for col in range(scores.shape[1]):
            hit = np.flatnonzero(active & (scores[:, col] >= threshold))
            best = hit[np.argsort(-scores[hit, col])][:k]
            out.append([(int(ram.rids[i]), float(scores[i, col])) for i in best])
        return out
    return [
        [(rid, cosine) for rid, cosine in FACT_VEC.knn(conn, v, k, "status = 'active'") if cosine >= threshold]
        for v in matrix
    ]


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
    conn: Any,
    config: KBConfig,
    indexes: Indexes,
    facts: list[Fact],
    matrix: np.ndarray,
    model: ChatModel | None = None,
) -> list[Action]:
    """Decide, before any write lock is taken, how each (new, cleaned) fact joins the KB.

    One KNN pass for the batch plus the batch's own similarity matrix; earlier facts of the
    batch are merge candidates for later ones, and every merge result can absorb more.
    Candidates are the `CANDIDATES` nearest active facts at cosine >= kb.related_similarity;
    below kb.duplicate_similarity only an aligned value change links them (kb/merge.py).
    """
    threshold, near = config.related_similarity, config.duplicate_similarity
    found = neighbours(conn, config, indexes, matrix, threshold, k=CANDIDATES)
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
