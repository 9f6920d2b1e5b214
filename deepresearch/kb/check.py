"""`kb check`: prove facts, sources, history, vectors and FTS rows agree."""

from __future__ import annotations

from typing import Any

from deepresearch.db import get_meta
from deepresearch.indexing import fts_integrity_problem, vec_loaded
from deepresearch.kb.codes import verify as verify_codes
from deepresearch.kb.index import vec_dimension
from deepresearch.kb.repository import DIMENSION_KEY, integrity_problems, vector_check_rows


def _ids(rows: list[tuple]) -> str:
    shown = ", ".join(str(r[0]) for r in rows[:5])
    return shown + (f" (+{len(rows) - 5} more)" if len(rows) > 5 else "")


def vectors_not_checked(conn: Any) -> str | None:
    """Why `check` cannot verify the vectors on `conn` (sqlite-vec's load error), or None when it can."""
    return None if vec_loaded(conn) else getattr(conn, "vec_error", None)


def check(conn: Any) -> list[str]:
    """A list of human-readable problems; empty when everything agrees.

    Also checks the whole file (`PRAGMA quick_check`: a damaged page in any table) and the
    corpus (`search.corpus_index.check_corpus`). Without sqlite-vec the vectors are not checked,
    which is not a problem (`vectors_not_checked` says why, for a note).
    """
    from deepresearch.search.corpus_index import check_corpus

    problems: list[str] = []
    try:
        damage = [str(r[0]) for r in conn.execute("pragma quick_check").fetchall() if str(r[0]) != "ok"]
    except Exception as exc:  # a page too damaged to read at all
        if type(exc).__name__ not in ("DatabaseError", "OperationalError"):
            raise
        damage = [str(exc)]
    if damage:
        problems.append(
            f"the database file is damaged ({'; '.join(damage[:3])}) — restore a backup, or recover what is"
            " readable with `sqlite3 deepresearch.db .recover | sqlite3 recovered.db`"
        )
        return problems  # the row checks below would only report the same damage again
    problems += check_corpus(conn)
    if (mismatch := fts_integrity_problem(conn, "fact_fts")) is not None:
        problems.append(
            f"FTS index does not match the facts table ({mismatch}) — rebuild with"
            " `insert into fact_fts(fact_fts) values('rebuild')`"
        )
    for label, rows in integrity_problems(conn).items():
        problems.append(f"{len(rows)} {label}: {_ids(rows)}")
    dim = get_meta(conn, DIMENSION_KEY)
    if not vec_loaded(conn):
        return problems
    if vec_dimension(conn) is None:
        problems.append("the vector table fact_vec is missing — run `deepresearch kb reembed`")
        return problems
    if dim is not None and int(dim) != vec_dimension(conn):
        problems.append(
            f"meta says {dim}-d vectors but fact_vec holds {vec_dimension(conn)}-d — run `deepresearch kb reembed`"
        )
    vec_rows = {
        r[0]: r[1:] for r in conn.execute("select rowid, category, status, verified_at, confidence from fact_vec")
    }
    fact_rows = vector_check_rows(conn)
    missing = [(fact_rows[r][4],) for r in fact_rows if r not in vec_rows]
    orphans = [(r,) for r in vec_rows if r not in fact_rows]
    stale = [(fact_rows[r][4],) for r in fact_rows if r in vec_rows and tuple(vec_rows[r]) != tuple(fact_rows[r][:4])]
    if missing:
        problems.append(f"{len(missing)} facts without a vector: {_ids(missing)} — run `deepresearch kb reembed`")
    if orphans:
        problems.append(
            f"{len(orphans)} vectors without a fact (rowids): {_ids(orphans)} — run `deepresearch kb reembed`"
        )
    if stale:
        problems.append(
            f"{len(stale)} vectors whose lifecycle columns differ from their fact: {_ids(stale)}"
            " — run `deepresearch kb reembed`"
        )
    problems += verify_codes(conn)
    return problems
