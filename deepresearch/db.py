"""One `connect(path)` that does all connection setup for the workspace's SQLite file.

It picks a SQLite binding that can load extensions, loads sqlite-vec, turns on WAL, a busy
timeout and foreign keys, and applies migrations. If sqlite-vec cannot be loaded, the
connection still works: `conn.vec_version` is None, `conn.vec_error` says why, and the
knowledge base falls back to keyword search (degraded mode).

Binding choice (measured, see docs/BENCHMARKS.md): sqlean-py first — it ships wheels for
Linux, macOS and Windows with a recent SQLite (FTS5 trigram tokenizer) and loads
extensions; pysqlite3-binary (Linux x86-64 wheels only) next; the stdlib module last, used
only when it was built with extension loading.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from deepresearch.errors import DatabaseCorrupt, DeepResearchError, InputError, KnowledgeBaseLocked
from deepresearch.migrations import apply_migrations
from deepresearch.migrations import transaction as transaction  # re-exported: writers import it from db

log = logging.getLogger(__name__)

BINDINGS = ("sqlean", "pysqlite3.dbapi2", "sqlite3")
BUSY_TIMEOUT_S = 30.0
DISABLE_VEC_ENV = "DEEPRESEARCH_DISABLE_VEC"
VEC_FIX = "pip install sqlite-vec sqlean-py"


def _loadable(module: ModuleType) -> bool:
    return hasattr(module.Connection, "enable_load_extension")


def sqlite_binding() -> ModuleType:
    """The first importable SQLite DB-API module that can load extensions (else stdlib)."""
    for name in BINDINGS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if _loadable(module):
            return module
    return importlib.import_module("sqlite3")


def _binding_name(module: ModuleType) -> str:
    return module.__name__.split(".")[0]


_CONNECTION_CLASSES: dict[str, type] = {}


def _connection_class(module: ModuleType) -> type:
    """A subclass of the binding's Connection that carries the capability attributes."""
    name = module.__name__
    if name not in _CONNECTION_CLASSES:
        attrs = {"vec_version": None, "vec_error": None, "binding": _binding_name(module)}
        _CONNECTION_CLASSES[name] = type("Connection", (module.Connection,), attrs)
    return _CONNECTION_CLASSES[name]


def load_sqlite_vec(conn: Any) -> str:
    """Load the sqlite-vec extension into `conn` and return its version."""
    if os.environ.get(DISABLE_VEC_ENV):
        raise RuntimeError(f"disabled by {DISABLE_VEC_ENV}")
    if not hasattr(conn, "enable_load_extension"):
        raise RuntimeError(f"the {conn.binding} SQLite binding cannot load extensions")
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)
    return str(conn.execute("select vec_version()").fetchone()[0])


KB_FILE = "the knowledge base"  # how a SQLite error names the workspace file unless told otherwise


@contextlib.contextmanager
def sqlite_errors(path: Path | str, what: str = KB_FILE) -> Iterator[None]:
    """Turn SQLite's locked/read-only/corrupt errors into user errors that name `what` at `path` and the fix."""
    try:
        yield
    except DeepResearchError:
        raise
    except Exception as exc:
        error = sqlite_user_error(exc, path, what)
        if error is None:
            raise
        raise error from exc


def database_failure(exc: BaseException) -> str | None:
    """How SQLite failed on the file itself ("locked", "read-only" or "corrupt"), or None for any other error.

    Such an error is about the database, not about the statement or the input that ran into it.
    """
    if type(exc).__name__ not in ("OperationalError", "DatabaseError"):
        return None
    message = str(exc).lower()
    if "locked" in message or "busy" in message:
        return "locked"
    if "unable to open database" in message or "readonly" in message:
        return "read-only"
    if "not a database" in message or "malformed" in message or "corrupt" in message:
        return "corrupt"
    return None


def sqlite_user_error(exc: BaseException, path: Path | str, what: str = KB_FILE) -> DeepResearchError | None:
    """The user error, naming `what` at `path` and the fix, for a `database_failure`; else None."""
    failure = database_failure(exc)
    if failure == "locked":
        return KnowledgeBaseLocked(
            f"{what} {path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f}s"
            " — wait for the other run, ingest or sweep to finish and try again"
        )
    if failure == "read-only":
        where = Path(path)
        return InputError(
            f"cannot open {what} {where} for writing ({exc}) — make it and its folder"
            f" {where.parent} writable (SQLite also creates {where.name}-wal and -shm there), or pass --home DIR"
        )
    if failure == "corrupt":
        return DatabaseCorrupt(
            f"{what} {path} is not a readable SQLite database ({exc}) — move it aside and rerun,"
            " or restore it from a backup"
        )
    return None


def _create_private(path: Path) -> None:
    """Create an empty database file readable by its owner only (SQLite gives -wal/-shm the same mode)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:  # another process created it first
        pass


def connect(path: Path | str, *, load_vec: bool = True, migrate: bool = True, private: bool = True) -> Any:
    """Open the workspace database with sqlite-vec, WAL, busy timeout, foreign keys, migrations.

    A new file is created 0600 when `private` (else SQLite follows the umask).
    """
    module = sqlite_binding()
    if path != ":memory:":
        file = Path(path)
        if file.is_dir():
            raise InputError(f"database {file} is a folder, not a file — move it aside or pass --home DIR")
        file.parent.mkdir(parents=True, exist_ok=True)
        if private and not file.exists():
            _create_private(file)
    with sqlite_errors(path):
        conn = module.connect(
            str(path),
            timeout=BUSY_TIMEOUT_S,
            factory=_connection_class(module),
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("pragma foreign_keys = on")
        conn.execute(f"pragma busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = conn.execute("pragma journal_mode = wal").fetchone()[0]
        if path != ":memory:" and str(mode).lower() != "wal":
            log.warning("could not switch %s to WAL (journal_mode=%s)", path, mode)
        conn.execute("pragma synchronous = normal")
    if load_vec:
        try:
            conn.vec_version = load_sqlite_vec(conn)
        except Exception as exc:  # any failure here means degraded mode, never a crash
            conn.vec_error = str(exc) or type(exc).__name__
            if os.environ.get(DISABLE_VEC_ENV):
                log.info("sqlite-vec disabled by %s; keyword search only", DISABLE_VEC_ENV)
            else:
                log.warning(
                    "sqlite-vec could not be loaded (%s); semantic recall is off and keyword search"
                    " is used instead — fix: %s",
                    conn.vec_error,
                    VEC_FIX,
                )
    else:
        conn.vec_error = "not requested"
    if migrate:
        with sqlite_errors(path):
            apply_migrations(conn)
    return conn


def sqlite_version(conn: Any) -> str:
    """The SQLite library version behind `conn`."""
    return str(conn.execute("select sqlite_version()").fetchone()[0])


def get_meta(conn: Any, key: str) -> str | None:
    """A value from the `meta` table (DB-wide settings such as the embedding model id)."""
    row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: Any, key: str, value: str) -> None:
    """Insert or replace a `meta` value (caller decides the transaction)."""
    conn.execute(
        "insert into meta (key, value) values (?, ?) on conflict(key) do update set value = excluded.value",
        (key, value),
    )
