"""The write path: validate, embed, plan merges, then one short `BEGIN IMMEDIATE` transaction.

Embedding and merge planning (which may call a chat model) happen before the transaction,
so the write lock is never held while a model runs. Every transaction appends history rows
and bumps `kb.generation` in `meta` (other processes' RAM indexes notice it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from deepresearch.db import transaction
from deepresearch.errors import InputError, ModelError
from deepresearch.facts import STATUSES, Fact, new_id, normalize_category, text_hash
from deepresearch.kb import lifecycle, records
from deepresearch.kb import repository as repo
from deepresearch.kb.engines import Context, claim_model
from deepresearch.kb.plan import Action, plan_batch
from deepresearch.kb.records import AddResult, MergeRecord
from deepresearch.kb.repository import vec_dimension

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
