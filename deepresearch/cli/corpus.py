"""`deepresearch corpus …` and `deepresearch cache …`: local documents and the search cache."""

from __future__ import annotations

import typer

app = typer.Typer(help="Ingest and search local documents (the offline search corpus).", no_args_is_help=True)
cache_app = typer.Typer(help="Inspect or clear the short-term search cache.", no_args_is_help=True)
