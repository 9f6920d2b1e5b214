"""KB analytics and interchange: `stats` and `export` through DuckDB, `read_jsonl` for imports.

Rows go from SQLite into DuckDB as an Arrow table (DuckDB's own sqlite extension would
need a download, which fails offline). The interchange shape is one JSON object per line:
`{id, fact, source_url, sources, category, confidence, research_topic, created_at,
verified_at, expires_at, status, superseded_by}` with times as epoch seconds; `import`
also accepts ISO-8601 times and lines with only the first fields. Every field of a record is
checked (type, range, status/superseded_by pairing, ids against other lines and the KB): a bad
line is rejected with its number and the rest are imported.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from deepresearch.db import get_meta
from deepresearch.errors import InputError
from deepresearch.facts import STATUSES, Fact, normalize_category, normalize_text
from deepresearch.kb.lifecycle import expires_at
from deepresearch.kb.repository import DIMENSION_KEY, MODEL_KEY, arrow_facts

FORMATS = ("jsonl", "csv", "parquet")
EXPORT_COLUMNS = (
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
AGE_BUCKETS = (
    (1, "< 1 day"),
    (7, "1-7 days"),
    (30, "7-30 days"),
    (180, "30-180 days"),
    (math.inf, "> 180 days"),
)


def _duck(conn: Any) -> Any:
    import duckdb

    con = duckdb.connect()
    con.register("interchange", arrow_facts(conn))  # the facts in the interchange shape (the repository's)
    return con


def stats(conn: Any, now: float | None = None) -> dict[str, Any]:
    """Counts by category and status, age histogram, expiring within 7 days, confidence, top sources."""
    now = time.time() if now is None else now
    con = _duck(conn)
    ages = " ".join(f"when (? - verified_at) / 86400 < {limit} then '{label}'" for limit, label in AGE_BUCKETS[:-1])
    result: dict[str, Any] = {
        "total": con.execute("select count(*) from interchange").fetchone()[0],
        "by_status": dict(con.execute("select status, count(*) from interchange group by 1 order by 1").fetchall()),
        "by_category": {
            c: dict(zip(("total", *STATUSES), rest, strict=False))
            for c, *rest in con.execute(
                f"select category, count(*), {', '.join(f'count(*) filter (status = {s!r})' for s in STATUSES)}"
                " from interchange group by 1 order by 1"
            ).fetchall()
        },
        "age_histogram": dict(
            con.execute(
                f"select case {ages} else '{AGE_BUCKETS[-1][1]}' end as bucket, count(*) from interchange"
                " where status = 'active' group by 1 order by min(verified_at) desc",
                [now] * (len(AGE_BUCKETS) - 1),
            ).fetchall()
        ),
        "expiring_within_7_days": dict(
            con.execute(
                "select category, count(*) from interchange"
                " where status = 'active' and expires_at >= ? and expires_at <= ?"
                " group by 1 order by 1",
                [now, now + 7 * 86400],
            ).fetchall()
        ),
        "confidence_histogram": dict(
            con.execute(
                "select printf('%.1f-%.1f', b / 5.0, (b + 1) / 5.0), n from"
                " (select least(floor(confidence * 5), 4)::int as b,"
                " count(*) as n from interchange where status = 'active' group by 1) order by b"
            ).fetchall()
        ),
        "top_sources": [
            {"url": url, "facts": n}
            for url, n in con.execute(
                "select url, count(*) from (select unnest(sources) as url from interchange)"
                " group by 1 order by 2 desc, 1 limit 10"
            ).fetchall()
        ],
    }
    result["embedding_model"] = get_meta(conn, MODEL_KEY)
    result["embedding_dimension"] = get_meta(conn, DIMENSION_KEY)
    con.close()
    return result


def export(conn: Any, path: Path | str, fmt: str = "jsonl", *, overwrite: bool = False, private: bool = False) -> int:
    """Write all facts to `path` as jsonl, csv or parquet; returns the number of rows.

    The file appears only complete (written next to it, then renamed); an existing file is
    refused unless `overwrite`, and kept as it was when writing fails; only a regular file is
    ever replaced (see `files.atomic_output`); `private` makes it 0600.
    """
    from deepresearch.files import atomic_output

    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} — use one of {', '.join(FORMATS)}")
    cols = ", ".join(EXPORT_COLUMNS)
    if fmt == "csv":  # CSV has no list type: sources become a JSON array string
        cols = cols.replace("sources", "to_json(sources)::varchar as sources")
    options = {"jsonl": "format json", "csv": "format csv, header true", "parquet": "format parquet"}[fmt]
    with atomic_output(Path(path), overwrite=overwrite, private=private) as tmp:
        con = _duck(conn)
        try:
            target = str(tmp).replace("'", "''")
            con.execute(f"copy (select {cols} from interchange) to '{target}' ({options})")
            count = con.execute("select count(*) from interchange").fetchone()[0]
        finally:
            con.close()
    return int(count)


def parse_time(value: Any, default: float) -> float:
    """Epoch seconds from epoch numbers or ISO-8601 text (naive times are UTC); missing → default."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


# Times outside 1970 … 200 years ahead are typos or sentinels (0001-01-01, 9999-12-31), not times.
LATEST = 200 * 365.25 * 86400.0
MAX_ID_CHARS = 64


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text, not {type(value).__name__}")
    return value


