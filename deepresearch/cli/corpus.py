"""`deepresearch corpus …`, `deepresearch search` and `deepresearch cache …`: local documents,
any search backend, and the search cache."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from deepresearch.cli.common import (
    CorpusMode,
    echo_json,
    is_tty,
    open_cache,
    open_corpus_workspace,
    open_workspace,
    search_backend,
    status,
    warn,
    with_options,
)

if TYPE_CHECKING:
    from deepresearch.search.corpus import Corpus

app = typer.Typer(help="Ingest and search local documents (the offline search corpus).", no_args_is_help=True)
cache_app = typer.Typer(help="Inspect or clear the short-term search cache.", no_args_is_help=True)

MODE_HELP = "hybrid (BM25 + vector), bm25 or vector; default from search.corpus.mode."


class _IngestProgress:
    """Two rich progress bars on stderr, text (files) and vectors (chunks), with rate and ETA; the
    callbacks are None when stderr is not a terminal (quiet, and --json stays clean)."""

    def __init__(self, text: bool = True, vectors: bool = True) -> None:
        self.bars: Any = None
        if not is_tty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bars = Progress(
            TextColumn("{task.description:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.text = self.bars.add_task("text", total=None, detail="", visible=text)
        self.vectors = self.bars.add_task("vectors", total=None, detail="", visible=vectors)

    def __enter__(self) -> _IngestProgress:
        if self.bars is not None:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.stop()

    @property
    def on_file(self) -> Any:
        """Callback for IngestProgress (after each file, and inside tables and large files)."""
        if self.bars is None:
            return None

        def show(event: Any) -> None:
            rate = event.chunks / event.seconds if event.seconds else 0.0
            detail = f"files · {event.chunks} chunks · {rate:.0f} chunks/s"
            self.bars.update(self.text, completed=event.files_done, total=event.files_total, detail=detail)

        return show

    @property
    def on_vectors(self) -> Any:
        """Callback for VectorProgress (after each embedded pool of chunks)."""
        if self.bars is None:
            return None

        def show(event: Any) -> None:
            rate = event.done / event.seconds if event.seconds else 0.0
            self.bars.update(self.vectors, completed=event.done, total=event.total, detail=f"chunks · {rate:.1f}/s")

        return show


def _render_results(results: list[Any], query: str, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        echo_json({"query": query, **extra, "results": results})
        return
    if not results:
        typer.echo(f"No results for {query!r}.")
        return
    from deepresearch.text import terminal_safe  # not at import: keeps the CLI's cold start lean

    for n, result in enumerate(results, start=1):
        typer.echo(f"{n}. {terminal_safe(result.title)}  [{result.score:.4g}]")
        typer.echo(f"   {terminal_safe(result.url)}")
        if result.snippet:
            typer.echo(f"   {terminal_safe(' '.join(result.snippet.split()))}")


@dataclass
class AddOptions:
    """The arguments and options of `deepresearch corpus add`."""

    paths: List[Path] = typer.Argument(..., help="Files or folders (.md .rst .txt .html .pdf .parquet .csv .jsonl).")
    glob: Optional[str] = typer.Option(None, "--glob", help="Pattern for files inside folders, e.g. '**/*.md'.")
    text_col: Optional[str] = typer.Option(None, "--text-col", help="Tabular files: column with the text.")
    title_col: Optional[str] = typer.Option(None, "--title-col", help="Tabular files: column with the title.")
    url_col: Optional[str] = typer.Option(None, "--url-col", help="Tabular files: column with the source URL.")
    id_col: Optional[str] = typer.Option(None, "--id-col", help="Tabular files: column with a stable row id.")
    keywords_only: bool = typer.Option(
        False, "--keywords-only", help="Index the text only (keyword search); `corpus embed` adds the vectors."
    )
    include_noindex: bool = typer.Option(
        False,
        "--include-noindex",
        help="Also index HTML pages marked <meta name=robots content=noindex> (skipped by default: print-all"
        " copies of a book, redirect stubs).",
    )
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON.")


@app.command("add")
@with_options(AddOptions)
def add(ctx: typer.Context, opts: AddOptions) -> None:
    """Ingest documents: text first (searchable at once), vectors behind it; unchanged files skipped."""
    from deepresearch.search.documents import add_documents
    from deepresearch.search.readers import TableSpec

    spec = TableSpec(text_col=opts.text_col, title_col=opts.title_col, url_col=opts.url_col, id_col=opts.id_col)
    ws = open_corpus_workspace(ctx)
    with _IngestProgress(vectors=not opts.keywords_only) as bars:
        report = add_documents(
            ws,
            opts.paths,
            table=spec,
            glob=opts.glob,
            progress=bars.on_file,
            vector_progress=bars.on_vectors,
            embed=not opts.keywords_only,
            include_noindex=opts.include_noindex,
        )
    from deepresearch.text import terminal_safe

    for message in report.errors:
        typer.secho(f"Error: {terminal_safe(message)}", err=True, fg=typer.colors.RED)
    if opts.as_json:
        echo_json(report)
    else:
        rate = report.chunks / report.seconds if report.seconds and report.chunks else 0.0
        typer.echo(
            f"added {len(report.added)}, replaced {len(report.replaced)}, skipped {len(report.skipped)},"
            f" failed {len(report.errors)} files; {report.documents} documents, {report.chunks} chunks"
            f" in {report.seconds:.1f}s ({rate:.1f} chunks/s)"
            + (f"; {report.duplicates} duplicate documents ignored" if report.duplicates else "")
        )
        if report.not_indexed:
            status(f"{len(report.not_indexed)} HTML pages marked noindex not indexed — `--include-noindex` adds them")
        if report.vectors_pending:
            status(f"{report.vectors_pending} chunks wait for their vector — `deepresearch corpus embed` adds them")
    if report.errors:
        raise typer.Exit(1)


@app.command("embed")
def embed(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Embed the chunks that have no vector yet (after `add --keywords-only` or an interrupted add)."""
    from deepresearch.search.documents import embed_documents

    ws = open_corpus_workspace(ctx)
    with _IngestProgress(text=False) as bars:
        embedded, pending = embed_documents(ws, progress=bars.on_vectors)
    if as_json:
        echo_json({"embedded": embedded, "vectors_pending": pending})
    else:
        typer.echo(f"embedded {embedded} chunks" + (f"; {pending} still without a vector" if pending else ""))


