"""One retry loop for every client that talks to a server: OpenAI-compatible chat, SearXNG, Milvus.

An attempt that fails transiently raises `TryAgain`; the loop waits and tries again, doubling
its wait each time (`backoff`, 2×backoff, …), unless the server said how long to wait: a
`Retry-After` header, in delta-seconds or as an HTTP-date, wins. Every wait is capped.

The whole call has one deadline, `timeout × (retries + 1)` from its start: what the attempts
alone could take at worst. Waits come out of that time instead of adding to it: a wait that
would end past the deadline is not taken (the call gives up at once with the last failure),
and each attempt gets only the time left, so no Retry-After can keep a caller waiting longer
than its configuration says.
"""

from __future__ import annotations

import email.utils
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_WAIT_SECONDS = 30.0


class TryAgain(Exception):
    """Raised by an attempt whose failure is transient; `wait` is what the server asked for (seconds)."""

    def __init__(self, problem: str, wait: float | None = None):
        super().__init__(problem)
        self.problem, self.wait = problem, wait


class GaveUp(Exception):
    """Every attempt failed, or the deadline left no time to wait for another one."""

    def __init__(self, problem: str, attempts: int, stopped: str | None = None):
        super().__init__(problem)
        self.problem, self.attempts, self.stopped = problem, attempts, stopped

    @property
    def tries(self) -> str:
        """ "1 attempt" or "N attempts"."""
        return f"{self.attempts} attempt" + ("" if self.attempts == 1 else "s")

    def describe(self) -> str:
        """The last failure, and why no further attempt was made when the deadline stopped it."""
        return self.problem + (f"; {self.stopped}" if self.stopped else "")


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a `Retry-After` header asks to wait (delta-seconds or an HTTP-date); None if unreadable."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; an HTTP-date is always UTC
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


@dataclass
class Retry:
    """How one client retries: `retries` after the first attempt, each attempt at most `timeout` s."""

    retries: int
    backoff: float
    timeout: float
    cap: float = MAX_WAIT_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @property
    def budget(self) -> float:
        """Seconds the whole call may take, waits included: what the attempts alone could take."""
        return self.timeout * (self.retries + 1)

    def call(self, attempt: Callable[[float], T], what: str = "request") -> T:
        """`attempt(seconds)` until it returns; `TryAgain` retries, other errors propagate; `GaveUp` at the end."""
        ends = self.clock() + self.budget
        last = TryAgain("no attempt made")
        for n in range(self.retries + 1):
            left = ends - self.clock()
            if left <= 0:
                raise GaveUp(last.problem, n, f"no time left within {self.budget:g}s") from last
            try:
                return attempt(min(self.timeout, left))
            except TryAgain as exc:
                last = exc
            if n == self.retries:
                raise GaveUp(last.problem, n + 1) from last
            asked = last.wait
            wait = min(self.backoff * 2**n if asked is None else asked, self.cap)
            if self.clock() + wait >= ends:
                said = f"the server asked to wait {asked:.1f}s" if asked is not None else f"a {wait:.1f}s wait"
                raise GaveUp(last.problem, n + 1, f"{said}, past the {self.budget:g}s deadline") from last
            log.warning("%s: %s; retry %d/%d in %.1fs", what, last.problem, n + 1, self.retries, wait)
            self.sleep(wait)
        raise AssertionError("unreachable")
