"""`deepresearch mcp`: the SDK's own stdio client against the real server subprocess (real SQLite,
real embedder; the research call loads the real GGUF and is marked slow), plus in-process calls
that hold a research run at a known point (a blocking fake model) to show that recall is not
blocked by it and that cancelling stops it."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from typer.testing import CliRunner

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'deepresearch[mcp]')")

from mcp import Client, MCPError, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from deepresearch.cli.main import app  # noqa: E402
from tests.research_helpers import RoutedChatModel, make_deps  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "docs" / "corpus"
FACT = "SQLite WAL mode lets one writer and many readers work on the same database at once."
SOURCE = "https://sqlite.org/wal.html"


def _stdio(home: Path, errlog: Any, *args: str, env: dict[str, str] | None = None) -> Client:
    """A client that starts `deepresearch --home HOME mcp ARGS` with this checkout's package."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "deepresearch", "--home", str(home), "mcp", *args],
        env={
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **(env or {}),
        },
        cwd=str(home),
    )
    return Client(stdio_client(params, errlog=errlog))


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _cli_error(home: Path, *argv: str) -> str:
    """The one line the CLI prints on stderr for `argv`."""
    result = CliRunner().invoke(app, ["--home", str(home), *argv])
    assert result.exit_code == 1, result.output
    return result.stderr.strip()


@pytest.fixture
def corpus_home(home: Path, real_embedder: Any) -> Path:
    """A workspace whose corpus holds two of the shipped sample documents."""
    from deepresearch.search.corpus import Corpus
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        report = Corpus(ws.db, real_embedder, ws.config.search.corpus).add_paths(
            [CORPUS / "sqlite-wal.md", CORPUS / "fts5.md"]
        )
        assert report.documents == 2 and not report.errors
    finally:
        ws.close()
    return home


def test_tool_schemas_use_the_library_enums() -> None:
    from deepresearch import mcp_server
    from deepresearch.config import CorpusConfig
    from deepresearch.facts import CATEGORIES, LIFECYCLE_MODES

    assert get_args(mcp_server.Category) == CATEGORIES
    assert get_args(mcp_server.LifecycleMode) == LIFECYCLE_MODES
    assert get_args(mcp_server.CorpusMode) == get_args(CorpusConfig.model_fields["mode"].annotation)


def test_stdio_server_add_query_search_and_bad_input(corpus_home: Path, tmp_path: Path) -> None:
    home = corpus_home
    expected_cli_line = _cli_error(home, "runs", "show", "NO-SUCH-RUN")

    async def main() -> None:
        with open(tmp_path / "server.err", "w", encoding="utf-8") as errlog:
            async with _stdio(home, errlog, "--allow-write") as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) >= {"kb_query", "corpus_search", "kb_add", "research", "runs_show"}
                assert tools["kb_query"].annotations.read_only_hint is True
                assert tools["kb_query"].input_schema["properties"]["top_k"]  # the CLI's option names
                assert set(tools["kb_add"].input_schema["properties"]) >= {"text", "source", "category", "confidence"}

                added = await client.call_tool(
                    "kb_add", {"text": FACT, "source": SOURCE, "category": "technology", "confidence": 0.9}
                )
                assert not added.is_error, _text(added)
                assert len(added.structured_content["added"]) == 1
                fact_id = added.structured_content["added"][0]

                found = await client.call_tool("kb_query", {"text": "Can readers and a writer use SQLite together?"})
                assert not found.is_error, _text(found)
                data = found.structured_content
                assert data["degraded"] is False
                assert data["hits"][0]["id"] == fact_id and data["hits"][0]["fact"] == FACT
                assert json.loads(_text(found)) == data  # the text content is the same JSON

                hits = await client.call_tool("corpus_search", {"query": "write-ahead log checkpoint", "n": 2})
                assert not hits.is_error, _text(hits)
                assert hits.structured_content["backend"] == "corpus"
                assert hits.structured_content["results"][0]["url"] == f"file://{CORPUS / 'sqlite-wal.md'}"

                # Malformed arguments: one clear line each, and the server keeps serving.
                for args, problem in (
                    ({"text": "WAL", "top_k": 0}, "top_k: Input should be greater than or equal to 1"),
                    ({"top_k": 3}, "text: Field required"),
                    ({"text": "WAL", "lifecycle": "sometimes"}, "lifecycle: Input should be 'off', 'inform'"),
                ):
                    bad = await client.call_tool("kb_query", args)
                    assert bad.is_error
                    assert _text(bad).startswith(f"Error: invalid arguments for kb_query: {problem}")
                    assert "\n" not in _text(bad) and "Traceback" not in _text(bad)
                # A user error from the library: the very line the CLI prints.
                missing = await client.call_tool("runs_show", {"run_id": "NO-SUCH-RUN"})
                assert missing.is_error and _text(missing) == expected_cli_line
                again = await client.call_tool(
                    "kb_query", {"text": "SQLite readers and writers", "top_k": 1, "include_expired": True}
                )
                assert not again.is_error and again.structured_content["hits"][0]["id"] == fact_id
                assert again.structured_content["include_expired"] is True

    anyio.run(main)
    assert "Traceback" not in (tmp_path / "server.err").read_text(encoding="utf-8")


