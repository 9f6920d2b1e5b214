"""Backend registry, ZIM (a file built with libzim's writer) and SearXNG (a real loopback server)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.errors import SearchError
from deepresearch.search.backends import BACKENDS, SearchBackend, SearchResult, get_backend, register_backend
from deepresearch.search.searxng import SearxngBackend
from deepresearch.workspace import Workspace

# --- registry ---------------------------------------------------------------------------------


def test_unknown_backend_names_the_choices(workspace: Workspace) -> None:
    with pytest.raises(SearchError, match="choose one of corpus, searxng, zim"):
        get_backend("bing", workspace)


def test_registered_backend_is_found(workspace: Workspace) -> None:
    class Echo(SearchBackend):
        name = "echo"

        def search(self, query: str, count: int) -> list[SearchResult]:
            return [SearchResult(query, "u", "", "", 1.0, self.name)] * count

    # The same call the built-ins use; unregistered afterwards so other tests see the real set.
    register_backend("echo")(lambda ws: Echo())
    try:
        assert [r.title for r in get_backend("echo", workspace).search("hi", 2)] == ["hi", "hi"]
    finally:
        BACKENDS.unregister("echo")
    assert "echo" not in BACKENDS


def test_corpus_backend_on_empty_corpus_returns_nothing(workspace: Workspace) -> None:
    backend = get_backend("corpus", workspace)
    assert backend.name == "corpus" and backend.io_bound is False
    backend.mode = "bm25"  # type: ignore[attr-defined]  # no embedding model needed
    assert backend.search("anything at all", 5) == []


# --- ZIM ---------------------------------------------------------------------------------------

ARTICLES = {
    "A/Moon": ("Moon", "<p>The Moon is Earth's only natural satellite, orbiting at about 384,400 km.</p>"),
    "A/Mars": ("Mars", "<p>Mars is the fourth planet from the Sun and has two small moons.</p>"),
    "A/Tide": ("Tide", "<p>Tides are caused by the gravitational pull of the Moon and the Sun.</p>"),
}


def make_zim(path: Path, articles: dict[str, tuple[str, str]]) -> Path:
    """Write a ZIM file with a full-text index using libzim's own writer."""
    from libzim.writer import Creator, Hint, Item, StringProvider

    class Article(Item):
        def __init__(self, url: str, title: str, body: str):
            super().__init__()
            self.url, self.title, self.body = url, title, body

        def get_path(self) -> str:
            return self.url

        def get_title(self) -> str:
            return self.title

        def get_mimetype(self) -> str:
            return "text/html"

        def get_contentprovider(self) -> StringProvider:
            nav = "<nav><a href='/'>Main page</a> <a href='/r'>Random article</a></nav>"
            head = f"<head><title>{self.title}</title></head>"
            html = f"<html>{head}<body>{nav}<main>{self.body}</main></body></html>"
            return StringProvider(html)

        def get_hints(self) -> dict:
            return {Hint.FRONT_ARTICLE: True}

    with Creator(str(path)).config_indexing(True, "eng") as creator:
        creator.set_mainpath(next(iter(articles)))
        for url, (title, body) in articles.items():
            creator.add_item(Article(url, title, body))
        creator.add_metadata("Title", "Test wiki")
        creator.add_metadata("Language", "eng")
    return path


@pytest.fixture(scope="module")
def zim_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_zim(tmp_path_factory.mktemp("zim") / "wiki_test.zim", ARTICLES)


def test_zim_search_returns_article_text(zim_file: Path, home: Path) -> None:
    ws = Workspace.open(home, overrides={"search.zim.files": [str(zim_file)]})
    backend = get_backend("zim", ws)
    results = backend.search("satellite", 5)
    assert [r.url for r in results] == ["zim://wiki_test.zim/A/Moon"]
    moon = results[0]
    assert moon.title == "Moon" and moon.backend == "zim"
    assert "only natural satellite" in moon.text and "Random article" not in moon.text
    assert {r.url for r in backend.search("Sun", 5)} == {
        "zim://wiki_test.zim/A/Mars",
        "zim://wiki_test.zim/A/Tide",
    }
    assert backend.search("xylophone", 5) == []


def test_missing_zim_file_is_one_clear_message(zim_file: Path, tmp_path: Path) -> None:
    from deepresearch.search.zim import ZimBackend

    missing = tmp_path / "nope.zim"
    with pytest.raises(SearchError, match=r"ZIM file not found: .*nope\.zim — fix search\.zim\.files"):
        ZimBackend([missing])
    backend = ZimBackend([missing, zim_file])  # the usable file still serves
    assert backend.problems == [f"ZIM file not found: {missing} — fix search.zim.files"]
    assert backend.search("satellite", 1)[0].title == "Moon"
    with pytest.raises(SearchError, match="set search.zim.files"):
        ZimBackend([])