def _time(record: dict[str, Any], key: str, default: float, latest: float) -> float:
    """A time field within 1970 … `latest` (years 0001 or 9999 are typos or sentinels, not times)."""
    value = record.get(key)
    try:
        seconds = parse_time(value, default)
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{key} {value!r} is not a time (epoch seconds or ISO-8601)") from None
    if not (math.isfinite(seconds) and 0.0 <= seconds <= latest):
        last = datetime.fromtimestamp(latest, timezone.utc).year
        raise ValueError(f"{key} {value!r} is outside 1970 … {last}")
    return seconds


def _ident(record: dict[str, Any], key: str) -> str:
    ident = _text(record, key).strip()
    if len(ident) > MAX_ID_CHARS or any(c.isspace() or not c.isprintable() for c in ident):
        raise ValueError(f"{key} {ident[:80]!r} is not an id (up to {MAX_ID_CHARS} printable characters, no spaces)")
    return ident


def fact_from_record(record: dict[str, Any], now: float, config: Any) -> Fact:
    """A Fact from one interchange record, every field checked (ValueError naming the field)."""
    if not isinstance(record, dict):
        raise ValueError("a line must be a JSON object")
    text = record.get("fact")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("missing 'fact' text")
    created = _time(record, "created_at", now, now + LATEST)
    verified = _time(record, "verified_at", created, now + LATEST)
    sources = record.get("sources") or []
    if isinstance(sources, str):  # CSV exports carry sources as a JSON array string
        try:
            sources = json.loads(sources)
        except ValueError:
            raise ValueError("sources must be a list of URLs (or a JSON array of them)") from None
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ValueError("sources must be a list of URLs (text)")
    category = _text(record, "category")
    expiry: float | None = None
    if record.get("expires_at") is not None:
        expiry = _time(record, "expires_at", 0.0, now + LATEST)
    elif "expires_at" not in record:
        expiry = expires_at(normalize_category(category), verified, config)
    confidence = record.get("confidence")
    if confidence is None:
        confidence = 0.7
    elif isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise ValueError(f"confidence {confidence!r} must be a number from 0 to 1")
    status = _text(record, "status") or "active"
    if status not in STATUSES:
        raise ValueError(f"status {status!r} must be one of {', '.join(STATUSES)}")
    superseded_by = _ident(record, "superseded_by") or None
    if (status == "superseded") != (superseded_by is not None):
        raise ValueError("superseded_by must be set exactly when status is superseded")
    return Fact(
        fact=text,
        source_url=_text(record, "source_url"),
        research_topic=_text(record, "research_topic"),
        category=category,
        confidence=float(confidence),
        created_at=created,
        verified_at=verified,
        expires_at=expiry,
        status=status,  # type: ignore[arg-type]
        superseded_by=superseded_by,
        id=_ident(record, "id"),
        sources=list(sources),
    )


def read_jsonl(
    path: Path | str, now: float, config: Any, stored_texts: Callable[[list[str]], dict[str, str]] | None = None
) -> tuple[list[Fact], list[tuple[Fact, str]]]:
    """Facts of an interchange JSONL file, and the lines rejected with their line number.

    Besides each record's own fields, an id may not carry two different texts (in the file,
    or against `stored_texts(ids)` → {id: text} of the KB), and a superseded record must name
    a fact that exists in the file or the KB: `kb check` would fail on either.
    """
    try:
        # only "\n" ends a JSONL line: splitlines() would also split on U+0085/U+2028 inside strings
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc} — pass a UTF-8 JSONL file") from None
    head = [line for line in lines[:200] if line.strip()]
    if head and not any(line.lstrip().startswith("{") for line in head):
        # A CSV/Parquet export (or any other file) would otherwise give one rejection per line.
        raise InputError(f"{path} is not JSONL (one JSON object per line) — export with `kb export --format jsonl`")
    parsed: list[tuple[int, Fact]] = []
    rejected: list[tuple[int, Fact, str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parsed.append((number, fact_from_record(json.loads(line), now, config)))
        except (ValueError, TypeError, RecursionError) as exc:
            rejected.append((number, Fact(fact=line[:200], source_url=""), str(exc)))
    facts = _consistent(parsed, rejected, stored_texts)
    return facts, [(fact, f"line {number}: {reason}") for number, fact, reason in sorted(rejected, key=lambda r: r[0])]


def _consistent(
    parsed: list[tuple[int, Fact]],
    rejected: list[tuple[int, Fact, str]],
    stored_texts: Callable[[list[str]], dict[str, str]] | None,
) -> list[Fact]:
    """The records whose id carries one text and whose superseded_by names a fact (others → rejected)."""
    ids = sorted({f.id for _, f in parsed if f.id} | {f.superseded_by for _, f in parsed if f.superseded_by})
    stored = stored_texts(ids) if stored_texts and ids else {}
    first: dict[str, tuple[int, str]] = {}
    kept: list[tuple[int, Fact]] = []
    for number, fact in parsed:
        if fact.id in first and normalize_text(first[fact.id][1]) != normalize_text(fact.fact):
            rejected.append((number, fact, f"id {fact.id} appears on line {first[fact.id][0]} with a different text"))
        elif fact.id in stored and normalize_text(stored[fact.id]) != normalize_text(fact.fact):
            reason = f"id {fact.id} already holds a different text in the knowledge base — drop the id to add it"
            rejected.append((number, fact, reason))
        else:
            if fact.id:
                first.setdefault(fact.id, (number, fact.fact))
            kept.append((number, fact))
    known = set(first) | set(stored)
    facts = []
    for number, fact in kept:
        if fact.superseded_by and fact.superseded_by not in known:
            rejected.append((number, fact, f"superseded_by {fact.superseded_by} names no fact in this file or the KB"))
        else:
            facts.append(fact)
    return facts
