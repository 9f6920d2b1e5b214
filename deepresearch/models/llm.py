"""Chat models as callers use them: pick the configured backend, ask, get structured output.

`ChatModel.complete(messages, schema=None, ...)` returns a `Completion` with the text,
the parsed JSON when a schema was given, token usage and timings (the types live in
`deepresearch.models.base` and are re-exported here for callers). Backends register with
`register_chat_model`, the same way an extension or a test fake does: `llama-cpp`
(`deepresearch.models.llama_backend`) and `openai` (`deepresearch.models.openai_backend`).
`complete_json` is what callers use for structured steps: it validates, retries once and
returns None so the caller can take its deterministic fallback.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.models.base import (
    CHAT_MODELS,
    ChatModel,
    Completion,
    Message,
    PromptTooLong,
    parse_json,
    register_chat_model,
)
from deepresearch.prompts import JSON_RETRY

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig
    from deepresearch.models.llama_backend import LlamaCppModel  # noqa: F401  (re-exported lazily)

__all__ = [
    "CHAT_MODELS",
    "ChatModel",
    "Completion",
    "Message",
    "PromptTooLong",
    "ask",
    "complete_json",
    "get_chat_model",
    "parse_json",
    "register_chat_model",
    "schema_errors",
]

log = logging.getLogger(__name__)


@register_chat_model("llama-cpp")
def _llama_cpp(config: LLMConfig) -> ChatModel:
    from deepresearch.models.llama_backend import LlamaCppModel

    return LlamaCppModel(config)


@register_chat_model("openai")
def _openai(config: LLMConfig) -> ChatModel:
    from deepresearch.models.openai_backend import OpenAIModel

    return OpenAIModel(config.openai, max_tokens=config.max_tokens, temperature=config.temperature)


_LOADED: dict[str, ChatModel] = {}


def get_chat_model(config: LLMConfig) -> ChatModel:
    """The chat model for `config`, created once per process and reused."""
    key = config.model_dump_json()
    if key not in _LOADED:
        _LOADED[key] = CHAT_MODELS.get(config.backend)(config)
    return _LOADED[key]


def __getattr__(name: str) -> Any:
    # `from deepresearch.models.llm import LlamaCppModel` keeps working without importing
    # llama_cpp when the module loads.
    if name == "LlamaCppModel":
        from deepresearch.models.llama_backend import LlamaCppModel

        return LlamaCppModel
    raise AttributeError(name)


def ask(
    model: ChatModel,
    prompt: str,
    *,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> Completion:
    """One free-text answer to `prompt` (the `deepresearch ask` smoke test)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return model.complete(messages, max_tokens=max_tokens, temperature=temperature)


# --- structured output ----------------------------------------------------------------------


def schema_errors(data: Any, schema: dict[str, Any]) -> list[str]:
    """Human-readable reasons `data` is not valid under `schema` (empty list = valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
        for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))[:5]
    ]


def complete_json(
    model: ChatModel,
    messages: list[Message],
    schema: dict[str, Any],
    *,
    max_tokens: int | None = None,
    validate: Callable[[Any], Any] | None = None,
    temperature: float | None = None,
) -> dict[str, Any] | list[Any] | None:
    """JSON valid under `schema` (and accepted by `validate`), or None after one retry.

    `temperature`: the first attempt's (None: the model's configured one; 0.0 for a yes/no that must
    not change between runs).
    `validate(data)` may return a falsy value or raise ValueError to reject an answer.
    Malformed output never raises; `ModelError` means the backend itself is unusable.
    A prompt that does not fit the context window also returns None.
    """
    attempt_messages = list(messages)
    for attempt in (1, 2):
        try:
            # The retry samples a little hotter so it does not repeat the same mistake.
            completion = model.complete(
                attempt_messages,
                schema=schema,
                max_tokens=max_tokens,
                temperature=temperature if attempt == 1 else 0.7,
            )
        except PromptTooLong as exc:
            log.info("structured call skipped: %s", exc)
            return None
        data = completion.data if completion.data is not None else parse_json(completion.text)
        problems = ["not valid JSON"] if data is None else schema_errors(data, schema)
        if not problems and validate is not None:
            try:
                if not validate(data):
                    problems = ["rejected by the caller's check"]
            except ValueError as exc:
                problems = [f"rejected by the caller's check: {exc}"]
        if not problems:
            return data  # type: ignore[no-any-return]
        log.info(
            "structured output attempt %d unusable (%s): %.200r",
            attempt,
            "; ".join(problems),
            completion.text,
        )
        retry = JSON_RETRY.messages(problems="; ".join(problems)[:300])
        attempt_messages = [*messages, {"role": "assistant", "content": completion.text[:1000]}, *retry]
    return None
