"""Keyword recall over the FTS5 trigram index: the degraded path when vectors cannot be used.

User text never reaches FTS5 syntax: each term becomes a quoted string (quotes doubled), so
operators, parentheses, `NEAR`, `*` or `:` in a query are just characters. The trigram
tokenizer matches any 3+ character substring, which makes Chinese/Japanese text (no
spaces) searchable; shorter terms ("AI", two-character CJK words) fall back to LIKE.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from deepresearch.indexing import match_any
from deepresearch.kb.index import Filter
from deepresearch.kb.repository import keyword_rows
from deepresearch.text import STOPWORDS, has_cjk, normalize_space

_TERM = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
MAX_TERMS = 32


def terms(text: str) -> tuple[list[str], list[str]]:
    """(terms of 3+ characters for MATCH, shorter terms for LIKE) from free user text."""
    long_terms: list[str] = []
    short_terms: list[str] = []
    for token in _TERM.findall(normalize_space(text).lower()):
        pieces = [token]
        if has_cjk(token):
            # CJK runs have no word boundaries: search their overlapping trigrams.
            pieces = []
            for run in _CJK_RUN.findall(token):
                pieces.extend(run[i : i + 3] for i in range(max(1, len(run) - 2)))
            pieces.extend(p for p in _CJK_RUN.split(token) if p)
        for piece in pieces:
            if piece in STOPWORDS or not piece.strip():
                continue
            target = long_terms if len(piece) >= 3 else short_terms
            if piece not in target:
                target.append(piece)
    return long_terms[:MAX_TERMS], short_terms[:MAX_TERMS]


def match_expression(text: str) -> str | None:
    """A safe FTS5 MATCH string: every term quoted and OR-ed; None when no term is long enough."""
    return match_any(terms(text)[0])


def _like_pattern(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def visibility_sql(flt: Filter, alias: str = "f") -> tuple[str, list[Any]]:
    """SQL condition + params for the lifecycle rules (decayed-confidence floor excluded)."""
    statuses = flt.visibility.statuses
    parts: list[str] = []
    params: list[Any] = []
    for category, cutoff in flt.visibility.cutoffs(flt.now).items():
        if cutoff is None:
            parts.append(f"{alias}.category = ?")
            params.append(category)
        else:
            parts.append(f"({alias}.category = ? and {alias}.verified_at >= ?)")
            params.extend([category, cutoff])
    sql = (
        f"{alias}.status in ({','.join('?' * len(statuses))}) and {alias}.confidence >= ?"
        f" and ({' or '.join(parts) or '0'})"
    )
    return sql, [*statuses, flt.min_confidence, *params]


def search_fts(conn: Any, text: str, flt: Filter, k: int) -> list[tuple[int, float]]:
    """Top-k (rid, relevance in 0..1 from BM25) among eligible facts matching the words of `text`."""
    where, params = visibility_sql(flt)
    expr = match_expression(text)
    short_terms = [] if expr is not None else terms(text)[1]
    if expr is None and not short_terms:
        return []
    rows = keyword_rows(conn, expr, [_like_pattern(t) for t in short_terms], where, params)
    out: list[tuple[int, float]] = []
    for rid, score, category, verified, raw in rows:
        factor = flt.decay_factor(category, np.array([(flt.now - verified) / 86400.0]))[0]
        if raw * factor < flt.min_confidence:
            continue
        strength = max(0.0, -float(score))
        out.append((int(rid), strength / (1.0 + strength) if expr else 0.5))
        if len(out) >= k:
            break
    return out
