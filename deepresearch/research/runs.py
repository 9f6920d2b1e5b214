"""Saved research runs: each step's state checkpointed in the DB, then list/show/search.

A run row holds the latest state (JSON) and the step to do next; `research_steps` logs
each finished step. Both are written in one short transaction per step, so a killed run
resumes from its last finished step.

A run stopped by Ctrl-C or an MCP cancel is marked `interrupted`; one whose process died
without a word (SIGKILL, power loss) is shown `interrupted` too: the row names its process
(host, pid, start time), and a `running` row whose process is gone on this host is not running.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepresearch.db import transaction
from deepresearch.errors import InputError, NotFound
from deepresearch.research.state import ResearchState


@dataclass
class RunRecord:
    """One saved research run as the `runs` commands show it."""

    id: str
    topic: str
    status: str
    step: str
    loop: int
    stop_reason: str | None
    created_at: float
    updated_at: float
    finished_at: float | None
    report_path: str | None
    report: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


_COLUMNS = "id, topic, status, step, loop, stop_reason, created_at, updated_at, finished_at, report_path"
INTERRUPTED = "interrupted"


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22); '' if unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def this_process() -> str:
    """The owner record of a run this process works on: host, pid and start time (JSON)."""
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": _started(os.getpid())})


def owner_gone(owner: str | None) -> bool:
    """True if the process in `owner` certainly no longer runs: on this host, and its pid is free or
    now belongs to a process that started at another time. Unknown (another host, no record): False."""
    try:
        record = json.loads(owner or "")
        host, pid, started = record["host"], int(record["pid"]), str(record["started"])
    except (ValueError, KeyError, TypeError):
        return False
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # alive, another user's (or a pid this OS cannot hold)
        return False
    now = _started(pid)
    return bool(started and now) and now != started


def _record(row: Any) -> RunRecord:
    """A RunRecord from `_COLUMNS` plus `owner`: a `running` run whose process is gone is interrupted."""
    record = RunRecord(*row[:10])
    if record.status == "running" and owner_gone(row[10]):
        record.status = INTERRUPTED
    return record


class RunStore:
    """Persistence of research runs over the workspace connection."""

    def __init__(self, conn: Any):
        self.conn = conn

    def create(self, state: ResearchState) -> None:
        """Insert a new run in state `running`."""
        now = time.time()
        with transaction(self.conn):
            self.conn.execute(
                "insert into research_runs (id, topic, status, step, loop, options_json, state_json,"
                " created_at, updated_at, owner) values (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.run_id,
                    state.topic,
                    state.step,
                    state.loop,
                    json.dumps(state.to_dict()["options"]),
                    json.dumps(state.to_dict(), ensure_ascii=False),
                    now,
                    now,
                    this_process(),
                ),
            )

    def checkpoint(self, state: ResearchState, done_step: str, info: dict[str, Any], seconds: float) -> None:
        """Save the state after `done_step` and log the step, in one transaction."""
        now = time.time()
        with transaction(self.conn):
            seq = self.conn.execute(
                "select coalesce(max(seq), 0) + 1 from research_steps where run_id = ?", (state.run_id,)
            ).fetchone()[0]
            self.conn.execute(
                "insert into research_steps (run_id, seq, loop, step, info_json, seconds, finished_at)"
                " values (?, ?, ?, ?, ?, ?, ?)",
                (
                    state.run_id,
                    seq,
                    state.loop,
                    done_step,
                    json.dumps(info, ensure_ascii=False, default=str),
                    seconds,
                    now,
                ),
            )
            self.conn.execute(
                "update research_runs set step = ?, loop = ?, state_json = ?, stop_reason = ?,"
                " updated_at = ?, report = ? where id = ?",
                (
                    state.step,
                    state.loop,
                    json.dumps(state.to_dict(), ensure_ascii=False),
                    state.stop_reason,
                    now,
                    state.report or None,
                    state.run_id,
                ),
            )

    def fail(self, run_id: str, step: str, error: BaseException) -> None:
        """Mark a run failed in `step` with its error; `--resume` continues from the last checkpoint."""
        from deepresearch.errors import user_message
        from deepresearch.text import redact_secrets

        message = user_message(error) or f"{type(error).__name__}: {error}"
        now = time.time()
        with transaction(self.conn):
            self.conn.execute(
                "update research_runs set status = 'failed', stop_reason = ?, updated_at = ? where id = ?",
                (redact_secrets(f"error in {step}: {message}")[:500], now, run_id),
            )

    def reopen(self, run_id: str) -> None:
        """Mark a resumed run running again, in this process (it may have failed or been killed)."""
        with transaction(self.conn):
            self.conn.execute(
                "update research_runs set status = 'running', updated_at = ?, owner = ?"
                " where id = ? and status != 'done'",
                (time.time(), this_process(), run_id),
            )

    def interrupt(self, run_id: str) -> None:
        """Mark a running run interrupted (Ctrl-C, an MCP cancel); `--resume` continues it."""
        with transaction(self.conn):
            self.conn.execute(
                "update research_runs set status = ?, updated_at = ? where id = ? and status = 'running'",
                (INTERRUPTED, time.time(), run_id),
            )

    def finish(self, run_id: str, report_path: str) -> None:
        """Mark a run done and remember where its Markdown report was written."""
        now = time.time()
        with transaction(self.conn):
            self.conn.execute(
                "update research_runs set status = 'done', report_path = ?, finished_at = ?, updated_at = ?"
                " where id = ?",
                (report_path, now, now, run_id),
            )

    def _resolve(self, run_id: str) -> str:
        """A full run id from an id or a unique prefix of one."""
        rows = self.conn.execute(
            "select id from research_runs where id like ? escape '\\' order by id limit 2",
            (run_id.replace("%", "\\%").replace("_", "\\_") + "%",),
        ).fetchall()
        if not rows:
            raise NotFound(f"no research run {run_id!r} — list runs with `deepresearch runs list`")
        if len(rows) > 1 and rows[0][0] != run_id:
            raise InputError(f"run id prefix {run_id!r} is ambiguous — give more characters")
        return str(rows[0][0])

    def load_state(self, run_id: str) -> ResearchState:
        """The checkpointed state of a run (to resume it)."""
        full = self._resolve(run_id)
        row = self.conn.execute("select state_json from research_runs where id = ?", (full,)).fetchone()
        return ResearchState.from_dict(json.loads(row[0]))

    def get(self, run_id: str) -> RunRecord:
        """One run with its report and step log."""
        full = self._resolve(run_id)
        row = self.conn.execute(
            f"select {_COLUMNS}, owner, report, state_json from research_runs where id = ?", (full,)
        ).fetchone()
        record = _record(row)
        record.report = row[11]
        state = json.loads(row[12])
        record.stats = {
            **state.get("counters", {}),
            **{k: v for k, v in state.get("report_stats", {}).items() if k != "sources"},
        }
        record.steps = [
            {"seq": r[0], "loop": r[1], "step": r[2], "seconds": round(r[3], 3), **json.loads(r[4])}
            for r in self.conn.execute(
                "select seq, loop, step, seconds, info_json from research_steps where run_id = ? order by seq",
                (full,),
            )
        ]
        return record

    def recent(self, limit: int = 20) -> list[RunRecord]:
        """Most recent runs first."""
        rows = self.conn.execute(
            f"select {_COLUMNS}, owner from research_runs order by created_at desc limit ?", (limit,)
        )
        return [_record(r) for r in rows]

    def search(self, text: str, limit: int = 20) -> list[RunRecord]:
        """Runs whose topic or report contains every word of `text` (substring match, works for CJK)."""
        terms = [t for t in text.split() if t]
        if not terms:
            raise InputError("give some words to search for")
        where = " and ".join(["(topic like ? escape '\\' or coalesce(report, '') like ? escape '\\')"] * len(terms))
        params: list[Any] = []
        for t in terms:
            pattern = "%" + t.replace("%", "\\%").replace("_", "\\_") + "%"
            params += [pattern, pattern]
        rows = self.conn.execute(
            f"select {_COLUMNS}, owner from research_runs where {where} order by created_at desc limit ?",
            (*params, limit),
        )
        return [_record(r) for r in rows]
