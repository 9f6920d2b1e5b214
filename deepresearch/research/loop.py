"""The bounded research loop: run the routed steps, checkpoint each, write the report.

Steps are in `steps.py`/`report.py`, the order and every stop rule in `router.py`, the real
dependencies in `wiring.py`. Every finished step is checkpointed, so `resume` continues a
killed run where it stopped.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import InputError
from deepresearch.facts import new_id
from deepresearch.research import steps
from deepresearch.research.deps import Deps
from deepresearch.research.report import report
from deepresearch.research.router import route
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions
from deepresearch.research.wiring import TimedModel, build_deps, options_from_config

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace

STEP_FUNCTIONS: dict[str, Callable[[ResearchState, Deps], dict[str, Any]]] = {
    "recall": steps.recall,
    "plan": steps.plan,
    "search": steps.search,
    "rank": steps.rank,
    "extract": steps.extract,
    "reflect": steps.reflect,
    "report": report,
}
Progress = Callable[..., None]


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


def run_research(
    ws: Workspace,
    topic: str | None = None,
    options: RunOptions | None = None,
    *,
    resume: str | None = None,
    deps: Deps | None = None,
    progress: Progress | None = None,
    out: Path | None = None,
) -> RunResult:
    """Run (or resume) a research run to its report; every step is checkpointed in the DB."""
    store = RunStore(ws.db)
    opts = options or options_from_config(ws)
    state = store.load_state(resume) if resume else ResearchState(new_id(), topic or "", opts)
    deps = deps or build_deps(ws, state.options)  # before the run row: a missing model leaves no stub run
    if not resume:
        store.create(state)
    model = deps.model.model if isinstance(deps.model, TimedModel) else deps.model
    clock, base = deps.clock, state.elapsed
    started = clock()
    budget = state.options.budget
    # A copy, so a caller can reuse its deps for the next run: timings go to this run's counters.
    deps = dataclasses.replace(deps, model=None if model is None else TimedModel(model, state, clock))
    deps.over_budget = lambda: budget is not None and base + clock() - started >= budget
    events: list[dict[str, Any]] = []

    def emit(event: str, **info: Any) -> None:
        if event != "model":
            events.append({"event": event, **info})
        if progress is not None:
            progress(event, **{"run_id": state.run_id, "loop": state.loop, **info})

    deps.progress = emit
    while state.step != "done":
        name, step_started = state.step, clock()
        events.clear()
        state.apply(STEP_FUNCTIONS[name](state, deps))
        state.step, stop = route(state, name, deps.over_budget())
        state.stop_reason = stop or state.stop_reason
        state.elapsed = base + clock() - started
        store.checkpoint(state, name, {"events": list(events)}, clock() - step_started)
        deps.after_step(name)
    return _finish(ws, store, state, out)


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower(), flags=re.UNICODE).strip("-")[:50] or "report"


def _finish(ws: Workspace, store: RunStore, state: ResearchState, out: Path | None) -> RunResult:
    """Save the report file (and `out`), mark the run finished, and return its result."""
    report_path = ws.reports_dir / f"{time.strftime('%Y%m%d')}-{_slug(state.topic)}-{state.run_id[-6:].lower()}.md"
    report_path.write_text(state.report, encoding="utf-8")
    store.finish(state.run_id, str(report_path))
    if out is not None:
        try:
            Path(out).write_text(state.report, encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot write the report to {out}: {exc.strerror} — it is saved at {report_path}"
            ) from None
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
    )
