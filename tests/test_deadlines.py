"""Issue 13 (6, 7): whole-request deadlines and response-shape errors of the HTTP backends,
against real loopback servers, through the CLI and with a hypothesis fuzz over the bodies."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.config import OpenAIConfig
from deepresearch.errors import ModelError, SearchError
from deepresearch.models.openai_backend import OpenAIModel
from deepresearch.search.searxng import SearxngBackend
from tests.loopback import JsonServer

runner = CliRunner()


class DripServer:
    """Accepts connections and answers one byte every `interval` seconds (40 of them, ~12 s, far
    past any deadline the tests set): inside the status line and headers, or inside the body."""

    def __init__(self, interval: float, where: str):
        self.interval, self.where = interval, where
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            if self.where == "body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                payload = b'{"results": [' + b" " * 100000
            else:
                payload = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100000
            for byte in payload[:40]:
                if self.stopped.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up: what the test wants
                    return
                time.sleep(self.interval)

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture(params=["headers", "body"])
def drip(request) -> Iterator[DripServer]:  # type: ignore[no-untyped-def]
    server = DripServer(0.3, request.param)
    yield server
    server.close()


def test_searxng_deadline_bounds_a_dripping_server(drip: DripServer, home: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each read arrives within the 1 s timeout, so only a whole-request deadline stops this."""
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", drip.url)
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__TIMEOUT", "1")
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__MAX_RETRIES", "0")
    started = time.monotonic()
    result = runner.invoke(app, ["--home", str(home), "search", "q", "--backend", "searxng", "--no-cache"])
    seconds = time.monotonic() - started
    assert result.exit_code == 1 and result.stderr.startswith("Error: SearXNG at "), result.output
    assert "no answer within 1s" in result.stderr
    assert seconds < 8.0, seconds  # 1 s deadline plus start-up on a loaded machine; the drip alone lasts ~12 s


def test_openai_deadline_bounds_a_dripping_server(drip: DripServer, home: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name, value in {
        "DEEPRESEARCH_LLM_BACKEND": "openai",
        "DEEPRESEARCH__LLM__OPENAI__BASE_URL": drip.url + "/v1",
        "DEEPRESEARCH__LLM__OPENAI__TIMEOUT": "1",
        "DEEPRESEARCH__LLM__OPENAI__MAX_RETRIES": "1",
        "DEEPRESEARCH__LLM__OPENAI__BACKOFF_SECONDS": "0",
    }.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    result = runner.invoke(app, ["--home", str(home), "ask", "hello"])
    seconds = time.monotonic() - started
    assert result.exit_code == 1 and "failed after 2 attempts (no answer within 1 s" in result.stderr, result.output
    assert seconds < 10.0, seconds  # two attempts of at most 1 s each, plus start-up; without a deadline ~24 s


@pytest.fixture(scope="module")
def body_server() -> Iterator[JsonServer]:
    server = JsonServer()
    yield server
    server.close()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([], "without a results list"),
        ({"results": "abc"}, "without a results list"),
        ({"results": 7}, "without a results list"),
        ({"results": [1, "x", None]}, "No results"),
        ({"results": [{"url": "https://a.org", "content": "c", "score": "high"}]}, "1. https://a.org"),
        ({"results": [{"url": "https://a.org", "score": [1]}, {"url": "https://b.org", "score": "NaN"}]}, "2."),
        pytest.param(b"[" * 100000, "did not return JSON", id="nested-too-deep"),
    ],
)
def test_searxng_response_shapes_are_error_lines_or_results(body_server, home: Path, monkeypatch, body, expected):  # type: ignore[no-untyped-def]
    """`[]`, `{"results":"abc"}`, `{"results":[1]}` and a non-numeric score were tracebacks."""
    body_server.serve(body)
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", body_server.url)
    result = runner.invoke(app, ["--home", str(home), "search", "q", "--backend", "searxng", "--no-cache"])
    assert "Traceback" not in result.output and not isinstance(result.exception, (TypeError, AttributeError))
    assert expected in result.output, result.output
    if result.exit_code:
        assert result.exit_code == 1 and result.stderr.count("Error: ") == 1


