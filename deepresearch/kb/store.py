"""The knowledge base: facts with embeddings, provenance, history, lifecycle-aware recall.

`KnowledgeBase` is a store class over an injected connection (see deepresearch.db.connect)
and returns dataclasses. Every write is one short `BEGIN IMMEDIATE` transaction that also
appends history rows and bumps `kb.generation` in `meta` (other processes' RAM indexes
notice it). Embedding happens before the transaction, so the write lock is never held
while a model runs.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from deepresearch.db import get_meta, set_meta, transaction
from deepresearch.errors import DimensionMismatch, InputError, ModelError, ModelNotFound, NotFound
from deepresearch.facts import Fact, Hit, new_id, normalize_category, text_hash
from deepresearch.kb import lifecycle
from deepresearch.kb.index import (
    GENERATION_KEY,
    VECTORS_KEY,
    Filter,
    RamIndex,
    create_vec_table,
    vec_dimension,
)

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.config import KBConfig
    from deepresearch.kb.merge import Action, CompressResult, MergeRecord
    from deepresearch.kb.sweep import SweepResult
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel
    from deepresearch.workspace import Workspace

log = logging.getLogger(__name__)

MODEL_KEY = "kb.embedding_model"
DIMENSION_KEY = "kb.embedding_dimension"
MISSING_KEY = "kb.vectors_missing"
MIN_FACT_CHARS = 10
MAX_FACT_CHARS = 2000
REEMBED_FIX = "run `deepresearch kb reembed` to rebuild the vectors with the configured model"

FACT_COLUMNS = (
    "rid, id, fact, source_url, research_topic, category, confidence, created_at, verified_at,"
    " expires_at, status, superseded_by"
)


@dataclass
class AddResult:
    """Outcome of `add_facts`: new ids, reconfirmed ids, and rejected facts with reasons.

    A near-duplicate merged into a stored fact lists the resulting fact in `reconfirmed`
    (the claim was known) and the merge itself in `merged`; a contradiction is added and
    its (id, other id, reason) listed in `flagged`.
    """

    added: list[str] = field(default_factory=list)
    reconfirmed: list[str] = field(default_factory=list)
    rejected: list[tuple[Fact, str]] = field(default_factory=list)
    merged: list[MergeRecord] = field(default_factory=list)
    flagged: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Conflict:
    """Two active facts that contradict each other, flagged for re-verification."""

    fact_id: str
    other_id: str
    detected_at: float
    reason: str
    resolved_at: float | None


@dataclass
class Recall:
    """Hits of a recall; `degraded` is True when keyword search stood in for vectors."""

    hits: list[Hit]
    degraded: bool = False
    reason: str | None = None
    mode: str = ""


@dataclass
class HistoryEvent:
    """One append-only history row of a fact."""

    seq: int
    fact_id: str
    event: str
    at: float
    old_text: str | None
    new_text: str | None
    detail: str | None


EmbedderSource = Union["Embedder", Callable[[], "Embedder"]]


class KnowledgeBase:
    """Facts, their sources, vectors, FTS rows and history in the workspace SQLite file."""

    def __init__(self, conn: Any, embedder: EmbedderSource | None, config: KBConfig):
        self.conn = conn
        self.config = config
        self._embedder_source = embedder
        self._embedder: Embedder | None = None
        self._ram = RamIndex()
        # the chat model that proposes fusions on write (None → the mechanical merge)
        self.merge_model: ChatModel | None = None

    @classmethod
    def from_workspace(cls, ws: Workspace) -> KnowledgeBase:
        """The knowledge base of a workspace, with its configured embedder loaded on first use."""
        from deepresearch.models.embed import get_embedder

        return cls(ws.db, lambda: get_embedder(ws.config.embedding), ws.config.kb)

    # --- capabilities -------------------------------------------------------------------

    @property
    def has_vectors(self) -> bool:
        """True when sqlite-vec is loaded and the vector table exists."""
        return bool(getattr(self.conn, "vec_version", None)) and vec_dimension(self.conn) is not None

    def embedder(self) -> Embedder:
        """The embedder, created on first use (raises ModelError/ModelNotFound if it cannot load)."""
        if self._embedder is None:
            from deepresearch.models.embed import Embedder

            source = self._embedder_source
            if source is None:
                raise ModelNotFound("no embedding model was given to the knowledge base")
            self._embedder = source if isinstance(source, Embedder) else source()
        return self._embedder

    def _checked_embedder(self) -> Embedder:
        """The embedder, after failing closed if the DB was built with another model/dimension."""
        embedder = self.embedder()
        model, dim = get_meta(self.conn, MODEL_KEY), get_meta(self.conn, DIMENSION_KEY)
        if model is not None and (model != embedder.model_id or int(dim or 0) != embedder.dimension):
            raise DimensionMismatch(
                f"the knowledge base was built with embedding model {model} ({dim}-d) but the configured"
                f" model is {embedder.model_id} ({embedder.dimension}-d) — {REEMBED_FIX}, or set"
                f" embedding.model back to {model}"
            )
        return embedder

    def _vector_or_reason(self) -> tuple[Embedder | None, str | None]:
        if not getattr(self.conn, "vec_version", None):
            return (
                None,
                f"sqlite-vec is not available ({getattr(self.conn, 'vec_error', None) or 'not loaded'})",
            )
        if vec_dimension(self.conn) is None:
            return None, "the vector table is missing (sqlite-vec was unavailable when the DB was created)"
        try:
            return self._checked_embedder(), None
        except (ModelError, ModelNotFound) as exc:
            return None, f"the embedding model cannot be loaded ({exc})"

    # --- writing ------------------------------------------------------------------------

    def add_facts(
        self,
        facts: list[Fact],
        now: float | None = None,
        *,
        merge: bool = True,
        model: ChatModel | None = None,
    ) -> AddResult:
        """Store facts (batch-embedded); exact duplicates reconfirm the stored fact, near
        duplicates (cosine >= kb.duplicate_similarity) merge into it (see kb/merge.py) unless
        `merge` is False; `model` (default: `merge_model`) proposes the fused text."""
        return self._store(facts, now, keep_identity=False, merge=merge, model=model or self.merge_model)

    def _store(
        self,
        facts: list[Fact],
        now: float | None,
        *,
        keep_identity: bool,
        merge: bool = False,
        model: ChatModel | None = None,
    ) -> AddResult:
        now = time.time() if now is None else now
        result = AddResult()
        valid: list[Fact] = []
        for fact in facts:
            cleaned, reason = self._clean(fact, now, keep_identity)
            if reason:
                result.rejected.append((fact, reason))
            else:
                valid.append(cleaned)
        if not valid:
            return result
        embedder, reason = self._vector_or_reason()
        if embedder is None and self.has_vectors:
            # sqlite-vec works but the model does not: storing without vectors would hide facts.
            raise ModelError(f"cannot store facts: {reason}")
        known = self._existing_hashes([text_hash(f.fact) for f in valid])
        to_embed = [f for f in valid if text_hash(f.fact) not in known]
        vectors = {}
        if embedder is not None and to_embed:
            texts = list(dict.fromkeys(f.fact for f in to_embed))
            matrix = embedder.embed_batch(texts)
            vectors = {t: matrix[i] for i, t in enumerate(texts)}
        plan: dict[int, Action] = {}
        if merge and embedder is not None and to_embed and vec_dimension(self.conn) == embedder.dimension:
            plan = self._plan_merges(valid, known, vectors, embedder, model)
        batch_ids: dict[int, str] = {}  # index in `valid` → the id it ended up as
        by_hash: dict[str, str] = {}
        with transaction(self.conn):
            if embedder is not None:
                self._claim_model(embedder)
            for n, fact in enumerate(valid):
                digest = text_hash(fact.fact)
                if digest in by_hash:  # same text earlier in this batch (maybe merged since)
                    self._reconfirm(by_hash[digest], fact, now)
                    result.reconfirmed.append(by_hash[digest])
                    batch_ids[n] = by_hash[digest]
                    continue
                action = plan.get(n)
                if action is not None and action.kind == "merge" and action.fact is not None:
                    merged_id = self._apply_merge(action, batch_ids, vectors, now, result)
                    if merged_id is not None:
                        batch_ids[n] = by_hash[digest] = merged_id
                        continue
                existing = None
                if keep_identity and self.conn.execute("select 1 from facts where id = ?", (fact.id,)).fetchone():
                    existing = fact.id
                elif fact.status != "superseded":
                    existing = self._find_by_hash(text_hash(fact.fact))
                if existing is not None:
                    self._reconfirm(existing, fact, now)
                    result.reconfirmed.append(existing)
                    batch_ids[n] = by_hash[digest] = existing
                    continue
                vector = vectors.get(fact.fact)
                if vector is None and embedder is not None:
                    vector = embedder.embed(fact.fact)  # lost a race with another writer's purge
                self._insert(fact, vector, now, event="add", detail="imported" if keep_identity else None)
                result.added.append(fact.id)
                batch_ids[n] = by_hash[digest] = fact.id
                if action is not None and action.kind == "flag" and action.decision is not None:
                    other = self._batch_target(action.target, batch_ids)
                    if other is not None:
                        self._flag(fact.id, other, action.decision.reason, now)
                        result.flagged.append((fact.id, other, action.decision.reason))
            self._bump()
        return result

    def _plan_merges(
        self,
        valid: list[Fact],
        known: set[str],
        vectors: dict[str, Any],
        embedder: Embedder,
        model: ChatModel | None,
    ) -> dict[int, Action]:
        """Merge actions by index in `valid`, decided before the write lock (model calls happen here)."""
        import numpy as np

        from deepresearch.kb.merge import plan_batch

        order, seen = [], set(known)
        for n, fact in enumerate(valid):
            digest = text_hash(fact.fact)
            if digest not in seen and fact.fact in vectors:
                seen.add(digest)
                order.append(n)
        if not order:
            return {}
        actions = plan_batch(self, [valid[n] for n in order], np.stack([vectors[valid[n].fact] for n in order]), model)
        plan: dict[int, Action] = {}
        for action in actions:  # targets inside the batch: position in `order` → index in `valid`
            if isinstance(action.target, int):
                action.target = order[action.target]
        plan = {order[p]: a for p, a in enumerate(actions) if a.kind != "insert"}
        fresh = [a.fact.fact for a in plan.values() if a.fact is not None and a.fact.fact not in vectors]
        if fresh:
            texts = list(dict.fromkeys(fresh))
            vectors.update(zip(texts, embedder.embed_batch(texts), strict=True))
        return plan

    def _batch_target(self, target: str | int | None, batch_ids: dict[int, str]) -> str | None:
        """The active fact a planned target is now: a stored id or an earlier fact of the batch."""
        ident = batch_ids.get(target) if isinstance(target, int) else target
        while ident is not None:
            row = self.conn.execute("select status, superseded_by from facts where id = ?", (ident,)).fetchone()
            if row is None:
                return None
            if row[0] != "superseded":
                return ident if row[0] == "active" else None
            ident = row[1]
        return None

    def _apply_merge(
        self,
        action: Action,
        batch_ids: dict[int, str],
        vectors: dict[str, Any],
        now: float,
        result: AddResult,
    ) -> str | None:
        """Merge a planned fact into its target inside the write transaction (None: target gone)."""
        from deepresearch.kb.merge import MergeRecord

        target = self._batch_target(action.target, batch_ids)
        merged, decision = action.fact, action.decision
        if target is None or merged is None or decision is None:
            return None  # another writer changed the target since planning: store it plainly
        old_text = self.conn.execute("select fact from facts where id = ?", (target,)).fetchone()[0]
        cleaned, problem = self._clean(merged, now, keep_identity=False)
        if problem:
            log.info("merge skipped: %s", problem)
            return None
        new_id = self._absorb_tx([target], cleaned, vectors.get(cleaned.fact), now, f"merge: {decision.kind}")
        result.merged.append(MergeRecord([target], [old_text], cleaned.fact, decision.kind, decision.method, new_id))
        result.reconfirmed.append(new_id)
        return new_id

    def _absorb_tx(self, old_ids: list[str], cleaned: Fact, vector: np.ndarray | None, now: float, reason: str) -> str:
        """In a transaction: store `cleaned` (or reconfirm its exact twin), supersede `old_ids` by it."""
        olds = self._facts_from_rows(
            self.conn.execute(
                f"select {FACT_COLUMNS} from facts where id in ({','.join('?' * len(old_ids))})", old_ids
            ).fetchall()
        )
        cleaned.sources = list(dict.fromkeys([*(s for o in olds for s in o.sources), *cleaned.sources]))
        target = self._find_by_hash(text_hash(cleaned.fact))
        if target is not None:
            self._reconfirm(target, cleaned, now)
            if target not in old_ids:
                self._log(target, "merge", now, None, None, f"absorbed {', '.join(old_ids)} ({reason})")
        else:
            target = cleaned.id
            self._insert(
                cleaned,
                vector,
                now,
                event="merge",
                detail=f"supersedes {', '.join(old_ids)} ({reason})",
                old_text=" | ".join(o.fact for o in olds),
            )
        for old in olds:
            if old.id == target:
                continue
            rid = self.conn.execute(
                "update facts set status = 'superseded', superseded_by = ? where id = ? returning rid",
                (target, old.id),
            ).fetchone()[0]
            self._sync_vector_meta(rid)
            self._log(old.id, "supersede", now, old.fact, cleaned.fact, f"superseded by {target} ({reason})")
            self.conn.execute(
                "update fact_conflicts set resolved_at = ? where resolved_at is null and (fact_id = ? or other_id = ?)",
                (now, old.id, old.id),
            )
        return target

    def absorb(self, old_ids: list[str], merged: Fact, now: float | None = None, reason: str = "merge") -> str:
        """Store `merged` (sources: the union) and supersede every fact of `old_ids` by it; return its id."""
        now = time.time() if now is None else now
        if not old_ids:
            raise InputError("nothing to merge: no fact ids given")
        for fact_id in old_ids:
            old = self.get(fact_id)
            if old.status == "superseded":
                raise InputError(f"fact {fact_id} is already superseded by {old.superseded_by} — merge that one")
        cleaned, problem = self._clean(merged, now, keep_identity=False)
        if problem:
            raise InputError(f"cannot merge {', '.join(old_ids)}: {problem}")
        embedder, _ = self._vector_or_reason()
        vector = embedder.embed(cleaned.fact) if embedder is not None else None
        with transaction(self.conn):
            if embedder is not None:
                self._claim_model(embedder)
            target = self._absorb_tx(old_ids, cleaned, vector, now, reason)
            self._bump()
        return target

    def _flag(self, fact_id: str, other_id: str, reason: str, now: float) -> None:
        self.conn.execute(
            "insert or ignore into fact_conflicts (fact_id, other_id, detected_at, reason) values (?,?,?,?)",
            (fact_id, other_id, now, reason),
        )

    def flag_conflict(self, fact_id: str, other_id: str, reason: str, now: float | None = None) -> None:
        """Record that two facts contradict each other (both stay active) for re-verification."""
        with transaction(self.conn):
            self._flag(fact_id, other_id, reason, time.time() if now is None else now)

    def conflicts(self, fact_ids: Iterable[str] | None = None, include_resolved: bool = False) -> list[Conflict]:
        """Flagged contradictions (involving `fact_ids`, if given), oldest first; by default only
        open ones: not resolved, and both facts still active (not superseded, expired or purged)."""
        sql = "select fact_id, other_id, detected_at, reason, resolved_at from fact_conflicts c where 1"
        params: list[Any] = []
        if not include_resolved:
            sql += (
                " and resolved_at is null"
                " and exists (select 1 from facts f where f.id = c.fact_id and f.status = 'active')"
                " and exists (select 1 from facts f where f.id = c.other_id and f.status = 'active')"
            )
        if fact_ids is not None:
            ids = list(fact_ids)
            marks = ",".join("?" * len(ids))
            sql += f" and (fact_id in ({marks}) or other_id in ({marks}))"
            params += ids + ids
        return [Conflict(*r) for r in self.conn.execute(sql + " order by detected_at, rowid", params)]

    def compress(
        self, model: ChatModel | None = None, *, dry_run: bool = False, now: float | None = None
    ) -> CompressResult:
        """Merge near-duplicate clusters across the whole KB (see kb/merge.py); `dry_run` writes nothing."""
        from deepresearch.kb.merge import compress

        return compress(self, model, dry_run=dry_run, now=now)

    def _clean(self, fact: Fact, now: float, keep_identity: bool) -> tuple[Fact, str | None]:
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
            cleaned.expires_at = lifecycle.expires_at(category, verified, self.config)
        return cleaned, None

    def _existing_hashes(self, hashes: list[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(hashes), 500):
            chunk = hashes[i : i + 500]
            rows = self.conn.execute(
                "select text_hash from facts where status != 'superseded'"
                f" and text_hash in ({','.join('?' * len(chunk))})",
                chunk,
            )
            found.update(r[0] for r in rows)
        return found

    def _find_by_hash(self, digest: str) -> str | None:
        row = self.conn.execute(
            "select id from facts where text_hash = ? and status != 'superseded'"
            " order by status = 'active' desc, verified_at desc limit 1",
            (digest,),
        ).fetchone()
        return None if row is None else row[0]

    def _claim_model(self, embedder: Embedder) -> None:
        """Record the model on first write; rebuild an empty vector table for its dimension."""
        if get_meta(self.conn, MODEL_KEY) is None:
            set_meta(self.conn, MODEL_KEY, embedder.model_id)
            set_meta(self.conn, DIMENSION_KEY, str(embedder.dimension))
        if vec_dimension(self.conn) != embedder.dimension:
            if self.conn.execute("select count(*) from fact_vec").fetchone()[0]:
                raise DimensionMismatch(f"the vector table holds vectors of another dimension — {REEMBED_FIX}")
            create_vec_table(self.conn, embedder.dimension)
            set_meta(self.conn, VECTORS_KEY, new_id())

    def _insert(
        self,
        fact: Fact,
        vector: np.ndarray | None,
        now: float,
        *,
        event: str,
        detail: str | None,
        old_text: str | None = None,
    ) -> None:
        cur = self.conn.execute(
            "insert into facts (id, fact, source_url, research_topic, category, confidence, created_at,"
            " verified_at, expires_at, status, superseded_by, text_hash) values (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                fact.id,
                fact.fact,
                fact.source_url,
                fact.research_topic,
                fact.category,
                fact.confidence,
                fact.created_at,
                fact.verified_at,
                fact.expires_at,
                fact.status,
                fact.superseded_by,
                text_hash(fact.fact),
            ),
        )
        rid = cur.lastrowid
        for url in fact.sources or [fact.source_url]:
            self.conn.execute(
                "insert or ignore into fact_sources (fact_id, url, added_at) values (?,?,?)",
                (fact.id, url, now),
            )
        if vector is not None:
            self._write_vector(rid, fact, vector)
        else:
            set_meta(self.conn, MISSING_KEY, "1")
        self._log(fact.id, event, now, old_text, fact.fact, detail)

    def _write_vector(self, rid: int, fact: Fact, vector: np.ndarray) -> None:
        import numpy as np

        self.conn.execute(
            "insert into fact_vec (rowid, category, embedding, status, verified_at, confidence) values (?,?,?,?,?,?)",
            (
                rid,
                fact.category,
                np.asarray(vector, dtype=np.float32).tobytes(),
                fact.status,
                fact.verified_at,
                fact.confidence,
            ),
        )

    def _sync_vector_meta(self, rid: int) -> None:
        """Copy the lifecycle columns of one fact into its vector row."""
        if not self.has_vectors:
            set_meta(self.conn, MISSING_KEY, "1")  # resynced by _backfill once sqlite-vec is back
            return
        row = self.conn.execute("select status, verified_at, confidence from facts where rid = ?", (rid,)).fetchone()
        self.conn.execute(
            "update fact_vec set status = ?, verified_at = ?, confidence = ? where rowid = ?", (*row, rid)
        )

    def _reconfirm(self, fact_id: str, new: Fact, now: float) -> None:
        rid, category, confidence, verified, status = self.conn.execute(
            "select rid, category, confidence, verified_at, status from facts where id = ?", (fact_id,)
        ).fetchone()
        verified = max(verified, new.verified_at)
        self.conn.execute(
            "update facts set confidence = ?, verified_at = ?, expires_at = ?, status = 'active' where rid = ?",
            (
                max(confidence, new.confidence),
                verified,
                lifecycle.expires_at(category, verified, self.config),
                rid,
            ),
        )
        for url in new.sources or [new.source_url]:
            self.conn.execute(
                "insert or ignore into fact_sources (fact_id, url, added_at) values (?,?,?)",
                (fact_id, url, now),
            )
        self._sync_vector_meta(rid)
        detail = f"source {new.source_url}" + ("; reactivated" if status == "expired" else "")
        self._log(fact_id, "reconfirm", now, None, None, detail)

    def _log(
        self,
        fact_id: str,
        event: str,
        at: float,
        old_text: str | None,
        new_text: str | None,
        detail: str | None,
    ) -> None:
        self.conn.execute(
            "insert into fact_history (fact_id, event, at, old_text, new_text, detail) values (?,?,?,?,?,?)",
            (fact_id, event, at, old_text, new_text, detail),
        )

    def _bump(self) -> None:
        """Tell RAM indexes in this and other processes that facts changed."""
        set_meta(self.conn, GENERATION_KEY, new_id())

    def supersede(self, old_id: str, new: Fact, now: float | None = None, reason: str = "merge") -> str:
        """Store `new` (keeping the old fact's sources), mark the old one superseded; return the new id."""
        return self.absorb([old_id], new, now, reason)

    # --- reading ------------------------------------------------------------------------

    def get(self, fact_id: str) -> Fact:
        """One fact with all its sources (NotFound if no fact has this id)."""
        row = self.conn.execute(f"select {FACT_COLUMNS} from facts where id = ?", (fact_id,)).fetchone()
        if row is None:
            raise NotFound(f"no fact with id {fact_id} — list ids with `deepresearch kb query TEXT --json`")
        return self._facts_from_rows([row])[0]

    def _facts_from_rows(self, rows: Iterable[tuple]) -> list[Fact]:
        rows = list(rows)
        sources: dict[str, list[str]] = {}
        ids = [r[1] for r in rows]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            for fid, url in self.conn.execute(
                f"select fact_id, url from fact_sources where fact_id in ({','.join('?' * len(chunk))})"
                " order by added_at, rowid",
                chunk,
            ):
                sources.setdefault(fid, []).append(url)
        return [
            Fact(
                fact=r[2],
                source_url=r[3],
                research_topic=r[4],
                category=r[5],
                confidence=r[6],
                created_at=r[7],
                verified_at=r[8],
                expires_at=r[9],
                status=r[10],
                superseded_by=r[11],
                id=r[1],
                sources=sources.get(r[1], [r[3]]),
            )
            for r in rows
        ]

    def query(
        self,
        text: str,
        *,
        top_k: int | None = None,
        min_confidence: float | None = None,
        mode: str | None = None,
        freshness: str | None = None,
        category: str | None = None,
        now: float | None = None,
    ) -> Recall:
        """Recall facts related to `text` under a lifecycle mode (FTS5 keyword search if degraded).

        Relevance is the cosine similarity; on the degraded path it is BM25 mapped to 0..1.
        """
        now = time.time() if now is None else now
        k = top_k or self.config.top_k
        vis = lifecycle.visibility(mode, self.config, freshness, category)
        minimum = self.config.min_confidence if min_confidence is None else float(min_confidence)
        flt = Filter(vis, now, minimum, self.config)
        embedder, reason = self._vector_or_reason()
        if embedder is not None:
            self._backfill(embedder)
            # an unclaimed (empty) vector table may still have the migration's default dimension
            empty = vec_dimension(self.conn) != embedder.dimension
            found = [] if empty else self._search_vectors(embedder.embed(text), flt, k)
        else:
            from deepresearch.kb.fts import search_fts

            log.info("keyword recall instead of semantic: %s", reason)  # Recall.reason carries it
            found = search_fts(self.conn, text, flt, k)
        return Recall(self._hits(found, flt), degraded=embedder is None, reason=reason, mode=vis.mode)

    def _search_vectors(self, vector: np.ndarray, flt: Filter, k: int) -> list[tuple[int, float]]:
        from deepresearch.kb.index import search_vec0

        # max(rid) is O(1) and close enough to the row count to pick an engine
        count = self.conn.execute("select coalesce(max(rid), 0) from facts").fetchone()[0]
        if count >= self.config.ram_index_min_facts:
            self._ram.refresh(self.conn)
            return self._ram.search(vector, flt, k)
        return search_vec0(self.conn, vector, flt, k)

    def _hits(self, found: list[tuple[int, float]], flt: Filter) -> list[Hit]:
        if not found:
            return []
        rids = [rid for rid, _ in found]
        rows = self.conn.execute(
            f"select {FACT_COLUMNS} from facts where rid in ({','.join('?' * len(rids))})", rids
        ).fetchall()
        by_rid = {r[0]: f for r, f in zip(rows, self._facts_from_rows(rows), strict=False)}
        hits = []
        for rid, relevance in found:
            fact = by_rid.get(rid)
            if fact is None:
                continue  # purged between search and fetch
            age = max(0.0, (flt.now - fact.verified_at) / lifecycle.DAY)
            hits.append(
                Hit(
                    id=fact.id,
                    fact=fact.fact,
                    source_url=fact.source_url,
                    sources=fact.sources,
                    category=fact.category,
                    confidence=lifecycle.decayed_confidence(
                        fact.confidence, fact.category, age, flt.visibility.mode, self.config
                    ),
                    raw_confidence=fact.confidence,
                    relevance=relevance,
                    age_days=age,
                    created_at=fact.created_at,
                    research_topic=fact.research_topic,
                    verified_at=fact.verified_at,
                    status=fact.status,
                )
            )
        return hits

    def history(self, fact_id: str) -> list[HistoryEvent]:
        """Every recorded change of a fact, oldest first (NotFound if there is none)."""
        rows = self.conn.execute(
            "select seq, fact_id, event, at, old_text, new_text, detail from fact_history"
            " where fact_id = ? order by seq",
            (fact_id,),
        ).fetchall()
        if not rows:
            raise NotFound(f"no history for fact {fact_id} — check the id with `deepresearch kb query TEXT --json`")
        return [HistoryEvent(*r) for r in rows]

    # --- maintenance ----------------------------------------------------------------------

    def _backfill(self, embedder: Embedder) -> None:
        """Embed facts stored, and resync lifecycle columns changed, while sqlite-vec was unavailable."""
        if get_meta(self.conn, MISSING_KEY) != "1":
            return
        stale = self.conn.execute(
            "select v.rowid from fact_vec v join facts f on f.rid = v.rowid"
            " where v.status != f.status or v.verified_at != f.verified_at or v.confidence != f.confidence"
        ).fetchall()
        rows = self.conn.execute("select rid, fact from facts where rid not in (select rowid from fact_vec)").fetchall()
        vectors = embedder.embed_batch([r[1] for r in rows]) if rows else None
        with transaction(self.conn):
            self._claim_model(embedder)
            for (rid, _), vector in zip(rows, vectors if vectors is not None else [], strict=False):
                fact = self._facts_from_rows(
                    self.conn.execute(f"select {FACT_COLUMNS} from facts where rid = ?", (rid,)).fetchall()
                )
                if fact:
                    self._write_vector(rid, fact[0], vector)
            for (rid,) in stale:
                self._sync_vector_meta(rid)
            self.conn.execute("delete from meta where key = ?", (MISSING_KEY,))
            self._bump()

    def reembed(self, batch: int = 256, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild every fact vector with the configured model; returns the number of facts."""
        if not getattr(self.conn, "vec_version", None):
            raise ModelError(
                "cannot rebuild vectors: sqlite-vec is not available — fix: pip install sqlite-vec sqlean-py"
            )
        embedder = self.embedder()
        rows = self.conn.execute(f"select {FACT_COLUMNS} from facts order by rid").fetchall()
        facts = self._facts_from_rows(rows)
        import numpy as np

        parts = []
        for i in range(0, len(facts), batch):
            parts.append(embedder.embed_batch([f.fact for f in facts[i : i + batch]]))
            if progress:
                progress(min(i + batch, len(facts)), len(facts))
        matrix = np.concatenate(parts) if parts else np.zeros((0, embedder.dimension), dtype=np.float32)
        with transaction(self.conn):
            create_vec_table(self.conn, embedder.dimension)
            for row, fact, vector in zip(rows, facts, matrix, strict=False):
                self._write_vector(row[0], fact, vector)
            set_meta(self.conn, MODEL_KEY, embedder.model_id)
            set_meta(self.conn, DIMENSION_KEY, str(embedder.dimension))
            set_meta(self.conn, VECTORS_KEY, new_id())
            self.conn.execute("delete from meta where key = ?", (MISSING_KEY,))
            self._bump()
        return len(facts)

    def sweep(
        self, now: float | None = None, purge: bool = False, batch: int = 500, dry_run: bool = False
    ) -> SweepResult:
        """Expire (or with purge, delete) facts past expires_at in short batched transactions."""
        from deepresearch.kb.sweep import sweep

        return sweep(self, now=now, purge=purge, batch=batch, dry_run=dry_run)

    def check(self) -> list[str]:
        """Problems found when comparing facts, sources, history, vectors and FTS ([] = consistent)."""
        from deepresearch.kb.check import check

        return check(self)

    def stats(self, now: float | None = None) -> dict[str, Any]:
        """Counts by category/status, age histogram, expiring soon, confidence, top sources (DuckDB)."""
        from deepresearch.kb.analytics import stats

        return stats(self, now=now)

    def export(self, path: Any, fmt: str = "jsonl", *, overwrite: bool = False) -> int:
        """Write every fact (with id, status, sources) as jsonl, csv or parquet via DuckDB."""
        from deepresearch.kb.analytics import export

        return export(self, path, fmt, overwrite=overwrite)

    def import_jsonl(self, path: Any, now: float | None = None) -> AddResult:
        """Import facts from JSONL in the interchange shape (the one `export` writes)."""
        from deepresearch.kb.analytics import import_jsonl

        return import_jsonl(self, path, now=now)
