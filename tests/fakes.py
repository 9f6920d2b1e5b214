"""Fakes for logic tests, plugged in through the real seams (registries, constructor args).

Integration tests use the real models; these are never a substitute for them.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import numpy as np

from deepresearch.models.embed import Embedder
from deepresearch.models.llm import ChatModel, Completion


class FakeEmbedder(Embedder):
    """Deterministic bag-of-words hashing embedder: shared words → similar vectors."""

    def __init__(self, dimension: int = 384, model_id: str = "fake-embedder"):
        self.dimension = dimension
        self.model_id = model_id
        self.calls = 0

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for token in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
                out[i, h % self.dimension] += 1.0 if (h >> 63) else -1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else np.eye(1, self.dimension, 0, dtype=np.float32)[0]
        return out


class FakeChatModel(ChatModel):
    """Replies from a queue (str, or dict/list for schema calls); records every call in `history`."""

    name = "fake-chat"

    def __init__(self, replies: list[Any] | None = None, default: Any = ""):
        self.replies = list(replies or [])
        self.default = default
        self.history: list[dict[str, Any]] = []

    def complete(self, messages, schema=None, max_tokens=None, temperature=None) -> Completion:  # type: ignore[no-untyped-def]
        self.history.append({"messages": messages, "schema": schema})
        reply = self.replies.pop(0) if self.replies else self.default
        text = reply if isinstance(reply, str) else json.dumps(reply)
        data = None
        if schema is not None:
            try:
                data = json.loads(text)
            except ValueError:
                data = None
        return Completion(text=text, data=data, prompt_tokens=10, completion_tokens=len(text.split()), model=self.name)
