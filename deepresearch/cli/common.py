"""Helpers every command module shares: the workspace from global options, JSON output.

A command opens what it needs through `open_workspace` / `open_kb` / `open_cache`; each
registers its close with `ctx.call_on_close`, so a command never closes anything itself and
everything is closed when the command ends, whether it returns or raises.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import sys
import typing
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

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


T = TypeVar("T")


def with_options(options: type[T]) -> Callable[[Callable[[typer.Context, T], None]], Callable[..., None]]:
    """A command whose options are declared once, as the fields of the dataclass `options` (each
    defaulting to a `typer.Option` or `typer.Argument`): Typer sees `ctx` plus one parameter per
    field — the same `--help`, names and defaults as a long signature — and the body gets
    `(ctx, options)`."""
    hints = typing.get_type_hints(options)
    fields = dataclasses.fields(options)  # type: ignore[arg-type]
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    params += [
        inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=hints[f.name])
        for f in fields
    ]

    def declare(body: Callable[[typer.Context, T], None]) -> Callable[..., None]:
        @functools.wraps(body)
        def command(ctx: typer.Context, **values: Any) -> None:
            body(ctx, options(**values))

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {"ctx": typer.Context, **{f.name: hints[f.name] for f in fields}, "return": None}
        return command

    return declare


MODEL_HELP = (  # every --model option
    "GGUF file or shipped model name (qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct, gemma3-270m);"
    " overrides llm.model_path."
)


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


# What json.dumps(ensure_ascii=False) leaves raw and a terminal may act on: DEL and C1 controls,
# line separators, bidi overrides. Inside a JSON string `\uXXXX` is the same text.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (dataclasses and paths are converted; every control
    character escaped, so stored text cannot drive the terminal)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=json_default)
    typer.echo(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def echo(message: str, *, err: bool = False, nl: bool = True) -> None:
    """Print a line of output that may hold stored text (facts, titles, reports, server errors):
    escape sequences and other control characters are shown escaped (`text.terminal_safe`);
    newlines and tabs are kept. Commands print stored text through this, `status`, `warn` or `echo_json`."""
    from deepresearch.text import terminal_safe

    typer.echo(terminal_safe(message, keep_newlines=True), err=err, nl=nl)


def warn(message: str) -> None:
    """A visible warning line on stderr (credentials in URLs redacted, control characters escaped)."""
    from deepresearch.text import redact_secrets, terminal_safe

    typer.secho(f"Warning: {terminal_safe(redact_secrets(message))}", err=True, fg=typer.colors.YELLOW)


def status(message: str) -> None:
    """A progress line on stderr (stdout stays clean for --json; credentials in URLs redacted)."""
    from deepresearch.text import redact_secrets

    echo(redact_secrets(message), err=True)


# Terminal control of our own (not from stored text): back to the line start, clear it.
CLEAR_LINE = "\r\033[K"


def is_tty() -> bool:
    """True when stderr is a terminal (progress bars only then)."""
    return sys.stderr.isatty()