def test_zim_cli_search(zim_file: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__ZIM__FILES", json.dumps([str(zim_file)]))
    result = CliRunner().invoke(app, ["--home", str(home), "search", "satellite", "--backend", "zim", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "zim" and data["cache_hit"] is False
    assert data["results"][0]["url"] == "zim://wiki_test.zim/A/Moon"


# --- SearXNG -----------------------------------------------------------------------------------


class FakeSearxng(BaseHTTPRequestHandler):
    """A SearXNG look-alike whose behaviour depends on the query text."""

    calls: dict[str, int] = {}

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, code: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        params = parse_qs(urlsplit(self.path).query)
        query = params.get("q", [""])[0]
        assert urlsplit(self.path).path == "/search" and params.get("format") == ["json"]
        n = FakeSearxng.calls[query] = FakeSearxng.calls.get(query, 0) + 1
        results = [
            {
                "title": "GPU shipments 2024",
                "url": "https://ex.org/gpu",
                "content": "GPU shipments rose 40%.",
            },
            {"title": "No URL", "url": "", "content": "dropped"},
            {"title": "AI chips", "url": "https://ex.org/chips", "content": "AI chip sales grew."},
        ]
        if query == "empty":
            self._send(200, {"query": query, "results": []})
        elif query == "ratelimited" and n == 1:
            self._send(429, {"error": "too many requests"}, {"Retry-After": "0"})
        elif query == "slow":
            time.sleep(0.6)
            self._send(200, {"results": results})
        elif query == "forbidden":
            self._send(403, b"Forbidden")
        elif query == "html":
            self._send(200, b"<html>not json</html>")
        else:
            self._send(200, {"query": query, "results": results})


@pytest.fixture(scope="module")
def searxng_url():  # type: ignore[no-untyped-def]
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSearxng)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def backend_for(url: str, **kwargs: object) -> tuple[SearxngBackend, list[float]]:
    sleeps: list[float] = []
    options = {"timeout": 2.0, "max_retries": 2, "backoff_seconds": 0.01, "sleep": sleeps.append} | kwargs
    return SearxngBackend(url, **options), sleeps  # type: ignore[arg-type]


def test_searxng_ok(searxng_url: str) -> None:
    backend, sleeps = backend_for(searxng_url)
    results = backend.search("gpu", 5)
    assert [r.url for r in results] == ["https://ex.org/gpu", "https://ex.org/chips"]
    assert results[0].text == "GPU shipments rose 40%." and results[0].backend == "searxng"
    assert results[0].score > results[1].score and sleeps == []
    assert len(backend.search("gpu", 1)) == 1 and backend.io_bound is True


def test_searxng_empty_is_no_results(searxng_url: str) -> None:
    backend, _ = backend_for(searxng_url)
    assert backend.search("empty", 5) == []


def test_searxng_429_then_ok_backs_off(searxng_url: str) -> None:
    backend, sleeps = backend_for(searxng_url)
    results = backend.search("ratelimited", 5)
    assert len(results) == 2 and FakeSearxng.calls["ratelimited"] == 2
    assert sleeps == [0.0]  # the server's Retry-After: 0 wins over our own backoff


def test_searxng_timeout_is_a_clear_error(searxng_url: str) -> None:
    # The call's deadline is 0.4 s (two attempts of 0.2 s): on a busy machine the first timed-out attempt can end
    # so late that the retry would run past it, and the call gives up after one attempt. Either way the error is
    # clear; that a failed attempt is retried is test_searxng_down_is_a_clear_error's (a refusal is quick).
    backend, sleeps = backend_for(searxng_url, timeout=0.2, max_retries=1)
    late = r"(?:; a 0\.0s wait, past the 0\.4s deadline)?"
    clear = rf"failed after (?:2 attempts|1 attempt): no answer within 0\.2s{late} — check"
    with pytest.raises(SearchError, match=clear):
        backend.search("slow", 5)
    assert sleeps in ([0.01], [])


def test_searxng_refused_and_non_json(searxng_url: str) -> None:
    backend, _ = backend_for(searxng_url)
    with pytest.raises(SearchError, match="add `json` to search.formats"):
        backend.search("forbidden", 5)
    with pytest.raises(SearchError, match="did not return JSON"):
        backend.search("html", 5)


def test_searxng_down_is_a_clear_error() -> None:
    backend, sleeps = backend_for("http://127.0.0.1:9", max_retries=1)
    with pytest.raises(SearchError, match="cannot connect"):
        backend.search("gpu", 5)
    assert sleeps == [0.01]


def test_searxng_cli_through_cache(searxng_url: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", searxng_url)
    runner = CliRunner()
    args = ["--home", str(home), "search", "cli query", "--backend", "searxng", "--json"]
    first = json.loads(runner.invoke(app, args).stdout)
    second = json.loads(runner.invoke(app, args).stdout)
    assert (first["cache_hit"], second["cache_hit"]) == (False, True)
    assert second["results"] == first["results"] and FakeSearxng.calls["cli query"] == 1
    third = json.loads(runner.invoke(app, [*args, "--no-cache"]).stdout)
    assert third["cache_hit"] is False and FakeSearxng.calls["cli query"] == 2
    empty = runner.invoke(app, ["--home", str(home), "search", "empty", "--backend", "searxng"])
    assert empty.exit_code == 0 and empty.stdout.strip() == "No results for 'empty'."
    down = runner.invoke(
        app,
        ["--home", str(home), "search", "slow", "--backend", "searxng", "--no-cache"],
        env={
            "DEEPRESEARCH__SEARCH__SEARXNG__TIMEOUT": "0.2",
            "DEEPRESEARCH__SEARCH__SEARXNG__MAX_RETRIES": "0",
        },
    )
    assert down.exit_code == 1 and down.stderr.startswith("Error: SearXNG at http://127.0.0.1:")
