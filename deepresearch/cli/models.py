"""`deepresearch models …`: the configured chat model and the GGUF models shipped in packages."""

from __future__ import annotations

from typing import Optional

import typer

from deepresearch.cli.common import MODEL_HELP, echo, echo_json, open_workspace

app = typer.Typer(help="List and inspect the configured models.", no_args_is_help=True)


def _size(size: Optional[int]) -> str:
    return "-" if size is None else f"{size / 1e6:.0f} MB"


@app.command("list")
def list_models(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show the configured model and the GGUF models shipped in installed packages."""
    from deepresearch.models.shipped import available_models
    from deepresearch.text import redact_secrets

    ws = open_workspace(ctx)
    # a server's base URL may carry user:password@ or ?api_key=: printed redacted, also in --json
    rows = [{**row, "path": row["path"] and redact_secrets(row["path"])} for row in available_models(ws.config.llm)]
    if json_out:
        echo_json(rows)
        return
    for row in rows:
        name = row["name"] + (" (default)" if row.get("default") else "")
        context = f"ctx {row['n_ctx']}" if row.get("n_ctx") else ""
        echo(f"{name:<38} {row['backend']:<10} {_size(row['size_bytes']):>7} {context:>9}  {row['status']}")
        echo(f"{'':<38} {row['path'] or '-'}")


@app.command("info")
def info(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Load the configured chat model and show its file, size, context and chat template."""
    from deepresearch.models.llm import get_chat_model

    ws = open_workspace(ctx, {"llm.model_path": model})
    details = get_chat_model(ws.config.llm).info()
    if json_out:
        echo_json(details)
        return
    for key, value in details.items():
        echo(f"{key:<14} {_size(value) if key == 'size_bytes' else value}")
