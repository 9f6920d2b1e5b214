"""The shared index layer on a real SQLite file with sqlite-vec: vec0 tables, KNN, the model
claim, the lazy embedder and FTS5 quoting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepresearch.db import connect, get_meta
from deepresearch.errors import DimensionMismatch, ModelNotFound
from deepresearch.indexing import (
    LazyEmbedder,
    ModelClaim,
    VecTable,
    fts_integrity_problem,
    match_any,
    vec_loaded,
)
from tests.fakes import FakeEmbedder

TABLE = VecTable("t_vec", partition=("kind text partition key",), metadata=("status text", "score float"))
CLAIM = ModelClaim("t.model", "t.dim", "the test index", "rebuild it")


@pytest.fixture
def conn(tmp_path: Path) -> Any:
    db = connect(tmp_path / "ws.db")
    assert vec_loaded(db)
    yield db
    db.close()


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_vec_table_create_dimension_and_recreate(conn: Any) -> None:
    assert not TABLE.exists(conn) and TABLE.dimension(conn) is None
    TABLE.create(conn, 3)
    assert TABLE.exists(conn) and TABLE.dimension(conn) == 3
    conn.execute(
        "insert into t_vec (rowid, kind, embedding, status, score) values (1, 'a', ?, 'on', 1.0)", (b"\0" * 12,)
    )
    TABLE.create(conn, 4)  # recreated empty for another dimension
    assert TABLE.dimension(conn) == 4
    assert conn.execute("select count(*) from t_vec").fetchone()[0] == 0


def test_knn_orders_by_cosine_and_filters_inside_the_search(conn: Any) -> None:
    TABLE.create(conn, 3)
    rows = [
        (1, "a", unit(1, 0, 0), "on", 0.9),
        (2, "a", unit(1, 0.1, 0), "off", 0.9),  # nearest but filtered out by status
        (3, "a", unit(1, 1, 0), "on", 0.5),
        (4, "b", unit(1, 0, 0), "on", 0.9),  # another partition
        (5, "a", unit(0, 0, 1), "on", 0.9),
    ]
    for rid, kind, vector, status, score in rows:
        conn.execute(
            "insert into t_vec (rowid, kind, embedding, status, score) values (?, ?, ?, ?, ?)",
            (rid, kind, vector.tobytes(), status, score),
        )
    query = unit(1, 0.05, 0)
    found = TABLE.knn(conn, query, 2, "kind = ? and status = ?", ["a", "on"], columns=("score",))
    assert [r[0] for r in found] == [1, 3]
    assert found[0][1] == pytest.approx(float(unit(1, 0, 0) @ query), abs=1e-5)
    assert found[0][2] == pytest.approx(0.9)
    everything = TABLE.knn(conn, query, 10**6, "kind = ?", ["a"])  # k beyond sqlite-vec's limit is capped
    assert [r[0] for r in everything] == [2, 1, 3, 5]


def test_plain_table_insert_and_delete(conn: Any) -> None:
    plain = VecTable("p_vec")
    plain.create(conn, 2)
    plain.insert(conn, [(7, unit(1, 0)), (8, unit(0, 1))])
    assert [r[0] for r in plain.knn(conn, unit(0.1, 1), 5)] == [8, 7]
    plain.delete(conn, [8, 99])
    assert [r[0] for r in plain.knn(conn, unit(0.1, 1), 5)] == [7]


def test_vectors_by_rowid_in_the_order_asked_without_absent_rows(conn: Any) -> None:
    plain = VecTable("p_vec")
    plain.create(conn, 2)
    plain.insert(conn, [(7, unit(1, 0)), (8, unit(3, 4))])
    found = plain.vectors(conn, [8, 99, 7])
    assert list(found) == [8, 7]
    assert found[8].dtype == np.float32 and np.array_equal(found[8], unit(3, 4))
    assert np.array_equal(found[7], unit(1, 0)) and plain.vectors(conn, []) == {}


def test_model_claim_fails_closed_on_another_model_or_dimension(conn: Any) -> None:
    first = FakeEmbedder(dimension=8, model_id="m1")
    assert CLAIM.stored(conn) == (None, None)
    assert CLAIM.check(conn, FakeEmbedder(dimension=4, model_id="any")).model_id == "any"  # unclaimed
    CLAIM.record(conn, first)
    assert CLAIM.stored(conn) == ("m1", "8") and CLAIM.check(conn, first) is first
    with pytest.raises(DimensionMismatch) as other_model:
        CLAIM.check(conn, FakeEmbedder(dimension=8, model_id="m2"))
    assert str(other_model.value) == (
        "the test index was built with embedding model m1 (8-d) but the configured model is m2 (8-d)"
        " — rebuild it, or set embedding.model back to m1"
    )
    with pytest.raises(DimensionMismatch, match=r"m1 \(8-d\).*m1 \(16-d\)"):
        CLAIM.check(conn, FakeEmbedder(dimension=16, model_id="m1"))
    CLAIM.forget(conn)
    assert get_meta(conn, "t.model") is None and CLAIM.check(conn, FakeEmbedder(dimension=16, model_id="m2"))


def test_lazy_embedder_creates_once_and_names_the_owner_when_missing() -> None:
    calls: list[int] = []

    def factory() -> FakeEmbedder:
        calls.append(1)
        return FakeEmbedder()

    lazy = LazyEmbedder(factory, "the corpus")
    assert lazy.given and calls == []
    assert lazy() is lazy() and calls == [1]
    direct = FakeEmbedder()
    assert LazyEmbedder(direct, "x")() is direct
    missing = LazyEmbedder(None, "the knowledge base")
    assert not missing.given
    with pytest.raises(ModelNotFound, match="no embedding model was given to the knowledge base"):
        missing()


def test_match_any_quotes_every_term() -> None:
    assert match_any(["near", 'say "hi"', "a*b"]) == '"near" OR "say ""hi""" OR "a*b"'
    assert match_any([]) is None


@given(terms=st.lists(st.text(min_size=1, max_size=12), max_size=6))
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_quoted_terms_are_valid_fts5(conn: Any, terms: list[str]) -> None:
    conn.execute("create virtual table if not exists q_fts using fts5(body)")
    expression = match_any([t for t in terms if "\0" not in t])
    if expression is not None:
        conn.execute("select count(*) from q_fts where q_fts match ?", (expression,)).fetchone()


def test_fts_integrity_problem_names_a_mismatch(conn: Any) -> None:
    conn.execute("create table docs (id integer primary key, body text)")
    conn.execute("create virtual table docs_fts using fts5(body, content='docs', content_rowid='id')")
    conn.execute("insert into docs (id, body) values (1, 'hello world')")
    conn.execute("insert into docs_fts (rowid, body) values (1, 'hello world')")
    assert fts_integrity_problem(conn, "docs_fts") is None
    conn.execute("update docs set body = 'changed behind the index' where id = 1")
    assert fts_integrity_problem(conn, "docs_fts")