def test_stdio_server_is_read_only_without_allow_write(home: Path, tmp_path: Path) -> None:
    async def main() -> None:
        with open(tmp_path / "server.err", "w", encoding="utf-8") as errlog:
            async with _stdio(home, errlog) as client:
                refused = await client.call_tool("kb_add", {"text": FACT, "source": SOURCE})
                assert refused.is_error
                assert _text(refused) == (
                    "Error: kb_add changes the knowledge base and this server is read-only"
                    " — restart it with `deepresearch mcp --allow-write`"
                )
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert tools["kb_add"].annotations.read_only_hint is False

    anyio.run(main)
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    try:
        assert ws.db.execute("select count(*) from facts").fetchone()[0] == 0
    finally:
        ws.close()


def test_mcp_command_fails_fast_on_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kb: [\n")
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(bad), "mcp"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: invalid YAML in ")


@pytest.mark.slow
def test_stdio_research_reports_progress_and_cited_sources(corpus_home: Path, tmp_path: Path) -> None:
    # Small on purpose (as the CLI's end-to-end test): 1 loop, 2 queries, 2 results, short generations.
    env = {
        "DEEPRESEARCH__RESEARCH__MAX_TOKENS": "48",
        "DEEPRESEARCH__SEARCH__RESULTS_PER_QUERY": "2",
        "DEEPRESEARCH__RESEARCH__FACTS_PER_SOURCE": "3",
        "DEEPRESEARCH__RESEARCH__QUERIES_PER_LOOP": "2",
    }
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def main() -> None:
        with open(tmp_path / "server.err", "w", encoding="utf-8") as errlog:
            async with _stdio(corpus_home, errlog, "--allow-write", env=env) as client:
                result = await client.call_tool(
                    "research",
                    {"question": "How does SQLite WAL mode treat readers and writers?", "loops": 1},
                    progress_callback=on_progress,
                )
                assert not result.is_error, _text(result)
                data = result.structured_content
                assert data["loops"] == 1 and data["fact_ids"]
                report = data["report"]
                cited = {int(n) for n in re.findall(r"\[(\d+)\]", report.split("## Sources")[0])}
                listed = {s["n"]: s["url"] for s in data["sources"]}
                assert cited and cited <= set(listed)
                retrieved = {f"file://{CORPUS / 'sqlite-wal.md'}", f"file://{CORPUS / 'fts5.md'}"}
                assert set(listed.values()) <= retrieved

                # The saved report is a resource, listed and readable by run id.
                uri = f"deepresearch://runs/{data['run_id']}/report"
                listed_uris = [str(r.uri) for r in (await client.list_resources()).resources]
                assert uri in listed_uris
                read = await client.read_resource(uri)
                assert read.contents[0].text == report
                shown = await client.call_tool("runs_show", {"run_id": data["run_id"]})
                assert shown.structured_content["status"] == "done" and shown.structured_content["report"] == report

    anyio.run(main)
    assert messages and any(m.startswith("[loop 1] search") for m in messages), messages
    assert any(m.startswith("report:") for m in messages)


# --- in-process: a research run held at a known point -------------------------------------------


class _HeldModel(RoutedChatModel):
    """The research tests' routed fake model, except that its reflect call waits until released."""

    def __init__(self) -> None:
        super().__init__(plan={"rationale": "r", "queries": ["SQLite WAL readers writers"]})
        self.reached, self.release = threading.Event(), threading.Event()

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        if "review research" in messages[0]["content"]:
            self.reached.set()
            self.release.wait(60)
        return super().complete(messages, schema, max_tokens, temperature)


def _wait_for(event: threading.Event) -> Any:
    return anyio.to_thread.run_sync(event.wait, 60)


def test_recall_is_not_blocked_by_a_running_research_and_cancel_stops_it(home: Path, real_embedder: Any) -> None:
    from deepresearch.mcp_server import build_server
    from deepresearch.workspace import Workspace

    expected_cli_line = _cli_error(home, "runs", "show", "NO-SUCH-RUN")
    held = _HeldModel()
    ws = Workspace.open(home)
    server = build_server(
        ws, allow_write=True, research_deps=lambda run_ws, options: make_deps(run_ws, real_embedder, model=held)
    )
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> None:
        async with Client(server, mode="legacy") as client:
            added = await client.call_tool("kb_add", {"text": FACT, "source": SOURCE})
            assert not added.is_error, _text(added)
            scope = anyio.CancelScope()

            async def run() -> None:
                with scope:
                    await client.call_tool(
                        "research", {"question": "How does SQLite WAL mode work?"}, progress_callback=on_progress
                    )
                    raise AssertionError("the research call should have been cancelled")

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                assert await _wait_for(held.reached), "the run never reached its reflect step"
                # The run holds the model mid-step; recall still answers.
                found = await client.call_tool("kb_query", {"text": "SQLite readers and writers"})
                assert not found.is_error and found.structured_content["hits"][0]["fact"] == FACT
                assert server.research_lock.locked() and not held.release.is_set()
                scope.cancel()
            held.release.set()  # the model returns; the run must stop at its next progress event
            with anyio.fail_after(30):
                while server.research_lock.locked():
                    await anyio.sleep(0.05)
            again = await client.call_tool("kb_query", {"text": "SQLite readers and writers"})
            assert not again.is_error
            # Reports are resources; a run without one, or no run, is an MCP error with the CLI's line.
            assert [r for r in (await client.list_resources()).resources if "/runs/" in str(r.uri)] == []
            run_id = ws.db.execute("select id from research_runs").fetchone()[0]
            with pytest.raises(MCPError, match=f"^Error: run {run_id} stopped before its report"):
                await client.read_resource(f"deepresearch://runs/{run_id}/report")
            with pytest.raises(MCPError) as missing:
                await client.read_resource("deepresearch://runs/NO-SUCH-RUN/report")
            assert missing.value.message == expected_cli_line

    try:
        anyio.run(main)
        assert any(m.startswith("[loop 1] search") for m in progress), progress
        # Stopped before its report, checkpointed: `deepresearch research --resume` can continue it.
        runs = ws.db.execute("select status, step, report, finished_at from research_runs").fetchall()
        # Issue 21 (7): marked interrupted, not left `running`
        assert len(runs) == 1 and runs[0][0] == "interrupted" and runs[0][1] in ("reflect", "answer", "report"), runs
        assert runs[0][2] is None and runs[0][3] is None
        assert not list(ws.reports_dir.iterdir())
    finally:
        ws.close()
