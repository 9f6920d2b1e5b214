"""Short-term search cache on diskcache, storing JSON text only.

diskcache's default `Disk` pickles values, and unpickling a value planted in the cache folder
runs code (CVE-2025-69872). `JSONDisk` here writes JSON strings and refuses to read a
pickled row, and the folder is created with mode 0700. Expiry uses an injectable clock so
tests can step past the TTL without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable

import diskcache

from deepresearch.search.base import SearchBackend, SearchResult

log = logging.getLogger(__name__)

_STATS_KEY = "_stats"


class JSONDisk(diskcache.Disk):
    """A diskcache Disk that stores values as JSON text and never unpickles."""

    def put(self, key: Any) -> Any:
        """Keys must be strings (anything else would be pickled)."""
        if not isinstance(key, str):
            raise TypeError(f"search cache keys must be str, not {type(key).__name__}")
        return super().put(key)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        """Serialize the value to JSON text before diskcache sees it."""
        if read:
            raise TypeError("the search cache stores JSON values, not files")
        return super().store(json.dumps(value, ensure_ascii=False), False, key=key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        """Parse JSON text; a pickled row (never written by us) is rejected, not loaded."""
        if mode == diskcache.core.MODE_PICKLE:
            raise ValueError("refusing to unpickle a search cache entry")
        return json.loads(super().fetch(mode, filename, value, read))


def normalize_query(query: str) -> str:
    """Query folded for cache keys: NFKC, case-folded, single spaces."""
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def cache_key(backend: str, query: str, count: int) -> str:
    """Stable key for (backend, normalized query, count), e.g. `corpus:5:3f2a…`."""
    digest = hashlib.sha256(normalize_query(query).encode("utf-8")).hexdigest()[:32]
    return f"{backend}:{int(count)}:{digest}"


class SearchCache:
    """Results per (backend, query, count) for `ttl_seconds`, with persistent hit/miss counters."""

    def __init__(self, directory: Path | str, ttl_seconds: float, clock: Callable[[], float] = time.time):
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        self.ttl_seconds = float(ttl_seconds)
        self.clock = clock
        self._cache = diskcache.Cache(str(self.directory), disk=JSONDisk)

    def key(self, backend_name: str, query: str, count: int) -> str:
        """The stable cache key of a search (see `cache_key`)."""
        return cache_key(backend_name, query, count)

    def _count(self, field: str) -> None:
        with self._cache.transact():
            stats = self._cache.get(_STATS_KEY) or {"hits": 0, "misses": 0}
            stats[field] = int(stats.get(field, 0)) + 1
            self._cache.set(_STATS_KEY, stats)

    def get(self, backend_name: str, query: str, count: int) -> list[SearchResult] | None:
        """Cached results younger than the TTL, else None (counted as hit or miss)."""
        key = self.key(backend_name, query, count)
        try:
            entry = self._cache.get(key)
        except (ValueError, TypeError) as exc:  # unreadable or planted entry: drop it
            log.warning("dropping unreadable search cache entry %s: %s", key, exc)
            self._cache.delete(key)
            entry = None
        if entry is not None and self.clock() - float(entry.get("stored_at", 0)) > self.ttl_seconds:
            self._cache.delete(key)
            entry = None
        self._count("hits" if entry is not None else "misses")
        if entry is None:
            return None
        return [SearchResult.from_dict(item) for item in entry.get("results", [])]

    def set(self, backend_name: str, query: str, count: int, results: list[SearchResult]) -> str:
        """Store results (as JSON) and return their key."""
        key = self.key(backend_name, query, count)
        entry = {
            "stored_at": self.clock(),
            "backend": backend_name,
            "query": normalize_query(query),
            "results": [r.to_dict() for r in results],
        }
        # diskcache's own expiry (real time) only reclaims space; validity is checked with self.clock.
        self._cache.set(key, entry, expire=self.ttl_seconds or None, tag=backend_name)
        return key

    def evict(self, key: str) -> bool:
        """Drop one entry (e.g. results whose facts the KB has since corrected); True if it existed."""
        return bool(self._cache.delete(key))

    def evict_backend(self, backend_name: str) -> int:
        """Drop every entry of one backend (e.g. corpus results after `corpus add`)."""
        return int(self._cache.evict(backend_name))

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk, hits, misses and the TTL."""
        counters = self._cache.get(_STATS_KEY) or {"hits": 0, "misses": 0}
        entries = sum(1 for key in self._cache.iterkeys() if key != _STATS_KEY)
        return {
            "directory": str(self.directory),
            "entries": entries,
            "bytes": int(self._cache.volume()),
            "hits": int(counters.get("hits", 0)),
            "misses": int(counters.get("misses", 0)),
            "ttl_seconds": self.ttl_seconds,
        }

    def clear(self) -> int:
        """Remove every entry and reset the counters; returns how many results were removed."""
        entries = sum(1 for key in self._cache.iterkeys() if key != _STATS_KEY)
        self._cache.clear()
        return entries

    def close(self) -> None:
        """Close the underlying SQLite connection."""
        self._cache.close()

    @classmethod
    def from_workspace(cls, ws: Any, clock: Callable[[], float] = time.time) -> SearchCache:
        """The cache in the workspace's 0700 cache folder with the configured TTL."""
        return cls(ws.cache_dir, ws.config.search.cache.ttl_seconds, clock=clock)


def cached_search(
    backend: SearchBackend, query: str, count: int, cache: SearchCache | None
) -> tuple[list[SearchResult], bool, str]:
    """Search through the cache: (results, hit, key). Empty results are not cached."""
    key = cache_key(backend.name, query, count)
    if cache is not None:
        cached = cache.get(backend.name, query, count)
        if cached is not None:
            return cached, True, key
    results = backend.search(query, count)
    if cache is not None and results:
        cache.set(backend.name, query, count, results)
    return results, False, key
