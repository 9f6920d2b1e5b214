"""connect(): binding, sqlite-vec, pragmas, migrations, degraded mode, locked/corrupt files."""

import logging

import pytest

from deepresearch import db as dbmod
from deepresearch.errors import DatabaseCorrupt
from deepresearch.migrations import MIGRATIONS, Migration, applied_migrations, apply_migrations


def test_connect_loads_sqlite_vec_on_the_chosen_binding(tmp_path):
    conn = dbmod.connect(tmp_path / "k.db")
    assert conn.binding == "sqlean"
    assert conn.vec_version and conn.vec_version.startswith("v")
    assert conn.execute("select vec_length(vec_f32('[1,2,3]'))").fetchone()[0] == 3
    assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert conn.execute("pragma foreign_keys").fetchone()[0] == 1
    assert conn.execute("pragma busy_timeout").fetchone()[0] == 30000


def test_blank_db_gets_every_migration_and_reapply_is_a_no_op(tmp_path):
    path = tmp_path / "k.db"
    conn = dbmod.connect(path)
    names = [m.name for m in MIGRATIONS]
    assert applied_migrations(conn) == names
    assert apply_migrations(conn) == []
    conn.close()
    conn = dbmod.connect(path)
    assert applied_migrations(conn) == names


def test_failed_migration_rolls_back_with_its_bookkeeping(tmp_path):
    conn = dbmod.connect(tmp_path / "k.db")
    broken = Migration("m999_broken", "create table t1 (x int);\ncreate table t1 (x int);")
    with pytest.raises(Exception, match="already exists"):
        apply_migrations(conn, [broken])
    assert "m999_broken" not in applied_migrations(conn)
    assert conn.execute("select count(*) from sqlite_master where name = 't1'").fetchone()[0] == 0


def test_degraded_when_extension_cannot_load(tmp_path, monkeypatch, caplog):
    def broken(conn):
        raise RuntimeError("simulated: vec0 missing")

    monkeypatch.setattr(dbmod, "load_sqlite_vec", broken)
    vec_migration = Migration("m998_vec", "create virtual table v using vec0(e float[2]);", requires_vec=True)
    with caplog.at_level(logging.WARNING):
        conn = dbmod.connect(tmp_path / "k.db")
        apply_migrations(conn, [vec_migration])
    assert conn.vec_version is None
    assert "simulated" in conn.vec_error
    assert "sqlite-vec could not be loaded" in caplog.text and "pip install" in caplog.text
    assert "m998_vec" not in applied_migrations(conn)  # deferred until the extension loads
    assert conn.execute("select count(*) from meta").fetchone()[0] == 0
    conn.close()
    monkeypatch.undo()
    conn = dbmod.connect(tmp_path / "k.db")
    assert apply_migrations(conn, [vec_migration]) == ["m998_vec"]


def test_disable_env_gives_degraded_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    conn = dbmod.connect(tmp_path / "k.db")
    assert conn.vec_version is None and "disabled" in conn.vec_error


def test_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "k.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DatabaseCorrupt, match="not a readable SQLite database"):
        dbmod.connect(path)
    assert path.read_bytes().startswith(b"this is not sqlite")  # nothing overwritten


def test_meta_roundtrip(tmp_path):
    conn = dbmod.connect(tmp_path / "k.db")
    with dbmod.transaction(conn):
        dbmod.set_meta(conn, "embedding_model", "m1")
        dbmod.set_meta(conn, "embedding_model", "m2")
    assert dbmod.get_meta(conn, "embedding_model") == "m2"
    assert dbmod.get_meta(conn, "missing") is None
