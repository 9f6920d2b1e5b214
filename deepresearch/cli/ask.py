"""`deepresearch ask`: one prompt to the configured chat model."""

from __future__ import annotations

from typing import Optional

import typer

from deepresearch.cli.common import MODEL_HELP, echo, echo_json, open_workspace, status


def ask(
    ctx: typer.Context,
    prompt: str = typer.Argument(..., help="The prompt."),
    system: Optional[str] = typer.Option(None, "--system", help="A system message."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Cap on generated tokens."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, max=2.0, help="Sampling temperature."),
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the answer with usage and timing as JSON."),
) -> None:
    """Send one prompt to the configured chat model and print the answer."""
    from deepresearch.models.llm import ask as ask_model
    from deepresearch.models.llm import get_chat_model

    ws = open_workspace(ctx, {"llm.model_path": model})
    answer = ask_model(
        get_chat_model(ws.config.llm), prompt, system=system, max_tokens=max_tokens, temperature=temperature
    )
    if json_out:
        echo_json({k: v for k, v in answer.__dict__.items() if k not in ("data", "extra")})
        return
    echo(answer.text.strip())
    status(
        f"[{answer.model}: {answer.prompt_tokens} prompt + {answer.completion_tokens} generated tokens, "
        f"{answer.seconds:.1f} s]"
    )
