"""The `onnx` embedding backend: a sentence-transformers model run by onnxruntime, no torch.

It reproduces what sentence-transformers does for all-MiniLM-L6-v2 — strip each text,
WordPiece-tokenize (lower-cased by the tokenizer's normalizer), truncate to the model's
`max_seq_length`, mean-pool the last hidden states over real tokens, L2-normalize — so the
vectors match the torch reference (cosine ≥ 0.999 per sentence on STS-B dev, see
docs/BENCHMARKS.md) and a database built by either backend is read by the other.

Texts are embedded in batches of one token length (`batches`): the corrected model's attention
has no key padding mask, so that onnxruntime runs its flash attention kernel, and a batch must
not be padded (text chunks mostly fill the 256-token window, so most batches are full anyway).
The plain ONNX file (no correction) masks its padding: its batches hold texts of similar
length, padded to the longest. A call with many texts is tokenized and run `TOKENIZE_TEXTS` at
a time, so its memory is one slice's tokens plus the result, however many texts it is given.

An int8 file can come with a weight correction (`CORRECTION_FILE`, made by
scripts/make_int8_correction.py from the float32 reference weights): a few bits per weight of
each matrix's rounding error, written into a corrected copy of the model in the user's cache
on first use (`deepresearch.models.onnx_model`), so the matrices are float32 again up to a
quarter of the int8 step — cosine ≥ 0.9998 to the reference instead of ≥ 0.998.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.models.base import Embedder

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# Tokens per batch (texts × padded length). Small batches are the fast ones once attention is
# flash attention (no tokens² buffer): 256-token chunks of real HTML pages, paired in one process
# at load 7-9 on 2 cores, ran 1.24-1.25× as fast in batches of 1-4 as in batches of 16 (4,096
# tokens), 1.10× in batches of 8; four per batch keeps the per-run overhead small on a quiet
# machine, and the activations are a few MiB (docs/BENCHMARKS.md, session 12).
TOKENS_PER_BATCH = 1024
# From this many texts in one call on, the model is rebuilt with onnxruntime's graph
# optimizations (int8·scale folded into float32 matrices once, fused kernels): that costs
# ≈0.1 s and ≈80 MiB more at load, which a one-shot query (`kb query`) should not pay; bulk
# embedding (corpus add, reembed) runs faster with it.
BULK_TEXTS = 16
# Texts tokenized per call: the tokenizer's output for all of a large call at once (ids, offsets,
# masks of every text) was what grew with the input, not the model's batches.
TOKENIZE_TEXTS = 1024
# Characters kept per token of the window before tokenizing (a WordPiece word is at most 100
# characters, [UNK] beyond; real text averages under 6 per token).
CHARS_PER_TOKEN = 100
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
# The weight correction of an int8 ONNX file, beside its tokenizer (see the module docstring).
CORRECTION_FILE = "int8-correction.npz"


def _return_large_buffers() -> None:
    """Fix glibc's mmap threshold at 1 MiB, so the activation buffers of each batch are mapped and
    unmapped rather than left in the heap: glibc raises the threshold (up to 32 MiB) after the first
    large free, and the heap then kept every batch's buffers (bulk embedding peaked at 515 MiB RSS,
    337 with the threshold fixed, at 4,096 tokens per batch; session 11 in docs/BENCHMARKS.md)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):  # not glibc (musl has no mallopt): its allocator decides
        pass


def max_seq_length(folder: Path, default: int = 256) -> int:
    """The model's `max_seq_length` from sentence_bert_config.json (sentence-transformers' own file)."""
    config = folder / "sentence_bert_config.json"
    if config.is_file():
        try:
            return int(json.loads(config.read_text(encoding="utf-8"))["max_seq_length"])
        except (ValueError, KeyError, TypeError):
            log.warning("cannot read max_seq_length from %s; using %d", config, default)
    return default


