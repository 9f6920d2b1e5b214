"""The one path for model calls in a research run: structured output only, validated, counted.

Every call names its step; the run counts per step how often the model was asked and how
often its output was accepted (`model.<step>.calls` / `model.<step>.accepted`), which is
what decides the default `research.model_steps`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import ModelError
from deepresearch.models.llm import parse_json

if TYPE_CHECKING:
    from deepresearch.research.deps import RunContext
    from deepresearch.research.state import ResearchState

log = logging.getLogger(__name__)
MODEL_STEPS = ("plan", "extract", "reflect", "answer", "check")


def ask(
    run: RunContext,
    state: ResearchState,
    step: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    validate: Callable[[Any], Any],
    max_tokens: int = 256,
) -> Any:
    """The validated result of one JSON call for `step`, or None (step off, no model, budget
    spent, call failed, or `validate` rejected the output: the caller's fallback answers)."""
    return ask_reply(run, state, step, messages, schema, lambda data, _: validate(data), max_tokens)


def ask_reply(
    run: RunContext,
    state: ResearchState,
    step: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    validate: Callable[[Any, dict[str, Any]], Any],
    max_tokens: int = 256,
) -> Any:
    """`ask`, with `validate` also given the backend's extras of the reply (`Completion.extra`: timings, and for a
    llama.cpp model the log-probability of each generated token, `token_logprobs`)."""
    model = run.model_for(step)
    if model is None:
        return None
    run.progress("model", what=step)
    run.bump(f"model.{step}.calls")
    started = run.clock()
    try:
        out = model.complete(messages, schema=schema, max_tokens=min(max_tokens, state.options.max_tokens))
    except ModelError as exc:
        log.warning("model call for %s failed: %s; using the fallback", step, exc)
        run.bump("llm_failures")
        return None
    finally:  # the seconds per step the report footer shows (a first call includes loading the model)
        run.bump(f"model.{step}.seconds", run.clock() - started)
    run.bump("llm_calls")
    data = out.data if out.data is not None else parse_json(out.text)
    result = validate(data, out.extra or {})
    if result:
        run.bump(f"model.{step}.accepted")
    return result or None


def record(run: RunContext, step: str, calls: int, accepted: int, seconds: float = 0.0) -> None:
    """Count model outputs a step judged itself (e.g. extraction proposals that passed grounding)."""
    if calls:
        run.bump(f"model.{step}.calls", calls)
        run.bump(f"model.{step}.accepted", accepted)
        run.bump(f"model.{step}.seconds", seconds)


def acceptance(counters: dict[str, float]) -> dict[str, dict[str, float]]:
    """{step: {calls, accepted, seconds}} from a run's counters."""
    out: dict[str, dict[str, float]] = {}
    for key, value in counters.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "model":
            entry = out.setdefault(parts[1], {"calls": 0, "accepted": 0, "seconds": 0.0})
            entry[parts[2]] = round(value, 2) if parts[2] == "seconds" else int(value)
    return out
