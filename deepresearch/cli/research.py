"""`deepresearch research` and `deepresearch runs …`: the research loop and saved runs."""

from __future__ import annotations

import typer

runs_app = typer.Typer(help="List, show and search saved research runs.", no_args_is_help=True)


def research(question: str = typer.Argument(..., help="The research question.")) -> None:
    """Research a question: recall, plan, search, summarize, extract, reflect, report."""
    raise NotImplementedError
