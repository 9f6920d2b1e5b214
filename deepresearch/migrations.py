"""Append-only, named, transactional schema migrations.

Each migration and its bookkeeping row in `_migrations` commit together, so a crash can
never leave a half-applied step. Never edit or reorder a released migration: append a new
one. A migration with `requires_vec=True` creates sqlite-vec tables; it is skipped (and
applied on a later connect) while the extension is unavailable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from deepresearch.db import transaction


@dataclass(frozen=True)
class Migration:
    """One schema step: a name that never changes and SQL (or a function) that applies it."""

    name: str
    sql: str = ""
    fn: Callable[[Any], None] | None = None
    requires_vec: bool = False


MIGRATIONS: list[Migration] = [
    Migration(
        "m001_meta",
        """
        create table meta (
            key text primary key,
            value text not null
        );
        """,
    ),
    # --- knowledge base (deepresearch/kb) ---
    # --- local corpus (deepresearch/search) ---
    # --- research runs (deepresearch/research) ---
]


def applied_migrations(conn: Any) -> list[str]:
    """Names of the migrations already applied to this database, in order."""
    conn.execute(
        "create table if not exists _migrations (name text primary key, applied_at real not null)"
    )
    return [row[0] for row in conn.execute("select name from _migrations order by rowid")]


def apply_migrations(conn: Any, migrations: list[Migration] | None = None) -> list[str]:
    """Apply every pending migration, each in its own transaction; return the names applied."""
    done = set(applied_migrations(conn))
    applied = []
    for migration in MIGRATIONS if migrations is None else migrations:
        if migration.name in done:
            continue
        if migration.requires_vec and not getattr(conn, "vec_version", None):
            continue
        with transaction(conn):
            if migration.sql:
                for statement in _statements(migration.sql):
                    conn.execute(statement)
            if migration.fn is not None:
                migration.fn(conn)
            conn.execute(
                "insert into _migrations (name, applied_at) values (?, ?)", (migration.name, time.time())
            )
        applied.append(migration.name)
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration script on semicolons that end a complete SQL statement."""
    import sqlite3

    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
