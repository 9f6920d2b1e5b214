"""The bounded research loop: run the routed steps, checkpoint each, write the report.

Steps are in `steps.py`/`report.py`, the order and every stop rule in `router.py`, the real
dependencies in `wiring.py`. Every finished step is checkpointed, so `resume` continues a
killed run where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterator

from deepresearch.facts import new_id
from deepresearch.research import reader, steps
from deepresearch.research.deps import Deps
from deepresearch.research.report import report
from deepresearch.research.result import RunResult, finish
from deepresearch.research.router import route
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions
from deepresearch.research.wiring import TimedModel, build_deps, options_from_config

if TYPE_CHECKING:
    from pathlib import Path

    from deepresearch.workspace import Workspace

STEP_FUNCTIONS: dict[str, Callable[[ResearchState, Deps], dict[str, Any]]] = {
    "recall": steps.recall,
    "plan": steps.plan,
    "search": steps.search,
    "rank": steps.rank,
    "extract": steps.extract,
    "reflect": steps.reflect,
    "answer": reader.answer,
    "report": report,
}
Progress = Callable[..., None]
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
    with _marked_interrupted(store, state.run_id):
        while state.step != "done":
            name, step_started = state.step, clock()
            events.clear()
            try:
                state.apply(STEP_FUNCTIONS[name](state, deps))
            except Exception as exc:  # an error does not leave the run "running": failed, resumable
                with contextlib.suppress(Exception):  # a failing database must not hide the step's own error
                    store.fail(state.run_id, name, exc)
                raise
            state.step, stop = route(state, name, deps.over_budget())
            state.stop_reason = stop or state.stop_reason
            state.elapsed = base + clock() - started
            store.checkpoint(state, name, {"events": list(events)}, clock() - step_started)
            deps.after_step(name)
        return finish(ws, store, state, out)


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
