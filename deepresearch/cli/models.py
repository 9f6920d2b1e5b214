"""`deepresearch models …`, `ask`, `extract`: the local language model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from deepresearch.cli.common import echo, echo_json, open_kb, open_workspace, status, warn, with_options

app = typer.Typer(help="List and inspect the configured models.", no_args_is_help=True)

_MODEL_HELP = (
    "GGUF file or shipped model name (qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct, gemma3-270m);"
    " overrides llm.model_path."
)


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
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP),
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


def ask(
    ctx: typer.Context,
    prompt: str = typer.Argument(..., help="The prompt."),
    system: Optional[str] = typer.Option(None, "--system", help="A system message."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Cap on generated tokens."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, max=2.0, help="Sampling temperature."),
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP),
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


@dataclass
class ExtractOptions:
    """The arguments and options of `deepresearch extract`."""

    path: Path = typer.Argument(..., help="A local document (text, Markdown, HTML or PDF).")
    topic: str = typer.Option("", "--topic", help="Research topic: facts about it come first.")
    max_facts: int = typer.Option(5, "--max-facts", min=1, help="Facts per ~1500-character chunk at most.")
    store: bool = typer.Option(False, "--store", help="Write the facts into the knowledge base.")
    no_model: bool = typer.Option(False, "--no-model", help="Extractive fallback only (no language model).")
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP)
    json_out: bool = typer.Option(False, "--json", help="Print the facts as JSON.")


@with_options(ExtractOptions)
def extract(ctx: typer.Context, opts: ExtractOptions) -> None:
    """Extract grounded facts from a local document (and optionally store them in the KB)."""
    from deepresearch.models.extract import extract_document
    from deepresearch.models.llm import get_chat_model
    from deepresearch.search.readers import read_file

    ws = open_workspace(ctx, {"llm.model_path": opts.model})
    doc = read_file(opts.path)
    chat = None if opts.no_model else get_chat_model(ws.config.llm)
    result = extract_document(
        doc.text,
        doc.url,
        topic=opts.topic,
        model=chat,
        max_facts=opts.max_facts,
        progress=lambda i, n: status(f"extract: chunk {i}/{n}"),
    )
    if result.error:
        warn(f"the model failed, facts come from the extractive fallback: {result.error}")
    stored: dict[str, Any] = {}
    if opts.store and result.facts:
        added = open_kb(ctx, ws).add_facts(result.facts)
        stored = {
            "added": len(added.added),
            "reconfirmed": len(added.reconfirmed),
            "rejected": len(added.rejected),
        }
    if opts.json_out:
        echo_json(
            [
                {
                    "fact": f.fact,
                    "source_url": f.source_url,
                    "category": f.category,
                    "confidence": f.confidence,
                    "method": method,
                }
                for f, method in zip(result.facts, result.methods, strict=True)
            ]
        )
    else:
        for f, method in zip(result.facts, result.methods, strict=True):
            echo(f"- {f.fact}  [{f.category}, {f.confidence:.2f}, {method}]")
    status(
        f"{len(result.facts)} facts from {doc.url} ({result.methods.count('model')} model, "
        f"{result.methods.count('fallback')} fallback; {result.rejected} model proposals rejected)"
    )
    if stored:
        status(f"stored: {stored['added']} added, {stored['reconfirmed']} reconfirmed, {stored['rejected']} rejected")