def test_searxng_redirect_loop_is_one_error_line(body_server, home: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    body_server.serve(b"", status=302, headers={"Location": "/search?again=1"})
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", body_server.url)
    result = runner.invoke(app, ["--home", str(home), "search", "q", "--backend", "searxng", "--no-cache"])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: SearXNG at ") and "TooManyRedirects" in result.stderr


def _chat(content: Any = "hi", **extra: Any) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}], **extra}


@pytest.mark.parametrize(
    "usage", ["many", [1, 2], {"prompt_tokens": "x", "completion_tokens": None}, {"prompt_tokens": float("inf")}]
)
def test_openai_usage_of_the_wrong_type_counts_zero(body_server, home: Path, monkeypatch, usage) -> None:  # type: ignore[no-untyped-def]
    """An OpenAI `usage` of the wrong type was a traceback; token counts are informative only."""
    body_server.serve(json.dumps(_chat("Paris.", usage=usage)).replace("Infinity", "1e999").encode())
    for name, value in {
        "DEEPRESEARCH_LLM_BACKEND": "openai",
        "DEEPRESEARCH__LLM__OPENAI__BASE_URL": body_server.url,
    }.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["--home", str(home), "ask", "capital?", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["text"], data["prompt_tokens"], data["completion_tokens"]) == ("Paris.", 0, 0)


@pytest.mark.parametrize(
    "body", [[], "x", {"choices": "abc"}, {"choices": [1]}, _chat(content=[1]), b"[" * 50000], ids=lambda b: str(b)[:24]
)
def test_openai_bad_shapes_are_one_error_line(body_server, home: Path, monkeypatch, body) -> None:  # type: ignore[no-untyped-def]
    body_server.serve(body)
    for name, value in {
        "DEEPRESEARCH_LLM_BACKEND": "openai",
        "DEEPRESEARCH__LLM__OPENAI__BASE_URL": body_server.url,
    }.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["--home", str(home), "ask", "capital?"])
    assert result.exit_code == 1 and result.stderr.count("Error: ") == 1 and "Traceback" not in result.output


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=10,
)
_KEYS = ("url", "title", "content", "score")
_SEARX = st.one_of(
    _JSON,
    st.fixed_dictionaries({"results": _JSON}),
    st.fixed_dictionaries({"results": st.lists(_JSON | st.dictionaries(st.sampled_from(_KEYS), _JSON), max_size=4)}),
)
_OPENAI = st.one_of(
    _JSON,
    st.fixed_dictionaries({"choices": _JSON, "usage": _JSON}),
    st.fixed_dictionaries(
        {
            "choices": st.lists(
                st.fixed_dictionaries({"message": st.dictionaries(st.just("content"), _JSON)}), max_size=2
            )
        },
        optional={"usage": _JSON | st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), _JSON)},
    ),
)
_FUZZ = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def searxng(body_server) -> Iterator[SearxngBackend]:  # type: ignore[no-untyped-def]
    """One backend (and HTTP client) for every example: building a client per example costs ~0.3 s."""
    from deepresearch import deadline

    http = deadline.client(5, follow_redirects=True)
    yield SearxngBackend(body_server.url, timeout=5, max_retries=0, client=http)
    http.close()


@_FUZZ
@given(body=_SEARX)
def test_fuzz_searxng_bodies_end_in_results_or_a_search_error(body_server, searxng, body) -> None:  # type: ignore[no-untyped-def]
    body_server.serve(body)
    try:
        results = searxng.search("q", 5)
    except SearchError:
        return
    assert all(r.url and r.score > 0 for r in results)


@pytest.fixture
def openai_model(body_server) -> OpenAIModel:  # type: ignore[no-untyped-def]
    return OpenAIModel(OpenAIConfig(base_url=body_server.url, timeout=5, max_retries=0))


@_FUZZ
@given(body=_OPENAI)
def test_fuzz_openai_bodies_end_in_a_completion_or_a_model_error(body_server, openai_model, body) -> None:  # type: ignore[no-untyped-def]
    body_server.serve(body)
    try:
        out = openai_model.complete([{"role": "user", "content": "q"}])
    except ModelError:
        return
    assert isinstance(out.text, str) and out.prompt_tokens >= 0 and out.completion_tokens >= 0
