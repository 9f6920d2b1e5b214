"""Issue 21 (8), the smaller findings: concurrent adds of one fact log history right, a rejected
1 MB fact is not echoed whole, an invalid lifecycle mode is an error like any invalid value, and
the MCP server rejects booleans for numbers and answers a line it cannot read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.facts import Fact
from tests.cli_helpers import one_error_line
from tests.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[1]
FACT = "SQLite WAL mode lets one writer and many readers work on the same database at once."
runner = CliRunner()


# --- concurrent adds of one fact -------------------------------------------------------------


class _RacingEmbedder(FakeEmbedder):
    """While this writer embeds (before its transaction), another writer stores the same fact."""

    def __init__(self, other: Any) -> None:
        super().__init__()
        self.other = other

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.other is not None:
            other, self.other = self.other, None
            other()
        return super().embed_batch(texts)


def test_a_fact_stored_by_another_writer_meanwhile_is_reconfirmed_not_merged(workspace) -> None:
    """The audit's six concurrent MCP kb_add calls: a writer that planned before another committed
    the same text merged into it ("duplicate"), logging the stored fact's source, not its own."""
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.workspace import Workspace

    other_ws = Workspace.open(workspace.home)
    first: list[str] = []
    other = KnowledgeBase(other_ws.db, FakeEmbedder(), workspace.config.kb)
    racing = KnowledgeBase(
        workspace.db,
        _RacingEmbedder(lambda: first.extend(other.add_facts([Fact(FACT, "https://e.org/first")]).added)),
        workspace.config.kb,
    )
    try:
        result = racing.add_facts([Fact(FACT, "https://e.org/second")])
    finally:
        other_ws.close()
    assert result.added == [] and result.reconfirmed == first and result.merged == []
    events = [(e.event, e.new_text, e.detail) for e in racing.history(first[0])]
    assert events == [("add", FACT, None), ("reconfirm", FACT, "source https://e.org/second")]


def test_six_concurrent_mcp_kb_add_calls_log_each_source_once(home: Path, real_embedder: Any) -> None:
    from mcp import Client

    from deepresearch.mcp_server import build_server
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    server = build_server(ws, allow_write=True)
    replies: dict[int, Any] = {}

    async def main() -> None:
        async with Client(server, mode="legacy") as client:

            async def add(i: int) -> None:
                replies[i] = (
                    await client.call_tool("kb_add", {"text": FACT, "source": f"https://e.org/{i}"})
                ).structured_content

            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(add, i)

    try:
        anyio.run(main)
        (fact_id,) = [r[0] for r in ws.db.execute("select id from facts")]
        history = ws.db.execute("select event, new_text, detail from fact_history order by seq").fetchall()
    finally:
        ws.close()
    assert sorted(len(r["added"]) for r in replies.values()) == [0, 0, 0, 0, 0, 1]
    assert all(r["merged"] == [] for r in replies.values()), replies
    assert [e for e, _, _ in history] == ["add"] + ["reconfirm"] * 5
    assert all(text == FACT for _, text, _ in history)
    added = next(i for i, r in replies.items() if r["added"])
    logged = sorted(d.removeprefix("source ") for _, _, d in history[1:])
    assert logged == sorted(f"https://e.org/{i}" for i in range(6) if i != added)


def test_reconfirming_a_known_source_says_so(workspace) -> None:
    from deepresearch.kb.store import KnowledgeBase

    kb = KnowledgeBase(workspace.db, FakeEmbedder(), workspace.config.kb)
    (fid,) = kb.add_facts([Fact(FACT, "https://e.org/a")]).added
    kb.add_facts([Fact(FACT, "https://e.org/a")])
    assert kb.history(fid)[-1].detail == "source https://e.org/a (already known)"


# --- a rejected 1 MB fact ---------------------------------------------------------------------


def test_a_rejected_huge_fact_is_not_echoed_whole(home: Path, fake_model) -> None:
    huge = "word " * 200_000  # 1 MB
    result = runner.invoke(app, ["--home", str(home), "kb", "add", huge, "--source", "https://e.org", "--json"])
    assert result.exit_code == 1
    assert len(result.stdout) < 2000 and len(result.stderr) < 500, (len(result.stdout), len(result.stderr))
    (rejected,) = json.loads(result.stdout)["rejected"]
    assert rejected["fact"].startswith("word word") and rejected["fact"].endswith("… [truncated: 1000000 characters]")
    assert rejected["reason"].startswith("too long")


# --- lifecycle mode: invalid is an error --------------------------------------------------------


def test_an_invalid_lifecycle_mode_is_an_error_naming_the_modes(home: Path, fake_model, monkeypatch) -> None:
    """KB_LIFECYCLE_MODE=bogus only warned (and used freshness) while every other bad value is an error."""
    line = one_error_line(runner.invoke(app, ["--home", str(home), "kb", "query", "x", "--lifecycle", "bogus"]))
    assert "unknown lifecycle mode 'bogus' — use one of off, inform, freshness, lifecycle" in line
    monkeypatch.setenv("KB_LIFECYCLE_MODE", "bogus")
    bad = runner.invoke(app, ["--home", str(home), "kb", "stats"])
    assert bad.exit_code == 1 and bad.stderr.splitlines() == [
        "Error: invalid configuration (environment):",
        "  kb.lifecycle_mode: Value error, unknown lifecycle mode 'bogus' — use one of off, inform, freshness,"
        " lifecycle",
    ]
    monkeypatch.setenv("KB_LIFECYCLE_MODE", "Lifecycle")
    assert runner.invoke(app, ["--home", str(home), "kb", "stats"]).exit_code == 0


# --- MCP: booleans are not numbers; unreadable lines get an answer --------------------------------


def test_mcp_rejects_booleans_for_numbers(home: Path, fake_model) -> None:
    from mcp import Client

    from deepresearch.mcp_server import build_server
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    server = build_server(ws, allow_write=True)
    texts: dict[str, str] = {}

    async def main() -> None:
        async with Client(server, mode="legacy") as client:
            for name, tool, args in (
                ("top_k", "kb_query", {"text": "WAL", "top_k": True}),
                ("n", "corpus_search", {"query": "WAL", "n": True}),
                ("confidence", "kb_add", {"text": FACT, "source": "https://e.org", "confidence": True}),
            ):
                result = await client.call_tool(tool, args)
                assert result.is_error, (name, result)
                texts[name] = "\n".join(c.text for c in result.content if c.type == "text")
            ok = await client.call_tool("kb_query", {"text": "WAL", "top_k": 2})
            assert not ok.is_error

    try:
        anyio.run(main)
    finally:
        ws.close()
    for name, text in texts.items():
        assert text.startswith("Error: invalid arguments for") and f"{name}: Input should be a valid" in text, text


def test_mcp_answers_a_line_it_cannot_read_with_a_json_rpc_error(home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepresearch", "--home", str(home), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: replies.extend(json.loads(line) for line in proc.stdout), daemon=True)  # type: ignore[union-attr]
    reader.start()
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    try:
        for line in ("this is not json", '{"just": "json"}', json.dumps(init)):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
        deadline = threading.Event()
        for _ in range(600):
            if len(replies) >= 3:
                break
            deadline.wait(0.1)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
    assert [r.get("id", "absent") for r in replies] == [None, None, 1], (replies, err[-2000:])
    assert replies[0]["error"]["code"] == -32700 and replies[1]["error"]["code"] == -32600
    assert replies[2]["result"]["serverInfo"]["name"] == "deepresearch"
    assert "Traceback" not in err
