"""The router: which step follows which, and every rule that stops a run, in one place.

recall → plan → search → rank → extract → reflect ─┬─ follow-ups → search (next loop)
                                                    └─ stop → answer → report → done
Pure functions: they read the state and return decisions; the loop applies them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepresearch.research.state import ResearchState

NEXT = {
    "recall": "plan",
    "search": "rank",
    "rank": "extract",
    "extract": "reflect",
    "answer": "report",
    "report": "done",
}


def decide_stop(state: ResearchState, sufficient: bool, follow_ups: list[str], over_budget: bool) -> str | None:
    """Why the run stops after this loop's reflection (None = go on with the follow-ups)."""
    if not state.queries_done and state.known:
        return "kb-covered"  # the plan found nothing the fresh KB facts miss
    if not state.new_sources:
        return "no-progress"  # the loop's searches found no passage the run did not have
    if sufficient:
        return "sufficient"  # a candidate answer is supported by the evidence
    if state.loop + 1 >= state.options.loops:
        return "max-loops"
    if over_budget:
        return "budget"
    if not follow_ups:
        return "no-follow-ups"
    return None


def route(state: ResearchState, done: str, over_budget: bool) -> tuple[str, str | None]:
    """(next step, stop reason to record or None) after step `done`; a spent budget goes to the
    answer (on its deterministic path: the model is not asked past the budget) and the report."""
    if done == "reflect":
        if state.stop_reason:
            return "answer", None
        return ("answer", "budget") if over_budget else ("search", None)
    nxt = ("search" if state.pending else "reflect") if done == "plan" else NEXT[done]
    if nxt == "search" and over_budget:
        return "answer", "budget"
    return nxt, None
