"""The write path: validate, embed, plan merges, then one short `BEGIN IMMEDIATE` transaction.

Embedding and merge planning (which may call a chat model) happen before the transaction,
so the write lock is never held while a model runs. Every transaction appends history rows
and bumps `kb.generation` in `meta` (other processes' RAM indexes notice it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from deepresearch.db import transaction
from deepresearch.errors import InputError, ModelError
from deepresearch.facts import Fact, new_id, normalize_category, text_hash
from deepresearch.kb import lifecycle, records
from deepresearch.kb import repository as repo
from deepresearch.kb.index import vec_dimension
from deepresearch.kb.plan import Action, plan_batch
from deepresearch.kb.records import AddResult, MergeRecord
from deepresearch.kb.vectors import claim_model

if TYPE_CHECKING:
    from deepresearch.config import KBConfig
    from deepresearch.kb.codes import Indexes
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

MIN_FACT_CHARS = 10
MAX_FACT_CHARS = 2000

# (checked embedder, None) or (None, why vectors cannot be used); called only when needed
Vectors = Callable[[], "tuple[Embedder | None, str | None]"]


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
        cleaned.status = fact.status if fact.status in ("active", "superseded", "expired") else "active"
    else:
        cleaned.id = new_id(created)
        cleaned.status = "active"
        cleaned.superseded_by = None
        cleaned.expires_at = lifecycle.expires_at(category, verified, config)
    return cleaned, None


def store_facts(
    conn: Any,
    config: KBConfig,
    indexes: Indexes,
    vectors: Vectors,
    facts: list[Fact],
    now: float,
    *,
    keep_identity: bool,
    merge: bool = False,
    model: ChatModel | None = None,
) -> AddResult:
    """Store facts (batch-embedded): exact duplicates reconfirm, planned merges supersede, the
    rest are inserted. `keep_identity` keeps ids, times and status (imports and sync pulls)."""
    result = AddResult()
    valid: list[Fact] = []
    for fact in facts:
        cleaned, reason = clean(fact, now, keep_identity, config)
        if reason:
            result.rejected.append((fact, reason))
        else:
            valid.append(cleaned)
    if not valid:
        return result
    embedder, reason = vectors()
    if embedder is None and repo.has_vectors(conn):
        # sqlite-vec works but the model does not: storing without vectors would hide facts.
        raise ModelError(f"cannot store facts: {reason}")
    known = repo.existing_hashes(conn, [text_hash(f.fact) for f in valid])
    to_embed = [f for f in valid if text_hash(f.fact) not in known]
    embedded: dict[str, Any] = {}
    if embedder is not None and to_embed:
        texts = list(dict.fromkeys(f.fact for f in to_embed))
        matrix = embedder.embed_batch(texts)
        embedded = {t: matrix[i] for i, t in enumerate(texts)}
    plan: dict[int, Action] = {}
    if merge and embedder is not None and to_embed and vec_dimension(conn) == embedder.dimension:
        plan = _plan_merges(conn, config, indexes, valid, known, embedded, embedder, model)
    batch_ids: dict[int, str] = {}  # index in `valid` → the id it ended up as
    by_hash: dict[str, str] = {}
    with transaction(conn):
        if embedder is not None:
            claim_model(conn, embedder)
        for n, fact in enumerate(valid):
            digest = text_hash(fact.fact)
            if digest in by_hash:  # same text earlier in this batch (maybe merged since)
                repo.reconfirm(conn, by_hash[digest], fact, now, config)
                result.reconfirmed.append(by_hash[digest])
                batch_ids[n] = by_hash[digest]
                continue
            if n in plan and not keep_identity and repo.find_by_hash(conn, digest) is not None:
                del plan[n]  # another writer stored this very text since planning: reconfirmed below
            action = plan.get(n)
            if action is not None and action.kind == "merge" and action.fact is not None:
                if keep_identity:
                    _keep_received(conn, action, fact, batch_ids)
                merged_id = _apply_merge(conn, config, action, batch_ids, embedded, now, result)
                if merged_id is not None:
                    if keep_identity and merged_id != fact.id:
                        _store_superseded(conn, fact, merged_id, embedded.get(fact.fact), now)
                    batch_ids[n] = by_hash[digest] = merged_id
                    continue
            existing = None
            if keep_identity and repo.exists(conn, fact.id):
                existing = fact.id
            elif fact.status != "superseded":
                existing = repo.find_by_hash(conn, digest)
            if existing is not None:
                repo.reconfirm(conn, existing, fact, now, config)
                result.reconfirmed.append(existing)
                batch_ids[n] = by_hash[digest] = existing
                continue
            vector = embedded.get(fact.fact)
            if vector is None and embedder is not None:
                vector = embedder.embed(fact.fact)  # lost a race with another writer's purge
            repo.insert(conn, fact, vector, now, event="add", detail="imported" if keep_identity else None)
            result.added.append(fact.id)
            batch_ids[n] = by_hash[digest] = fact.id
            if action is not None and action.kind == "flag" and action.decision is not None:
                other = _batch_target(conn, action.target, batch_ids)
                if other is not None:
                    records.flag(conn, fact.id, other, action.decision.reason, now)
                    result.flagged.append((fact.id, other, action.decision.reason))
        repo.bump(conn)
    return result


def _plan_merges(
    conn: Any,
    config: KBConfig,
    indexes: Indexes,
    valid: list[Fact],
    known: set[str],
    embedded: dict[str, Any],
    embedder: Embedder,
    model: ChatModel | None,
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
    actions = plan_batch(conn, config, indexes, [valid[n] for n in order], matrix, model)
    for action in actions:  # targets inside the batch: position in `order` → index in `valid`
        if isinstance(action.target, int):
            action.target = order[action.target]
    plan = {order[p]: a for p, a in enumerate(actions) if a.kind != "insert"}
    fresh = [a.fact.fact for a in plan.values() if a.fact is not None and a.fact.fact not in embedded]
    if fresh:
        texts = list(dict.fromkeys(fresh))
        embedded.update(zip(texts, embedder.embed_batch(texts), strict=True))
    return plan


def _batch_target(conn: Any, target: str | int | None, batch_ids: dict[int, str]) -> str | None:
    """The active fact a planned target is now: a stored id or an earlier fact of the batch."""
    return repo.live_head(conn, batch_ids.get(target) if isinstance(target, int) else target)


def _apply_merge(
    conn: Any,
    config: KBConfig,
    action: Action,
    batch_ids: dict[int, str],
    embedded: dict[str, Any],
    now: float,
    result: AddResult,
) -> str | None:
    """Merge a planned fact into its target inside the write transaction (None: target gone)."""
    target = _batch_target(conn, action.target, batch_ids)
    merged, decision = action.fact, action.decision
    if target is None or merged is None or decision is None:
        return None  # another writer changed the target since planning: store it plainly
    old_text = repo.column_of(conn, target, "fact")
    cleaned, problem = clean(merged, now, bool(merged.id), config)  # an id: a received fact's (see below)
    if problem:
        log.info("merge skipped: %s", problem)
        return None
    new = repo.supersede(conn, [target], cleaned, embedded.get(cleaned.fact), now, f"merge: {decision.kind}", config)
    result.merged.append(MergeRecord([target], [old_text], cleaned.fact, decision.kind, decision.method, new))
    if target in result.added:  # a fact of this batch, merged on the way in: it is the one added
        result.added[result.added.index(target)] = new
    else:  # a changed value ("changes 2 → 3") is a fact added; a rewording only confirms what was known
        (result.added if decision.reason.startswith("changes ") else result.reconfirmed).append(new)
    return new


def _keep_received(conn: Any, action: Action, incoming: Fact, batch_ids: dict[int, str]) -> None:
    """A fact received from another workspace (a sync pull) that merges into a fact here keeps its
    id and times when it is the newer of the two: the other workspace made that same merge, so both
    end with the same fact under the same id. When the fact here is newer the merge stays local."""
    target = _batch_target(conn, action.target, batch_ids)
    verified = repo.column_of(conn, target, "verified_at")
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


def _store_superseded(conn: Any, incoming: Fact, by: str, vector: Any, now: float) -> None:
    """Keep a received fact that a newer fact here replaces, as superseded by it: a later pull then
    skips it, and the next push deletes it remotely (the newer value goes out instead)."""
    if repo.exists(conn, incoming.id):
        return
    old = replace(incoming, status="superseded", superseded_by=by)
    repo.insert(conn, old, vector, now, event="add", detail=f"received; superseded by {by}")
    records.log_event(conn, incoming.id, "supersede", now, incoming.fact, None, f"superseded by {by} (received)")


def absorb(
    conn: Any, config: KBConfig, vectors: Vectors, old_ids: list[str], merged: Fact, now: float, reason: str
) -> str:
    """Store `merged` (sources: the union) and supersede every fact of `old_ids` by it; return its id."""
    if not old_ids:
        raise InputError("nothing to merge: no fact ids given")
    for fact_id in old_ids:
        old = repo.get(conn, fact_id)
        if old.status == "superseded":
            raise InputError(f"fact {fact_id} is already superseded by {old.superseded_by} — merge that one")
    cleaned, problem = clean(merged, now, False, config)
    if problem:
        raise InputError(f"cannot merge {', '.join(old_ids)}: {problem}")
    embedder, _ = vectors()
    vector = embedder.embed(cleaned.fact) if embedder is not None else None
    with transaction(conn):
        if embedder is not None:
            claim_model(conn, embedder)
        target = repo.supersede(conn, old_ids, cleaned, vector, now, reason, config)
        repo.bump(conn)
    return target
