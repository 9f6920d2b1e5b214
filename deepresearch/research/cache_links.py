"""Cache/KB coupling: the KB wins over stale cached evidence.

Each cached search result remembers which facts it produced (`research_cache_facts`:
cache key → fact ids). When one of those facts is later superseded or corrected, the
cached raw results that would bring the old claim back are evicted, so the next search
goes to the backend again instead of re-extracting the outdated claim from the cache.
"""

from __future__ import annotations

import time
from typing import Any

from deepresearch.db import transaction
from deepresearch.errors import NotFound


def link_facts(conn: Any, cache_key: str, fact_ids: list[str], run_id: str = "") -> None:
    """Remember that the cached result under `cache_key` produced `fact_ids`."""
    now = time.time()
    with transaction(conn):
        conn.executemany(
            "insert or ignore into research_cache_facts (cache_key, fact_id, run_id, created_at) values (?, ?, ?, ?)",
            [(cache_key, fid, run_id, now) for fid in fact_ids],
        )


def linked_facts(conn: Any, cache_key: str) -> list[str]:
    """Fact ids produced by the cached result under `cache_key`."""
    rows = conn.execute("select fact_id from research_cache_facts where cache_key = ? order by fact_id", (cache_key,))
    return [r[0] for r in rows]


def _drop_key(conn: Any, cache: Any, cache_key: str) -> None:
    cache.evict(cache_key)
    with transaction(conn):
        conn.execute("delete from research_cache_facts where cache_key = ?", (cache_key,))


def _outdated(kb: Any, fact_id: str) -> bool:
    try:
        return kb.get(fact_id).status == "superseded"
    except NotFound:
        return True  # deleted from the KB: the cached claim has no standing either


def evict_if_superseded(conn: Any, kb: Any, cache: Any, cache_key: str) -> bool:
    """Evict the cache entry `cache_key` if any fact it produced was superseded; True if evicted."""
    if any(_outdated(kb, fid) for fid in linked_facts(conn, cache_key)):
        _drop_key(conn, cache, cache_key)
        return True
    return False


def evict_for_fact(conn: Any, cache: Any, fact_id: str) -> int:
    """Evict every cache entry that produced `fact_id` (for callers that supersede a fact outside a run;
    runs evict lazily through `evict_if_superseded` before each search)."""
    keys = [
        r[0] for r in conn.execute("select distinct cache_key from research_cache_facts where fact_id = ?", (fact_id,))
    ]
    for key in keys:
        _drop_key(conn, cache, key)
    return len(keys)
