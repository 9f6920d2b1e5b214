"""Append-only, named, transactional schema migrations.

Each migration and its bookkeeping row in `_migrations` commit together, so a crash can
never leave a half-applied step. Never edit or reorder a released migration: append a new
one. A migration with `requires_vec=True` creates sqlite-vec tables; it is skipped (and
applied on a later connect) while the extension is unavailable.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# Lives here, at the bottom layer, so migrations need nothing from db.py (db re-exports it).


@contextlib.contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    """A short write transaction (BEGIN IMMEDIATE … COMMIT, rolled back on error)."""
    conn.execute("begin immediate")
    try:
        yield conn
    except BaseException:
        conn.execute("rollback")
        raise
    conn.execute("commit")


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
    # Times are epoch seconds (REAL). `rid` is the integer key shared with the vector and FTS
    # tables; `id` (a ULID) is the fact's identity across machines.
    Migration(
        "m101_facts",
        """
        create table facts (
            rid integer primary key,
            id text not null unique,
            fact text not null,
            source_url text not null,
            research_topic text not null default '',
            category text not null,
            confidence real not null check (confidence >= 0 and confidence <= 1),
            created_at real not null,
            verified_at real not null,
            expires_at real,
            status text not null default 'active' check (status in ('active', 'superseded', 'expired')),
            superseded_by text,
            text_hash text not null
        );
        create unique index facts_active_hash on facts (text_hash) where status = 'active';
        create index facts_expiry on facts (expires_at) where expires_at is not null and status = 'active';
        create index facts_status_category on facts (status, category, verified_at);
        create table fact_sources (
            fact_id text not null references facts (id) on delete cascade,
            url text not null,
            added_at real not null,
            primary key (fact_id, url)
        );
        create table fact_history (
            seq integer primary key,
            fact_id text not null,
            event text not null check (event in ('add', 'reconfirm', 'merge', 'supersede', 'expire', 'delete')),
            at real not null,
            old_text text,
            new_text text,
            detail text
        );
        create index fact_history_fact on fact_history (fact_id, seq);
        """,
    ),
    # trigram tokenizer: keyword recall must work on CJK text, which has no spaces between words.
    Migration(
        "m102_fact_fts",
        """
        create virtual table fact_fts using fts5(fact, content='facts', content_rowid='rid', tokenize='trigram');
        create trigger facts_fts_insert after insert on facts begin
            insert into fact_fts (rowid, fact) values (new.rid, new.fact);
        end;
        create trigger facts_fts_delete after delete on facts begin
            insert into fact_fts (fact_fts, rowid, fact) values ('delete', old.rid, old.fact);
        end;
        create trigger facts_fts_update after update of fact on facts begin
            insert into fact_fts (fact_fts, rowid, fact) values ('delete', old.rid, old.fact);
            insert into fact_fts (rowid, fact) values (new.rid, new.fact);
        end;
        """,
    ),
    # Vectors with the lifecycle columns as vec0 partition/metadata columns, so filters run
    # inside the KNN. 384 = all-MiniLM-L6-v2; an empty table is rebuilt for another dimension.
    Migration(
        "m103_fact_vec",
        """
        create virtual table fact_vec using vec0(
            category text partition key,
            embedding float[384] distance_metric=cosine,
            status text,
            verified_at float,
            confidence float
        );
        """,
        requires_vec=True,
    ),
    # Dedup looks up active *and* expired facts by hash, and purge sweeps expired ones too:
    # the partial indexes of m101 cover only active rows, which made both full scans.
    Migration(
        "m104_fact_lookup_indexes",
        """
        create index facts_hash on facts (text_hash);
        create index facts_expires_any on facts (expires_at) where expires_at is not null;
        """,
    ),
    # Contradictions the merge step could not fuse: both facts stay active and the pair is
    # listed here for re-verification (kb/merge.py); resolved_at is set once one is superseded.
    Migration(
        "m105_fact_conflicts",
        """
        create table fact_conflicts (
            fact_id text not null,
            other_id text not null,
            detected_at real not null,
            reason text not null default '',
            resolved_at real,
            primary key (fact_id, other_id)
        );
        create index fact_conflicts_other on fact_conflicts (other_id);
        """,
    ),
    # --- local corpus (deepresearch/search) ---
    # The chunk vector table (corpus_vec) is created by deepresearch.search.corpus_index on first
    # ingest, because its dimension is the embedding model's, known only at run time.
    Migration(
        "m201_corpus",
        """
        create table corpus_sources (
            id integer primary key,
            path text not null unique,
            kind text not null,
            file_hash text,
            spec text not null default '{}',
            added_at real not null,
            updated_at real not null
        );
        create table corpus_documents (
            id integer primary key,
            source_id integer not null references corpus_sources(id) on delete cascade,
            doc_key text not null,
            url text not null,
            title text not null,
            content_hash text not null,
            unique (source_id, doc_key)
        );
        create index corpus_documents_hash on corpus_documents(content_hash);
        create table corpus_chunks (
            id integer primary key,
            doc_id integer not null references corpus_documents(id) on delete cascade,
            seq integer not null,
            text text not null
        );
        create index corpus_chunks_doc on corpus_chunks(doc_id);
        create virtual table corpus_fts using fts5(
            title, body, content = '', contentless_delete = 1,
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        """,
    ),
    # --- research runs (deepresearch/research) ---
    Migration(
        "m301_research_runs",
        """
        create table research_runs (
            id text primary key,
            topic text not null,
            status text not null default 'running',
            step text not null,
            loop integer not null default 0,
            options_json text not null,
            state_json text not null,
            stop_reason text,
            report text,
            report_path text,
            created_at real not null,
            updated_at real not null,
            finished_at real
        );
        create index research_runs_created on research_runs (created_at);
        create table research_steps (
            run_id text not null references research_runs (id) on delete cascade,
            seq integer not null,
            loop integer not null,
            step text not null,
            info_json text not null,
            seconds real not null,
            finished_at real not null,
            primary key (run_id, seq)
        );
        create table research_cache_facts (
            cache_key text not null,
            fact_id text not null,
            run_id text not null default '',
            created_at real not null,
            primary key (cache_key, fact_id)
        );
        create index research_cache_facts_fact on research_cache_facts (fact_id);
        """,
    ),
    # Runs no longer keep the planning prompt (issue 13): forget the copies older runs saved.
    Migration(
        "m302_runs_forget_prompts",
        """
        update research_runs
        set state_json = case when json_valid(state_json)
                              then json_remove(state_json, '$.planning_prompt') else state_json end
        where state_json like '%"planning_prompt"%';
        """,
    ),
    # The compact vector copy for recall at scale (deepresearch/kb/codes.py): sign bits and
    # lifecycle columns per segment of 65,536 rowids, an int8 copy of each vector (one row per
    # fact: a point read from a plain table costs µs, from vec0 up to a ms), and a log every
    # write to `facts` feeds through triggers, so no writer has to know about the copy.
    # AUTOINCREMENT: log positions must never be reused after a fold deletes the rows it applied.
    Migration(
        "m106_fact_codes",
        """
        create table fact_codes (
            seg integer primary key,
            n integer not null,
            rids blob not null,
            bits blob not null,
            category blob not null,
            status blob not null,
            verified blob not null,
            confidence blob not null
        );
        create table fact_codes_int8 (
            rid integer primary key,
            vector blob not null
        );
        create table fact_codes_log (
            seq integer primary key autoincrement,
            rid integer not null,
            fresh integer not null default 0
        );
        create trigger facts_codes_insert after insert on facts begin
            insert into fact_codes_log (rid, fresh) values (new.rid, 1);
        end;
        create trigger facts_codes_update after update of category, status, verified_at, confidence on facts begin
            insert into fact_codes_log (rid) values (new.rid);
        end;
        create trigger facts_codes_delete after delete on facts begin
            insert into fact_codes_log (rid) values (old.rid);
        end;
        """,
    ),
    # `kb sweep --purge` deletes a fact together with the older versions it superseded (they
    # would point at nothing): finding them must not scan the table once per purged fact.
    Migration(
        "m107_facts_superseded_by",
        """
        create index facts_superseded_by on facts (superseded_by) where superseded_by is not null;
        """,
    ),
    # The process a running run belongs to (JSON: host, pid, process start time), so `runs list`
    # can tell a run whose process was killed (SIGKILL, power loss) from one still running.
    Migration(
        "m303_research_runs_owner",
        """
        alter table research_runs add column owner text;
        """,
    ),
]


def applied_migrations(conn: Any) -> list[str]:
    """Names of the migrations already applied to this database, in order."""
    conn.execute("create table if not exists _migrations (name text primary key, applied_at real not null)")
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
            conn.execute("insert into _migrations (name, applied_at) values (?, ?)", (migration.name, time.time()))
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
