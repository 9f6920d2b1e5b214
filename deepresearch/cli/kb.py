"""`deepresearch kb …`: the long-term knowledge base."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from deepresearch.cli.common import Fresh, echo, echo_json, open_kb, open_workspace, status, warn, with_options
from deepresearch.views import add_result_json, recall_json

app = typer.Typer(help="Query and maintain the long-term knowledge base.", no_args_is_help=True)


class ExportFormat(str, Enum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"


MAX_WARNINGS = 20


def _report_add(result: Any, as_json: bool, list_ids: bool = True) -> None:
    if as_json:
        echo_json(add_result_json(result))
    else:
        echo(
            f"added {len(result.added)}, reconfirmed {len(result.reconfirmed)},"
            f" rejected {len(result.rejected)}"
            + (f", merged {len(result.merged)}" if result.merged else "")
            + (f", flagged {len(result.flagged)}" if result.flagged else "")
        )
        for merge in result.merged:
            echo(f"merged {merge.old_texts[0]!r} → {merge.new_text!r}")
        if list_ids:
            for ident in [*result.added, *result.reconfirmed]:
                echo(ident)
    for fact, reason in result.rejected[:MAX_WARNINGS]:
        warn(f"rejected {fact.fact[:60]!r}: {reason}")
    if len(result.rejected) > MAX_WARNINGS:
        warn(f"… and {len(result.rejected) - MAX_WARNINGS} more rejected (see --json)")


@app.command("add")
def add(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The fact: one self-contained, checkable sentence."),
    source: str = typer.Option(..., "--source", "-s", help="Full URL of the source (https://…, file://…)."),
    category: Optional[str] = typer.Option(
        None, "--category", "-c", help="market_data | product_info | strategy | technology | historical."
    ),
    confidence: float = typer.Option(0.7, "--confidence", min=0.0, max=1.0, help="Confidence 0–1."),
    topic: str = typer.Option("", "--topic", help="Research topic the fact belongs to."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Add one fact (an exact duplicate reconfirms the stored fact)."""
    from deepresearch.facts import CATEGORIES, DEFAULT_CATEGORY, Fact, is_known_category

    if category and not is_known_category(category):
        warn(f"unknown category {category!r}; storing it as {DEFAULT_CATEGORY!r} (known: {', '.join(CATEGORIES)})")
    kb = open_kb(ctx)
    result = kb.add_facts([Fact(text, source, research_topic=topic, category=category or "", confidence=confidence)])
    _report_add(result, as_json)
    if result.rejected and not (result.added or result.reconfirmed):
        raise typer.Exit(1)


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Path = typer.Argument(
        ...,
        help="JSONL file, one {fact, source_url, category, confidence, research_topic, created_at,"
        " verified_at} object per line.",
    ),
    link: bool = typer.Option(
        False,
        "--link/--restore",
        help="--restore (default): bring back an export as it was — ids, times, status and history links"
        " kept, nothing merged, so an export/import round trip is lossless. --link: someone else's facts —"
        " each active one goes through the `kb add` rule with a new id (duplicates reconfirm, updates"
        " supersede, contradictions are flagged); superseded or expired records are rejected.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Import facts from JSONL (the shape `kb export --format jsonl` writes): a restore, or with --link a merge."""
    kb = open_kb(ctx)
    result = kb.import_jsonl(file, link=link)
    _report_add(result, as_json, list_ids=False)
    if result.rejected and not (result.added or result.reconfirmed):
        raise typer.Exit(1)


def _expiry_tag(hit: Any) -> str:
    """`status`, plus when the fact expires or that it is past its TTL (not yet swept)."""
    from datetime import datetime, timezone

    if hit.status != "active":
        return hit.status
    if hit.expired:
        return "active, EXPIRED (past TTL, not swept yet)"
    if hit.expires_at is None:
        return "active, never expires"
    return f"active, expires {datetime.fromtimestamp(hit.expires_at, timezone.utc).strftime('%Y-%m-%d')}"


@dataclass
class QueryOptions:
    """The arguments and options of `deepresearch kb query`."""

    text: str = typer.Argument(..., help="What to recall (meaning, not exact words).")
    top_k: Optional[int] = typer.Option(None, "--top-k", "-k", min=1, help="Facts to return (default: kb.top_k).")
    min_confidence: Optional[float] = typer.Option(
        None, "--min-confidence", min=0.0, max=1.0, help="Drop facts whose decayed confidence is lower."
    )
    lifecycle: Optional[str] = typer.Option(
        None, "--lifecycle", help="off | inform | freshness | lifecycle (default: kb.lifecycle_mode)."
    )
    fresh: Optional[Fresh] = typer.Option(None, "--fresh", help="Freshness level for freshness mode.")
    category: Optional[str] = typer.Option(None, "--category", "-c", help="Only facts of this category.")
    include_expired: bool = typer.Option(
        False, "--include-expired", help="Also recall facts a sweep marked expired and superseded facts."
    )
    as_json: bool = typer.Option(False, "--json", help="Print {degraded, reason, mode, include_expired, hits} as JSON.")


@app.command("query")
@with_options(QueryOptions)
def query(ctx: typer.Context, opts: QueryOptions) -> None:
    """Recall facts related to TEXT, filtered and decayed by the lifecycle mode."""
    from deepresearch.kb.lifecycle import age_tag

    kb = open_kb(ctx)
    kb.one_shot = True  # one query per process: a direct KNN beats loading a RAM index
    recall = kb.query(
        opts.text,
        top_k=opts.top_k,
        min_confidence=opts.min_confidence,
        mode=opts.lifecycle,
        freshness=opts.fresh and opts.fresh.value,
        category=opts.category,
        include_expired=opts.include_expired,
    )
    if recall.degraded:
        warn(f"keyword search only, not semantic recall: {recall.reason}")
    if opts.as_json:
        echo_json(recall_json(recall))
        return
    if not recall.hits:
        status(f"no facts found (lifecycle mode: {recall.mode})")
        return
    echo(f"{'conf':>5} {'rel':>5}  {'age':<14} {'category':<13} fact")
    for hit in recall.hits:
        mark = "! " if hit.conflicts_with else ""
        echo(
            f"{hit.confidence:5.2f} {hit.relevance:5.2f}  {age_tag(hit.age_days):<14} {hit.category:<13}"
            f" {mark}{hit.fact}"
        )
        echo(f"{'':42}{hit.source_url}  [{hit.id}]  ({_expiry_tag(hit)})")
        if hit.conflicts_with:
            echo(f"{'':42}! contradicts {', '.join(hit.conflicts_with)} — see `deepresearch kb conflicts`")


@app.command("sweep")
def sweep(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would change; write nothing."),
    purge: bool = typer.Option(
        False,
        "--purge",
        help="Delete expired facts, and the older versions they superseded, instead of marking them (history is kept).",
    ),
    batch: int = typer.Option(500, "--batch", min=1, help="Facts per transaction."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print nothing on success (for cron); --json output is still printed."
    ),
) -> None:
    """Expire facts past their TTL (cron-safe: short transactions, exit 0 on success)."""
    # A cron job with a wrong or missing DEEPRESEARCH_HOME must fail, not sweep a new empty KB.
    kb = open_kb(ctx, create=False)
    result = kb.sweep(purge=purge, batch=batch, dry_run=dry_run)
    if as_json:
        echo_json(result)
    elif not quiet:
        echo(result.summary())


@app.command("history")
def history(
    ctx: typer.Context,
    fact_id: str = typer.Argument(..., help="Fact id (ULID)."),
    as_json: bool = typer.Option(False, "--json", help="Print the events as JSON."),
) -> None:
    """Show every recorded change of one fact."""
    from datetime import datetime, timezone

    kb = open_kb(ctx)
    events = kb.history(fact_id)
    if as_json:
        echo_json(events)
        return
    for e in events:
        when = datetime.fromtimestamp(e.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
        text = f"{e.old_text!r} → {e.new_text!r}" if e.old_text and e.new_text else repr(e.new_text or e.old_text or "")
        detail = f"  ({e.detail})" if e.detail else ""
        echo(f"{when}  {e.event:<10} {text}{detail}")


@app.command("check")
def check(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the problems as JSON."),
) -> None:
    """Verify that facts, sources, history, vectors and FTS rows agree (exit 1 on problems)."""
    kb = open_kb(ctx)
    problems = kb.check()
    unchecked = kb.vectors_not_checked()
    if as_json:
        echo_json({"ok": not problems, "problems": problems, "vectors_not_checked": unchecked})
    else:
        if unchecked:
            echo(f"note: vectors not checked — sqlite-vec is not available ({unchecked})")
        for problem in problems:
            echo(f"problem: {problem}")
        echo("ok: facts, vectors and FTS agree" if not problems else f"{len(problems)} problem(s)")
    if problems:
        raise typer.Exit(1)


@app.command("stats")
def stats(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as JSON."),
) -> None:
    """Counts by category and status, age histogram, expiring soon, confidence, top sources."""
    kb = open_kb(ctx)
    data = kb.stats()
    if as_json:
        echo_json(data)
        return
    echo(f"facts: {data['total']}  " + "  ".join(f"{k}: {v}" for k, v in data["by_status"].items()))
    echo(f"embedding model: {data['embedding_model']} ({data['embedding_dimension']}-d)")
    for title in ("by_category", "age_histogram", "expiring_within_7_days", "confidence_histogram"):
        echo(f"{title.replace('_', ' ')}:")
        for key, value in data[title].items():
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items())
            echo(f"  {key:<16} {value}")
    echo("top sources:")
    for row in data["top_sources"]:
        echo(f"  {row['facts']:>5}  {row['url']}")


@app.command("export")
def export(
    ctx: typer.Context,
    fmt: ExportFormat = typer.Option(ExportFormat.jsonl, "--format", "-f", help="File format."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="File to write (default: stdout; required for parquet)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --output file."),
) -> None:
    """Export every fact with id, status and sources (the interchange shape `kb import` reads)."""
    import sys
    import tempfile

    if output is None and fmt is ExportFormat.parquet:
        echo("Error: parquet is binary — pass --output FILE", err=True)
        raise typer.Exit(2)
    ws = open_workspace(ctx)
    kb = open_kb(ctx, ws)
    if output is not None:
        count = kb.export(output, fmt.value, overwrite=force, private=ws.config.workspace.private)
        status(f"exported {count} facts to {output}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"facts.{fmt.value}"
        kb.export(path, fmt.value)
        data = path.read_text(encoding="utf-8")
        if sys.stdout.isatty():  # for reading: stored escape sequences shown escaped
            echo(data, nl=False)
        else:  # for a pipe or file: the data exactly as `kb import` reads it back
            typer.echo(data, nl=False)


@app.command("compress")
def compress(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would merge; write nothing."),
    no_model: bool = typer.Option(
        False, "--no-model", help="Fuse texts mechanically (deterministic) instead of asking the LLM."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the merges as JSON."),
) -> None:
    """Merge near-duplicate facts across the KB (old rows superseded, contradictions flagged)."""
    from deepresearch.errors import DeepResearchError

    ws = open_workspace(ctx)
    chat = None
    if not no_model:
        from deepresearch.models.llm import get_chat_model

        try:
            chat = get_chat_model(ws.config.llm)
        except DeepResearchError as exc:
            warn(f"no chat model, fusing texts mechanically: {exc}")
    result = open_kb(ctx, ws).compress(chat, dry_run=dry_run)
    if as_json:
        echo_json(result)
        return
    verb = "would merge" if dry_run else "merged"
    for merge in result.merges:
        echo(f"{verb} ({merge.kind}, {merge.method}):")
        for old in merge.old_texts:
            echo(f"  - {old}")
        echo(f"  → {merge.new_text}" + (f"  [{merge.new_id}]" if merge.new_id else ""))
    for fact_id, other, reason in result.flagged:
        echo(f"flagged {fact_id} vs {other}: {reason}")
    echo(
        f"{result.facts} active facts, {result.clusters} clusters, {verb} {len(result.merges)},"
        f" flagged {len(result.flagged)}" + (" (dry run: nothing written)" if dry_run else "")
    )


@app.command("conflicts")
def conflicts(
    ctx: typer.Context,
    include_resolved: bool = typer.Option(False, "--all", help="Also list resolved conflicts."),
    as_json: bool = typer.Option(False, "--json", help="Print the conflicts as JSON."),
) -> None:
    """List contradicting facts kept side by side, to re-verify (merging could not fuse them)."""
    kb = open_kb(ctx)
    found = kb.conflicts(include_resolved=include_resolved)
    texts = {i: kb.get(i).fact for c in found for i in (c.fact_id, c.other_id)}
    if as_json:
        echo_json([{**vars(c), "fact": texts[c.fact_id], "other_fact": texts[c.other_id]} for c in found])
        return
    if not found:
        status("no open conflicts")
    for c in found:
        echo(f"{c.fact_id}  {texts[c.fact_id]}")
        echo(f"{c.other_id}  {texts[c.other_id]}")
        echo(f"  reason: {c.reason}" + ("  (resolved)" if c.resolved_at else ""))


@app.command("reembed")
def reembed(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Rebuild every fact vector with the configured embedding model (after changing models)."""
    kb = open_kb(ctx)
    count = kb.reembed(progress=lambda done, total: status(f"embedded {done}/{total}"))
    model = kb.embedder().model_id
    if as_json:
        echo_json({"facts": count, "model": model})
    else:
        echo(f"re-embedded {count} facts with {model}")
