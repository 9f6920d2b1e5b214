"""Short-term search cache on diskcache, storing JSON text only.

diskcache's default `Disk` pickles values, and unpickling a value planted in the cache folder
runs code (CVE-2025-69872); it also trusts the file name stored in a row, so a planted
`../../x` or absolute name would be read or deleted. `JSONDisk` here writes JSON strings,
refuses pickled keys and values, and touches only file names of the shape it creates itself.
Rows it cannot read are removed from the index (never their files) and reported as a warning;
they are never fatal. The folder is private (0700, see `files.private_dir`). Expiry uses an
injectable clock so tests can step past the TTL without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable

import diskcache

from deepresearch.errors import SearchError
from deepresearch.files import private_dir
from deepresearch.search.base import SearchBackend, SearchResult

log = logging.getLogger(__name__)

_STATS_KEY = "_stats"
# The only file names diskcache's Disk.filename() generates: ab/cd/<28 hex>.val under the folder.
_VALUE_FILE = re.compile(r"[0-9a-f]{2}[/\\][0-9a-f]{2}[/\\][0-9a-f]{28}\.val")
_BAD_ROW = (ValueError, TypeError, KeyError, AttributeError, OSError)


def _is_value_file(filename: Any) -> bool:
    return isinstance(filename, str) and _VALUE_FILE.fullmatch(filename) is not None


class JSONDisk(diskcache.Disk):
    """A diskcache Disk that stores values as JSON text and never unpickles."""

    def put(self, key: Any) -> Any:
        """Keys must be strings (anything else would be pickled)."""
        if not isinstance(key, str):
            raise TypeError(f"search cache keys must be str, not {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        """A stored key; a pickled one (never written by us) is rejected, not loaded."""
        if not raw:
            raise ValueError("refusing to unpickle a search cache key")
        return super().get(key, raw)

    def remove(self, file_path: Any) -> None:
        """Delete a value file, but only one of the names this Disk creates (never ../ or absolute)."""
        if not _is_value_file(file_path):
            log.warning("search cache: not deleting %r, it is not a cache value file", file_path)
            return
        super().remove(file_path)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        """Serialize the value to JSON text before diskcache sees it."""
        if read:
            raise TypeError("the search cache stores JSON values, not files")
        return super().store(json.dumps(value, ensure_ascii=False), False, key=key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        """Parse JSON text; a pickled row (never written by us) is rejected, not loaded."""
        if mode == diskcache.core.MODE_PICKLE:
            raise ValueError("refusing to unpickle a search cache entry")
        if mode != diskcache.core.MODE_RAW and not _is_value_file(filename):
            raise ValueError(f"refusing to read {filename!r}, it is not a cache value file")
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
        self.directory = private_dir(Path(directory), "search cache folder")
        self.ttl_seconds = float(ttl_seconds)
        self.clock = clock
        try:
            self._cache = diskcache.Cache(str(self.directory), disk=JSONDisk)
        except (sqlite3.Error, *_BAD_ROW) as exc:
            raise SearchError(
                f"the search cache in {self.directory} cannot be opened ({exc}) — delete that folder"
                " (it only holds cached search results)"
            ) from None
        self.dropped = self._drop_unreadable_rows()

    def _drop_unreadable_rows(self) -> int:
        """Remove index rows this cache never writes (pickled keys or values, foreign file names).

        Only the rows go; files they name are left alone, since a planted name may point anywhere.
        """
        db = sqlite3.connect(self.directory / "cache.db", timeout=60)
        try:
            rows = db.execute("select rowid, raw, mode, filename from Cache").fetchall()
            bad = [
                rowid
                for rowid, raw, mode, filename in rows
                if not raw
                or mode == diskcache.core.MODE_PICKLE
                or (filename is not None or mode != diskcache.core.MODE_RAW)
                and not _is_value_file(filename)
            ]
            if bad:
                with db:
                    db.executemany("delete from Cache where rowid = ?", [(rowid,) for rowid in bad])
                log.warning(
                    "search cache: removed %d unreadable entries from %s (planted or damaged; their files were"
                    " left alone)",
                    len(bad),
                    self.directory,
                )
            return len(bad)
        finally:
            db.close()

    def key(self, backend_name: str, query: str, count: int) -> str:
        """The stable cache key of a search (see `cache_key`)."""
        return cache_key(backend_name, query, count)

    def _counters(self) -> dict[str, int]:
        """The hit/miss counters; an unreadable counters row is reported and reset."""
        try:
            stats = self._cache.get(_STATS_KEY)
            if stats is None:
                return {"hits": 0, "misses": 0}
            return {"hits": int(stats["hits"]), "misses": int(stats["misses"])}
        except _BAD_ROW as exc:
            log.warning("search cache: resetting unreadable hit/miss counters (%s)", exc)
            self._cache.delete(_STATS_KEY)
            return {"hits": 0, "misses": 0}

    def _count(self, field: str) -> None:
        with self._cache.transact():
            stats = self._counters()
            stats[field] += 1
            self._cache.set(_STATS_KEY, stats)

    def get(self, backend_name: str, query: str, count: int) -> list[SearchResult] | None:
        """Cached results younger than the TTL, else None (counted as hit or miss)."""
        key = self.key(backend_name, query, count)
        results: list[SearchResult] | None = None
        try:
            entry = self._cache.get(key)
            if entry is not None:
                if self.clock() - float(entry["stored_at"]) > self.ttl_seconds:
                    self._cache.delete(key)
                else:
                    results = [SearchResult.from_dict(item) for item in entry["results"]]
        except _BAD_ROW as exc:  # unreadable or planted entry: drop it, search again
            log.warning("search cache: dropping unreadable entry %s (%s)", key, exc)
            self._cache.delete(key)
            results = None
        self._count("hits" if results is not None else "misses")
        return results

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
        try:
            return int(self._cache.evict(backend_name))
        except sqlite3.Error as exc:  # named here: the caller's database is another file
            raise SearchError(
                f"the search cache in {self.directory} could not drop its {backend_name} results ({exc})"
                " — delete that folder (it only holds cached search results)"
            ) from None

    def stats(self) -> dict[str, Any]:
        """Entries, bytes on disk, hits, misses and the TTL."""
        counters = self._counters()
        entries = self._entries()
        return {
            "directory": str(self.directory),
            "entries": entries,
            "bytes": int(self._cache.volume()),
            "hits": int(counters.get("hits", 0)),
            "misses": int(counters.get("misses", 0)),
            "ttl_seconds": self.ttl_seconds,
        }

    def _entries(self) -> int:
        """Stored results (every row but the counters)."""
        return max(0, len(self._cache) - (1 if _STATS_KEY in self._cache else 0))

    def clear(self) -> int:
        """Remove every entry and reset the counters; returns how many results were removed."""
        entries = self._entries()
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
