"""The `llama-cpp` chat backend: any GGUF run in-process by llama-cpp-python.

Chat template: the GGUF's own `tokenizer.chat_template` when it has one; `llm.chat_format`
overrides it; a GGUF without a template gets a documented fallback — Gemma's turn format
for `gemma*` architectures (the system message folded into the first user turn, because
llama-cpp-python's built-in `gemma` format drops it) and ChatML for everything else.

Fast constrained decoding. llama-cpp-python puts the grammar sampler *first* in its chain,
so every generated token checks the grammar against the whole vocabulary (262k tokens for
Gemma 3: ≈80 ms per token). `_LazyGrammarSampler` does what llama.cpp's own
`common_sampler` does instead: sample with the normal chain, check only the chosen token
against the grammar, and only when it is rejected run the grammar over the full vocabulary
and resample. The output is still guaranteed to match the grammar.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearch.errors import ModelError
from deepresearch.models.base import ChatModel, Completion, Message, PromptTooLong, parse_json
from deepresearch.models.cpu import ThreadChooser, half_the_cores
from deepresearch.models.shipped import resolve_model_path

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig

log = logging.getLogger(__name__)

# Gemma's turn format; system text becomes the head of the first user turn.
GEMMA_FALLBACK_TEMPLATE = (
    "{{ bos_token }}{% set sys = namespace(text='') %}"
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{% set sys.text = sys.text + m['content'] + '\n\n' %}"
    "{% endif %}{% endfor %}{% set first = namespace(done=false) %}"
    "{% for m in messages %}{% if m['role'] != 'system' %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n{% if role == 'user' and not first.done %}{{ sys.text }}{% endif %}"
    "{{ m['content'] | trim }}<end_of_turn>\n{% if role == 'user' %}{% set first.done = true %}{% endif %}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
CHATML_FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_MODEL_LOCK = threading.Lock()
# Generation is serialized process-wide: LlamaCppModel objects that differ only in sampling
# settings share the one loaded llama.cpp model, which is not thread-safe.
_GENERATE_LOCK = threading.Lock()
# One loaded llama.cpp model per process: loading a second GGUF releases the first.
_LOADED_LLAMA: dict[str, Any] = {}
_CHOOSER: ThreadChooser | None = None  # llm.n_threads null: threads chosen per call from the idle cores


class _LazyGrammarSampler:
    """Sample freely, then verify only the sampled token against the grammar (llama.cpp's trick)."""

    TOP_K = 1024

    def __init__(self, llama: Any, chain: Any, grammar: Any):
        import llama_cpp
        import numpy as np

        self._lib = llama_cpp
        self._chain = chain  # a LlamaSampler: keeps the C chain alive
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:
            raise ModelError("llama.cpp could not compile the JSON grammar for this schema")
        self.n_vocab = llama.n_vocab()
        dtype = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
        self._ids = np.arange(self.n_vocab, dtype=np.int32)
        self._cur = np.zeros(self.n_vocab, dtype=dtype)
        self._one = llama_cpp.llama_token_data()
        self.fast = 0  # tokens accepted on the fast path
        self.slow = 0  # tokens the grammar rejected: resampled among the top TOP_K
        self.full = 0  # of those, tokens that needed the grammar over the whole vocabulary
        self.logprobs: list[tuple[int, float]] = []  # (token, its log-probability under the model), in order

    def _array(self, size: int) -> Any:
        lib = self._lib
        return lib.llama_token_data_array(
            data=self._cur.ctypes.data_as(lib.llama_token_data_p), size=size, selected=-1, sorted=False
        )

    def _select(self, array: Any) -> int:
        if array.selected < 0 or array.selected >= array.size:
            raise ModelError("no token satisfies the JSON grammar — the schema may be unsatisfiable")
        return int(array.data[array.selected].id)

    def _grammar_then_chain(self, ids: Any, logits: Any) -> int | None:
        """Grammar over the candidates `ids`, then the chain; None if the grammar rejects them all."""
        import numpy as np

        size = len(ids)
        self._cur["id"][:size] = ids
        self._cur["logit"][:size] = logits[ids]
        self._cur["p"][:size] = 0.0
        array = self._array(size)
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
        if not np.isfinite(self._cur["logit"][: array.size]).any():
            return None
        self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(array))
        return self._select(array)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """Next token: the chain's choice if the grammar accepts it, else a grammar-first resample.

        The resample first tries the TOP_K most likely tokens (the chain keeps at most its
        own top-k anyway) and only then the whole vocabulary.
        """
        import numpy as np

        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        self._cur["id"] = self._ids
        self._cur["logit"] = logits
        self._cur["p"] = 0.0
        array = self._array(self.n_vocab)
        lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(array))
        token = self._select(array)
        self._one.id, self._one.logit, self._one.p = token, 1.0, 0.0  # type: ignore[assignment]
        single = lib.llama_token_data_array(data=ctypes.pointer(self._one), size=1, selected=-1, sorted=False)
        lib.llama_sampler_apply(self._grammar, ctypes.byref(single))
        if self._one.logit != float("-inf"):
            self.fast += 1
        else:
            self.slow += 1
            top = np.argpartition(logits, -self.TOP_K)[-self.TOP_K :] if self.n_vocab > self.TOP_K else self._ids
            choice = self._grammar_then_chain(top, logits)
            if choice is None:
                self.full += 1
                choice = self._grammar_then_chain(self._ids, logits)
            if choice is None:
                raise ModelError("no token satisfies the JSON grammar — the schema may be unsatisfiable")
            token = choice
        lib.llama_sampler_accept(self._grammar, token)
        lib.llama_sampler_accept(self._chain.sampler, token)
        peak = float(logits.max())  # log-softmax of the raw logits: the model's own probability of the token
        self.logprobs.append((token, float(logits[token]) - peak - float(np.log(np.exp(logits - peak).sum()))))
        return token

    def close(self) -> None:
        """Free the C grammar sampler."""
        if self._grammar:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


