"""Shared fixtures: isolated workspaces, fakes, and the real models (session-scoped)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Timing is not what property tests check; a loaded 2-core CI machine must not make them flaky.
settings.register_profile("deepresearch", deadline=None)
settings.load_profile("deepresearch")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_ENV_TO_CLEAR = ("DEEPRESEARCH_HOME", "DEEPRESEARCH_CONFIG", "KB_LIFECYCLE_MODE", "DEEPRESEARCH_DISABLE_VEC")


def pytest_report_header(config):  # type: ignore[no-untyped-def]
    """Versions of the components the tests exercise."""
    parts = []
    try:
        from deepresearch.db import sqlite_binding

        mod = sqlite_binding()
        parts.append(f"sqlite {mod.sqlite_version} via {mod.__name__}")
        import sqlite_vec

        parts.append(f"sqlite-vec {getattr(sqlite_vec, '__version__', '?')}")
    except Exception as exc:  # the header must never break collection
        parts.append(f"sqlite: {exc}")
    for name in ("llama_cpp", "onnxruntime", "torch", "sentence_transformers", "duckdb"):
        try:
            from importlib.metadata import version

            parts.append(f"{name} {version(name.replace('_', '-'))}")
        except Exception:
            parts.append(f"{name} missing")
    return "deepresearch: " + ", ".join(parts)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory, request):
    """No test reads the developer's workspace or config.

    The shipped default reads each run's evidence with Qwen2.5-Coder-1.5B (`research.model_steps:
    [answer]`, ~10-20 s a run on 2 cores). The many runs here that test the loop's plumbing (kills,
    resume, errors, MCP, the install) run without it; tests marked `product_defaults` run the
    product's own defaults, and the reader's worth is tested there and in test_models_qwen.py."""
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("DEEPRESEARCH__"):
            monkeypatch.delenv(name, raising=False)
    if request.node.get_closest_marker("product_defaults") is None:
        monkeypatch.setenv("DEEPRESEARCH__RESEARCH__MODEL_STEPS", "[]")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def workspace(home: Path):
    """An opened Workspace on `home` (closed after the test)."""
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    yield ws
    ws.close()


@pytest.fixture
def fake_model(monkeypatch):
    """The configured embedding model, replaced through the per-process embedder cache (CLI tests)."""
    from deepresearch.models import embed
    from tests.fakes import FakeEmbedder

    fake = FakeEmbedder(model_id="fake-embedder")
    monkeypatch.setitem(embed._CACHE, ("sentence-transformers", None), fake)
    return fake


@pytest.fixture
def fake_embedder():
    from tests.fakes import FakeEmbedder

    return FakeEmbedder()


@pytest.fixture
def use_embedder(monkeypatch):
    """`use_embedder(fake)` makes `fake` the embedding model of every workspace the test opens.

    It is registered as backend "fake" with the call the built-ins use, and selected the way a
    user selects a backend (`embedding.backend`, here through the environment)."""
    from deepresearch.models import embed

    def use(fake):  # type: ignore[no-untyped-def]
        embed.register_embedder("fake")(lambda config: fake)
        monkeypatch.setenv("DEEPRESEARCH__EMBEDDING__BACKEND", "fake")
        monkeypatch.setattr(embed, "_CACHE", {})
        return fake

    yield use
    embed.EMBEDDERS.unregister("fake")


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2 through the default backend (onnx; loaded once)."""
    from deepresearch.config import EmbeddingConfig
    from deepresearch.models.embed import get_embedder

    return get_embedder(EmbeddingConfig())


@pytest.fixture(scope="session")
def real_llm():
    """The real small shipped GGUF (SmolLM2-135M, loaded once): the real llama-cpp path for tests of
    plumbing (prompts, schemas, fallbacks) at a second a call; `qwen_llm` is the default model."""
    from deepresearch.config import LLMConfig
    from deepresearch.models.llm import get_chat_model
    from deepresearch.models.shipped import SMOLLM2

    return get_chat_model(LLMConfig(model_path=SMOLLM2))


@pytest.fixture(scope="session")
def qwen_llm():
    """The real Qwen2.5-Coder-1.5B-Instruct by its short name (assembled on first use; loaded once)."""
    from deepresearch.config import LLMConfig
    from deepresearch.models.llm import get_chat_model
    from deepresearch.models.shipped import QWEN

    return get_chat_model(LLMConfig(model_path=QWEN))


@pytest.fixture
def open_kb(tmp_path):
    """Factory: a KnowledgeBase in a fresh workspace folder under tmp_path (default: a FakeEmbedder);
    every workspace it opened is closed afterwards."""
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.workspace import Workspace
    from tests.fakes import FakeEmbedder

    opened = []

    def make(name="ws", embedder=None):
        ws = Workspace.open(tmp_path / name)
        opened.append(ws)
        return KnowledgeBase(ws.db, embedder or FakeEmbedder(), ws.config.kb)

    yield make
    for ws in opened:
        ws.close()
