"""The knowledge base and research loop as a local MCP server (stdio), on the official `mcp` SDK.

An interface beside the CLI, not below it: every tool is a thin call into the library function
the matching command calls, returns that command's `--json` shape, and fails with the line the
CLI would print (`Error: …`). Tool arguments are named like the CLI's options and checked by
the tool schemas.

Concurrency: the SDK runs each call in a worker thread, and every call opens its own workspace
connection (a SQLite connection must not be shared by threads in the middle of a transaction).
WAL lets a `kb_query` read while a research run writes, so a long run blocks other calls only
for SQLite's own short write locks. Research runs one at a time, because the GGUF model is one
in-process object; a cancelled run stops at its next progress event, with every finished step
checkpointed (`deepresearch research --resume RUN_ID` continues it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from typing import Annotated, Any, Callable, Iterator, Literal, Optional

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    Resource,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from deepresearch import __version__
from deepresearch.errors import NotFound, user_message
from deepresearch.text import redact_secrets
from deepresearch.views import add_result_json, recall_json, to_jsonable
from deepresearch.workspace import Workspace

# The schemas' enums; a test keeps them equal to deepresearch.facts' tuples.
Category = Literal["market_data", "product_info", "strategy", "technology", "historical"]
LifecycleMode = Literal["off", "inform", "freshness", "lifecycle"]
CorpusMode = Literal["hybrid", "bm25", "vector"]

DepsFactory = Callable[[Workspace, Any], Any]
REPORT_URI = "deepresearch://runs/{run_id}/report"
LISTED_REPORTS = 100
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class RunCancelled(BaseException):
    """Raised inside a research run's progress callback once the client cancelled the call.

    A BaseException, so no step's `except Exception` fallback swallows it on the way out.
    """


def _one_line(exc: ValidationError) -> str:
    """Pydantic's multi-line report as one `field: problem; …` line."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def cli_line(exc: BaseException) -> str | None:
    """The `Error: …` line the CLI prints for `exc` (credentials redacted); None for a bug."""
    message = user_message(exc)
    return None if message is None else f"Error: {redact_secrets(message)}"


def _failed(payload: dict[str, Any], message: str) -> CallToolResult:
    """An error result that still carries the JSON the CLI prints before it exits 1."""
    return CallToolResult(
        content=[
            TextContent(type="text", text=f"Error: {message}"),
            TextContent(type="text", text=json.dumps(payload, indent=2, ensure_ascii=False)),
        ],
        structured_content=payload,
        is_error=True,
    )


