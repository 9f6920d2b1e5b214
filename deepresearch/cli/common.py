"""Helpers every command module shares: the workspace from global options, JSON output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace


def open_workspace(ctx: typer.Context, overrides: dict[str, Any] | None = None) -> Workspace:
    """The workspace chosen by the global --home/--config options plus command flag overrides."""
    from deepresearch.workspace import Workspace

    root = ctx.find_root()
    params = root.params if root is not None else {}
    home: Path | None = params.get("home")
    config_file: Path | None = params.get("config")
    return Workspace.open(home, config_file=config_file, overrides=overrides)


def json_default(obj: Any) -> Any:
    """`json.dumps` fallback for what commands return: dataclasses, paths, numpy values."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def to_jsonable(data: Any) -> Any:
    """`data` as plain JSON values (dicts, lists, strings, numbers): the `--json` shape."""
    return json.loads(json.dumps(data, ensure_ascii=False, default=json_default))


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout (dataclasses and paths are converted)."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=json_default))


def warn(message: str) -> None:
    """A visible warning line on stderr (credentials in URLs redacted)."""
    from deepresearch.text import redact_secrets

    typer.secho(f"Warning: {redact_secrets(message)}", err=True, fg=typer.colors.YELLOW)


def status(message: str) -> None:
    """A progress line on stderr (stdout stays clean for --json)."""
    typer.echo(message, err=True)


def is_tty() -> bool:
    """True when stderr is a terminal (progress bars only then)."""
    return sys.stderr.isatty()