def _llama_class() -> Any:
    """llama_cpp.Llama with the lazy grammar sampler swapped in (built on first use)."""
    from llama_cpp import Llama

    class FastGrammarLlama(Llama):  # type: ignore[misc]
        lazy_grammar = True
        last_sampler: _LazyGrammarSampler | None = None

        def _init_sampler(self, **kwargs: Any) -> Any:  # type: ignore[override]
            grammar = kwargs.pop("grammar", None)
            if grammar is not None and not self.lazy_grammar:
                # The stock path (grammar over the whole vocabulary), kept for the benchmark.
                return super()._init_sampler(grammar=grammar, **kwargs)
            chain = super()._init_sampler(grammar=None, **kwargs)
            if grammar is None:
                return chain
            self.last_sampler = _LazyGrammarSampler(self, chain, grammar)
            return self.last_sampler

    return FastGrammarLlama


def _fallback_handler(llama: Any) -> tuple[Any, str]:
    """A chat handler for a GGUF without a chat template (see module docstring)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    meta = llama.metadata or {}
    model = llama._model
    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    eos = model.token_get_text(eos_id) if eos_id != -1 else ""
    bos = model.token_get_text(bos_id) if bos_id != -1 else ""
    stop_ids = [eos_id]
    if meta.get("general.architecture", "").startswith("gemma"):
        template, name = GEMMA_FALLBACK_TEMPLATE, "fallback:gemma"
        stop_ids += llama.tokenize(b"<end_of_turn>", add_bos=False, special=True)[:1]
    else:
        template, name = CHATML_FALLBACK_TEMPLATE, "fallback:chatml"
        stop_ids += llama.tokenize(b"<|im_end|>", add_bos=False, special=True)[:1]
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, stop_token_ids=stop_ids)
    return formatter.to_chat_handler(), name


def _perf(llama: Any) -> tuple[float, float, int, int]:
    """llama.cpp's running counters: prompt-eval ms, generation ms, prompt tokens evaluated, tokens generated."""
    import llama_cpp

    data = llama_cpp.llama_perf_context(llama._ctx.ctx)
    return data.t_p_eval_ms, data.t_eval_ms, data.n_p_eval, data.n_eval


def _timings(before: tuple[float, float, int, int], after: tuple[float, float, int, int]) -> dict[str, Any]:
    """One call's share of the counters. `prompt_evaluated` < prompt tokens means llama.cpp reused the
    previous call's KV cache for the common prefix (it evaluates only the tokens after it)."""
    return {
        "prompt_evaluated": after[2] - before[2],
        "prompt_eval_seconds": round((after[0] - before[0]) / 1000, 4),
        "generated_evaluated": after[3] - before[3],
        "generation_seconds": round((after[1] - before[1]) / 1000, 4),
    }


def close_models() -> None:
    """Free the loaded llama.cpp model (also run at exit, while llama_cpp can still free it)."""
    with _MODEL_LOCK:
        for key in list(_LOADED_LLAMA):
            _LOADED_LLAMA.pop(key).close()


# Without this, the model is freed during interpreter shutdown after llama_cpp's globals
# are gone, which prints a TypeError traceback on every exit.
atexit.register(close_models)


def _thread_chooser() -> ThreadChooser:
    """The process's one thread chooser (its first window opens before the model loads)."""
    global _CHOOSER
    if _CHOOSER is None:
        _CHOOSER = ThreadChooser()
        _CHOOSER.look()
    return _CHOOSER


def _set_threads(llama: Any, threads: int) -> None:
    """Run the loaded model's next calls on `threads` threads (prompt and generation alike)."""
    if threads != llama.n_threads or threads != llama.n_threads_batch:
        import llama_cpp

        llama_cpp.llama_set_n_threads(llama._ctx.ctx, threads, threads)
        llama.n_threads = llama.n_threads_batch = threads


