"""The bounded research loop and its router.

recall → plan → search → summarize → extract → reflect ─┬─ follow-ups → search (next loop)
                                                         └─ stop → report → done
Stops when reflection finds the answer sufficient, `loops` is reached, a loop adds no new
facts, no follow-up is left, or the time budget is spent (the report is written anyway).
Every finished step is checkpointed, so `resume` continues a killed run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import InputError
from deepresearch.facts import new_id
from deepresearch.models.llm import ChatModel, Completion
from deepresearch.research import steps
from deepresearch.research.report import report
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace

STEP_FUNCTIONS: dict[str, Callable[[ResearchState, steps.Deps], dict[str, Any]]] = {
    "recall": steps.recall,
    "plan": steps.plan,
    "search": steps.search,
    "summarize": steps.summarize,
    "extract": steps.extract,
    "reflect": steps.reflect,
    "report": report,
}
# Test-only hook: block after the named step is checkpointed, so a test can SIGKILL mid-run.
PAUSE_ENV = "DEEPRESEARCH_TEST_PAUSE_AFTER"

Progress = Callable[..., None]


def route(state: ResearchState, done: str, over_budget: bool) -> str:
    """The step after `done`; the budget sends the run straight to the report."""
    if done == "reflect":
        return "report" if state.stop_reason else ("report" if over_budget else "search")
    nxt = {
        "recall": "plan",
        "plan": "search" if state.pending else "reflect",
        "search": "summarize",
        "summarize": "extract",
        "extract": "reflect",
        "report": "done",
    }[done]
    if nxt == "search" and over_budget:
        state.stop_reason = "budget"
        return "report"
    return nxt


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


class TimedModel(ChatModel):
    """Wraps the chat model to count calls and generation seconds into the run's counters."""

    def __init__(self, model: ChatModel, state: ResearchState):
        self.model, self.state, self.name = model, state, model.name
        self.supports_schema = model.supports_schema

    def complete(self, messages, schema=None, max_tokens=None, temperature=None) -> Completion:  # type: ignore[no-untyped-def]
        """Delegate and time one completion."""
        start = time.perf_counter()
        try:
            return self.model.complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        finally:
            self.state.bump("llm_seconds", time.perf_counter() - start)


def build_deps(ws: Workspace, opts: RunOptions) -> steps.Deps:
    """The real dependencies for a workspace: KB, GGUF model, embedder, backend, cache."""
    from deepresearch.kb.lifecycle import age_tag
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.models.embed import get_embedder
    from deepresearch.models.extract import extract_facts
    from deepresearch.models.llm import get_chat_model
    from deepresearch.search.backends import get_backend
    from deepresearch.search.cache import SearchCache

    cfg = ws.config
    cache = SearchCache.from_workspace(ws) if opts.use_cache and cfg.search.cache.enabled else None
    return steps.Deps(
        kb=KnowledgeBase.from_workspace(ws),
        model=get_chat_model(cfg.llm),
        embedder=get_embedder(cfg.embedding),
        backend=get_backend(opts.backend, ws),
        cache=cache,
        conn=ws.db,
        extract=extract_facts,
        age_tag=age_tag,
        freshness_days=dict(cfg.kb.freshness_days),
        cover_similarity=cfg.research.kb_cover_similarity,
    )


def options_from_config(ws: Workspace, **overrides: Any) -> RunOptions:
    """Run options from the workspace config, with the given (non-None) overrides."""
    cfg = ws.config
    opts = RunOptions(
        loops=cfg.research.max_loops,
        queries=cfg.research.queries_per_loop,
        results_per_query=cfg.search.results_per_query,
        fresh=cfg.kb.freshness,
        lifecycle=cfg.kb.lifecycle_mode,
        backend=cfg.search.backend,
        use_cache=cfg.search.cache.enabled,
        kb_write=cfg.research.kb_write,
        budget=cfg.research.budget_seconds,
        facts_per_source=cfg.research.facts_per_source,
        max_tokens=cfg.research.max_tokens,
    )
    for key, value in overrides.items():
        if value is not None:
            setattr(opts, key, value)
    return opts


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower(), flags=re.UNICODE).strip("-")[:50] or "report"


def run_research(
    ws: Workspace,
    topic: str | None = None,
    options: RunOptions | None = None,
    *,
    resume: str | None = None,
    deps: steps.Deps | None = None,
    progress: Progress | None = None,
    out: Path | None = None,
) -> RunResult:
    """Run (or resume) a research run to its report; every step is checkpointed in the DB."""
    store = RunStore(ws.db)
    state = (
        store.load_state(resume) if resume else ResearchState(new_id(), topic or "", options or options_from_config(ws))
    )
    deps = deps or build_deps(ws, state.options)  # before the run row: a missing model leaves no stub run
    if not resume:
        store.create(state)
    model = deps.model.model if isinstance(deps.model, TimedModel) else deps.model
    # A copy, so a caller can reuse its deps for the next run: timings go to this run's counters.
    deps = dataclasses.replace(deps, model=None if model is None else TimedModel(model, state))
    base, started = state.elapsed, time.perf_counter()

    def elapsed() -> float:
        return base + time.perf_counter() - started

    def over_budget() -> bool:
        return state.options.budget is not None and elapsed() >= state.options.budget

    events: list[dict[str, Any]] = []

    def emit(event: str, **info: Any) -> None:
        if event != "model":
            events.append({"event": event, **info})
        if progress is not None:
            progress(event, **{"run_id": state.run_id, "loop": state.loop, **info})

    deps.progress, deps.over_budget = emit, over_budget
    while state.step != "done":
        name, step_started = state.step, time.perf_counter()
        events.clear()
        state.apply(STEP_FUNCTIONS[name](state, deps))
        state.step = route(state, name, over_budget())
        state.elapsed = elapsed()
        store.checkpoint(state, name, {"events": list(events)}, time.perf_counter() - step_started)
        if os.environ.get(PAUSE_ENV) == name:
            time.sleep(600)
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
