"""The real Qwen2.5-Coder-1.5B-Instruct, assembled from its 22 part packages and loaded by its short name.

Qwen is a dependency (pyproject.toml): when its parts are not installed these tests fail, they do not skip.
One load for the whole file (the session fixture `qwen_llm`; the CLI calls reuse the loaded model).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.models.llm import schema_errors
from deepresearch.models.shipped import QWEN, QWEN_SPLIT, split_model_status

pytestmark = pytest.mark.slow

EVIDENCE = (
    "[1] The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after"
    " the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. Locally nicknamed"
    " 'La dame de fer', it was constructed as the centrepiece of the 1889 World's Fair.\n"
    "[2] The Statue of Liberty is a colossal neoclassical sculpture on Liberty Island in New York Harbor. The"
    " copper statue, a gift from the people of France, was designed by the French sculptor Frédéric Auguste"
    " Bartholdi and its metal framework was built by Gustave Eiffel. It was dedicated on October 28, 1886."
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "sources": {"type": "array", "items": {"type": "integer"}}},
    "required": ["answer", "sources"],
}


def _reader(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer from the evidence only, as a short span."},
        {"role": "user", "content": f"Evidence:\n{EVIDENCE}\n\nQuestion: {question}"},
    ]


def test_qwen_by_its_short_name_is_the_verified_qwen_gguf(qwen_llm):
    info = qwen_llm.info()
    assert info["name"] == "Qwen2.5 Coder 1.5B Instruct GGUF" and info["architecture"] == "qwen2"
    assert info["chat_template"] == "gguf" and info["n_vocab"] == 151936 and info["size_bytes"] == QWEN_SPLIT.size
    path, status = split_model_status(QWEN_SPLIT)
    assert status == "found, verified" and str(path) == info["path"]


def test_ask_through_the_cli_with_model_name_answers_a_one_line_question(qwen_llm, tmp_path):
    result = CliRunner().invoke(
        app,
        ["--home", str(tmp_path), "ask", "What is the capital of France? Answer with one word.", "--model", QWEN]
        + ["--max-tokens", "8", "--temperature", "0", "--json"],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert "paris" in answer["text"].lower() and answer["model"] == QWEN_SPLIT.file_name


def test_deepresearch_model_env_selects_qwen(qwen_llm, tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_MODEL", QWEN)
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "models", "info", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["name"] == "Qwen2.5 Coder 1.5B Instruct GGUF"


def test_a_second_call_with_the_same_evidence_evaluates_only_the_new_question(qwen_llm):
    qwen_llm._load().reset()  # cold: the whole prompt is evaluated
    first = qwen_llm.complete(_reader("Who designed the Eiffel Tower?"), max_tokens=8, temperature=0.0)
    assert first.extra["prompt_evaluated"] >= first.prompt_tokens - 1 > 150
    second = qwen_llm.complete(_reader("When was the statue dedicated?"), max_tokens=16, temperature=0.0)
    assert second.prompt_tokens > 150 and second.extra["prompt_evaluated"] < 20  # the question's tokens only
    assert "eiffel" in first.text.lower() and "1886" in second.text


def test_a_tiny_answer_schema_gives_valid_json(qwen_llm):
    out = qwen_llm.complete(_reader("Who built the statue's framework?"), schema=ANSWER_SCHEMA, max_tokens=40)
    assert out.data is not None and schema_errors(out.data, ANSWER_SCHEMA) == []
    assert "eiffel" in out.data["answer"].lower() and out.extra["finish_reason"] == "stop"