def import_onnxruntime() -> Any:
    """onnxruntime with its telemetry off (an offline tool): without ORT_DISABLE_TELEMETRY at import,
    onnxruntime 1.2x writes a device id and an event store under $XDG_CACHE_HOME/Microsoft, and
    prints a coloured warning when that folder cannot be written."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort

    ort.disable_telemetry_events()
    return ort


@dataclass(frozen=True)
class Correction:
    """The weight correction of an int8 ONNX file, and where its corrected copy is cached."""

    file: Path
    cache_dir: Path | None = None  # None: the user's model cache (models/shipped.model_cache_dir)
    # Activation maxima for the int8 corpus model (models/onnx_int8.py); None: documents float
    activations: Path | None = None


class OnnxEmbedder(Embedder):
    """A BERT-style sentence encoder in ONNX (`last_hidden_state` output) with mean pooling."""

    def __init__(
        self,
        onnx_path: Path,
        tokenizer_path: Path,
        model_id: str,
        *,
        max_length: int = 256,
        batch_size: int = 64,
        threads: int | None = None,
        correction: Path | Correction | None = None,
    ):
        self.onnx_path = onnx_path
        self.tokenizer_path = tokenizer_path
        self.correction = Correction(correction) if isinstance(correction, Path) else correction
        self.model_id = model_id
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._optimized = False
        self._int8: Any = None  # the int8 session of `embed_documents`, False when it cannot be built
        self._tokenizer: Any = None
        self._inputs: list[str] = []
        self._dimension: int | None = None
        self._source: Path | bytes | None = None  # the corrected model, found or built once per process
        self._unpadded = False  # the loaded model's attention has no key padding mask (see `batches`)
        self._lock = threading.Lock()

    def _model(self, rebuild: bool = False) -> Path | bytes:
        """What onnxruntime loads: the corrected model (cached file, or bytes) or the ONNX file itself."""
        if self.correction is None:
            return self.onnx_path
        if self._source is None or rebuild:
            # once: the cache key hashes 26 MB, and a read-only cache means building the model in
            # memory; the switch to the optimized session (bulk embedding) reuses what was found
            from deepresearch.models.onnx_model import corrected_model
            from deepresearch.models.shipped import model_cache_dir

            cache = self.correction.cache_dir or model_cache_dir()
            model = corrected_model(self.onnx_path, self.correction.file, cache, rebuild=rebuild)
            self._source = self.onnx_path if model is None else model
        return self._source

    def _int8_model(self, rebuild: bool = False) -> Path | bytes | None:
        """The int8 corpus model (cached file, or bytes), or None when there is none for this file."""
        from deepresearch.models.onnx_int8 import quantized_model
        from deepresearch.models.shipped import model_cache_dir

        correction = self.correction
        if correction is None or correction.activations is None:
            return None
        cache = correction.cache_dir or model_cache_dir()
        return quantized_model(self.onnx_path, correction.file, correction.activations, cache, rebuild=rebuild)

    def _runtime(self) -> Any:
        """onnxruntime, with the model files and the tokenizer checked and loaded once."""
        for path in (self.onnx_path, self.tokenizer_path):
            if not path.is_file():
                raise ModelNotFound(
                    f"embedding model file not found: {path} — set embedding.model to a folder holding"
                    " model.onnx and tokenizer.json, or embedding.backend: sentence-transformers"
                )
        try:
            ort = import_onnxruntime()
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelNotFound(
                f"the onnx embedding backend needs onnxruntime and tokenizers ({exc.name} is missing)"
                " — pip install onnxruntime tokenizers, or set embedding.backend: sentence-transformers"
            ) from None
        if self._tokenizer is None:
            try:
                tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
            except Exception as exc:
                raise ModelError(f"cannot load embedding model {self.onnx_path}: {exc}") from exc
            # tokenizer.json may pin a fixed padding/truncation (all-MiniLM-L6-v2's pads to
            # 128); sentence-transformers truncates at max_seq_length and pads per batch.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=self.max_length)
            self._tokenizer = tokenizer
        return ort

    def _options(self, ort: Any, optimized: bool) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or 0  # 0 = onnxruntime's choice (all cores)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        if not optimized:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        else:  # bulk: activations go back to the system after each batch instead of an arena
            options.enable_cpu_mem_arena = False
            _return_large_buffers()
            # Idle pool threads sleep instead of spinning: a spinning thread burns the time
            # the ingest's own reader thread (and any other job) needs, and on a busy machine
            # a descheduled thread keeps the others spinning at each barrier (paired, load
            # 7-9: 1.6× the speed without spinning; session 12 in docs/BENCHMARKS.md).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    def _load(self, optimized: bool = False) -> Any:
        with self._lock:
            if self._session is not None and (self._optimized or not optimized):
                return self._session
            # a one-shot session giving way to the bulk one is let go first: building the bulk session
            # beside it raised the peak RSS of an ingest by ≈50 MiB (a caller still running it keeps it)
            self._session = None
            ort = self._runtime()
            session, model = self._built(ort, self._model, self._options(ort, optimized))
            self._unpadded = model != self.onnx_path  # the rewritten model (onnx_graph.fused_attention)
            self._session, self._optimized = session, optimized
            return session

    def _load_int8(self) -> Any:
        """The int8 corpus session (built once; the float session is let go first), or None."""
        with self._lock:
            if self._int8 is None and (self.correction is None or self.correction.activations is None):
                self._int8 = False  # corpus_precision: float, or no correction: documents go through embed_batch
            if self._int8 is None:
                ort = self._runtime()
                self._session = None  # corpus add: the dimension probe's one-shot session
                self._int8 = self._built(ort, self._int8_model, self._options(ort, True))[0] or False
            return self._int8 or None

    def _built(self, ort: Any, source: Any, options: Any) -> tuple[Any, Path | bytes | None]:
        """(session, model) of what `source()` gives ((None, None) when it gives None); a cached copy
        that does not load is rebuilt once (`source(rebuild=True)`)."""
        try:
            model = source()
            if model is None:
                return None, None
            try:
                session = self._session_of(ort, model, options)
            except Exception:
                if not isinstance(model, Path) or model == self.onnx_path:
                    raise
                # a cached copy that does not load (truncated, overwritten) is rebuilt once
                log.warning("the cached embedding model %s does not load; rebuilding it", model)
                model = source(rebuild=True)
                session = self._session_of(ort, model, options)
        except Exception as exc:
            raise ModelError(f"cannot load embedding model {self.onnx_path}: {exc}") from exc
        self._inputs = [i.name for i in session.get_inputs()]
        width = session.get_outputs()[0].shape[-1]
        self._dimension = int(width) if isinstance(width, int) else self._dimension
        return session, model

    @staticmethod
    def _session_of(ort: Any, model: Path | bytes, options: Any) -> Any:
        source = str(model) if isinstance(model, Path) else model
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """Vector length (the model's hidden size), known once the model is loaded."""
        self._load()
        if self._dimension is None:
            self._dimension = int(self.embed_batch(["dimension probe"]).shape[1])
        return self._dimension

    def batches(self, lengths: list[int], same_length: bool = False, rows: int | None = None) -> list[list[int]]:
        """Indexes grouped into batches within the token budget: texts of similar length (padded to the
        longest), or of one length (`same_length`: no padding, for the rewritten model)."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        out: list[list[int]] = []
        current: list[int] = []
        for index in order:
            # lengths ascend, so this text is the longest of the batch it joins
            full = len(current) >= (rows or self.batch_size) or (len(current) + 1) * lengths[index] > TOKENS_PER_BATCH
            if current and (full or (same_length and lengths[current[0]] != lengths[index])):
                out.append(current)
                current = []
            current.append(index)
        if current:
            out.append(current)
        return out

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` (any number): tokenized `TOKENIZE_TEXTS` at a time, run in length-sorted
        batches, mean-pooled, unit length; memory beyond the result does not grow with the count."""
        # after corpus documents were embedded here (the int8 session), this is a bulk process (an
        # eval, a research run that ingests): its queries get the optimized session, as they did
        # when the documents went through the float one (SciFact: p50 query latency 4× otherwise)
        session = self._load(optimized=len(texts) >= BULK_TEXTS or bool(self._int8))
        return self._embed(session, texts, self.batch_size)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed corpus chunks with the int8 model (`Correction.activations`; models/onnx_int8.py),
        one text per run so that a vector does not depend on its batch; the float model (as
        `embed_batch`) when there is none. Queries and facts always go through `embed_batch`."""
        session = self._load_int8() if texts else None
        if session is None:
            return self.embed_batch(texts)
        return self._embed(session, texts, 1)

    def _embed(self, session: Any, texts: list[str], rows: int) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        result: np.ndarray | None = None
        for start in range(0, len(texts), TOKENIZE_TEXTS):
            part = self._embed_part(session, texts[start : start + TOKENIZE_TEXTS], rows)
            if result is None:
                result = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            result[start : start + len(part)] = part
        assert result is not None
        return result

    def _embed_part(self, session: Any, texts: list[str], rows: int) -> np.ndarray:
        import numpy as np

        # The window is max_length tokens: a text far longer is cut before the tokenizer sees it
        # (tokenizing a 200 MB string whole only to keep 256 tokens would hold it many times over).
        limit = self.max_length * CHARS_PER_TOKEN
        encodings = self._tokenizer.encode_batch([str(t)[:limit].strip() for t in texts])
        lengths = [len(e.ids) for e in encodings]
        result = np.empty((len(texts), 0), dtype=np.float32)
        unpadded = self._unpadded or session is self._int8
        for batch in self.batches(lengths, unpadded, rows):
            width = max(lengths[i] for i in batch)
            feeds = {
                name: np.zeros((len(batch), width), dtype=np.int64)
                for name in ("input_ids", "attention_mask", "token_type_ids")
            }
            for row, index in enumerate(batch):
                encoding, size = encodings[index], lengths[index]
                feeds["input_ids"][row, :size] = encoding.ids
                feeds["attention_mask"][row, :size] = 1
                feeds["token_type_ids"][row, :size] = encoding.type_ids
            hidden = session.run(None, {name: feeds[name] for name in self._inputs})[0]
            mask = feeds["attention_mask"][:, :, None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if not result.shape[1]:
                result = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            result[batch] = pooled
        return result
