"""What a model backend implements, and the registries backends register in.

Backends (`llama_backend`, `openai_backend`, the embedders in `embed`) import only this
module, never the facades (`llm`, `embed.get_embedder`) that pick one of them, so no
import runs in a circle. Built-ins, extensions and test fakes register the same way:
`@register_chat_model("name")` / `@register_embedder("name")`, undone with
`CHAT_MODELS.unregister(name)`.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import ModelError
from deepresearch.registry import Registry

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.config import EmbeddingConfig, LLMConfig

Message = dict[str, str]


@dataclass
class Completion:
    """One model answer: text, parsed JSON (schema calls), usage and timings."""

    text: str
    data: Any = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def field_logprobs(tokens: list[tuple[str, float]], field: str) -> list[float]:
    """The log-probabilities of the generated tokens that spell the string value of `field` in a JSON reply
    (`tokens`: (piece, log-probability) in order, as `Completion.extra["token_logprobs"]`); [] when absent or empty."""
    text, spans = "", []
    for piece, logprob in tokens:
        spans.append((len(text), len(text) + len(piece), logprob))
        text += piece
    key = text.find(f'"{field}"')
    colon = text.find(":", key) if key >= 0 else -1
    start = text.find('"', colon + 1) if colon >= 0 else -1
    end = text.find('"', start + 1) if start >= 0 else -1
    if end <= start + 1:
        return []
    return [logprob for a, b, logprob in spans if b > start + 1 and a < end]


class ChatModel(ABC):
    """A chat model. `complete` is the only required method."""

    name: str = ""
    supports_schema: bool = True

    @abstractmethod
    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Answer `messages`; with `schema`, the answer is JSON valid under it (in `data`)."""

    def info(self) -> dict[str, Any]:
        """What `models info` and `doctor` show about this model."""
        return {"name": self.name}


class PromptTooLong(ModelError):
    """The prompt does not fit the model's context window."""


class Embedder(ABC):
    """Turns texts into unit-length vectors. `model_id` and `dimension` are recorded in the DB."""

    model_id: str
    dimension: int

    @abstractmethod
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` into a float32 array of shape (len(texts), dimension), rows L2-normalized."""

    def embed(self, text: str) -> np.ndarray:
        """Embed one text into a float32 vector of length `dimension`."""
        return self.embed_batch([text])[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed corpus chunks in bulk (as `embed_batch` unless a backend has a faster approximation
        for them, e.g. the onnx backend's int8 model); queries and facts use `embed_batch`/`embed`."""
        return self.embed_batch(texts)


ChatModelFactory = Callable[["LLMConfig"], ChatModel]
EmbedderFactory = Callable[["EmbeddingConfig"], Embedder]

CHAT_MODELS: Registry[ChatModelFactory] = Registry("llm backend", "llm.backend")
EMBEDDERS: Registry[EmbedderFactory] = Registry("embedding backend", "embedding.backend")


def register_chat_model(name: str) -> Callable[[ChatModelFactory], ChatModelFactory]:
    """Register a chat backend factory `factory(LLMConfig) -> ChatModel` under `name` (`llm.backend`)."""
    return CHAT_MODELS.register(name)


def register_embedder(name: str) -> Callable[[EmbedderFactory], EmbedderFactory]:
    """Register an embedding backend factory `factory(EmbeddingConfig) -> Embedder` (`embedding.backend`)."""
    return EMBEDDERS.register(name)


# --- reading JSON out of model text (backends and the structured-output path share it) --------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json(text: str) -> Any:
    """Parse model output as JSON: the whole text, a ```json fence, or the first {...}/[...] span."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            # strict=False: llama.cpp's JSON grammar lets raw newlines into strings.
            return json.loads(candidate, strict=False)
        except ValueError:
            continue
    return None
