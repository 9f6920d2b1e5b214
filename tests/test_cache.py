"""Search cache: TTL with an injected clock, JSON-only storage, 0700 folder, counters, CLI."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import stat
from pathlib import Path
from typing import Any

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


def test_a_failing_eviction_names_the_cache_folder(tmp_path: Path) -> None:
    """`corpus add` evicts cached corpus results; a broken cache file is named as the cache, not the corpus."""
    from deepresearch.errors import SearchError

    cache = SearchCache(tmp_path / "cache", ttl_seconds=60)
    cache.set("corpus", "q", 2, [hit("C")])
    other = sqlite3.connect(tmp_path / "cache" / "cache.db")
    other.execute("alter table Cache rename to Gone")  # another process broke the file
    other.commit()
    other.close()
    with pytest.raises(SearchError, match=r"the search cache in .*cache could not drop its corpus results .* folder"):
        cache.evict_backend("corpus")
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


def _plant(db_path: Path, key: Any, *, raw: int = 1, mode: int = diskcache.core.MODE_RAW, filename=None, value=None):
    """Insert a Cache row the way an attacker with write access to the folder could."""
    db = sqlite3.connect(db_path)
    db.execute(
        "insert into Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode,"
        " filename, value) values (?, ?, 0, null, 0, 0, null, 0, ?, ?, ?)",
        (key, raw, mode, filename, value),
    )
    db.commit()
    db.close()


def test_planted_file_names_are_never_deleted_or_read(tmp_path: Path, home: Path) -> None:
    """Issue 13 (4): a row whose filename is ../../x or absolute made `cache clear` delete x."""
    victims = [tmp_path / "victim-relative.txt", tmp_path / "victim-absolute.txt", tmp_path / "victim-open.txt"]
    for victim in victims:
        victim.write_text("precious")
    cache_db = home / "cache" / "cache.db"
    SearchCache(home / "cache", 60).close()
    relative = "../../" + victims[0].name  # home/cache/../../ == tmp_path
    assert (home / "cache" / relative).resolve() == victims[0]
    _plant(cache_db, cache_key("corpus", "q", 5), mode=diskcache.core.MODE_TEXT, filename=relative)
    _plant(cache_db, "absolute", mode=diskcache.core.MODE_BINARY, filename=str(victims[1]))
    # Planted while a cache is open: the Disk itself must refuse, not only the scrub at open.
    cache = SearchCache(home / "cache", 60)
    assert cache.dropped == 2
    _plant(cache_db, cache_key("corpus", "q", 5), mode=diskcache.core.MODE_TEXT, filename=str(victims[2]))
    assert cache.get("corpus", "q", 5) is None  # unreadable: dropped, searched again
    cache.close()
    _plant(cache_db, "later", mode=diskcache.core.MODE_TEXT, filename=relative)
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "clear"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "stats", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["entries"] == 0
    assert all(v.read_text() == "precious" for v in victims)


def test_disk_refuses_foreign_names_even_when_called_directly(tmp_path: Path) -> None:
    from deepresearch.search.cache import JSONDisk

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    disk = JSONDisk(str(tmp_path / "cache"))
    for name in ("../victim.txt", str(victim), "ab/cd/../../../victim.txt"):
        disk.remove(name)
        with pytest.raises(ValueError, match="not a cache value file"):
            disk.fetch(diskcache.core.MODE_TEXT, name, None, False)
    assert victim.read_text() == "precious"


def test_pickled_rows_are_skipped_and_reported_not_fatal(home: Path, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """Issue 13 (4): a pickled `_stats` row made every `search`/`cache stats` a traceback."""

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (Path.write_text, (tmp_path / "pwned", "yes"))

    cache = SearchCache(home / "cache", 60)
    cache.set("corpus", "kept", 5, [hit("A")])
    cache.close()
    cache_db = home / "cache" / "cache.db"
    _plant(cache_db, "_stats", mode=diskcache.core.MODE_PICKLE, value=pickle.dumps(Boom()))
    _plant(cache_db, pickle.dumps(Boom()), raw=0, value="{}")  # a pickled key
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "stats", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["entries"], data["hits"], data["misses"]) == (1, 0, 0)
    # A counters row planted while the cache is open is reset with a warning, not fatal.
    cache = SearchCache(home / "cache", 60)
    _plant(cache_db, "_stats", value="[1, 2]")
    with caplog.at_level("WARNING", logger="deepresearch.search.cache"):
        assert cache.get("corpus", "kept", 5) == [hit("A")]
    assert "resetting unreadable hit/miss counters" in caplog.text
    assert cache.stats()["hits"] == 1
    cache.close()
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    "value",
    ['"just text"', "[1]", '{"stored_at": "soon", "results": []}', '{"stored_at": 1e12, "results": [1]}', "{"],
)
def test_malformed_json_entry_is_dropped_and_searched_again(tmp_path: Path, value: str) -> None:
    cache = SearchCache(tmp_path / "cache", 60, clock=Clock(1e12))
    key = cache.set("counting", "q", 2, [hit("A")])
    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    db.execute("update Cache set value = ? where key = ?", (value, key))
    db.commit()
    db.close()
    backend = CountingBackend()
    results, was_hit, _ = cached_search(backend, "q", 2, cache)
    assert (was_hit, backend.calls, len(results)) == (False, 1, 2)
    assert cached_search(backend, "q", 2, cache)[1] is True  # stored again, readable now
    cache.close()


def test_symlink_to_a_shared_folder_is_refused_and_left_unchanged(home: Path, tmp_path: Path) -> None:
    """Issue 13 (5): a cache/ symlink to a 1777 folder was chmod'ed to 0700 (sticky bit lost).

    Decision: a linked cache folder is never chmod'ed; one other users can reach is refused.
    """
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (home / "cache").symlink_to(shared)
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "stats"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: search cache folder ") and "chmod 700" in result.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert list(shared.iterdir()) == []
    shared.chmod(0o700)  # a private target is used as it is
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "stats", "--json"])
    assert result.exit_code == 0, result.output
    assert (shared / "cache.db").exists() and stat.S_IMODE(shared.stat().st_mode) == 0o700


def test_cache_folder_of_another_user_is_one_clear_error(home: Path) -> None:
    cache_dir = home / "cache"
    if os.geteuid() == 0:
        cache_dir.mkdir(mode=0o700)
        os.chown(cache_dir, 65534, 65534)
    else:  # only root can give a folder away; "/" belongs to root
        cache_dir.symlink_to("/")
    result = CliRunner().invoke(app, ["--home", str(home), "cache", "stats"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: search cache folder ") and "belongs to another user" in result.stderr
    assert "Traceback" not in result.output
