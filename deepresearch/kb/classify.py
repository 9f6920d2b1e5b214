"""Where the write path and `kb compress` wire the model's second opinion into the update rule.

With `kb.classify_with_model` on and a chat model at hand, the pairs the rule cannot decide
(kb/updates.py `undecided`: no slot changed, no sign of different times or subjects, yet most
words shared) are put to the model (models/judge.py: same / update / contradiction / distinct
through a JSON-schema enum). Its verdict is used only when consistent with the texts
(`updates.second_opinion`); the direction of an update is the metadata's call (`merge.direction`),
the merged text is the checked fusion of kb/merge.py. Every pair the rule decides is decided by
the rule alone; no model, a failed call or a refused answer leaves the rule's verdict standing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepresearch.facts import Fact
from deepresearch.kb import merge
from deepresearch.kb.merge import Decision

if TYPE_CHECKING:
    from deepresearch.models.llm import ChatModel


def decide(
    stored: Fact, incoming: Fact, model: ChatModel | None = None, *, near: bool = True, classify: bool = False
) -> Decision:
    """The rule's decision on the pair, with the model's second opinion where the rule has none
    (`classify` and a model given)."""
    judge = None
    if classify and model is not None:
        from deepresearch.models.judge import ModelJudge

        judge = ModelJudge(model)
    return merge.decide(stored, incoming, model, near=near, judge=judge)
