"""`deepresearch extract`: grounded facts from one local document, optionally stored in the KB."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer

from deepresearch.cli.common import MODEL_HELP, echo, echo_json, open_kb, open_workspace, status, warn, with_options


@dataclass
class ExtractOptions:
    """The arguments and options of `deepresearch extract`."""

    path: Path = typer.Argument(..., help="A local document (text, Markdown, reStructuredText, HTML or PDF).")
    topic: str = typer.Option("", "--topic", help="Research topic: facts about it come first.")
    max_facts: int = typer.Option(5, "--max-facts", min=1, help="Facts per ~1500-character chunk at most.")
    store: bool = typer.Option(False, "--store", help="Write the facts into the knowledge base.")
    no_model: bool = typer.Option(False, "--no-model", help="Extractive fallback only (no language model).")
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP)
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
