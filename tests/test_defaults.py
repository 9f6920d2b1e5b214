"""Defaults live in one place, the config: a code default that mirrors a config key equals the
config's default (configs/default.yaml equals the code's Config(), tests/test_config.py).

A bare `RunOptions()` or `Deps(...)` — what tests and scripts build — runs the product a user
gets with no config file; a backend built without its settings behaves as the default config says.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from deepresearch.config import Config
from deepresearch.models.embed import SentenceTransformerEmbedder
from deepresearch.models.openai_backend import OpenAIModel
from deepresearch.research.deps import Deps
from deepresearch.research.state import RunOptions
from deepresearch.search.backends import CorpusBackend
from deepresearch.search.corpus import Corpus
from deepresearch.search.searxng import SearxngBackend

DEFAULT = Config()


def configured(key: str) -> Any:
    """The default config's value of a dotted key."""
    value: Any = DEFAULT
    for part in key.split("."):
        value = getattr(value, part)
    return value


def default_of(cls: type, name: str) -> Any:
    """The code default of a dataclass field."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def test_every_run_option_is_a_config_key_with_its_default():
    for f in dataclasses.fields(RunOptions):
        assert "config" in f.metadata, f"RunOptions.{f.name} names no config key"
        assert getattr(RunOptions(), f.name) == configured(f.metadata["config"]), f.name
    assert RunOptions.from_config(DEFAULT) == RunOptions()
    assert RunOptions.from_config(DEFAULT, loops=1, budget=None).loops == 1


@pytest.mark.parametrize(
    ("name", "key", "as_config"),
    [
        ("cover_similarity", "research.kb_cover_similarity", None),
        ("model_steps", "research.model_steps", tuple),
        ("freshness_days", "kb.freshness_days", None),
    ],
)
def test_deps_settings_default_to_the_config(name, key, as_config):
    expected = configured(key)
    assert default_of(Deps, name) == (as_config(expected) if as_config else expected)


@pytest.mark.parametrize(
    ("function", "parameter", "key"),
    [
        (SearxngBackend.__init__, "timeout", "search.searxng.timeout"),
        (SearxngBackend.__init__, "max_retries", "search.searxng.max_retries"),
        (SearxngBackend.__init__, "backoff_seconds", "search.searxng.backoff_seconds"),
        (OpenAIModel.__init__, "max_tokens", "llm.max_tokens"),
        (OpenAIModel.__init__, "temperature", "llm.temperature"),
        (SentenceTransformerEmbedder.__init__, "batch_size", "embedding.batch_size"),
        (CorpusBackend.__init__, "mode", "search.corpus.mode"),
        (Corpus.search, "mode", "search.corpus.mode"),
        (Corpus.rank, "mode", "search.corpus.mode"),
    ],
)
def test_parameter_defaults_that_mirror_a_config_key_equal_it(function, parameter, key):
    assert inspect.signature(function).parameters[parameter].default == configured(key)