def _read_corpus(ctx: typer.Context) -> Corpus:
    """The workspace corpus for commands that only read it (no embedder, no search backend)."""
    from deepresearch.search.corpus import Corpus

    ws = open_corpus_workspace(ctx)
    return Corpus(ws.db, None, ws.config.search.corpus)


@app.command("status")
def corpus_status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show corpus size, unfinished ingests and how many chunks wait for their vector."""
    info = _read_corpus(ctx).status()
    if as_json:
        echo_json(info)
        return
    typer.echo(f"{info.sources} files, {info.documents} documents, {info.chunks} chunks")
    if info.incomplete_sources:
        typer.echo(
            f"{info.incomplete_sources} files incomplete (ingest interrupted) — `deepresearch corpus add` them again"
        )
    if info.vectors_pending is None:
        typer.echo("vectors: unknown (sqlite-vec is not loaded — see `deepresearch doctor`)")
    else:
        waiting = f"{info.vectors_pending} chunks wait for their vector — `deepresearch corpus embed`"
        typer.echo(
            f"vectors: {waiting if info.vectors_pending else 'all chunks embedded'}"
            + (f" (model {info.embedding_model})" if info.embedding_model else "")
        )


@app.command("list")
def list_sources(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List ingested files with their document and chunk counts."""
    sources = _read_corpus(ctx).sources()
    if as_json:
        echo_json(sources)
        return
    if not sources:
        typer.echo("The corpus is empty — add documents with `deepresearch corpus add PATH`.")
        return
    from deepresearch.text import terminal_safe

    for s in sources:
        mark = "" if s.complete else "  (incomplete: interrupted — `corpus add` it again)"
        typer.echo(f"{s.documents:>7} docs {s.chunks:>8} chunks  {s.kind:<5}  {terminal_safe(s.path)}{mark}")