class DeepResearchServer(MCPServer):
    """MCPServer whose tool errors read like the CLI's: one `Error: …` line, never a traceback."""

    def __init__(self, workspace: Workspace, *, allow_write: bool, research_deps: DepsFactory | None = None):
        super().__init__(
            "deepresearch",
            version=__version__,
            instructions=(
                "A local knowledge base of sourced facts and a research loop over offline sources. "
                "Recall with kb_query before researching; research stores what it finds "
                + ("in the knowledge base." if allow_write else "only in its report (this server is read-only).")
            ),
            log_level="WARNING",
        )
        self.workspace = workspace
        self.allow_write = allow_write
        self.research_deps = research_deps
        self.research_lock = threading.Lock()

    @contextlib.contextmanager
    def open(self) -> Iterator[Workspace]:
        """A fresh connection to the workspace for one call (closed after it)."""
        from deepresearch.db import sqlite_errors

        ws = dataclasses.replace(self.workspace)  # same home and config, its own lazily opened connection
        try:
            with sqlite_errors(ws.db_path):
                yield ws
        finally:
            ws.close()

    def require_write(self, tool: str) -> None:
        """Refuse a tool that changes the KB unless the server was started with --allow-write."""
        if not self.allow_write:
            raise ToolError(
                f"Error: {tool} changes the knowledge base and this server is read-only"
                " — restart it with `deepresearch mcp --allow-write`"
            )

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Run a tool; a user error or bad arguments become one `Error: …` line for the client."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            line = cli_line(cause) if cause is not None else None
            if line is not None:
                raise ToolError(line) from None
            if isinstance(cause, ValidationError):
                raise ToolError(f"Error: invalid arguments for {name}: {_one_line(cause)}") from cause
            if isinstance(cause, ToolError) and not isinstance(exc, UnexpectedToolError):
                raise cause from None  # our own message, without the SDK's "Error executing tool" prefix
            raise

    async def run_stdio_async(self) -> None:
        """Serve on stdio, where a line that is not a JSON-RPC message gets a JSON-RPC error reply
        (id null), not silence that leaves the client waiting for its timeout."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            relay, inbox = anyio.create_memory_object_stream[Any](0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_answer_unreadable, read_stream, relay, write_stream)
                lowlevel = self._lowlevel_server
                await lowlevel.run(inbox, write_stream, lowlevel.create_initialization_options())

    async def list_resources(self) -> list[Resource]:
        """The static resources plus one report resource per finished run (newest first)."""
        return [*await super().list_resources(), *await anyio.to_thread.run_sync(self._report_resources)]

    def _report_resources(self) -> list[Resource]:
        from deepresearch.research.runs import RunStore

        with self.open() as ws:
            records = RunStore(ws.db).recent(LISTED_REPORTS)
        return [
            Resource(
                uri=REPORT_URI.format(run_id=r.id),
                name=f"report-{r.id}",
                title=r.topic,
                description=f"Research report ({r.stop_reason or r.status})",
                mime_type="text/markdown",
            )
            for r in records
            if r.report_path
        ]


async def _answer_unreadable(source: Any, relay: Any, replies: Any) -> None:
    """Pass the stdio transport's messages on; answer each line it could not read as JSON-RPC with
    a parse error (-32700: not JSON) or an invalid request (-32600: JSON, but not a message)."""
    async with relay:
        async for item in source:
            if not isinstance(item, Exception):
                await relay.send(item)
                continue
            errors = item.errors() if isinstance(item, ValidationError) else []
            if errors and errors[0].get("type") == "json_invalid":
                error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
            else:
                error = ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message")
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await replies.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))


def build_server(
    workspace: Workspace, *, allow_write: bool = False, research_deps: DepsFactory | None = None
) -> DeepResearchServer:
    """The MCP server for a workspace: tools kb_query, corpus_search, kb_add, research, runs_show
    and a report resource per run. `research_deps(ws, options)` replaces the real models and
    backend of research runs (as `run_research(deps=…)` does; tests plug fakes in here)."""
    server = DeepResearchServer(workspace, allow_write=allow_write, research_deps=research_deps)
    _add_search_tools(server)
    _add_write_tools(server)
    _add_run_views(server)
    return server


def _add_search_tools(server: DeepResearchServer) -> None:
    """The read-only tools: kb_query (recall) and corpus_search."""

    @server.tool(annotations=READ_ONLY)
    def kb_query(
        text: Annotated[str, Field(min_length=1, description="What to recall (meaning, not exact words).")],
        top_k: Annotated[
            Optional[int], Field(ge=1, strict=True, description="Facts to return (default: kb.top_k).")
        ] = None,
        lifecycle: Annotated[
            Optional[LifecycleMode], Field(description="How stale facts are filtered (default: kb.lifecycle_mode).")
        ] = None,
        category: Annotated[Optional[Category], Field(description="Only facts of this category.")] = None,
        include_expired: Annotated[
            bool, Field(description="Also recall facts a sweep marked expired and superseded facts.")
        ] = False,
    ) -> dict[str, Any]:
        """Recall facts related to `text` from the knowledge base, filtered and decayed by the lifecycle
        mode (as `deepresearch kb query --json`: {degraded, reason, mode, include_expired, hits})."""
        from deepresearch.kb.store import KnowledgeBase

        with server.open() as ws:
            recall = KnowledgeBase.from_workspace(ws).query(
                text, top_k=top_k, mode=lifecycle, category=category, include_expired=include_expired
            )
        return recall_json(recall)

    @server.tool(annotations=READ_ONLY)
    def corpus_search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        mode: Annotated[
            Optional[CorpusMode], Field(description="hybrid (BM25 + vector) | bm25 | vector (default: config).")
        ] = None,
        n: Annotated[int, Field(ge=1, le=100, strict=True, description="Number of results.")] = 5,
    ) -> dict[str, Any]:
        """Search the local document corpus: best chunk of each matching document (as
        `deepresearch corpus search --json`: {query, backend, mode, results})."""
        from deepresearch.search.corpus import Corpus

        with server.open() as ws:
            chosen = mode or ws.config.search.corpus.mode
            results = Corpus.from_workspace(ws).search(query, n, mode=chosen)
        return {"query": query, "backend": "corpus", "mode": chosen, "results": to_jsonable(results)}


def _add_write_tools(server: DeepResearchServer) -> None:
    """The tools that may write the KB: kb_add (needs --allow-write) and research."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    def kb_add(
        text: Annotated[str, Field(min_length=1, description="The fact: one self-contained, checkable sentence.")],
        source: Annotated[str, Field(min_length=1, description="Full URL of the source (https://…, file://…).")],
        category: Annotated[Optional[Category], Field(description="Category (default: strategy).")] = None,
        confidence: Annotated[float, Field(ge=0.0, le=1.0, strict=True, description="Confidence 0–1.")] = 0.7,
        topic: Annotated[str, Field(description="Research topic the fact belongs to.")] = "",
    ) -> dict[str, Any]:
        """Store one fact (needs --allow-write); an exact duplicate reconfirms the stored fact, a near
        duplicate merges into it (as `deepresearch kb add --json`)."""
        from deepresearch.facts import Fact
        from deepresearch.kb.store import KnowledgeBase

        server.require_write("kb_add")
        fact = Fact(text, source, research_topic=topic, category=category or "", confidence=confidence)
        with server.open() as ws:
            result = KnowledgeBase.from_workspace(ws).add_facts([fact])
        payload = add_result_json(result)
        if result.rejected and not (result.added or result.reconfirmed):
            return _failed(payload, f"fact rejected: {result.rejected[0][1]}")  # type: ignore[return-value]
        return payload

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    async def research(
        question: Annotated[str, Field(min_length=1, description="The research question.")],
        ctx: Context,
        loops: Annotated[
            Optional[int], Field(ge=1, strict=True, description="Reflection loops at most (default: config).")
        ] = None,
    ) -> dict[str, Any]:
        """Research a question: recall, plan, search, rank the evidence, extract, reflect, answer, and
        write a cited report (as `deepresearch research --json`: report, sources, facts, …). Progress arrives as
        progress notifications; cancelling stops the run at its next step (resumable from the CLI).
        Without --allow-write the run does not store facts in the knowledge base."""
        stop, started, done = threading.Event(), threading.Event(), threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                lambda: _research(server, question, loops, ctx, stop, started, done), abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            stop.set()
            with anyio.CancelScope(shield=True):  # a started worker closes its connection before we go
                while started.is_set() and not done.is_set():
                    await anyio.sleep(0.05)
            raise


