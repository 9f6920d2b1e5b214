"""What a finished run returns, and how it is finished: report file saved, run marked done."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearch.errors import InputError
from deepresearch.files import write_output

if TYPE_CHECKING:
    from deepresearch.research.runs import RunStore
    from deepresearch.research.state import ResearchState
    from deepresearch.workspace import Workspace


@dataclass
class RunResult:
    """What a finished run returns (and `--json` prints)."""

    run_id: str
    topic: str
    stop_reason: str | None
    loops: int
    answer: str
    report: str
    report_path: str
    queries: list[str]
    sources: list[dict[str, Any]]
    facts: list[dict[str, str]]
    fact_ids: list[str]
    known_facts: int
    counters: dict[str, float]
    elapsed_seconds: float
    report_stats: dict[str, Any] = field(default_factory=dict)
    search_error: str | None = None  # the last failed search, if any
    short_answer: str | None = None  # the bold answer; None when the run abstained
    answer_sources: list[dict[str, Any]] = field(default_factory=list)  # {n, url, title} it rests on
    answer_parts: list[dict[str, str]] = field(default_factory=list)  # {question, answer}: read one hop at a time

    def failure(self) -> str | None:
        """Why the run is not a success although it finished: every search failed (e.g. the network
        is down), so its report has no evidence. None for a run that found sources."""
        if self.search_error and not self.sources:
            return (
                f"no source could be searched ({self.search_error}) — the report has no evidence;"
                " fix the search backend or use the corpus backend, then run again"
            )
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower(), flags=re.UNICODE).strip("-")[:50] or "report"


def finish(ws: Workspace, store: RunStore, state: ResearchState, out: Path | None) -> RunResult:
    """Save the report file (and `out`), mark the run finished, and return its result."""
    private = ws.config.workspace.private
    report_path = ws.reports_dir / f"{time.strftime('%Y%m%d')}-{_slug(state.topic)}-{state.run_id[-6:].lower()}.md"
    write_output(report_path, state.report, overwrite=True, private=private)
    store.finish(state.run_id, str(report_path))
    if out is not None:
        try:
            write_output(Path(out), state.report, overwrite=True, private=private)
        except OSError as exc:
            raise InputError(
                f"cannot write the report to {out}: {exc.strerror} — it is saved at {report_path}"
            ) from None
        except InputError as exc:
            raise InputError(f"cannot write the report: {exc} — it is saved at {report_path}") from None
    return RunResult(
        run_id=state.run_id,
        topic=state.topic,
        stop_reason=state.stop_reason,
        loops=len(state.reflections),
        answer=state.answer,
        report=state.report,
        report_path=str(report_path),
        queries=state.queries_done,
        sources=state.report_stats.get("sources", []),
        facts=state.facts,
        fact_ids=state.fact_ids,
        known_facts=len(state.known),
        counters=dict(state.counters),
        elapsed_seconds=round(state.elapsed, 3),
        report_stats={k: v for k, v in state.report_stats.items() if k != "sources"},
        search_error=state.last_search_error,
        short_answer=state.report_stats.get("short_answer"),
        answer_sources=list(state.report_stats.get("answer_sources", [])),
        answer_parts=list(state.report_stats.get("answer_parts", [])),
    )
