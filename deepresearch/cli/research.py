"""`deepresearch research` and `deepresearch runs …`: the research loop and saved runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from deepresearch.cli.common import (
    CLEAR_LINE,
    Fresh,
    echo,
    echo_json,
    is_tty,
    open_workspace,
    search_backend,
    status,
    warn,
    with_options,
)
from deepresearch.research.progress import describe

if TYPE_CHECKING:
    from deepresearch.research.state import RunOptions
    from deepresearch.workspace import Workspace

runs_app = typer.Typer(help="List, show and search saved research runs.", no_args_is_help=True)


def _progress(event: str, **info: Any) -> None:
    """Progress on stderr: a line per step; a live status line on a terminal while the model works."""
    if event == "model":
        if is_tty():
            typer.echo(CLEAR_LINE, err=True, nl=False)
            echo(f"… model: {info['what']}", err=True, nl=False)
        return
    line = describe(event, **info)
    if line:
        if is_tty():
            typer.echo(CLEAR_LINE, err=True, nl=False)
        status(line)


@dataclass
class ResearchOptions:
    """The arguments and options of `deepresearch research`."""

    question: Optional[str] = typer.Argument(None, help="The research question (omit with --resume).")
    loops: Optional[int] = typer.Option(None, "--loops", min=1, help="Reflection loops at most.")
    queries: Optional[int] = typer.Option(None, "--queries", min=1, help="Search queries per loop at most.")
    fresh: Optional[Fresh] = typer.Option(
        None, "--fresh", help="Freshness level: max age of facts that count as known."
    )
    lifecycle: Optional[str] = typer.Option(
        None,
        "--lifecycle",
        help="How recalled facts are filtered and worded: off | inform | freshness | lifecycle"
        " (anything else is an error, as for KB_LIFECYCLE_MODE and kb query).",
    )
    backend: Optional[str] = typer.Option(
        None, "--backend", callback=search_backend, help="Search backend: corpus | zim | searxng (or any registered)."
    )
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the search cache.")
    no_kb_write: bool = typer.Option(False, "--no-kb-write", help="Do not store extracted facts in the KB.")
    budget: Optional[float] = typer.Option(None, "--budget", min=0.001, help="Stop searching after SECONDS.")
    out: Optional[Path] = typer.Option(None, "--out", help="Also write the Markdown report to FILE.")
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue the killed run RUN_ID.")
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of the report.")

    def given(self) -> bool:
        """True when a question or a run option was given (a resumed run keeps its saved ones)."""
        flags = (self.loops, self.queries, self.fresh, self.lifecycle, self.backend, self.budget)
        return self.question is not None or any(f is not None for f in flags) or self.no_cache or self.no_kb_write


def _run_options(ws: Workspace, opts: ResearchOptions) -> RunOptions:
    """The run options: the workspace config with the flags given on the command line."""
    from deepresearch.kb.lifecycle import effective_mode
    from deepresearch.research.loop import options_from_config

    return options_from_config(
        ws,
        loops=opts.loops,
        queries=opts.queries,
        fresh=opts.fresh and opts.fresh.value,
        lifecycle=opts.lifecycle and effective_mode(opts.lifecycle, ws.config.kb),
        backend=opts.backend,
        use_cache=False if opts.no_cache else None,
        kb_write=False if opts.no_kb_write else None,
        budget=opts.budget,
    )


@with_options(ResearchOptions)
def research(ctx: typer.Context, opts: ResearchOptions) -> None:
    """Research a question: recall, plan, search, rank, extract, reflect, answer, report."""
    from deepresearch.errors import InputError, SearchError

    if not opts.resume and not (opts.question or "").strip():
        raise InputError("give a research question, or --resume RUN_ID to continue a run")
    # The first progress line before the loop's imports and the models load (seconds on a busy machine).
    status(f"resuming run {opts.resume}" if opts.resume else f"research: {(opts.question or '').strip()[:200]}")
    from deepresearch.research.loop import run_research

    if opts.resume and opts.given():
        warn("--resume continues a run with its saved question and options; the ones given are ignored")
    ws = open_workspace(ctx)
    options = None if opts.resume else _run_options(ws, opts)
    result = run_research(ws, opts.question, options, resume=opts.resume, progress=_progress, out=opts.out)
    if opts.as_json:
        echo_json(result)
    else:
        echo(result.report)
    status(f"report saved: {result.report_path} (run {result.run_id})")
    failure = result.failure()
    if failure:
        raise SearchError(failure)


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", min=1, help="Runs to show."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List saved research runs, newest first."""
    from deepresearch.research.runs import RunStore

    _print_runs(RunStore(open_workspace(ctx).db).recent(limit), as_json)


@runs_app.command("search")
def runs_search(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="Words that must all appear in the topic or report."),
    limit: int = typer.Option(20, "--limit", min=1, help="Runs to show."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Find saved runs whose question or report contains TEXT."""
    from deepresearch.research.runs import RunStore

    _print_runs(RunStore(open_workspace(ctx).db).search(text, limit), as_json)


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run, its steps and report as JSON."),
) -> None:
    """Show one run's report (or, with --json, its steps, counters and report)."""
    from deepresearch.research.runs import RunStore

    record = RunStore(open_workspace(ctx).db).get(run_id)
    if as_json:
        echo_json(record)
    elif record.report:
        echo(record.report)
    else:
        echo(
            f"run {record.id} stopped before its report (step {record.step}); "
            f"continue it with `deepresearch research --resume {record.id}`"
        )


def _print_runs(records: list[Any], as_json: bool) -> None:
    import time

    if as_json:
        echo_json(records)
        return
    if not records:
        status("no runs")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        echo(f"{r.id}  {when}  {r.status:<11}  {(r.stop_reason or r.step):<13}  {r.topic}")
    stopped = [r.id for r in records if r.status in ("interrupted", "failed")]
    if stopped:
        status(f"continue an interrupted or failed run with `deepresearch research --resume {stopped[0]}`")
