"""stats/export through DuckDB, import_jsonl, and the interchange round trip (hypothesis)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepresearch.config import KBConfig
from deepresearch.db import connect
from deepresearch.facts import CATEGORIES, Fact
from deepresearch.kb.store import KnowledgeBase
from tests.fakes import FakeEmbedder

NOW = 1_800_000_000.0
DAY = 86400.0
FIELDS = (
    "id",
    "fact",
    "source_url",
    "sources",
    "category",
    "confidence",
    "research_topic",
    "created_at",
    "verified_at",
    "expires_at",
    "status",
    "superseded_by",
)


def _kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(connect(path), FakeEmbedder(), KBConfig())


@pytest.fixture
def kb(tmp_path):
    store = _kb(tmp_path / "kb.db")
    yield store
    store.conn.close()


def test_stats_counts(kb):
    kb.add_facts(
        [
            Fact(
                "Prices of DRAM rose by ten percent",
                "https://a.example",
                category="market_data",
                confidence=0.9,
            ),
            Fact(
                "Prices of NAND fell by five percent",
                "https://a.example",
                category="market_data",
                confidence=0.3,
                created_at=NOW - 20 * DAY,
            ),
            Fact("The transistor was invented in 1947", "https://b.example", category="historical"),
        ],
        now=NOW,
    )
    kb.sweep(now=NOW)
    data = kb.stats(now=NOW)
    assert data["total"] == 3
    assert data["by_status"] == {"active": 2, "expired": 1}
    assert data["by_category"]["market_data"] == {"total": 2, "active": 1, "expired": 1, "superseded": 0}
    assert data["expiring_within_7_days"] == {"market_data": 1}
    assert data["age_histogram"] == {"< 1 day": 2}
    assert data["confidence_histogram"] == {"0.6-0.8": 1, "0.8-1.0": 1}
    assert data["top_sources"][0] == {"url": "https://a.example", "facts": 2}
    assert data["embedding_model"] == "fake-embedder"


def test_export_formats_and_import_of_minimal_lines(kb, tmp_path):
    old = kb.add_facts([Fact("Version 2 of the protocol adds compression", "https://p.example")], now=NOW).added[0]
    kb.supersede(old, Fact("Version 2.1 of the protocol adds compression", "https://q.example"), now=NOW)
    for fmt in ("jsonl", "csv", "parquet"):
        assert kb.export(tmp_path / f"out.{fmt}", fmt) == 2
    rows = (
        duckdb.connect()
        .execute(f"select id, status, sources from '{tmp_path / 'out.parquet'}' order by status desc")
        .fetchall()
    )
    assert [r[1] for r in rows] == ["superseded", "active"]
    assert rows[1][2] == ["https://p.example", "https://q.example"]
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        '{"fact": "Minimal line with ISO time imported", "source_url": "https://m.example",'
        ' "created_at": "2026-01-02T03:04:05Z", "category": "technology", "confidence": 0.6}\n'
        '{"fact": "Minimal line with epoch time imported", "source_url": "https://m.example",'
        ' "created_at": 1700000000}\n'
        "not json\n\n"
        '{"fact": "short", "source_url": "https://m.example"}\n',
        encoding="utf-8",
    )
    fresh = _kb(tmp_path / "fresh.db")
    result = fresh.import_jsonl(lines, now=NOW)
    assert len(result.added) == 2
    assert [r.split(":")[0] for _, r in result.rejected] == ["line 3", "too short"]
    first = fresh.get(result.added[0])
    assert (first.created_at, first.verified_at, first.category) == (1767323045.0, 1767323045.0, "technology")
    assert first.expires_at == 1767323045.0 + 180 * DAY
    csv_import = fresh.conn.execute("select count(*) from facts").fetchone()[0]
    assert csv_import == 2


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=10, max_size=80).filter(
    lambda t: len(" ".join(t.split())) >= 10 and t == " ".join(t.split())
)
_url = st.from_regex(r"https://[a-z]{1,8}\.example/[a-z0-9]{0,6}", fullmatch=True)
_time = st.floats(min_value=0, max_value=4e9, allow_nan=False)
_record = st.fixed_dictionaries(
    {
        "fact": _text,
        "source_url": _url,
        "sources": st.lists(_url, max_size=3),
        "category": st.sampled_from(CATEGORIES),
        "confidence": st.floats(min_value=0, max_value=1, allow_nan=False),
        "research_topic": st.text(max_size=20),
        "created_at": _time,
        "verified_at": _time,
        "expires_at": st.one_of(st.none(), _time),
        "status": st.sampled_from(["active", "expired", "superseded"]),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_record, min_size=1, max_size=6, unique_by=lambda r: " ".join(r["fact"].casefold().split())))
def test_import_export_round_trip_preserves_every_field(records):
    from deepresearch.facts import new_id

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ids = [new_id() for _ in records]
        for i, record in enumerate(records):
            record["id"] = ids[i]
            record["superseded_by"] = ids[(i + 1) % len(ids)] if record["status"] == "superseded" else None
            record["sources"] = list(dict.fromkeys([record["source_url"], *record["sources"]]))
        src = tmp / "in.jsonl"
        src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        kb = _kb(tmp / "a.db")
        result = kb.import_jsonl(src, now=NOW)
        assert not result.rejected and len(result.added) == len(records)
        kb.export(tmp / "out.jsonl", "jsonl")
        back = [json.loads(line) for line in (tmp / "out.jsonl").read_text(encoding="utf-8").split("\n") if line]
        assert sorted(back, key=lambda r: r["id"]) == sorted(
            ({k: r[k] for k in FIELDS} for r in records), key=lambda r: r["id"]
        )
        again = _kb(tmp / "b.db")
        again.import_jsonl(tmp / "out.jsonl", now=NOW)
        again.export(tmp / "again.jsonl", "jsonl")
        assert (tmp / "again.jsonl").read_text(encoding="utf-8") == (tmp / "out.jsonl").read_text(encoding="utf-8")
        kb.conn.close()
        again.conn.close()
