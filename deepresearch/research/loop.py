"""The bounded research loop: run the routed steps, checkpoint each, write the report.

Steps are in `steps.py`, `reader.py` (answer) and `report.py`, the order and every stop rule in
`router.py`, the real dependencies in `wiring.py`. The loop is the state's only writer: it
applies each step's update and the counts the step tallied. Every finished step is
checkpointed, so `resume` continues a killed run where it stopped.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator

from deepresearch.facts import new_id
from deepresearch.research import reader, steps
from deepresearch.research.deps import Budget, Deps, Progress, RunContext, Tally
from deepresearch.research.report import report
from deepresearch.research.result import RunResult, finish
from deepresearch.research.router import route
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions
from deepresearch.research.wiring import TimedModel, build_deps, options_from_config

if TYPE_CHECKING:
    from pathlib import Path

    from deepresearch.workspace import Workspace

Step = Callable[[ResearchState, Deps, RunContext], dict[str, Any]]
STEP_FUNCTIONS: dict[str, Step] = {
    "recall": steps.recall,
    "plan": steps.plan,
    "search": steps.search,
    "rank": steps.rank,
    "extract": steps.extract,
    "reflect": steps.reflect,
    "answer": reader.answer,
    "report": report,
}
__all__ = ["RunResult", "build_deps", "options_from_config", "run_research"]


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
    if out is not None:  # a path that cannot take the report fails now, not after the run
        from deepresearch.files import check_output

        check_output(out, overwrite=True)
    store = RunStore(ws.db)
    opts = options or options_from_config(ws)
    state = store.load_state(resume) if resume else ResearchState(new_id(), topic or "", opts)
    deps = deps or build_deps(ws, state.options)  # before the run row: a missing model leaves no stub run
    if not resume:
        store.create(state)
    else:
        store.reopen(state.run_id)
    events: list[dict[str, Any]] = []
    run = _context(state, deps, progress, events)
    with _marked_interrupted(store, state.run_id):
        while state.step != "done":
            _step(store, state, deps, run, events)
        return finish(ws, store, state, out)


def _context(state: ResearchState, deps: Deps, progress: Progress | None, events: list[dict[str, Any]]) -> RunContext:
    """This run's context: its budget (counting the time spent before a resume), its progress line
    (each event also logged in `events` for the step's checkpoint) and its timed model."""

    def emit(event: str, **info: Any) -> None:
        if event != "model":
            events.append({"event": event, **info})
        if progress is not None:
            progress(event, **{"run_id": state.run_id, "loop": state.loop, **info})

    clock, tally = deps.clock, Tally()
    budget = Budget(state.options.budget, clock, started=clock(), spent_before=state.elapsed)
    model = None if deps.model is None else TimedModel(deps.model, tally, clock)
    return RunContext(model, deps.model_steps, budget, emit, tally)


def _step(store: RunStore, state: ResearchState, deps: Deps, run: RunContext, events: list[dict[str, Any]]) -> None:
    """Run the state's next step, apply its update and tally, route, and checkpoint."""
    name, started = state.step, run.clock()
    events.clear()
    try:
        update = STEP_FUNCTIONS[name](state, deps, run)
    except Exception as exc:  # an error does not leave the run "running": failed, resumable
        with contextlib.suppress(Exception):  # a failing database must not hide the step's own error
            store.fail(state.run_id, name, exc)
        raise
    state.apply(update, run.tally.drain())
    state.step, stop = route(state, name, run.budget.spent())
    state.stop_reason = stop or state.stop_reason
    state.elapsed = run.budget.elapsed()
    store.checkpoint(state, name, {"events": list(events)}, run.clock() - started)
    deps.after_step(name)


@contextlib.contextmanager
def _marked_interrupted(store: RunStore, run_id: str) -> Iterator[None]:
    """A run stopped by Ctrl-C (KeyboardInterrupt) or an MCP cancel is marked interrupted, not left
    `running`; `--resume` continues it from its last checkpoint."""
    try:
        yield
    except Exception:
        raise
    except BaseException:
        with contextlib.suppress(Exception):  # the database may be what was interrupted
            store.interrupt(run_id)
        raise
