"""The llama-cpp backend with the real shipped GGUF (loaded once per session)."""

from __future__ import annotations

import pytest

from deepresearch.models.base import field_logprobs
from deepresearch.models.llm import complete_json, get_chat_model, schema_errors

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "country": {"enum": ["France", "Germany", "Italy"]},
        "facts": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
    },
    "required": ["city", "country", "facts"],
}
MESSAGES = [
    {"role": "system", "content": "Answer with JSON only."},
    {
        "role": "user",
        "content": "Paris is the capital of France. Give the city, its country and up to two facts.",
    },
]


def test_chat_completion_returns_text_with_usage(real_llm):
    out = real_llm.complete(
        [{"role": "user", "content": "What is the capital of France?"}], max_tokens=12, temperature=0.0
    )
    assert out.text.strip() and out.completion_tokens >= 1 and out.prompt_tokens > 5 and out.seconds > 0
    assert out.model.endswith(".gguf")


def test_schema_constrained_call_is_valid_json_under_the_schema(real_llm):
    out = real_llm.complete(MESSAGES, schema=SCHEMA, max_tokens=80, temperature=0.0)
    assert out.extra["finish_reason"] == "stop", out.text
    assert out.data is not None and schema_errors(out.data, SCHEMA) == []
    counts = out.extra["grammar_tokens"]
    assert counts["fast"] + counts["resampled"] == out.completion_tokens + 1  # + the end-of-turn token
    # every sampled token's log-probability under the model, its pieces spelling the reply
    logprobs = out.extra["token_logprobs"]
    assert len(logprobs) == counts["fast"] + counts["resampled"]
    assert "".join(piece for piece, _ in logprobs).startswith(out.text.strip())
    assert all(lp <= 0.0 for _, lp in logprobs) and any(lp < 0.0 for _, lp in logprobs)
    city = field_logprobs(logprobs, "city")
    assert city and all(-30.0 < lp <= 0.0 for lp in city)


def test_lazy_grammar_gives_the_same_tokens_as_the_stock_grammar(real_llm):
    llama = real_llm._load()
    lazy = real_llm.complete(MESSAGES, schema=SCHEMA, max_tokens=40, temperature=0.0)
    llama.lazy_grammar = False
    try:
        stock = real_llm.complete(MESSAGES, schema=SCHEMA, max_tokens=40, temperature=0.0)
    finally:
        llama.lazy_grammar = True
    assert lazy.text == stock.text and "grammar_tokens" not in stock.extra


def test_complete_json_with_the_real_model(real_llm):
    data = complete_json(real_llm, MESSAGES, SCHEMA, max_tokens=80)
    assert data is None or schema_errors(data, SCHEMA) == []


def test_info_has_what_doctor_and_models_info_show(real_llm):
    info = real_llm.info()
    assert {"name", "path", "n_ctx"} <= set(info)
    assert info["n_ctx"] == 4096 and info["chat_template"] == "gguf" and info["backend"] == "llama-cpp"
    assert info["size_bytes"] > 50_000_000 and info["n_threads"] >= 1


def test_one_loaded_model_per_process(real_llm):
    from deepresearch.config import LLMConfig
    from deepresearch.models.shipped import SMOLLM2

    assert get_chat_model(LLMConfig(model_path=SMOLLM2)) is real_llm
    assert real_llm._load() is real_llm._load()


def test_prompt_too_long_is_a_clear_error_and_none_for_structured_calls(real_llm):
    from deepresearch.models.llm import PromptTooLong

    huge = [{"role": "user", "content": "word " * 5000}]
    with pytest.raises(PromptTooLong, match="raise llm.n_ctx"):
        real_llm.complete(huge, max_tokens=4)
    assert complete_json(real_llm, huge, SCHEMA, max_tokens=4) is None


def test_fallback_templates_render_system_and_turns():
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from deepresearch.models.llama_backend import CHATML_FALLBACK_TEMPLATE, GEMMA_FALLBACK_TEMPLATE

    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    gemma = Jinja2ChatFormatter(GEMMA_FALLBACK_TEMPLATE, eos_token="<eos>", bos_token="<bos>")(messages=messages)
    assert gemma.prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )
    chatml = Jinja2ChatFormatter(CHATML_FALLBACK_TEMPLATE, eos_token="", bos_token="")(messages=messages[:2])
    assert (
        chatml.prompt
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_each_call_runs_on_the_threads_chosen_for_it(real_llm, monkeypatch):
    """llm.n_threads null: the call's thread count comes from the chooser and is reported."""
    from deepresearch.models import llama_backend

    chooser = llama_backend._thread_chooser()
    messages = [{"role": "user", "content": "Name a colour."}]
    for threads in (2, 1):
        monkeypatch.setattr(chooser, "choose", lambda n=threads: n)
        out = real_llm.complete(messages, max_tokens=4, temperature=0.0)
        assert out.extra["threads"] == threads and out.text.strip()
