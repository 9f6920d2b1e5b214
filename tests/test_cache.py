"""Search cache: TTL with an injected clock, JSON-only storage, 0700 folder, counters, CLI."""

from __future__ import annotations

import json
import pickle
import sqlite3
import stat
from pathlib import Path

import diskcache
import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.search.backends import SearchBackend, SearchResult
from deepresearch.search.cache import SearchCache, cache_key, cached_search


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingBackend(SearchBackend):
    name = "counting"

    def __init__(self, results: list[SearchResult] | None = None):
        self.calls = 0
        self.results = results if results is not None else [hit("A"), hit("B")]

    def search(self, query: str, count: int) -> list[SearchResult]:
        self.calls += 1
        return self.results[:count]


def hit(title: str) -> SearchResult:
    return SearchResult(
        title=title,
        url=f"https://ex.org/{title}",
        snippet="s",
        text=f"text of {title} 芯片",
        score=0.5,
        backend="counting",
    )


def test_hit_within_ttl_miss_after(tmp_path: Path) -> None:
    clock = Clock()
    cache = SearchCache(tmp_path / "cache", ttl_seconds=7200, clock=clock)
    backend = CountingBackend()
    first, hit1, key = cached_search(backend, "GPU  Shipments", 2, cache)
    clock.now += 7199
    second, hit2, key2 = cached_search(backend, "gpu shipments", 2, cache)  # normalized: same key
    assert (hit1, hit2, backend.calls) == (False, True, 1)
    assert second == first and key == key2
    clock.now += 2  # past the TTL
    third, hit3, _ = cached_search(backend, "gpu shipments", 2, cache)
    assert hit3 is False and backend.calls == 2 and third == first
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 2
    cache.close()


def test_key_is_stable_and_separates_backend_and_count() -> None:
    key = cache_key("corpus", " Hello   World ", 5)
    assert key == cache_key("corpus", "hello world", 5)
    assert key.startswith("corpus:5:")
    assert key != cache_key("zim", "hello world", 5) and key != cache_key("corpus", "hello world", 6)


def test_values_are_json_text_never_pickle(tmp_path: Path) -> None:
    cache = SearchCache(tmp_path / "cache", ttl_seconds=60)
    cache.set("counting", "q", 2, [hit("A"), hit("B")])
    cache.get("counting", "q", 2)  # also writes the counters
    cache.close()
    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    rows = db.execute("select key, mode, value from Cache").fetchall()
    db.close()
    assert len(rows) == 2  # the entry and the hit/miss counters
    for _key, mode, value in rows:
        assert mode == diskcache.core.MODE_RAW and mode != diskcache.core.MODE_PICKLE
        assert isinstance(value, str)
        assert not value.startswith("\x80")  # no pickle protocol header
        json.loads(value)
    entry = json.loads(next(v for k, _, v in rows if k.startswith("counting:")))
    assert entry["results"][0]["title"] == "A" and entry["results"][0]["text"].endswith("芯片")


def test_planted_pickle_is_never_loaded(tmp_path: Path) -> None:
    cache = SearchCache(tmp_path / "cache", ttl_seconds=60)
    key = cache.set("counting", "q", 2, [hit("A")])
    cache.close()

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (Path.write_text, (tmp_path / "pwned", "yes"))

    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    db.execute("update Cache set mode = 4, value = ? where key = ?", (pickle.dumps(Boom()), key))
    db.commit()
    db.close()
    cache = SearchCache(tmp_path / "cache", ttl_seconds=60)
    assert cache.get("counting", "q", 2) is None
    assert not (tmp_path / "pwned").exists()
    cache.close()


def test_directory_mode_is_0700(tmp_path: Path, workspace) -> None:  # type: ignore[no-untyped-def]
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    SearchCache(loose, 60).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    cache = SearchCache.from_workspace(workspace)
    assert cache.directory == workspace.home / "cache"
    assert stat.S_IMODE(cache.directory.stat().st_mode) == 0o700
    cache.close()


def test_evict_clear_and_empty_results_not_cached(tmp_path: Path) -> None:
    cache = SearchCache(tmp_path / "cache", ttl_seconds=60)
    empty = CountingBackend(results=[])
    assert cached_search(empty, "nothing", 3, cache)[0] == []
    assert cached_search(empty, "nothing", 3, cache)[1] is False and empty.calls == 2
    backend = CountingBackend()
    _, _, key = cached_search(backend, "q", 2, cache)
    assert cache.evict(key) is True and cache.evict(key) is False
    assert cached_search(backend, "q", 2, cache)[1] is False
    cache.set("corpus", "other", 2, [hit("C")])
    assert cache.evict_backend("corpus") == 1 and cache.stats()["entries"] == 1
    assert cache.clear() == 1
    assert cache.stats() | {"directory": "", "bytes": 0} == {
        "directory": "",
        "entries": 0,
        "bytes": 0,
        "hits": 0,
        "misses": 0,
        "ttl_seconds": 60.0,
    }
    cache.close()


def test_no_cache_means_always_backend() -> None:
    backend = CountingBackend()
    for _ in range(2):
        results, was_hit, key = cached_search(backend, "q", 1, None)
        assert not was_hit and len(results) == 1 and key == cache_key("counting", "q", 1)
    assert backend.calls == 2


def test_cache_cli_stats_and_clear(home: Path) -> None:
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    cache = SearchCache.from_workspace(ws)
    cache.set("corpus", "q", 5, [hit("A")])
    cache.get("corpus", "q", 5)
    cache.close()
    runner = CliRunner()
    result = runner.invoke(app, ["--home", str(home), "cache", "stats", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["entries"], data["hits"], data["misses"], data["ttl_seconds"]) == (1, 1, 0, 7200.0)
    result = runner.invoke(app, ["--home", str(home), "cache", "stats"])
    assert "1 entries" in result.stdout and "hit rate 100%" in result.stdout
    result = runner.invoke(app, ["--home", str(home), "cache", "clear"])
    assert result.exit_code == 0 and result.stdout.strip() == "removed 1 cached searches"


@pytest.mark.parametrize("ttl", [0.0])
def test_zero_ttl_never_hits(tmp_path: Path, ttl: float) -> None:
    clock = Clock()
    cache = SearchCache(tmp_path / "c", ttl_seconds=ttl, clock=clock)
    backend = CountingBackend()
    cached_search(backend, "q", 1, cache)
    clock.now += 0.001
    assert cached_search(backend, "q", 1, cache)[1] is False
    cache.close()
