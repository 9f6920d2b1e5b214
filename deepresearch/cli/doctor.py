"""`deepresearch doctor`: the offline self-check."""

from __future__ import annotations

from typing import List, Optional

import typer

from deepresearch.cli.common import echo, echo_json, open_workspace


def doctor(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    skip: Optional[List[str]] = typer.Option(None, "--skip", help="Skip a check by name (repeatable)."),
) -> None:
    """Check offline that the database, sqlite-vec, models, llama.cpp build, DuckDB and workspace all work."""
    from deepresearch.doctor import run_checks

    ws = open_workspace(ctx)
    checks = run_checks(ws, skip=set(skip or []))
    ok = all(c.ok for c in checks)
    if json_out:
        echo_json({"ok": ok, "checks": checks})
    else:
        for c in checks:
            mark = ("warn" if c.warning else "ok  ") if c.ok else "FAIL"
            echo(f"{mark} {c.name:<16} {c.detail}" + (f"\n     fix: {c.fix}" if c.fix and not c.ok else ""))
            if c.warning:
                echo(f"     warning: {c.warning}")
        echo("all checks passed" if ok else "some checks failed")
    raise typer.Exit(0 if ok else 1)
