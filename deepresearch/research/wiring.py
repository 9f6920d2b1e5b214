"""Wiring of a research run: the real dependencies of a workspace, run options from the
config, and the model wrapper that times every call into the run's tally."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.models.llm import ChatModel, Completion
from deepresearch.research import hooks
from deepresearch.research.deps import Deps, Tally
from deepresearch.research.state import RunOptions

if TYPE_CHECKING:
    from deepresearch.workspace import Workspace


class TimedModel(ChatModel):
    """Wraps the chat model to count generation seconds into the run's tally."""

    def __init__(self, model: ChatModel, tally: Tally, clock: Callable[[], float] = time.perf_counter):
        self.model, self.tally, self.name, self.clock = model, tally, model.name, clock
        self.supports_schema = model.supports_schema

    def complete(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Delegate and time one completion."""
        start = self.clock()
        try:
            return self.model.complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        finally:
            self.tally.bump("llm_seconds", self.clock() - start)


def build_deps(ws: Workspace, opts: RunOptions) -> Deps:
    """The real dependencies for a workspace: KB, GGUF model, embedder, backend, cache."""
    from deepresearch.kb.lifecycle import age_tag
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.models.categorize import LinearCategorizer
    from deepresearch.models.embed import get_embedder
    from deepresearch.models.extract import extract_facts
    from deepresearch.models.llm import get_chat_model
    from deepresearch.search.backends import get_backend
    from deepresearch.search.cache import SearchCache

    cfg = ws.config
    cache = SearchCache.from_workspace(ws) if opts.use_cache and cfg.search.cache.enabled else None
    steps = tuple(cfg.research.model_steps)
    embedder = get_embedder(cfg.embedding)
    categorizer = LinearCategorizer(embedder)
    return Deps(
        kb=KnowledgeBase.from_workspace(ws),
        # No model is loaded when no step may use it: a run then starts without the GGUF.
        model=get_chat_model(cfg.llm) if steps else None,
        embedder=embedder,
        backend=get_backend(opts.backend, ws),
        cache=cache,
        conn=ws.db,
        # Categories by a linear classifier in the workspace's own embedding space (fitted once per process).
        extract=functools.partial(extract_facts, categorizer=categorizer),
        age_tag=age_tag,
        freshness_days=dict(cfg.kb.freshness_days),
        cover_similarity=cfg.research.kb_cover_similarity,
        model_steps=steps,
        after_step=hooks.after_step(),  # a no-op unless a crash test asks for a pause
        categorizer=categorizer,
    )


def options_from_config(ws: Workspace, **overrides: Any) -> RunOptions:
    """Run options from the workspace config, with the given (non-None) overrides."""
    return RunOptions.from_config(ws.config, **overrides)
