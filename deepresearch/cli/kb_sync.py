"""`deepresearch kb sync …`: copy knowledge-base facts to and from other stores (Milvus)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import typer

from deepresearch.cli.common import echo_json, is_tty, open_kb, warn, with_options

sync_app = typer.Typer(help="Synchronise the knowledge base with a vector database.", no_args_is_help=True)


class Progress:
    """Push/pull progress as one self-updating stderr line per stage, at most 4 updates a second;
    silent when stderr is not a terminal (stdout, and so --json, never carries it)."""

    def __init__(self, tty: bool, clock: Callable[[], float] = time.monotonic):
        self.tty, self.clock = tty, clock
        self.stage, self.started, self.shown, self.first = "", 0.0, 0.0, 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Called by the sync after each batch: facts done of total in `stage` (push | pull)."""
        if not self.tty:
            return
        now = self.clock()
        if stage != self.stage:
            self.finish()
            self.stage, self.started, self.shown, self.first = stage, now, 0.0, done
        elif now - self.shown < 0.25 and done < total:
            return
        self.shown = now
        share = f" ({100 * done // total}%)" if total else ""
        rate = f", {(done - self.first) / (now - self.started):,.0f}/s" if now > self.started else ""
        typer.echo(f"\r{stage}: {done:,}/{total:,} facts{share}{rate}", err=True, nl=False)

    def finish(self) -> None:
        """End the current line (a no-op when none is open)."""
        if self.stage:
            typer.echo("", err=True)
            self.stage = ""


def _direction(push: bool, pull: bool, both: bool) -> str:
    chosen = [name for name, on in (("push", push), ("pull", pull), ("both", both)) if on]
    if len(chosen) > 1:
        typer.echo("Error: choose one of --push, --pull, --both", err=True)
        raise typer.Exit(2)
    return chosen[0] if chosen else "push"


@dataclass
class MilvusOptions:
    """The options of `deepresearch kb sync milvus`."""

    uri: str = typer.Option(
        ..., "--uri", help="Milvus server URL (http://host:19530) or milvus-lite path ending in .db."
    )
    collection: str = typer.Option("deepresearch_facts", "--collection", help="Remote collection name.")
    push: bool = typer.Option(False, "--push", help="Send new/changed facts, delete removed ones (default).")
    pull: bool = typer.Option(False, "--pull", help="Store remote facts that are new or fresher here.")
    both: bool = typer.Option(False, "--both", help="Push, then pull.")
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would change; write nothing.")
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")


@sync_app.command("milvus")
@with_options(MilvusOptions)
def milvus(ctx: typer.Context, opts: MilvusOptions) -> None:
    """Push facts to a Milvus collection incrementally, or pull them back for offline use."""
    direction = _direction(opts.push, opts.pull, opts.both)
    from deepresearch.kb.sync import sync_milvus, validate_collection

    validate_collection(opts.collection)  # fail before opening the workspace or loading anything

    kb = open_kb(ctx)
    progress = Progress(is_tty())
    ctx.call_on_close(progress.finish)  # an error ends the progress line too
    report: Any = sync_milvus(kb, opts.uri, opts.collection, direction, opts.dry_run, progress)
    progress.finish()
    for message in report.warnings[:20]:
        warn(message)
    if opts.as_json:  # a server URL may carry user:password@ (printed redacted, as everywhere)
        echo_json(report.to_dict())
    else:
        typer.echo(report.summary())