def load_llama(path: Path, n_ctx: int, n_threads: int | None, chat_format: str | None) -> Any:
    """The process's one loaded llama.cpp model for these settings (loads or swaps it)."""
    key = f"{path}|{n_ctx}|{n_threads}|{chat_format}"
    with _MODEL_LOCK:
        if key in _LOADED_LLAMA:
            return _LOADED_LLAMA[key]
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise ModelError("llama-cpp-python is not installed — pip install llama-cpp-python") from None
        for old in list(_LOADED_LLAMA):  # free the previous model before loading another
            _LOADED_LLAMA.pop(old).close()
        # Loaded on half the usable cores, like llama.cpp; with llm.n_threads null each call then
        # runs on the cores idle at the time (models/cpu.py).
        threads = n_threads or half_the_cores()
        from llama_cpp._utils import suppress_stdout_stderr

        try:
            # verbose=False silences the model load but not the context set-up, where
            # llama.cpp still prints notes (e.g. gemma's "using full-size SWA cache").
            with suppress_stdout_stderr(disable=False):
                llama = _llama_class()(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    chat_format=chat_format,
                    verbose=False,
                )
        except Exception as exc:  # llama.cpp reports a bad file as a bare ValueError
            raise ModelError(f"cannot load GGUF model {path}: {exc} — is it a valid GGUF file?") from exc
        if chat_format:
            llama.template_source = f"format:{chat_format}"
        elif "tokenizer.chat_template" in (llama.metadata or {}):
            llama.template_source = "gguf"
        else:
            llama.chat_handler, llama.template_source = _fallback_handler(llama)
        _LOADED_LLAMA[key] = llama
        return llama


def _sampler_extra(llama: Any, sampler: Any) -> dict[str, Any]:
    """A constrained call's grammar counts and its tokens' log-probabilities."""
    return {
        "grammar_tokens": {"fast": sampler.fast, "resampled": sampler.slow, "full_vocab": sampler.full},
        "token_logprobs": [
            (llama.detokenize([token]).decode("utf-8", "replace"), round(logprob, 4))
            for token, logprob in sampler.logprobs
        ],
    }


class LlamaCppModel(ChatModel):
    """A GGUF model run in-process by llama-cpp-python; one loaded model per process."""

    def __init__(self, config: LLMConfig):
        self.config = config
        self.path = resolve_model_path(config)
        self.name = self.path.name

    def _load(self) -> Any:
        return load_llama(self.path, self.config.n_ctx, self.config.n_threads, self.config.chat_format)

    def info(self) -> dict[str, Any]:
        """Model file, size, metadata name, context size and template source (loads the model)."""
        llama = self._load()
        meta = llama.metadata or {}
        return {
            "name": meta.get("general.name", self.name),
            "backend": "llama-cpp",
            "path": str(self.path),
            "size_bytes": self.path.stat().st_size,
            "n_ctx": llama.n_ctx(),
            "n_ctx_train": llama._model.n_ctx_train(),
            "n_vocab": llama.n_vocab(),
            "n_threads": llama.n_threads,
            "architecture": meta.get("general.architecture", ""),
            "chat_template": llama.template_source,
        }

    def _create(self, llama: Any, kwargs: dict[str, Any]) -> Any:
        """llama-cpp-python's chat completion, its failures as this project's errors."""
        try:
            return llama.create_chat_completion(**kwargs)
        except ValueError as exc:
            if "exceed context window" in str(exc):
                raise PromptTooLong(
                    f"prompt too long for model {self.name}: {exc} — raise llm.n_ctx or send less text"
                ) from None
            raise ModelError(f"model {self.name} failed: {exc}") from exc
        except Exception as exc:
            raise ModelError(f"model {self.name} failed: {exc}") from exc

    def complete(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Chat completion in-process; calls are serialized on the one loaded model."""
        from llama_cpp.llama_grammar import LlamaGrammar

        kwargs: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens or self.config.max_tokens,
            "temperature": self.config.temperature if temperature is None else temperature,
        }
        if schema is not None:
            import json

            kwargs["grammar"] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        with _GENERATE_LOCK:
            chooser = _thread_chooser() if self.config.n_threads is None else None
            llama = self._load()
            if chooser is not None:
                _set_threads(llama, chooser.choose())
            start = time.perf_counter()
            before = _perf(llama)
            try:
                out = self._create(llama, kwargs)
            finally:
                if chooser is not None:
                    chooser.look()
            seconds = time.perf_counter() - start
            timings = _timings(before, _perf(llama))
            sampler = getattr(llama, "last_sampler", None)
            llama.last_sampler = None
            threads = llama.n_threads
        text = out["choices"][0]["message"]["content"] or ""
        usage = out.get("usage", {})
        extra: dict[str, Any] = {
            "finish_reason": out["choices"][0].get("finish_reason"),
            "threads": threads,
            **timings,
        }
        if schema is not None and sampler is not None:
            extra.update(_sampler_extra(llama, sampler))
        return Completion(
            text=text,
            data=parse_json(text) if schema is not None else None,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=self.name,
            extra=extra,
        )
