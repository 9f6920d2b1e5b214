"""Lifecycle rules: which facts a recall may see under each mode, decay, TTL and age tags.

One place decides visibility so the vector path, the RAM path and the keyword (degraded)
path all apply the same rules (DESIGN.md §3):

| mode      | filter by age                        | decay |
|-----------|--------------------------------------|-------|
| off       | no                                   | no    |
| inform    | no                                   | no    |
| freshness | uniform max age of the freshness level | yes (past TTL → 0) |
| lifecycle | per-category TTL                     | yes   |

Facts a sweep marked `expired` and `superseded` facts are never recalled in any mode unless
the caller asks (`include_expired`). A fact past its TTL that no sweep has touched yet is
still `active`: modes off/inform return it and the hit says so (`Hit.expired`), the other
modes drop it by age.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepresearch.errors import InputError
from deepresearch.facts import CATEGORIES, LIFECYCLE_MODES, normalize_category

if TYPE_CHECKING:
    from deepresearch.config import KBConfig

log = logging.getLogger(__name__)

DAY = 86400.0


def effective_mode(mode: str | None, config: KBConfig) -> str:
    """The lifecycle mode to use: the given one, else the config's; an unknown one is an InputError
    naming the valid modes (as every other invalid option or environment value is)."""
    chosen = str(mode if mode is not None else config.lifecycle_mode).strip().lower()
    if chosen not in LIFECYCLE_MODES:
        raise InputError(f"unknown lifecycle mode {mode!r} — use one of {', '.join(LIFECYCLE_MODES)}")
    return chosen


def ttl_days(category: str, config: KBConfig) -> float | None:
    """Days until a fact of `category` expires (None = never)."""
    return config.categories[normalize_category(category)].ttl_days


def expires_at(category: str, verified_at: float, config: KBConfig) -> float | None:
    """Epoch seconds when a fact verified at `verified_at` expires (None = never)."""
    ttl = ttl_days(category, config)
    return None if ttl is None else verified_at + ttl * DAY


def decayed_confidence(raw: float, category: str, age_days: float, mode: str | None, config: KBConfig) -> float:
    """raw × max(floor, e^(−λ·age)); 0 past the category TTL; unchanged in modes off/inform."""
    mode = effective_mode(mode, config)
    if mode in ("off", "inform"):
        return raw
    policy = config.categories[normalize_category(category)]
    age = max(0.0, age_days)
    if policy.ttl_days is not None and age > policy.ttl_days:
        return 0.0
    return raw * max(config.decay_floor, math.exp(-policy.decay * age))


def age_tag(age_days: float) -> str:
    """A short human age: "today", "yesterday", "3 days ago", "2 months ago", "1 year ago"."""
    days = max(0.0, age_days)
    if days < 1:
        return "today"
    if days < 2:
        return "yesterday"
    for size, unit in ((365.0, "year"), (30.0, "month"), (7.0, "week")):
        if days >= size * (2 if unit == "week" else 1):
            n = int(days // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return f"{int(days)} days ago"


@dataclass(frozen=True)
class Visibility:
    """What a recall may see: allowed statuses and, per category, the max age in days (None = any)."""

    mode: str
    statuses: tuple[str, ...]
    max_age: dict[str, float | None]
    decay: bool

    def cutoffs(self, now: float) -> dict[str, float | None]:
        """Per category, the oldest `verified_at` (epoch s) still visible (None = no limit)."""
        return {c: None if a is None else now - a * DAY for c, a in self.max_age.items()}


ALL_STATUSES = ("active", "expired", "superseded")


def visibility(
    mode: str | None,
    config: KBConfig,
    freshness: str | None = None,
    category: str | None = None,
    include_expired: bool = False,
) -> Visibility:
    """The visibility rules of `mode` (freshness level, category filter and swept/superseded facts optional)."""
    mode = effective_mode(mode, config)
    cats = (normalize_category(category),) if category else CATEGORIES
    if mode == "freshness":
        level = freshness or config.freshness
        if level not in config.freshness_days:
            log.warning("unknown freshness level %r; using %r", level, config.freshness)
            level = config.freshness
        limit = config.freshness_days[level]
        max_age: dict[str, float | None] = {c: limit for c in cats}
    elif mode == "lifecycle":
        max_age = {c: config.categories[c].ttl_days for c in cats}
    else:
        max_age = {c: None for c in cats}
    statuses = ALL_STATUSES if include_expired else ("active",)
    return Visibility(mode, statuses, max_age, decay=mode in ("freshness", "lifecycle"))