@app.command("search")
def search_corpus(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for."),
    count: int = typer.Option(5, "--count", "-n", min=1, help="Number of results."),
    mode: Optional[CorpusMode] = typer.Option(None, "--mode", help=MODE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    """Search the local corpus directly (no cache): best chunk of each matching document."""
    from deepresearch.search.corpus import Corpus

    ws = open_corpus_workspace(ctx)
    corpus = Corpus.from_workspace(ws)
    chosen = mode.value if mode else ws.config.search.corpus.mode
    if corpus.count_chunks() == 0 and not as_json:
        warn("the corpus is empty — add documents with `deepresearch corpus add PATH`")
    results = corpus.search(query, count, mode=chosen)
    extra = {"backend": "corpus", "mode": chosen, "vectors_pending": corpus.vectors_pending()}
    _render_results(results, query, as_json, extra)


@app.command("remove")
def remove(
    ctx: typer.Context,
    paths: Optional[List[Path]] = typer.Argument(None, help="Ingested files to remove."),
    all_sources: bool = typer.Option(False, "--all", help="Remove every document (and the chunk vectors)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Remove ingested files (their documents, chunks, index rows and vectors)."""
    from deepresearch.errors import InputError
    from deepresearch.search.documents import remove_documents

    if not paths and not all_sources:
        raise InputError("name the files to remove (see `deepresearch corpus list`) or pass --all")
    removed = remove_documents(open_corpus_workspace(ctx), paths or [], all_sources=all_sources)
    if as_json:
        echo_json({"removed_documents": removed})
    else:
        typer.echo(f"removed {removed} documents")


def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for."),
    backend: Optional[str] = typer.Option(
        None, "--backend", "-b", callback=search_backend, help="corpus | zim | searxng (default: config)."
    ),
    count: Optional[int] = typer.Option(None, "--count", "-n", min=1, help="Results (default: config)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the search cache."),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    """Search with the configured backend through the short-term cache."""
    from deepresearch.search.backends import get_backend
    from deepresearch.search.cache import cached_search

    ws = open_workspace(ctx)
    cfg = ws.config.search
    engine = get_backend(backend or cfg.backend, ws)
    cache = open_cache(ctx, ws) if cfg.cache.enabled and not no_cache else None
    results, hit, key = cached_search(engine, query, count or cfg.results_per_query, cache)
    if hit and not as_json:
        status(f"(from cache, key {key})")
    _render_results(results, query, as_json, {"backend": engine.name, "cache_hit": hit, "cache_key": key})


@cache_app.command("stats")
def cache_stats(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show cache entries, size on disk, hits and misses."""
    stats = open_cache(ctx, open_workspace(ctx)).stats()
    if as_json:
        echo_json(stats)
        return
    lookups = stats["hits"] + stats["misses"]
    rate = f"{100 * stats['hits'] / lookups:.0f}%" if lookups else "n/a"
    typer.echo(f"{stats['entries']} entries, {stats['bytes']} bytes in {stats['directory']}")
    typer.echo(f"hits {stats['hits']}, misses {stats['misses']} (hit rate {rate}); TTL {stats['ttl_seconds']:g}s")


@cache_app.command("clear")
def cache_clear(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Delete every cached search result and reset the counters."""
    removed = open_cache(ctx, open_workspace(ctx)).clear()
    if as_json:
        echo_json({"removed": removed})
    else:
        typer.echo(f"removed {removed} cached searches")
