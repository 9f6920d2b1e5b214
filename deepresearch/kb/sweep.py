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

from deepresearch.db import transaction
from deepresearch.errors import DeepResearchError
from deepresearch.kb.codes import fold
from deepresearch.kb.repository import bump, delete, due, expire, has_vectors, older_versions


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
        rows = due(conn, now, purge, -1)
        result.expired = sum(1 for r in rows if r[3] == "active")
        if purge:
            doomed = {r[1] for r in rows}
            for row in rows:
                doomed.update(old_id for _, old_id, _ in older_versions(conn, row[1]))
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
            rows = due(conn, now, purge, batch)
            for rid, fact_id, text, status in rows:
                if purge:
                    for old in older_versions(conn, fact_id):
                        delete(conn, old, now, vectors, f"purged with {fact_id}, which superseded it")
                        result.purged += 1
                    delete(conn, (rid, fact_id, text), now, vectors, "purged by sweep (past expires_at)")
                    result.purged += 1
                else:
                    expire(conn, rid, fact_id, now, vectors)
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
