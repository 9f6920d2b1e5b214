"""SearXNG backend: the instance's JSON API with timeouts, retries and rate-limit backoff.

An empty answer is an empty list (the caller says "no results"); a network failure after
the retries is a `SearchError` naming the fix, never a traceback.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

from deepresearch.errors import SearchError
from deepresearch.search.base import SearchBackend, SearchResult

log = logging.getLogger(__name__)

RETRY_STATUSES = {429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 30.0


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _score(value: Any, rank: int) -> float:
    """SearXNG's score when it is a finite number, else one from the rank."""
    try:
        score = float(value)
    except (TypeError, ValueError):
        return 1.0 / rank
    return score if math.isfinite(score) and score > 0 else 1.0 / rank


class SearxngBackend(SearchBackend):
    """Queries `<base_url>/search?format=json`."""

    name = "searxng"
    io_bound = True

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        max_retries: int = 3,
        backoff_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        client: Any = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep
        self._client = client

    def _get(self, query: str) -> Any:
        import httpx

        from deepresearch import deadline

        client = self._client or deadline.client(self.timeout, follow_redirects=True)
        url = f"{self.base_url}/search"
        params = {"q": query, "format": "json"}
        problem = ""
        try:
            for attempt in range(self.max_retries + 1):
                delay = self.backoff_seconds * (2**attempt)
                try:
                    # `timeout` bounds the whole request, not each read (a dripping server cannot stall it).
                    response = deadline.send(client, "GET", url, self.timeout, params=params)
                except httpx.TimeoutException:
                    problem = f"no answer within {self.timeout:g}s"
                except httpx.TransportError as exc:
                    problem = f"cannot connect ({type(exc).__name__}: {exc})"
                except (httpx.HTTPError, httpx.InvalidURL) as exc:  # redirect loop, bad encoding, bad URL
                    raise SearchError(
                        f"SearXNG at {self.base_url} cannot be used ({type(exc).__name__}: {exc}) — check"
                        " search.searxng.base_url"
                    ) from None
                else:
                    if response.status_code == 200:
                        return response
                    if response.status_code == 403:
                        raise SearchError(
                            f"SearXNG at {self.base_url} refused the JSON API (HTTP 403) — add `json` to"
                            " search.formats in the instance's settings.yml"
                        )
                    if response.status_code not in RETRY_STATUSES:
                        raise SearchError(
                            f"SearXNG at {self.base_url} answered HTTP {response.status_code} — check"
                            " search.searxng.base_url"
                        )
                    problem = (
                        "rate limited (HTTP 429)" if response.status_code == 429 else f"HTTP {response.status_code}"
                    )
                    asked = _retry_after(response.headers.get("retry-after"))
                    delay = min(delay if asked is None else asked, MAX_RETRY_AFTER_S)
                if attempt < self.max_retries:
                    log.info("searxng: %s; retry %d/%d in %.1fs", problem, attempt + 1, self.max_retries, delay)
                    self.sleep(delay)
        finally:
            if self._client is None:
                client.close()
        raise SearchError(
            f"SearXNG at {self.base_url} failed after {self.max_retries + 1} attempts: {problem} — check that"
            " the instance runs and search.searxng.base_url, or raise search.searxng.timeout"
        )

    def search(self, query: str, count: int) -> list[SearchResult]:
        """Up to `count` web results; [] when SearXNG finds nothing."""
        response = self._get(query)
        try:
            payload = response.json()
        except (ValueError, RecursionError):
            raise SearchError(
                f"SearXNG at {self.base_url} did not return JSON — is base_url a SearXNG instance"
                " with the json format enabled?"
            ) from None
        items = (payload.get("results") or []) if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise SearchError(
                f"SearXNG at {self.base_url} answered JSON without a results list — is base_url a SearXNG"
                " instance with the json format enabled?"
            )
        results = []
        for rank, item in enumerate(items, start=1):
            if not isinstance(item, dict):  # a malformed entry is skipped, the rest kept
                continue
            url = str(item.get("url") or "")
            if not url:
                continue
            content = str(item.get("content") or "")
            results.append(
                SearchResult(
                    title=str(item.get("title") or url),
                    url=url,
                    snippet=content[:300],
                    text=content,
                    score=_score(item.get("score"), rank),
                    backend=self.name,
                )
            )
            if len(results) >= count:
                break
        if not results:
            log.info("searxng: no results for %r", query)
        return results
