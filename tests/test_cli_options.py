"""`cli.common.with_options`: a command's options declared once, as a dataclass, are exactly the
command's parameters — the same help, names, defaults and checks as a long signature."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
import typer.main
from typer.testing import CliRunner

from deepresearch.cli.common import Fresh, with_options
from deepresearch.cli.main import app as main_app

runner = CliRunner()


@dataclass
class EchoOptions:
    """Options of a test command."""

    text: str = typer.Argument(..., help="What to echo.")
    times: int = typer.Option(1, "--times", "-t", min=1, help="How often.")
    fresh: Optional[Fresh] = typer.Option(None, "--fresh", help="A choice.")
    out: Optional[Path] = typer.Option(None, "--out", help="A path.")
    loud: bool = typer.Option(False, "--loud", help="A flag.")


def _app() -> tuple[typer.Typer, list[EchoOptions]]:
    seen: list[EchoOptions] = []
    app = typer.Typer()

    @app.command()
    @with_options(EchoOptions)
    def echo(ctx: typer.Context, opts: EchoOptions) -> None:
        """Echo TEXT."""
        seen.append(opts)
        typer.echo(" ".join([opts.text.upper() if opts.loud else opts.text] * opts.times))

    return app, seen


def test_the_fields_become_the_options_and_the_body_gets_them_typed():
    app, seen = _app()
    result = runner.invoke(app, ["hi", "-t", "2", "--fresh", "high", "--out", "x.md", "--loud"])
    assert result.exit_code == 0 and result.stdout == "HI HI\n"
    assert seen == [EchoOptions("hi", 2, Fresh.high, Path("x.md"), True)]
    assert runner.invoke(app, ["hi"]).stdout == "hi\n"  # the dataclass defaults are the CLI's
    assert seen[-1] == EchoOptions("hi", 1, None, None, False)


def test_help_and_checks_come_from_the_fields():
    app, _ = _app()
    help_text = runner.invoke(app, ["--help"], terminal_width=200).stdout
    assert "Echo TEXT." in help_text
    for name in ("--times", "-t", "How often.", "--fresh", "--out", "--loud", "What to echo."):
        assert name in help_text
    assert runner.invoke(app, ["hi", "--times", "0"]).exit_code == 2  # min=1 still checked
    assert runner.invoke(app, ["hi", "--fresh", "stale"]).exit_code == 2  # the choice too


def test_every_declared_command_exposes_each_field_as_a_parameter():
    """The real commands built this way: research, kb query, kb sync milvus, corpus add, extract."""
    from deepresearch.cli import corpus, extract, kb, kb_sync, research

    root = typer.main.get_command(main_app)
    commands = {
        ("research",): research.ResearchOptions,
        ("kb", "query"): kb.QueryOptions,
        ("kb", "sync", "milvus"): kb_sync.MilvusOptions,
        ("corpus", "add"): corpus.AddOptions,
        ("extract",): extract.ExtractOptions,
    }
    for path, options in commands.items():
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        params = [p.name for p in command.params]
        assert params == [f.name for f in dataclasses.fields(options)], path
