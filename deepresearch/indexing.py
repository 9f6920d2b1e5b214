"""The vector and keyword indexes the KB and the corpus keep in the workspace file.

Both sides store text with an FTS5 index and vectors in a sqlite-vec `vec0` table
(`fact_fts`/`fact_vec` for facts, `corpus_fts`/`corpus_vec` for chunks). What they share
lives here, once: the embedder created on first use, the claim that records which model
built a vector table and fails closed when another one is configured, vec0 table creation
and KNN, and the quoting that keeps user text out of FTS5 syntax. What differs stays with
each side: the KB's lifecycle filters, the corpus's tokenization and rank fusion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

from deepresearch.db import get_meta, set_meta
from deepresearch.errors import DimensionMismatch, ModelNotFound
from deepresearch.models.base import Embedder

if TYPE_CHECKING:
    import numpy as np

VEC_K_LIMIT = 4096  # sqlite-vec refuses a larger k

EmbedderSource = Union[Embedder, Callable[[], Embedder]]


def vec_loaded(conn: Any) -> bool:
    """True when this connection loaded sqlite-vec (see `db.connect`)."""
    return bool(getattr(conn, "vec_version", None))


class LazyEmbedder:
    """An embedder given as an instance or as a zero-argument factory, created on first call.

    Commands that never embed (keyword search, listing) then never load a model.
    """

    def __init__(self, source: EmbedderSource | None, owner: str):
        self._source = source
        self._owner = owner
        self._embedder: Embedder | None = None

    @property
    def given(self) -> bool:
        """True when an embedder (or a factory for one) was given."""
        return self._source is not None

    def __call__(self) -> Embedder:
        """The embedder, created on first use (raises ModelNotFound when none was given)."""
        if self._embedder is None:
            if self._source is None:
                raise ModelNotFound(f"no embedding model was given to {self._owner}")
            self._embedder = self._source if isinstance(self._source, Embedder) else self._source()
        return self._embedder


@dataclass(frozen=True)
class ModelClaim:
    """Where an index records (in `meta`) the embedding model that built its vectors.

    Vectors of two models are never comparable, so a process configured with another model
    or dimension fails closed with `fix` in the message instead of mixing vector spaces.
    """

    model_key: str
    dimension_key: str
    owner: str  # "the knowledge base", as the start of the mismatch message
    fix: str

    def stored(self, conn: Any) -> tuple[str | None, str | None]:
        """(model id, dimension) recorded in `meta`, or (None, None) before the first claim."""
        return get_meta(conn, self.model_key), get_meta(conn, self.dimension_key)

    def check(self, conn: Any, embedder: Embedder) -> Embedder:
        """`embedder`, after failing closed if the index was built with another model or dimension."""
        model, dim = self.stored(conn)
        if model is not None and (model != embedder.model_id or int(dim or 0) != embedder.dimension):
            raise DimensionMismatch(
                f"{self.owner} was built with embedding model {model} ({dim}-d) but the configured"
                f" model is {embedder.model_id} ({embedder.dimension}-d) — {self.fix}, or set"
                f" embedding.model back to {model}"
            )
        return embedder

    def record(self, conn: Any, embedder: Embedder) -> None:
        """Record `embedder` as the model of the index (caller holds the transaction)."""
        set_meta(conn, self.model_key, embedder.model_id)
        set_meta(conn, self.dimension_key, str(embedder.dimension))

    def forget(self, conn: Any) -> None:
        """Forget the model (the index was emptied): the next write claims it again."""
        conn.execute("delete from meta where key in (?, ?)", (self.model_key, self.dimension_key))


@dataclass(frozen=True)
class VecTable:
    """A sqlite-vec vec0 table of cosine-distance vectors in the `embedding` column.

    `partition` and `metadata` are vec0 column definitions placed before and after the
    vector; constraints on them run inside the KNN, so filtered rows never fill the top k.
    """

    name: str
    partition: tuple[str, ...] = ()
    metadata: tuple[str, ...] = ()

    def exists(self, conn: Any) -> bool:
        """True when the table exists (it can, while sqlite-vec is not loaded to read it)."""
        return conn.execute("select 1 from sqlite_master where name = ?", (self.name,)).fetchone() is not None

    def dimension(self, conn: Any) -> int | None:
        """The vector length the table was created with (None if it does not exist)."""
        row = conn.execute("select sql from sqlite_master where name = ?", (self.name,)).fetchone()
        if row is None:
            return None
        match = re.search(r"float\[(\d+)\]", row[0])
        return int(match.group(1)) if match else None

    def create(self, conn: Any, dimension: int) -> None:
        """(Re)create the table, empty, for vectors of `dimension`."""
        columns = [*self.partition, f"embedding float[{int(dimension)}] distance_metric=cosine", *self.metadata]
        conn.execute(f"drop table if exists {self.name}")
        conn.execute(f"create virtual table {self.name} using vec0({', '.join(columns)})")

    def knn(
        self,
        conn: Any,
        vector: np.ndarray,
        k: int,
        where: str = "",
        params: Sequence[Any] = (),
        columns: Sequence[str] = (),
    ) -> list[tuple[Any, ...]]:
        """(rowid, cosine similarity, *columns) of the `k` nearest rows, nearest first.

        `where` (with `params`) constrains partition and metadata columns inside the KNN.
        """
        sql = f"select rowid, distance{''.join(', ' + c for c in columns)} from {self.name}"
        sql += " where embedding match ? and k = ?" + (f" and {where}" if where else "") + " order by distance"
        rows = conn.execute(sql, [vector_blob(vector), min(int(k), VEC_K_LIMIT), *params]).fetchall()
        return [(int(r[0]), 1.0 - float(r[1]), *r[2:]) for r in rows]

    def vectors(self, conn: Any, rowids: Iterable[int]) -> dict[int, np.ndarray]:
        """{rowid: float32 vector} of the stored rows among `rowids`, in their order (absent rows left out).

        One point read a row: cheap for a few rows, where a full scan of vec0 would read them all.
        """
        import numpy as np

        out = {}
        for rowid in rowids:
            row = conn.execute(f"select embedding from {self.name} where rowid = ?", (int(rowid),)).fetchone()
            if row is not None:
                out[int(rowid)] = np.frombuffer(row[0], dtype=np.float32)
        return out

    def insert(self, conn: Any, rows: Iterable[tuple[int, np.ndarray]]) -> None:
        """Store (rowid, vector) pairs (vector only: tables with metadata columns write their own)."""
        conn.executemany(
            f"insert into {self.name} (rowid, embedding) values (?, ?)",
            [(rowid, vector_blob(vector)) for rowid, vector in rows],
        )

    def delete(self, conn: Any, rowids: Iterable[int]) -> None:
        """Delete the vectors of `rowids` (missing ones are ignored)."""
        conn.executemany(f"delete from {self.name} where rowid = ?", [(int(r),) for r in rowids])


def vector_blob(vector: np.ndarray) -> bytes:
    """A vector as sqlite-vec reads it: little-endian float32 bytes."""
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


def match_any(terms: Iterable[str], joiner: str = " OR ") -> str | None:
    """An FTS5 MATCH expression OR-ing `terms` (AND-ing them with `joiner=" AND "`), each a quoted
    string (quotes doubled), so operators, parentheses, `NEAR`, `*` or `:` in user text are just
    characters; None if no terms."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    return joiner.join(quoted) or None


def fts_integrity_problem(conn: Any, table: str) -> str | None:
    """Why the FTS5 `table` does not match its content, or None when it does."""
    try:
        conn.execute(f"insert into {table} ({table}, rank) values ('integrity-check', 1)")
    except Exception as exc:  # FTS5 reports a mismatch with its content table as an error
        return str(exc)
    return None
