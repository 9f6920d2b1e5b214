"""Domain types shared by every layer: fact categories, `Fact`, `Hit`, ids and hashing."""

from __future__ import annotations

import hashlib
import os
import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

CATEGORIES: tuple[str, ...] = (
    "market_data",
    "product_info",
    "strategy",
    "technology",
    "historical",
)
DEFAULT_CATEGORY = "strategy"

LIFECYCLE_MODES: tuple[str, ...] = ("off", "inform", "freshness", "lifecycle")
DEFAULT_LIFECYCLE_MODE = "freshness"
FRESHNESS_LEVELS: tuple[str, ...] = ("high", "medium", "low")

# Every status a fact can have, in one order: the compact vector copy stores a status as its index
# here (kb/codes.py), so existing files need this order kept and a new status appended.
STATUSES: tuple[str, ...] = ("active", "expired", "superseded")
Status = Literal["active", "expired", "superseded"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(now: float | None = None) -> str:
    """A ULID: 26 chars, globally unique, lexicographically sortable by creation time."""
    ms = int((time.time() if now is None else now) * 1000)
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def _category_key(category: str) -> str:
    return re.sub(r"[\s\-]+", "_", category.strip().lower())


def normalize_category(category: str | None) -> str:
    """Map free-form category text to a known category; unknown or missing → strategy."""
    if not category:
        return DEFAULT_CATEGORY
    key = _category_key(category)
    return key if key in CATEGORIES else DEFAULT_CATEGORY


def is_known_category(category: str) -> bool:
    """True when `category` names a known category (any case, spaces or hyphens for underscores)."""
    return _category_key(category) in CATEGORIES


def normalize_text(text: str) -> str:
    """Text folded for exact-duplicate detection: NFKC, case, whitespace, end punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = re.sub(r"\s+", " ", folded).strip()
    return folded.rstrip(" .。!！")


def text_hash(text: str) -> str:
    """SHA-256 of the normalized text; equal for facts that differ only in case/spacing."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


@dataclass
class Fact:
    """One atomic, checkable statement with its provenance and lifecycle columns."""

    fact: str
    source_url: str
    research_topic: str = ""
    category: str = DEFAULT_CATEGORY
    confidence: float = 0.7
    created_at: float = 0.0
    verified_at: float = 0.0
    expires_at: float | None = None
    status: Status = "active"
    superseded_by: str | None = None
    id: str = ""
    sources: list[str] = field(default_factory=list)


@dataclass
class Hit:
    """A recalled fact with its decayed confidence and relevance to the query."""

    id: str
    fact: str
    source_url: str
    sources: list[str]
    category: str
    confidence: float
    raw_confidence: float
    relevance: float
    age_days: float
    created_at: float
    research_topic: str
    verified_at: float = 0.0
    status: Status = "active"
    # when the fact's TTL ends (None = never); `expired` is True once that time has passed,
    # whether or not a sweep marked it yet (inform/off mode still show such facts, tagged)
    expires_at: float | None = None
    expired: bool = False
    # ids of active facts this one is in an open (unresolved) contradiction with
    conflicts_with: list[str] = field(default_factory=list)
