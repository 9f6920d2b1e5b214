"""Helpers every command module shares: the workspace from global options, JSON output.

A command opens what it needs through `open_workspace` / `open_kb` / `open_cache`; each
registers its close with `ctx.call_on_close`, so a command never closes anything itself and
everything is closed when the command ends, whether it returns or raises.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from deepresearch.views import json_default

if TYPE_CHECKING:
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.search.cache import SearchCache
    from deepresearch.workspace import Workspace


class Fresh(str, Enum):
    """Freshness levels (the choices of every --fresh option, checked by the CLI framework)."""

    high = "high"
    medium = "medium"
    low = "low"


class CorpusMode(str, Enum):
    """Corpus retrieval modes (--mode)."""

    hybrid = "hybrid"
    bm25 = "bm25"
    vector = "vector"


def search_backend(value: str | None) -> str | None:
    """--backend: a registered search backend, checked like a choice (extensions and test fakes count)."""
    from deepresearch.search.backends import BACKENDS

    if value is not None and value not in BACKENDS:
        raise typer.BadParameter(f"{value!r} is not a search backend — use one of {', '.join(BACKENDS.names())}")
    return value


# ctx.meta key (shared by every context of one invocation): the database a command opened, as
# (what it is to the user, its file), so the root's error translation names it in SQLite errors.
DATABASE = "deepresearch.database"
CORPUS_FILE = "the corpus database"


def open_workspace(ctx: typer.Context, overrides: dict[str, Any] | None = None, *, create: bool = True) -> Workspace:
    """The workspace chosen by the global --home/--config options plus command flag overrides,
    closed when the command ends. `create=False`: a missing workspace is an error, not a new one."""
    from deepresearch.workspace import Workspace

    params = ctx.find_root().params
    home: Path | None = params.get("home")
    config_file: Path | None = params.get("config")
    ws = Workspace.open(home, config_file=config_file, overrides=overrides, create=create)
    ctx.call_on_close(ws.close)
    return ws


def open_kb(ctx: typer.Context, ws: Workspace | None = None, *, create: bool = True) -> KnowledgeBase:
    """The knowledge base of `ws` (default: the workspace, opened here), closed when the command ends.

    SQLite errors of a command that opened the KB are then named for the KB file by the root's
    error translation (locked: wait; read-only: make it writable; corrupt: move it aside).
    """
    from deepresearch.db import KB_FILE
    from deepresearch.kb.store import KnowledgeBase

    ws = ws or open_workspace(ctx, create=create)
    ctx.meta[DATABASE] = (KB_FILE, ws.db_path)
    return KnowledgeBase.from_workspace(ws)


def open_corpus_workspace(ctx: typer.Context) -> Workspace:
    """The workspace of a corpus command, closed when the command ends.

    The corpus lives in the workspace file: its SQLite errors are named for that file, as the
    corpus database, by the root's error translation (as `open_kb` does for the KB).
    """
    ws = open_workspace(ctx)
    ctx.meta[DATABASE] = (CORPUS_FILE, ws.db_path)
    return ws


def open_cache(ctx: typer.Context, ws: Workspace) -> SearchCache:
    """The workspace's search cache, closed when the command ends."""
    from deepresearch.search.cache import SearchCache

    cache = SearchCache.from_workspace(ws)
    ctx.call_on_close(cache.close)
    return cache


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (dataclasses and paths are converted)."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=json_default))


def warn(message: str) -> None:
    """A visible warning line on stderr (credentials in URLs redacted)."""
    from deepresearch.text import redact_secrets

    typer.secho(f"Warning: {redact_secrets(message)}", err=True, fg=typer.colors.YELLOW)


def status(message: str) -> None:
    """A progress line on stderr (stdout stays clean for --json; credentials in URLs redacted)."""
    from deepresearch.text import redact_secrets

    typer.echo(redact_secrets(message), err=True)


def is_tty() -> bool:
    """True when stderr is a terminal (progress bars only then)."""
    return sys.stderr.isatty()
