"""Lifecycle modes × categories at ages just below and just above each threshold (DESIGN §3)."""

from __future__ import annotations

import math

import pytest

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.errors import InputError
from deepresearch.facts import CATEGORIES, Fact
from deepresearch.kb import lifecycle
from deepresearch.kb.lifecycle import age_tag, decayed_confidence, effective_mode, visibility
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeEmbedder

DAY = 86400.0
NOW = 1_800_000_000.0
TTL = {"market_data": 7, "product_info": 30, "strategy": 90, "technology": 180, "historical": None}
LAMBDA = {"market_data": 0.1, "product_info": 0.05, "strategy": 0.02, "technology": 0.005, "historical": 0.0}
EPS = 0.01  # days: "just below" / "just above" a threshold


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """One fact per category at ages around every threshold that matters (TTLs, freshness levels)."""
    conn = connect(tmp_path_factory.mktemp("kb") / "kb.db")
    store = KnowledgeBase(conn, FakeEmbedder(), KBConfig())
    ages = sorted({a for t in (7, 30, 90, 180) for a in (t - EPS, t + EPS)} | {0.5, 400.0})
    facts = [
        Fact(
            f"lifecycle probe {category} aged {age} days marker",
            f"https://example.com/{category}/{age}",
            category=category,
            confidence=0.8,
            created_at=NOW - age * DAY,
            verified_at=NOW - age * DAY,
        )
        for category in CATEGORIES
        for age in ages
    ]
    # probes differ only in their age number: merging would (rightly) read them as updates
    assert len(store.add_facts(facts, now=NOW, merge=False).added) == len(facts)
    yield store
    conn.close()


def _visible(kb: KnowledgeBase, mode: str, **kw) -> dict[tuple[str, float], float]:
    recall = kb.query("lifecycle probe marker", top_k=500, mode=mode, now=NOW, **kw)
    return {(h.category, round(h.age_days, 2)): h.confidence for h in recall.hits}


@pytest.mark.parametrize("category", CATEGORIES)
def test_lifecycle_mode_uses_per_category_ttl(kb, category):
    seen = _visible(kb, "lifecycle")
    ttl = TTL[category]
    for limit in (7, 30, 90, 180):
        below, above = (category, round(limit - EPS, 2)), (category, round(limit + EPS, 2))
        assert below in seen if ttl is None or limit <= ttl else below not in seen
        assert (above in seen) == (ttl is None or limit + EPS <= ttl)
    assert ((category, 400.0) in seen) == (ttl is None)  # historical never expires


@pytest.mark.parametrize("category", CATEGORIES)
@pytest.mark.parametrize(("level", "limit"), [("high", 7), ("medium", 30), ("low", 180)])
def test_freshness_mode_uses_uniform_max_age_and_decays(kb, category, level, limit):
    seen = _visible(kb, "freshness", freshness=level)
    below, above = (category, round(limit - EPS, 2)), (category, round(limit + EPS, 2))
    assert below in seen and above not in seen
    age = limit - EPS
    ttl = TTL[category]
    expected = 0.0 if ttl is not None and age > ttl else 0.8 * max(0.1, math.exp(-LAMBDA[category] * age))
    assert seen[below] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("mode", ["off", "inform"])
def test_off_and_inform_show_everything_undecayed(kb, mode):
    seen = _visible(kb, mode)
    assert len(seen) == len(CATEGORIES) * 10
    assert set(seen.values()) == {0.8}


def test_invalid_mode_is_an_error_naming_the_modes(kb):
    with pytest.raises(InputError, match="unknown lifecycle mode 'bogus' — use one of off, inform, freshness"):
        effective_mode("bogus", KBConfig())
    with pytest.raises(InputError, match="nonsense"):
        kb.query("lifecycle probe", mode="nonsense", now=NOW)
    assert effective_mode(" Lifecycle ", KBConfig()) == "lifecycle"


def test_min_confidence_applies_to_decayed_value(kb):
    seen = _visible(kb, "lifecycle", min_confidence=0.5)
    assert seen and all(c >= 0.5 for c in seen.values())
    # technology at 90 days: 0.8·e^(−0.45) ≈ 0.51 stays; at 180 days ≈ 0.33 is dropped
    assert ("technology", round(90 - EPS, 2)) in seen and ("technology", round(180 - EPS, 2)) not in seen


@pytest.mark.parametrize("category", CATEGORIES)
def test_decay_values_floor_and_ttl(category):
    config = KBConfig()
    ttl, lam = TTL[category], LAMBDA[category]
    assert decayed_confidence(0.9, category, 0.0, "lifecycle", config) == pytest.approx(0.9)
    for age in (1.0, 6.99, 29.0, 89.0, 179.0, 1000.0):
        got = decayed_confidence(0.9, category, age, "lifecycle", config)
        if ttl is not None and age > ttl:
            assert got == 0.0
        else:
            assert got == pytest.approx(0.9 * max(0.1, math.exp(-lam * age)))
            assert got >= 0.09 - 1e-12  # never below the 0.1 floor
        assert decayed_confidence(0.9, category, age, "off", config) == 0.9
        assert decayed_confidence(0.9, category, age, "inform", config) == 0.9


def test_floor_reached_before_ttl_when_ttl_is_long():
    config = KBConfig(categories={"technology": {"ttl_days": 10000, "decay": 0.005}})
    # e^(−0.005·600) ≈ 0.0498 < 0.1 → the floor holds
    assert decayed_confidence(1.0, "technology", 600, "freshness", config) == pytest.approx(0.1)
    assert decayed_confidence(1.0, "historical", 10_000, "lifecycle", config) == 1.0


def test_unknown_category_behaves_as_strategy():
    config = KBConfig()
    assert decayed_confidence(1.0, "gossip", 50, "lifecycle", config) == decayed_confidence(
        1.0, "strategy", 50, "lifecycle", config
    )
    assert visibility("lifecycle", config, category="gossip").max_age == {"strategy": 90}


@pytest.mark.parametrize(
    ("days", "tag"),
    [
        (0, "today"),
        (0.99, "today"),
        (1.2, "yesterday"),
        (3.5, "3 days ago"),
        (13, "13 days ago"),
        (14, "2 weeks ago"),
        (45, "1 month ago"),
        (70, "2 months ago"),
        (400, "1 year ago"),
        (800, "2 years ago"),
        (-5, "today"),
    ],
)
def test_age_tag(days, tag):
    assert age_tag(days) == tag


def test_one_freshness_rule_for_recall_and_research():
    from deepresearch.research.queries import is_fresh
    from deepresearch.research.state import Known

    days = {"high": 7.0, "medium": 30.0, "low": 180.0}
    assert lifecycle.fresh_max_age("medium", days) == 30.0  # recall's freshness mode: one age for all
    assert lifecycle.fresh_max_age("medium", days, "market_data") == 1.0  # research re-checks fast movers
    assert lifecycle.fresh_max_age("nonsense", days) == 30.0
    for category, age, mode, level, fresh in [
        ("technology", 29.0, "freshness", "medium", True),
        ("technology", 31.0, "lifecycle", "medium", False),
        ("product_info", 2.0, "freshness", "low", False),
        ("product_info", 400.0, "off", "low", True),
    ]:
        assert lifecycle.is_fresh(category, age, mode, level, days) is fresh
        assert is_fresh(Known("id", "text", [], category, 0.9, age), mode, level, days) is fresh


def test_statuses_keep_the_order_the_compact_copy_stores():
    from deepresearch.facts import STATUSES

    assert STATUSES[:3] == ("active", "expired", "superseded")  # status codes 0, 1, 2 in existing files
