"""The write path: validate, embed, plan merges, then one short `BEGIN IMMEDIATE` transaction.

Embedding and merge planning (which may call a chat model) happen before the transaction,
so the write lock is never held while a model runs. Every transaction appends history rows
and bumps `kb.generation` in `meta` (other processes' RAM indexes notice it).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import transaction
from deepresearch.errors import InputError, ModelError
from deepresearch.facts import STATUSES, Fact, new_id, normalize_category, text_hash
from deepresearch.indexing import match_any
from deepresearch.kb import lifecycle, records
from deepresearch.kb import repository as repo
from deepresearch.kb.align import PUNCT, UNSPACED_RUN, known_word, proper, segment, unspaced
from deepresearch.kb.classify import decide
from deepresearch.kb.engines import Context, claim_model
from deepresearch.kb.lifecycle import Filter
from deepresearch.kb.merge import Decision, merged_fact
from deepresearch.kb.records import AddResult, MergeRecord
from deepresearch.kb.repository import select_facts, vec_dimension
from deepresearch.text import content_words

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

MIN_FACT_CHARS = 10
MAX_FACT_CHARS = 2000


def clean(fact: Fact, now: float, keep_identity: bool, config: KBConfig) -> tuple[Fact, str | None]:
    """The fact as it would be stored (normalized text, URL, category, times, id), or why it is refused."""
    text = " ".join((fact.fact or "").split())  # collapse whitespace only: the text is kept as written
    if len(text) < MIN_FACT_CHARS:
        return fact, f"too short: a fact needs at least {MIN_FACT_CHARS} characters"
    if len(text) > MAX_FACT_CHARS:
        return fact, f"too long: one atomic fact is at most {MAX_FACT_CHARS} characters"
    url = (fact.source_url or "").strip()
    if "://" not in url:
        return fact, "source_url must be a full URL (https://…, file://…, zim://…)"
    try:
        confidence = float(fact.confidence)
    except (TypeError, ValueError):
        return fact, f"confidence {fact.confidence!r} is not a number"
    if math.isnan(confidence):
        return fact, "confidence is not a number"
    if keep_identity:  # imports carry explicit times (0.0 is a valid epoch there)
        created, verified = float(fact.created_at), float(fact.verified_at)
    else:
        created = float(fact.created_at or now)
        verified = float(fact.verified_at or created)
    category = normalize_category(fact.category)
    sources = list(dict.fromkeys([url, *(s for s in fact.sources if s)]))
    cleaned = replace(
        fact,
        fact=text,
        source_url=url,
        category=category,
        confidence=min(1.0, max(0.0, confidence)),
        created_at=created,
        verified_at=verified,
        research_topic=fact.research_topic or "",
        sources=sources,
    )
    if keep_identity:
        cleaned.id = fact.id or new_id(created)
        cleaned.status = fact.status if fact.status in STATUSES else "active"
    else:
        cleaned.id = new_id(created)
        cleaned.status = "active"
        cleaned.superseded_by = None
        cleaned.expires_at = lifecycle.expires_at(category, verified, config)
    return cleaned, None


@dataclass
class StoreOptions:
    """How `store_facts` stores: `keep_identity` keeps ids, times and status (imports and sync
    pulls); `merge` plans merges with `model` proposing fused texts; `embedder` replaces the KB's
    for this call (a pull serves the remote vectors); `bulk` takes merge candidates from the RAM
    matrix from the first fact on (`Engines.engine_for`)."""

    keep_identity: bool
    merge: bool = False
    model: ChatModel | None = None
    embedder: Embedder | None = None
    bulk: bool = False


def store_facts(ctx: Context, facts: list[Fact], now: float, options: StoreOptions) -> AddResult:
    """Store facts (batch-embedded): exact duplicates reconfirm, planned merges supersede, the
    rest are inserted — embedding and merge planning before the one write transaction."""
    conn, result = ctx.conn, AddResult()
    valid: list[Fact] = []
    for fact in facts:
        cleaned, reason = clean(fact, now, options.keep_identity, ctx.config)
        if reason:
            result.rejected.append((fact, reason))
        else:
            valid.append(cleaned)
    if not valid:
        return result
    embedder, reason = ctx.vectors(options.embedder)
    if embedder is None and repo.has_vectors(conn):
        # sqlite-vec works but the model does not: storing without vectors would hide facts.
        raise ModelError(f"cannot store facts: {reason}")
    known = repo.existing_hashes(conn, [text_hash(f.fact) for f in valid])
    to_embed = [f for f in valid if text_hash(f.fact) not in known]
    embedded: dict[str, Any] = {}
    if embedder is not None and to_embed:
        texts = list(dict.fromkeys(f.fact for f in to_embed))
        embedded = dict(zip(texts, embedder.embed_batch(texts), strict=True))
    plan: dict[int, Action] = {}
    if options.merge and embedder is not None and to_embed and vec_dimension(conn) == embedder.dimension:
        plan = _plan_merges(ctx, valid, known, embedded, embedder, options)
    writer = _Writer(ctx, now, options.keep_identity, embedded, embedder, result)
    with transaction(conn):
        if embedder is not None:
            claim_model(conn, embedder)
        for n, fact in enumerate(valid):
            writer.store(n, fact, plan.get(n))
        repo.bump(conn)
    return result


def _plan_merges(
    ctx: Context,
    valid: list[Fact],
    known: set[str],
    embedded: dict[str, Any],
    embedder: Embedder,
    options: StoreOptions,
) -> dict[int, Action]:
    """Merge actions by index in `valid`, decided before the write lock (model calls happen here)."""
    order, seen = [], set(known)
    for n, fact in enumerate(valid):
        digest = text_hash(fact.fact)
        if digest not in seen and fact.fact in embedded:
            seen.add(digest)
            order.append(n)
    if not order:
        return {}
    matrix = np.stack([embedded[valid[n].fact] for n in order])
    actions = plan_batch(ctx, [valid[n] for n in order], matrix, options.model, bulk=options.bulk)
    for action in actions:  # targets inside the batch: position in `order` → index in `valid`
        if isinstance(action.target, int):
            action.target = order[action.target]
    plan = {order[p]: a for p, a in enumerate(actions) if a.kind != "insert"}
    fresh = [a.fact.fact for a in plan.values() if a.fact is not None and a.fact.fact not in embedded]
    if fresh:
        texts = list(dict.fromkeys(fresh))
        embedded.update(zip(texts, embedder.embed_batch(texts), strict=True))
    return plan


class _Writer:
    """One write transaction of `store_facts`: each valid fact reconfirms, merges or is inserted
    (and flagged), remembering which id each fact of the batch ended up as."""

    def __init__(
        self,
        ctx: Context,
        now: float,
        keep_identity: bool,
        embedded: dict[str, Any],
        embedder: Embedder | None,
        result: AddResult,
    ):
        self.conn, self.config, self.now, self.keep = ctx.conn, ctx.config, now, keep_identity
        self.embedded, self.embedder, self.result = embedded, embedder, result
        self.batch_ids: dict[int, str] = {}  # index in `valid` → the id it ended up as
        self.by_hash: dict[str, str] = {}

    def store(self, n: int, fact: Fact, action: Action | None) -> None:
        """Store the `n`-th valid fact as planned (`action`), or as the facts here now require."""
        digest = text_hash(fact.fact)
        if digest in self.by_hash:  # same text earlier in this batch (maybe merged since)
            self._reconfirm(n, digest, self.by_hash[digest], fact)
            return
        if action is not None and not self.keep and repo.find_by_hash(self.conn, digest) is not None:
            action = None  # another writer stored this very text since planning: reconfirmed below
        if action is not None and action.kind == "merge" and action.fact is not None:
            merged_id = self._merge(fact, action)
            if merged_id is not None:
                self.batch_ids[n] = self.by_hash[digest] = merged_id
                return
        existing = None
        if self.keep and repo.exists(self.conn, fact.id):
            existing = fact.id
        elif fact.status != "superseded":
            existing = repo.find_by_hash(self.conn, digest)
        if existing is not None:
            self._reconfirm(n, digest, existing, fact)
            return
        vector = self.embedded.get(fact.fact)
        if vector is None and self.embedder is not None:
            vector = self.embedder.embed(fact.fact)  # lost a race with another writer's purge
        repo.insert(self.conn, fact, vector, self.now, event="add", detail="imported" if self.keep else None)
        self.result.added.append(fact.id)
        self.batch_ids[n] = self.by_hash[digest] = fact.id
        if action is not None and action.kind == "flag" and action.decision is not None:
            other = self._target(action.target)
            if other is not None:
                records.flag(self.conn, fact.id, other, action.decision.reason, self.now)
                self.result.flagged.append((fact.id, other, action.decision.reason))

    def _reconfirm(self, n: int, digest: str, target: str, fact: Fact) -> None:
        repo.reconfirm(self.conn, target, fact, self.now, self.config)
        self.result.reconfirmed.append(target)
        self.batch_ids[n] = self.by_hash[digest] = target

    def _target(self, target: str | int | None) -> str | None:
        """The active fact a planned target is now: a stored id or an earlier fact of the batch."""
        return repo.live_head(self.conn, self.batch_ids.get(target) if isinstance(target, int) else target)

    def _merge(self, fact: Fact, action: Action) -> str | None:
        """Apply a planned merge of `fact`; the id it ended up as (None: store it plainly)."""
        if self.keep:
            self._keep_received(action, fact)
        merged_id = self._apply_merge(action)
        if merged_id is not None and self.keep and merged_id != fact.id:
            self._store_superseded(fact, merged_id)
        return merged_id

    def _apply_merge(self, action: Action) -> str | None:
        """Merge a planned fact into its target inside the write transaction (None: target gone)."""
        target = self._target(action.target)
        merged, decision, result = action.fact, action.decision, self.result
        if target is None or merged is None or decision is None:
            return None  # another writer changed the target since planning: store it plainly
        old_text = repo.column_of(self.conn, target, "fact")
        cleaned, problem = clean(merged, self.now, bool(merged.id), self.config)  # an id: a received fact's
        if problem:
            log.info("merge skipped: %s", problem)
            return None
        vector, reason = self.embedded.get(cleaned.fact), f"merge: {decision.kind}"
        new = repo.supersede(self.conn, [target], cleaned, vector, self.now, reason, self.config)
        result.merged.append(MergeRecord([target], [old_text], cleaned.fact, decision.kind, decision.method, new))
        if target in result.added:  # a fact of this batch, merged on the way in: it is the one added
            result.added[result.added.index(target)] = new
        else:  # a changed value ("changes 2 → 3") is a fact added; a rewording only confirms what was known
            (result.added if decision.reason.startswith("changes ") else result.reconfirmed).append(new)
        return new

    def _keep_received(self, action: Action, incoming: Fact) -> None:
        """A fact received from another workspace (a sync pull) that merges into a fact here keeps its
        id and times when it is the newer of the two: the other workspace made that same merge, so both
        end with the same fact under the same id. When the fact here is newer the merge stays local."""
        verified = repo.column_of(self.conn, self._target(action.target), "verified_at")
        if action.fact is None or verified is None or incoming.verified_at < verified:
            return
        action.fact = replace(
            action.fact,
            id=incoming.id,
            category=incoming.category,
            created_at=incoming.created_at,
            verified_at=incoming.verified_at,
            expires_at=incoming.expires_at,
        )

    def _store_superseded(self, incoming: Fact, by: str) -> None:
        """Keep a received fact that a newer fact here replaces, as superseded by it: a later pull then
        skips it, and the next push deletes it remotely (the newer value goes out instead)."""
        if repo.exists(self.conn, incoming.id):
            return
        old = replace(incoming, status="superseded", superseded_by=by)
        vector = self.embedded.get(incoming.fact)
        repo.insert(self.conn, old, vector, self.now, event="add", detail=f"received; superseded by {by}")
        reason = f"superseded by {by} (received)"
        records.log_event(self.conn, incoming.id, "supersede", self.now, incoming.fact, None, reason)


def absorb(ctx: Context, old_ids: list[str], merged: Fact, now: float, reason: str) -> str:
    """Store `merged` (sources: the union) and supersede every fact of `old_ids` by it; return its id."""
    conn = ctx.conn
    if not old_ids:
        raise InputError("nothing to merge: no fact ids given")
    for fact_id in old_ids:
        old = repo.get(conn, fact_id)
        if old.status == "superseded":
            raise InputError(f"fact {fact_id} is already superseded by {old.superseded_by} — merge that one")
    cleaned, problem = clean(merged, now, False, ctx.config)
    if problem:
        raise InputError(f"cannot merge {', '.join(old_ids)}: {problem}")
    embedder, _ = ctx.vectors()
    vector = embedder.embed(cleaned.fact) if embedder is not None else None
    with transaction(conn):
        if embedder is not None:
            claim_model(conn, embedder)
        target = repo.supersede(conn, old_ids, cleaned, vector, now, reason, ctx.config)
        repo.bump(conn)
    return target


# --- merge planning: which incoming facts merge into (or contradict) which -------------------------
#
# Planning happens before the write lock is taken (model calls may run here); `store_facts` then
# applies the plan inside its transaction.

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
