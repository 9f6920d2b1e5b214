"""Lifecycle rules: which facts a recall may see under each mode, decay, TTL and age tags.

One place decides visibility so the vector path, the RAM path and the keyword (degraded)
path all apply the same rules (README, "Fact lifecycle"; `kb.categories` in configs/default.yaml):

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
from typing import TYPE_CHECKING, Mapping

import numpy as np

from deepresearch.errors import InputError
from deepresearch.facts import CATEGORIES, LIFECYCLE_MODES, STATUSES, normalize_category

if TYPE_CHECKING:
    from deepresearch.config import KBConfig

log = logging.getLogger(__name__)

DAY = 86400.0
# Categories whose values move fast: research re-verifies their facts once they are a day old
# (README, "How it works": the plan re-checks stale facts), whatever the freshness level.
FAST_CHANGING = ("market_data", "product_info")
FAST_CHANGING_MAX_AGE_DAYS = 1.0


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
        limit = fresh_max_age(level, config.freshness_days)
        max_age: dict[str, float | None] = {c: limit for c in cats}
    elif mode == "lifecycle":
        max_age = {c: config.categories[c].ttl_days for c in cats}
    else:
        max_age = {c: None for c in cats}
    statuses = STATUSES if include_expired else ("active",)
    return Visibility(mode, statuses, max_age, decay=mode in ("freshness", "lifecycle"))


def fresh_max_age(level: str, freshness_days: Mapping[str, float], category: str | None = None) -> float:
    """The freshness rule: how many days a fact stays fresh at freshness `level` (an unknown
    level: 30). Given its `category`, a fast-changing fact (`FAST_CHANGING`) stays fresh for a day:
    research re-checks it; recall's freshness mode asks without a category (one age for all)."""
    if category is not None and normalize_category(category) in FAST_CHANGING:
        return FAST_CHANGING_MAX_AGE_DAYS
    return float(freshness_days.get(level, 30.0))


def is_fresh(category: str, age_days: float, mode: str, level: str, freshness_days: Mapping[str, float]) -> bool:
    """A known fact research need not re-check: lifecycle mode off, or younger than `fresh_max_age`."""
    return mode == "off" or age_days <= fresh_max_age(level, freshness_days, category)


@dataclass(frozen=True)
class Filter:
    """Everything a search must honour before ranking."""

    visibility: Visibility
    now: float
    min_confidence: float
    config: KBConfig

    def decay_factor(self, category: str, age_days: np.ndarray) -> np.ndarray:
        """The multiplier applied to raw confidence (1 when the mode does not decay)."""
        if not self.visibility.decay:
            return np.ones_like(age_days)
        policy = self.config.categories[category]
        factor = np.maximum(self.config.decay_floor, np.exp(-policy.decay * np.maximum(age_days, 0.0)))
        if policy.ttl_days is not None:
            factor = np.where(age_days > policy.ttl_days, 0.0, factor)
        return factor
