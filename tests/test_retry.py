"""The one retry helper (`deepresearch.retry`): backoff, both forms of Retry-After, one deadline;
then the OpenAI and SearXNG clients against a real loopback server answering 429 with an HTTP-date."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime, formatdate
from typing import Any, Iterator

import pytest

from deepresearch.config import OpenAIConfig
from deepresearch.errors import ModelError, SearchError
from deepresearch.models.openai_backend import OpenAIModel
from deepresearch.retry import GaveUp, Retry, TryAgain, retry_after
from deepresearch.search.searxng import SearxngBackend
from tests.loopback import JsonServer

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        (format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),  # IMF-fixdate
        ("Mon, 30 Nov 2026 12:00:05 -0000", 5.0),  # parses naive: still UTC
        ("Monday, 30-Nov-26 12:00:10 GMT", 10.0),  # obsolete RFC 850 form
        ("Mon Nov 30 12:00:20 2026", 20.0),  # asctime form
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),  # in the past: no wait
        ("", None),
        (None, None),
        ("soon", None),
        ("inf", None),
        ("nan", None),
        ("Mon, 99 Foo 2026 25:61:00 GMT", None),
    ],
)
def test_retry_after_reads_delta_seconds_and_http_dates(header: str | None, seconds: float | None) -> None:
    assert retry_after(header, now=NOW) == seconds


class Clock:
    """A fake monotonic clock that only the (fake) sleeps and attempts move."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _policy(clock: Clock, **kw: Any) -> Retry:
    return Retry(**{"retries": 3, "backoff": 0.5, "timeout": 10.0, "sleep": clock.sleep, "clock": clock} | kw)


def test_backoff_doubles_and_a_server_wait_wins_capped() -> None:
    clock = Clock()
    waits = iter([None, 4.0, 99.0])
    given: list[float] = []

    def attempt(seconds: float) -> str:
        given.append(seconds)
        if len(given) <= 3:
            raise TryAgain("busy", next(waits))
        return "ok"

    assert _policy(clock, timeout=20.0).call(attempt) == "ok"
    assert clock.sleeps == [0.5, 4.0, 30.0]  # our backoff, the server's 4 s, the server's 99 s capped at 30
    assert given == [20.0, 20.0, 20.0, 20.0]


def test_gives_up_after_the_retries_with_the_last_problem() -> None:
    clock = Clock()
    calls = []

    def attempt(seconds: float) -> None:
        calls.append(seconds)
        raise TryAgain(f"HTTP 503 #{len(calls)}")

    with pytest.raises(GaveUp) as info:
        _policy(clock, retries=2).call(attempt)
    assert (info.value.tries, info.value.problem, info.value.stopped) == ("3 attempts", "HTTP 503 #3", None)
    assert clock.sleeps == [0.5, 1.0]


def test_never_sleeps_past_the_whole_call_deadline() -> None:
    """timeout 1 s × 3 attempts = 3 s for the whole call: a 60 s Retry-After (capped to 30) is not waited."""
    clock = Clock()

    def attempt(seconds: float) -> None:
        raise TryAgain("rate limited (HTTP 429)", 60.0)

    with pytest.raises(GaveUp) as info:
        _policy(clock, retries=2, timeout=1.0).call(attempt)
    assert clock.sleeps == [] and info.value.attempts == 1
    assert info.value.describe() == "rate limited (HTTP 429); the server asked to wait 60.0s, past the 3s deadline"


def test_each_attempt_gets_only_the_time_left() -> None:
    clock = Clock()
    given: list[float] = []

    def attempt(seconds: float) -> str:
        given.append(seconds)
        if len(given) == 1:
            clock.now += 1.0  # the first attempt used its whole second
            raise TryAgain("no answer within 1s")
        if len(given) == 2:
            clock.now += 0.5
            raise TryAgain("HTTP 502", 1.2)
        return "ok"

    # 3 s in all: 1 s used, 0.25 s wait, 0.5 s used, 1.2 s wait → 0.05 s left for the last try.
    assert _policy(clock, retries=2, timeout=1.0, backoff=0.25).call(attempt) == "ok"
    assert clock.sleeps == [0.25, 1.2]
    assert given[:2] == [1.0, 1.0] and given[2] == pytest.approx(0.05)


def test_other_errors_are_not_retried() -> None:
    clock = Clock()

    def attempt(seconds: float) -> None:
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        _policy(clock).call(attempt)
    assert clock.sleeps == []


# --- the clients against a real loopback server -------------------------------------------


@pytest.fixture
def server() -> Iterator[JsonServer]:
    s = JsonServer()
    s.serve({}, status=500)
    yield s
    s.close()


def _http_date(seconds_ahead: float) -> str:
    return formatdate(time.time() + seconds_ahead, usegmt=True)


CHAT = {"choices": [{"message": {"role": "assistant", "content": "Paris."}}]}
SEARX = {"results": [{"url": "https://a.org", "title": "A", "content": "a"}]}


def test_searxng_waits_until_an_http_date_retry_after(server: JsonServer) -> None:
    """A real wait: the date is 3 s ahead at one-second resolution, so the retry comes 2–3 s later
    (less the time the 429 took to arrive)."""
    server.script = [(429, {"error": "slow down"}, {"Retry-After": _http_date(3)}), (200, SEARX, {})]
    backend = SearxngBackend(server.url, timeout=5, max_retries=2, backoff_seconds=0.01)
    assert [r.url for r in backend.search("q", 5)] == ["https://a.org"]
    gap = server.times[1] - server.times[0]
    assert 1.0 < gap < 6.0, gap  # not our 0.01 s backoff: the server's date


def test_openai_honours_an_http_date_retry_after(server: JsonServer) -> None:
    sleeps: list[float] = []
    server.script = [(429, {"error": {"message": "slow down"}}, {"Retry-After": _http_date(3)}), (200, CHAT, {})]
    model = OpenAIModel(OpenAIConfig(base_url=server.url, max_retries=2, backoff_seconds=0.01), sleep=sleeps.append)
    assert model.complete([{"role": "user", "content": "capital?"}]).text == "Paris."
    assert len(sleeps) == 1 and 1.0 < sleeps[0] <= 3.0, sleeps  # the date (2–3 s ahead), not the 0.01 s backoff


def test_a_retry_after_past_the_deadline_fails_at_once(server: JsonServer) -> None:
    """An hour-away date with a 1 s timeout and 2 retries (3 s in all): no wait, one clear error line."""
    sleeps: list[float] = []
    far = {"Retry-After": _http_date(3600)}
    server.script = [(429, {"error": "slow down"}, far)]
    backend = SearxngBackend(server.url, timeout=1, max_retries=2, backoff_seconds=0.01, sleep=sleeps.append)
    with pytest.raises(SearchError, match=r"failed after 1 attempt: rate limited \(HTTP 429\); the server asked"):
        backend.search("q", 5)
    server.script = [(503, {"error": {"message": "overloaded"}}, far)]
    model = OpenAIModel(OpenAIConfig(base_url=server.url, timeout=1, max_retries=2), sleep=sleeps.append)
    with pytest.raises(ModelError, match=r"failed after 1 attempt \(HTTP 503: overloaded; the server asked to wait"):
        model.complete([{"role": "user", "content": "capital?"}])
    assert sleeps == [] and len(server.times) == 2
