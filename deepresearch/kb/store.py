"""The knowledge base: facts with embeddings, provenance, history, lifecycle-aware recall.

`KnowledgeBase` owns what lives longer than one call over an injected connection (see
deepresearch.db.connect) — the config, the lazily loaded embedder, the vector engines and the
merge model, together its `Context` (kb/engines.py) — and hands that one object to the modules
that do the work:

- kb/repository.py: every SQL statement on the facts table (insert, history, generation, rows → facts);
- kb/engines.py: the vector engines behind one `search` and the rule choosing one, keyword search,
  the embedding-model claim (fail closed on a mismatch);
- kb/write.py: the write path (validate, embed, plan merges, one short transaction);
- kb/recall.py: lifecycle-aware recall (a vector engine, or FTS5 when degraded);
- kb/merge.py, kb/classify.py, kb/compress.py: merging with differential preservation (the write
  path plans its merges in kb/write.py);
- kb/maintenance.py, kb/analytics.py: expiry, consistency, backfill/reembed, DuckDB stats/export/import.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deepresearch.db import transaction
from deepresearch.errors import DeepResearchError
from deepresearch.facts import Fact
from deepresearch.indexing import EmbedderSource, LazyEmbedder
from deepresearch.kb import analytics, maintenance, records, write
from deepresearch.kb import repository as repo
from deepresearch.kb.compress import compress
from deepresearch.kb.engines import Context, Engines
from deepresearch.kb.maintenance import SweepResult, check, sweep, vectors_not_checked
from deepresearch.kb.recall import RecallOptions, recall
from deepresearch.kb.records import AddResult, CompressResult, Conflict, HistoryEvent, Recall
from deepresearch.kb.write import StoreOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from deepresearch.config import KBConfig
    from deepresearch.models.embed import Embedder
    from deepresearch.models.llm import ChatModel
    from deepresearch.workspace import Workspace

log = logging.getLogger(__name__)

# the public names callers import from here
__all__ = ["AddResult", "CompressResult", "Conflict", "HistoryEvent", "KnowledgeBase", "Recall", "SweepResult"]


class KnowledgeBase:
    """Facts, their sources, vectors, FTS rows and history in the workspace SQLite file."""

    def __init__(self, conn: Any, embedder: EmbedderSource | None, config: KBConfig):
        # the float matrix (recall from kb.ram_index_min_facts on) and the compact copy
        # (from kb.bit_index_min_facts on, and in one-shot processes) load on first use
        engines = Engines(conn, config)
        self.ctx = Context(conn, config, LazyEmbedder(embedder, "the knowledge base"), engines)

    @property
    def conn(self) -> Any:
        """The workspace database connection."""
        return self.ctx.conn

    @property
    def config(self) -> KBConfig:
        """The `kb` section of the configuration."""
        return self.ctx.config

    @property
    def indexes(self) -> Engines:
        """The vector engines (`vec0`, the float matrix `ram`, the compact copy `codes`)."""
        return self.ctx.engines

    @property
    def one_shot(self) -> bool:
        """True in a process that answers one query (the CLI): never load the float matrix."""
        return self.ctx.one_shot

    @one_shot.setter
    def one_shot(self, value: bool) -> None:
        self.ctx.one_shot = value

    @property
    def merge_model(self) -> ChatModel | None:
        """The chat model that proposes fusions on write (None → the mechanical merge)."""
        return self.ctx.merge_model

    @merge_model.setter
    def merge_model(self, model: ChatModel | None) -> None:
        self.ctx.merge_model = model

    @classmethod
    def from_workspace(cls, ws: Workspace) -> KnowledgeBase:
        """The knowledge base of a workspace, with its configured embedder loaded on first use."""
        from deepresearch.models.embed import get_embedder

        kb = cls(ws.db, lambda: get_embedder(ws.config.embedding), ws.config.kb)
        if ws.config.kb.classify_with_model:  # the chat model classifies (and fuses) merge candidates
            from deepresearch.models.llm import get_chat_model

            try:
                kb.merge_model = get_chat_model(ws.config.llm)  # loads its weights on first use
            except DeepResearchError as exc:
                log.warning("kb.classify_with_model is on but %s; the deterministic rule decides", exc)
        return kb

    # --- capabilities -------------------------------------------------------------------

    @property
    def has_vectors(self) -> bool:
        """True when sqlite-vec is loaded and the vector table exists."""
        return repo.has_vectors(self.conn)

    def embedder(self) -> Embedder:
        """The embedder, created on first use (raises ModelError/ModelNotFound if it cannot load)."""
        return self.ctx.embedder()

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
        now = time.time() if now is None else now
        options = StoreOptions(keep_identity=False, merge=merge, model=model or self.merge_model)
        return write.store_facts(self.ctx, facts, now, options)

    def import_facts(
        self, facts: list[Fact], now: float | None = None, *, embedder: Embedder | None = None
    ) -> AddResult:
        """Store facts keeping their ids, times and status (imports, sync pulls); no merging.

        Known ids and texts reconfirm the stored fact. `embedder` replaces the KB's own for
        this call (a sync pull serves the remote rows' vectors through it).
        """
        now = time.time() if now is None else now
        return write.store_facts(self.ctx, facts, now, StoreOptions(keep_identity=True, embedder=embedder))

    def receive_facts(
        self, facts: list[Fact], now: float | None = None, *, embedder: Embedder | None = None
    ) -> AddResult:
        """Store facts from another workspace (sync pulls) through the write path of `add_facts`,
        keeping their ids, times and sources: a newer value of a fact here supersedes it (under the
        received id), a disagreeing one is flagged as a conflict, as if it had been added here.

        Merge candidates come from the in-RAM matrix from the first fact on (below
        kb.bit_index_min_facts): a pull stores facts in bulk, and one matrix product per batch
        finds the same neighbours as a vec0 scan per fact, ≈ 100× sooner at 10k facts."""
        now = time.time() if now is None else now
        options = StoreOptions(keep_identity=True, merge=True, model=self.merge_model, embedder=embedder, bulk=True)
        return write.store_facts(self.ctx, facts, now, options)

    def import_jsonl(self, path: Any, now: float | None = None, *, link: bool = False) -> AddResult:
        """Import facts from JSONL in the interchange shape (the one `export` writes).

        A restore (the default) keeps ids, times, status and history links and merges nothing: a
        round trip of `kb export` gives the same knowledge base back. With `link` the facts are
        someone else's: each active one goes through the write path (`link_facts`)."""
        now = time.time() if now is None else now
        facts, rejected = analytics.read_jsonl(path, now, self.config, self._stored_texts)
        result = self.link_facts(facts, now) if link else self.import_facts(facts, now)
        result.rejected = rejected + result.rejected
        return result

    def link_facts(self, facts: list[Fact], now: float | None = None, batch: int = 256) -> AddResult:
        """Add facts from elsewhere through the write path, oldest verification first, in batches:
        new ids, their own times, confidence and sources kept, and each one linked like `kb add`
        (a duplicate reconfirms, an update supersedes, a contradiction is flagged). Records that
        are not active (superseded or expired where they come from) are rejected: their history
        belongs to the other knowledge base (a restore brings it)."""
        now = time.time() if now is None else now
        result = AddResult()
        active = []
        for fact in facts:
            if fact.status not in ("", "active"):
                result.rejected.append((fact, f"status {fact.status}: --link imports active facts only (--restore)"))
            else:
                active.append(fact)  # add_facts gives it a new id, active status and its own expiry
        active.sort(key=lambda f: (f.verified_at, f.created_at))
        for start in range(0, len(active), batch):
            part = self.add_facts(active[start : start + batch], now)
            for name in ("added", "reconfirmed", "rejected", "merged", "flagged"):
                getattr(result, name).extend(getattr(part, name))
        return result

    def _stored_texts(self, ids: list[str]) -> dict[str, str]:
        """{id: text} of the stored facts among `ids` (imports check ids against them)."""
        return repo.stored_texts(self.conn, ids)

    def absorb(self, old_ids: list[str], merged: Fact, now: float | None = None, reason: str = "merge") -> str:
        """Store `merged` (sources: the union) and supersede every fact of `old_ids` by it; return its id."""
        now = time.time() if now is None else now
        return write.absorb(self.ctx, old_ids, merged, now, reason)

    def supersede(self, old_id: str, new: Fact, now: float | None = None, reason: str = "merge") -> str:
        """Store `new` (keeping the old fact's sources), mark the old one superseded; return the new id."""
        return self.absorb([old_id], new, now, reason)

    def flag_conflict(self, fact_id: str, other_id: str, reason: str, now: float | None = None) -> None:
        """Record that two facts contradict each other (both stay active) for re-verification."""
        with transaction(self.conn):
            records.flag(self.conn, fact_id, other_id, reason, time.time() if now is None else now)

    def compress(
        self, model: ChatModel | None = None, *, dry_run: bool = False, now: float | None = None
    ) -> CompressResult:
        """Merge near-duplicate clusters across the whole KB (see kb/compress.py); `dry_run` writes nothing."""
        return compress(self.ctx, model, dry_run=dry_run, now=now)

    # --- reading ------------------------------------------------------------------------

    def get(self, fact_id: str) -> Fact:
        """One fact with all its sources (NotFound if no fact has this id)."""
        return repo.get(self.conn, fact_id)

    def query(self, text: str, **options: Unpack[RecallOptions]) -> Recall:
        """Recall facts related to `text` under a lifecycle mode (FTS5 keyword search if degraded).

        Options (`kb.recall.RecallOptions`): top_k, min_confidence, mode, freshness, category,
        now, include_expired. Relevance is the cosine similarity; on the degraded path it is BM25
        mapped to 0..1. Swept (`expired`) and `superseded` facts are recalled only with
        `include_expired`. A hit in an open contradiction lists the other fact ids in `conflicts_with`.
        """
        found = recall(self.ctx, text, **options)
        if found.hits:
            for c in self.conflicts([h.id for h in found.hits]):
                for hit in found.hits:
                    if hit.id in (c.fact_id, c.other_id):
                        hit.conflicts_with.append(c.other_id if hit.id == c.fact_id else c.fact_id)
        return found

    def history(self, fact_id: str) -> list[HistoryEvent]:
        """Every recorded change of a fact, oldest first (NotFound if there is none)."""
        return records.history(self.conn, fact_id)

    def conflicts(self, fact_ids: Iterable[str] | None = None, include_resolved: bool = False) -> list[Conflict]:
        """Flagged contradictions (involving `fact_ids`, if given), oldest first; by default only
        open ones: not resolved, and both facts still active (not superseded, expired or purged)."""
        return repo.conflicts(self.conn, fact_ids, include_resolved)

    # --- maintenance ----------------------------------------------------------------------

    def reembed(self, batch: int = 256, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild every fact vector with the configured model; returns the number of facts."""
        return maintenance.reembed(self.conn, self.embedder, batch, progress)

    def sweep(
        self, now: float | None = None, purge: bool = False, batch: int = 500, dry_run: bool = False
    ) -> SweepResult:
        """Expire (or with purge, delete) facts past expires_at in short batched transactions."""
        return sweep(self.conn, now=now, purge=purge, batch=batch, dry_run=dry_run)

    def check(self) -> list[str]:
        """Problems found when comparing facts, sources, history, vectors and FTS ([] = consistent)."""
        return check(self.conn)

    def vectors_not_checked(self) -> str | None:
        """Why `check` leaves the vectors out (sqlite-vec is not available), or None when it checks them."""
        return vectors_not_checked(self.conn)

    def stats(self, now: float | None = None) -> dict[str, Any]:
        """Counts by category/status, age histogram, expiring soon, confidence, top sources (DuckDB)."""
        return analytics.stats(self.conn, now=now)

    def export(self, path: Any, fmt: str = "jsonl", *, overwrite: bool = False, private: bool = False) -> int:
        """Write every fact (with id, status, sources) as jsonl, csv or parquet via DuckDB (0600 if `private`)."""
        return analytics.export(self.conn, path, fmt, overwrite=overwrite, private=private)
