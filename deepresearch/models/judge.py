"""The model's second opinion on a pair of facts the update rule cannot decide.

A `kb/updates.py` `Judge`: (older text, newer text) → same | update | contradiction | distinct,
asked through a JSON schema whose only field is that enum (JUDGE_FACTS), so a grammar-constrained
backend can answer nothing else; a few tokens of output. Anything unusable — a failed call, a
prompt too long, an answer outside the enum — is None: no opinion, the rule's verdict stands.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from deepresearch.errors import DeepResearchError
from deepresearch.prompts import JUDGE_FACTS, JUDGE_SCHEMA, JUDGE_VERDICTS

if TYPE_CHECKING:
    from deepresearch.models.base import ChatModel

log = logging.getLogger(__name__)

MAX_TOKENS = 16  # {"relation": "contradiction"} is 8 tokens in Qwen's tokenizer
MAX_FACT_CHARS = 600  # a longer text is cut for the prompt (RGB passages are ~300 characters)


class ModelJudge:
    """Ask `model` which of JUDGE_VERDICTS relates two facts; counts its calls and seconds."""

    def __init__(self, model: ChatModel):
        self.model = model
        self.calls = 0
        self.seconds = 0.0

    def __call__(self, older: str, newer: str) -> str | None:
        """The model's verdict on (older, newer), or None when it gave no usable one."""
        from deepresearch.models.llm import complete_json

        started = time.perf_counter()
        self.calls += 1
        messages = JUDGE_FACTS.messages(old=older[:MAX_FACT_CHARS], new=newer[:MAX_FACT_CHARS])
        try:
            data = complete_json(self.model, messages, JUDGE_SCHEMA, max_tokens=MAX_TOKENS)
        except DeepResearchError as exc:  # a second opinion must never fail a write
            log.info("second opinion failed (%s); the rule decides", exc)
            data = None
        finally:
            self.seconds += time.perf_counter() - started
        verdict = data.get("relation") if isinstance(data, dict) else None
        return verdict if verdict in JUDGE_VERDICTS else None
