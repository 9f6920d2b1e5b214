"""The optional model step for merge candidates: same claim, update, contradiction or distinct.

With `kb.classify_with_model` on (off by default) and a chat model at hand, each candidate pair
of the write path (kb/write.py) and of `kb compress` is put to the model with a schema whose
`relation` is an enum of the four outcomes (prompts.CLASSIFY_FACTS). Its answer is used only
when it passes the checks the deterministic rule (kb/merge.py) is built on:

- a pair the rule keeps apart as claims about different times or subjects is never asked about;
- `same` and `update` need a merged text that passes `fusion_problem` against both facts (keeps
  every detail of the old fact the new one does not replace, every word of the new, adds nothing);
- `same` is refused when the new text replaces a value or a negation of the old (that is no
  longer the same claim); `update` and `contradiction` need a value that actually differs;
- an `update` without a later, at-least-as-confident verification is a contradiction (the
  direction is the metadata's call, not the model's).

Anything else — no model, a failed call, a refused answer — falls back to the rule (`merge.decide`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from deepresearch.errors import DeepResearchError, ModelError
from deepresearch.facts import Fact
from deepresearch.kb import merge
from deepresearch.kb.merge import Decision
from deepresearch.text import numbers

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel

log = logging.getLogger(__name__)

OUTCOMES = ("same", "update", "contradiction", "distinct")


def decide(
    stored: Fact, incoming: Fact, model: ChatModel | None = None, *, near: bool = True, classify: bool = False
) -> Decision:
    """The model's classification of the pair when asked for (`classify`) and accepted, else the rule's."""
    if classify and model is not None:
        older, newer = merge.ordered(stored, incoming)
        decision = classify_pair(older, newer, model)
        if decision is not None:
            return decision
    return merge.decide(stored, incoming, model, near=near)


def refusal(older: str, newer: str, data: Any) -> str | None:
    """Why the model's answer about (older, newer) cannot be used (None: it can)."""
    outcome = data.get("relation") if isinstance(data, dict) else None
    if outcome not in OUTCOMES:
        return f"relation {outcome!r} is not one of {', '.join(OUTCOMES)}"
    changed = _differs(older, newer)
    if outcome == "same" and changed:
        return "the new fact replaces a value of the old one: not the same claim"
    if outcome in ("update", "contradiction") and not changed:
        return f"an {outcome} needs a value that differs, and none does"
    if outcome in ("same", "update"):
        merged = " ".join(str(data.get("merged", "")).split())
        return merge.fusion_problem(older, newer, merged) if merged else "no merged text"
    return None


def _differs(older: str, newer: str) -> bool:
    """A replaced word or value, a negation, or a number gone with another come."""
    on, nn = numbers(older), numbers(newer)
    return bool(merge.changed_values(older, newer)) or bool(on - nn and nn - on)


def classify_pair(older: Fact, newer: Fact, model: ChatModel) -> Decision | None:
    """The model's accepted reading of (older, newer) as a Decision, or None for the rule to decide."""
    if merge.kept_apart(older.fact, newer.fact):
        return None  # different times or subjects: the rule says distinct, no model can merge them

    from deepresearch.models.llm import complete_json
    from deepresearch.prompts import CLASSIFY_FACTS, CLASSIFY_SCHEMA

    def check(data: Any) -> bool:
        problem = refusal(older.fact, newer.fact, data)
        if problem:
            raise ValueError(problem)
        return True

    try:
        data = complete_json(
            model,
            CLASSIFY_FACTS.messages(old=older.fact, new=newer.fact),
            CLASSIFY_SCHEMA,
            max_tokens=200,
            validate=check,
        )
    except (ModelError, DeepResearchError) as exc:  # merging must never fail a write
        log.info("merge classification failed (%s); the rule decides", exc)
        return None
    if not isinstance(data, dict):
        log.info("merge classification refused for %.60r; the rule decides", newer.fact)
        return None
    outcome, text = data["relation"], " ".join(str(data["merged"]).split())
    if outcome == "distinct":
        return Decision("distinct", "model: distinct facts", method="model")
    if outcome == "contradiction":
        return Decision("contradiction", "model: the values contradict", method="model")
    if outcome == "same":
        return Decision("duplicate", "model: same claim", text, "model")
    kind, reason = merge.direction(older, newer, "model: update")
    if kind == "contradiction":
        return Decision(kind, reason, method="model")
    return Decision("update", reason, text, "model")
