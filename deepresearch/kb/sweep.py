"""The expiry sweep: mark facts past `expires_at` expired (or delete them with purge).

Cron-safe by construction: each batch is its own short `BEGIN IMMEDIATE` transaction, so a
research run writing to the same WAL database waits milliseconds, never the whole sweep;
rows are selected by the partial index on `expires_at`; a second run finds nothing to do.
Purged facts keep their history (a `delete` row records the text). Purging a fact also
deletes the older versions it superseded, transitively: they are never recalled, and kept
they would name a successor that no longer exists (`kb check` flags that).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from deepresearch.db import set_meta, transaction
from deepresearch.errors import DeepResearchError
from deepresearch.kb.codes import fold
from deepresearch.kb.rows import MISSING_KEY, bump, has_vectors, log_event


@dataclass
class SweepResult:
    """Counts of one sweep (`expired` newly marked, `purged` deleted)."""

    expired: int = 0
    purged: int = 0
    batches: int = 0
    dry_run: bool = False
    seconds: float = 0.0
    now: float = 0.0

    def summary(self) -> str:
        """One line for logs and cron mail."""
        verb = "would expire" if self.dry_run else "expired"
        text = f"sweep: {verb} {self.expired} fact(s)"
        if self.purged or not self.dry_run:
            text += f", {'would purge' if self.dry_run else 'purged'} {self.purged}"
        return f"{text} in {self.batches} batch(es), {self.seconds:.2f}s"


def _due(conn: Any, now: float, purge: bool, limit: int) -> list[tuple[int, str, str, str]]:
    # Purge also removes facts an earlier sweep already marked expired. INDEXED BY: without
    # ANALYZE statistics SQLite prefers the status index and sorts every active row per batch.
    if purge:
        index, statuses = "facts_expires_any", "status in ('active', 'expired')"
    else:
        index, statuses = "facts_expiry", "status = 'active'"
    return conn.execute(
        f"select rid, id, fact, status from facts indexed by {index}"
        f" where expires_at is not null and expires_at < ? and {statuses} order by expires_at limit ?",
        (now, limit),
    ).fetchall()


def _older_versions(conn: Any, fact_id: str) -> list[tuple[int, str, str]]:
    """(rid, id, text) of every fact superseded by `fact_id`, directly or through a chain."""
    return conn.execute(
        "with recursive chain(id) as (select id from facts where superseded_by = ?"
        " union select f.id from facts f join chain c on f.superseded_by = c.id)"
        " select rid, id, fact from facts where id in (select id from chain)",
        (fact_id,),
    ).fetchall()


def _delete(conn: Any, rid: int, fact_id: str, text: str, now: float, vectors: bool, why: str) -> None:
    conn.execute("delete from facts where rid = ?", (rid,))
    if vectors:
        conn.execute("delete from fact_vec where rowid = ?", (rid,))
    log_event(conn, fact_id, "delete", now, text, None, why)


def sweep(
    conn: Any,
    *,
    now: float | None = None,
    purge: bool = False,
    batch: int = 500,
    dry_run: bool = False,
) -> SweepResult:
    """Expire (or delete) every fact whose `expires_at` is before `now`, `batch` rows per transaction."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    result = SweepResult(dry_run=dry_run, now=now)
    if dry_run:
        rows = _due(conn, now, purge, -1)
        result.expired = sum(1 for r in rows if r[3] == "active")
        if purge:
            doomed = {r[1] for r in rows}
            for row in rows:
                doomed.update(old_id for _, old_id, _ in _older_versions(conn, row[1]))
            result.purged = len(doomed)
        result.batches = 0
        result.seconds = time.perf_counter() - started
        return result
    vectors = has_vectors(conn)
    if purge and not vectors and conn.execute("select 1 from sqlite_master where name = 'fact_vec'").fetchone():
        raise DeepResearchError(
            "sweep --purge must delete vectors too, but sqlite-vec is not available — fix: pip install"
            " sqlite-vec sqlean-py, or run the sweep without --purge"
        )
    while True:
        with transaction(conn):
            rows = _due(conn, now, purge, batch)
            for rid, fact_id, text, status in rows:
                if purge:
                    for old_rid, old_id, old_text in _older_versions(conn, fact_id):
                        _delete(
                            conn, old_rid, old_id, old_text, now, vectors, f"purged with {fact_id}, which superseded it"
                        )
                        result.purged += 1
                    _delete(conn, rid, fact_id, text, now, vectors, "purged by sweep (past expires_at)")
                    result.purged += 1
                else:
                    conn.execute("update facts set status = 'expired' where rid = ?", (rid,))
                    if vectors:
                        conn.execute("update fact_vec set status = 'expired' where rowid = ?", (rid,))
                    else:
                        set_meta(conn, MISSING_KEY, "1")  # vector rows resync when sqlite-vec is back
                    log_event(conn, fact_id, "expire", now, None, None, "past expires_at")
                if status == "active":
                    result.expired += 1
            if rows:
                bump(conn)
                result.batches += 1
        if len(rows) < batch:
            break
    if result.batches and vectors:
        fold(conn)  # a sweep may touch half the KB: readers should not each re-apply that
    result.seconds = time.perf_counter() - started
    return result
