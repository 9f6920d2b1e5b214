"""The `deepresearch` command: global options, command groups, and the one place errors
become output (`Error: <message>` on stderr, exit 1; usage errors exit 2).

Only typer and the standard library are imported here: torch and llama_cpp load inside
the commands that need them, so `--help` and `--version` stay fast.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

import typer

from deepresearch import __version__

RAISE_ENV = "DEEPRESEARCH_RAISE_ERRORS"


class _ErrorTranslatingGroup(typer.core.TyperGroup):
    """Root group: every user-facing error raised below it is shown as one clean line.

    That is the project's own `DeepResearchError`s plus the OS, SQLite, YAML, Unicode and
    DuckDB errors `errors.user_message` knows (SQLite's locked/read-only/corrupt errors name the
    file and the fix when the command opened the KB or the corpus); anything else is a bug and keeps
    its traceback.
    Credentials inside URLs are redacted from the line.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if os.environ.get(RAISE_ENV):
                raise
            typer.echo("Error: interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            from deepresearch.cli.common import DATABASE
            from deepresearch.db import sqlite_user_error
            from deepresearch.errors import user_message
            from deepresearch.text import redact_secrets, terminal_safe

            # SQLite's locked/read-only/corrupt errors name the database the command opened (the KB,
            # the corpus), also when the library already turned one into a user error while connecting.
            named = None
            if DATABASE in ctx.meta:
                what, path = ctx.meta[DATABASE]
                cause = exc.__cause__
                named = sqlite_user_error(exc, path, what) or (cause and sqlite_user_error(cause, path, what))
            message = user_message(named or exc)
            if message is None or os.environ.get(RAISE_ENV):
                raise
            typer.echo(f"Error: {terminal_safe(redact_secrets(message), keep_newlines=True)}", err=True)
            raise typer.Exit(1) from None


class _RedactingFilter(logging.Filter):
    """Log lines never show credentials inside URLs."""

    def filter(self, record: logging.LogRecord) -> bool:
        from deepresearch.text import redact_secrets

        message = record.getMessage()
        redacted = redact_secrets(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


app = typer.Typer(
    cls=_ErrorTranslatingGroup,
    help="Local-first deep research: plan, search offline sources, extract facts into a "
    "long-term knowledge base, and write cited reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"deepresearch {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    home: Optional[Path] = typer.Option(
        None,
        "--home",
        help="Workspace folder (default: $DEEPRESEARCH_HOME, else ./memory).",
        show_default=False,
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", help="YAML config file (default: $DEEPRESEARCH_CONFIG, else <home>/config.yaml)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show debug logging on stderr."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Local-first deep research with a long-term knowledge base."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactingFilter) for f in handler.filters):
            handler.addFilter(_RedactingFilter())


def _register() -> None:
    from deepresearch.cli import ask, corpus, doctor, extract, kb, kb_sync, mcp, models, research

    app.command("doctor")(doctor.doctor)
    kb.app.add_typer(kb_sync.sync_app, name="sync")
    app.add_typer(kb.app, name="kb")
    app.add_typer(corpus.app, name="corpus")
    app.add_typer(corpus.cache_app, name="cache")
    app.command("search")(corpus.search)
    app.add_typer(models.app, name="models")
    app.command("ask")(ask.ask)
    app.command("extract")(extract.extract)
    app.command("research")(research.research)
    app.add_typer(research.runs_app, name="runs")
    app.command("mcp")(mcp.mcp)


_register()


def run() -> None:
    """Console-script entry point."""
    app()
