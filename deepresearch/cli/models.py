"""`deepresearch models …`, `ask`, `extract`: the local language model."""

from __future__ import annotations

import typer

app = typer.Typer(help="List and inspect the configured models.", no_args_is_help=True)


def ask(prompt: str = typer.Argument(..., help="The prompt.")) -> None:
    """Send one prompt to the configured chat model and print the answer."""
    raise NotImplementedError


def extract(path: str = typer.Argument(..., help="A local document.")) -> None:
    """Extract grounded facts from a local document."""
    raise NotImplementedError