def _add_run_views(server: DeepResearchServer) -> None:
    """Saved runs: the runs_show tool and a report resource per run."""

    @server.tool(annotations=READ_ONLY)
    def runs_show(
        run_id: Annotated[str, Field(min_length=1, description="Run id (or a unique prefix).")],
    ) -> dict[str, Any]:
        """One saved research run with its steps, counters and report (as `deepresearch runs show --json`)."""
        from deepresearch.research.runs import RunStore

        with server.open() as ws:
            return dict(to_jsonable(RunStore(ws.db).get(run_id)))

    @server.resource(REPORT_URI, name="report", title="Research report", mime_type="text/markdown")
    def report(run_id: str) -> str:
        """The Markdown report of a saved research run."""
        from deepresearch.research.runs import RunStore

        try:
            with server.open() as ws:
                record = RunStore(ws.db).get(run_id)
        except Exception as exc:
            line = cli_line(exc)
            if line is None:
                raise
            raise (ResourceNotFoundError if isinstance(exc, NotFound) else ResourceError)(line) from None
        if not record.report:
            raise ResourceNotFoundError(
                f"Error: run {record.id} stopped before its report (step {record.step}) — continue it with"
                f" `deepresearch research --resume {record.id}`"
            )
        return record.report


def _research(
    server: DeepResearchServer,
    question: str,
    loops: int | None,
    ctx: Context,
    stop: threading.Event,
    started: threading.Event,
    done: threading.Event,
) -> Any:
    """The research tool's worker thread: one run on its own connection, progress sent to the client."""
    from deepresearch.research.loop import options_from_config, run_research
    from deepresearch.research.progress import describe

    sent = 0

    def progress(event: str, **info: Any) -> None:
        nonlocal sent
        if stop.is_set():
            raise RunCancelled()
        line = describe(event, **info)
        if line:
            sent += 1
            anyio.from_thread.run(ctx.report_progress, sent, None, line)

    started.set()
    try:
        # One GGUF model in this process: runs take turns, and a waiting call can still be cancelled.
        while not server.research_lock.acquire(timeout=0.2):
            if stop.is_set():
                raise RunCancelled()
        try:
            with server.open() as ws:
                options = options_from_config(ws, loops=loops, kb_write=None if server.allow_write else False)
                deps = server.research_deps(ws, options) if server.research_deps else None
                result = run_research(ws, question, options, deps=deps, progress=progress)
        finally:
            server.research_lock.release()
        payload = to_jsonable(result)
        failure = result.failure()
        if failure:
            return _failed(payload, failure)
        return payload
    finally:
        done.set()
