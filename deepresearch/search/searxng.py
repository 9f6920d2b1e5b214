"""SearXNG backend: the instance's JSON API with a whole-request deadline and `retry.Retry`.

An empty answer is an empty list (the caller says "no results"); a network failure after
the retries is a `SearchError` naming the fix, never a traceback.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

from deepresearch.errors import SearchError
from deepresearch.retry import GaveUp, Retry, TryAgain, retry_after
from deepresearch.search.base import SearchBackend, SearchResult
from deepresearch.text import join_url, redact_secrets

log = logging.getLogger(__name__)

RETRY_STATUSES = {429, 500, 502, 503, 504}


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
        self.shown_url = redact_secrets(self.base_url)  # messages reach terminals, logs and run records
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep
        self._client = client

    def _get(self, query: str) -> Any:
        import httpx

        from deepresearch import deadline

        client = self._client or deadline.client(self.timeout, follow_redirects=True)
        # the base URL's own query (e.g. a token) is kept: httpx's `params=` would replace it
        url = join_url(self.base_url, "/search", {"q": query, "format": "json"})

        def attempt(seconds: float) -> Any:
            try:
                # A whole-request deadline, not one per read: a dripping server cannot stall it.
                response = deadline.send(client, "GET", url, seconds)
            except httpx.TimeoutException:
                raise TryAgain(f"no answer within {self.timeout:g}s") from None
            except httpx.TransportError as exc:
                raise TryAgain(f"cannot connect ({type(exc).__name__}: {exc})") from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:  # redirect loop, bad encoding, bad URL
                raise SearchError(
                    f"SearXNG at {self.shown_url} cannot be used ({type(exc).__name__}: {exc}) — check"
                    " search.searxng.base_url"
                ) from None
            if response.status_code == 200:
                return response
            if response.status_code == 403:
                raise SearchError(
                    f"SearXNG at {self.shown_url} refused the JSON API (HTTP 403) — add `json` to"
                    " search.formats in the instance's settings.yml"
                )
            if response.status_code not in RETRY_STATUSES:
                raise SearchError(
                    f"SearXNG at {self.shown_url} answered HTTP {response.status_code} — check search.searxng.base_url"
                )
            status = response.status_code
            raise TryAgain(
                "rate limited (HTTP 429)" if status == 429 else f"HTTP {status}",
                retry_after(response.headers.get("retry-after")),
            )

        policy = Retry(self.max_retries, self.backoff_seconds, self.timeout, sleep=self.sleep)
        try:
            return policy.call(attempt, f"searxng {self.shown_url}")
        except GaveUp as exc:
            raise SearchError(
                f"SearXNG at {self.shown_url} failed after {exc.tries}: {exc.describe()} — check that"
                " the instance runs and search.searxng.base_url, or raise search.searxng.timeout"
            ) from None
        finally:
            if self._client is None:
                client.close()

    def search(self, query: str, count: int) -> list[SearchResult]:
        """Up to `count` web results; [] when SearXNG finds nothing."""
        response = self._get(query)
        try:
            payload = response.json()
        except (ValueError, RecursionError):
            raise SearchError(
                f"SearXNG at {self.shown_url} did not return JSON — is base_url a SearXNG instance"
                " with the json format enabled?"
            ) from None
        items = (payload.get("results") or []) if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise SearchError(
                f"SearXNG at {self.shown_url} answered JSON without a results list — is base_url a SearXNG"
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
