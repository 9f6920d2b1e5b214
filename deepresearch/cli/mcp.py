"""`deepresearch mcp`: serve the workspace to MCP clients (desktop assistants, coding agents) over stdio."""

from __future__ import annotations

import typer

from deepresearch.cli.common import open_workspace


def mcp(
    ctx: typer.Context,
    allow_write: bool = typer.Option(
        False,
        "--allow-write",
        help="Enable the tools that change the knowledge base (kb_add; research storing its facts).",
    ),
) -> None:
    """Serve the knowledge base and research loop as a local MCP server on stdio (read-only by default)."""
    from deepresearch.errors import DeepResearchError

    # The SDK loads only here, so `--help` and every other command stay light.
    try:
        from deepresearch.mcp_server import build_server
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != "mcp":
            raise
        raise DeepResearchError("the MCP server needs the mcp package — pip install 'deepresearch[mcp]'") from None

    # Opened now so a bad --home, config or database fails before a client connects, not on its first call.
    ws = open_workspace(ctx)
    ws.db  # noqa: B018 (connecting applies migrations and checks the file; each call opens its own)
    build_server(ws, allow_write=allow_write).run("stdio")
