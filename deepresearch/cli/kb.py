"""`deepresearch kb …`: the long-term knowledge base."""

from __future__ import annotations

import typer

app = typer.Typer(help="Query and maintain the long-term knowledge base.", no_args_is_help=True)
