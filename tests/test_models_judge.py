"""The model's second opinion on a pair of facts (models/judge.py): an enum answer or none at all."""

from __future__ import annotations

from deepresearch.errors import ModelError
from deepresearch.models.judge import ModelJudge
from deepresearch.prompts import JUDGE_SCHEMA
from tests.fakes import FakeChatModel

OLD, NEW = "The prize was awarded to Ana María Ruiz.", "The prize went to Li Wei this year."


class Failing(FakeChatModel):
    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        self.history.append({"messages": messages, "schema": schema})
        raise ModelError("backend gone")


def test_the_verdict_is_asked_through_the_enum_schema():
    model = FakeChatModel([{"relation": "update"}])
    judge = ModelJudge(model)
    assert judge(OLD, NEW) == "update"
    assert model.history[0]["schema"] is JUDGE_SCHEMA
    assert JUDGE_SCHEMA["properties"]["relation"]["enum"] == ["same", "update", "contradiction", "distinct"]
    prompt = model.history[0]["messages"][-1]["content"]
    assert f"Old: {OLD}\nNew: {NEW}" in prompt
    assert judge.calls == 1 and judge.seconds >= 0


def test_malformed_answers_give_no_opinion():
    for replies in (["not json", "still not json"], [{"relation": "maybe"}, {"relation": "perhaps"}], [{}, []]):
        model = FakeChatModel(replies)
        assert ModelJudge(model)(OLD, NEW) is None
        assert len(model.history) == 2  # one retry, then the rule's verdict stands


def test_a_failing_backend_gives_no_opinion():
    model = Failing()
    assert ModelJudge(model)(OLD, NEW) is None
    assert len(model.history) == 1


def test_long_facts_are_cut_for_the_prompt():
    model = FakeChatModel([{"relation": "distinct"}])
    ModelJudge(model)("word " * 500, NEW)
    assert len(model.history[0]["messages"][-1]["content"]) < 2500
