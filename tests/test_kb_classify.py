"""The optional model classification of merge candidates (kb/classify.py): accepted only when grounded."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.errors import ModelError
from deepresearch.facts import Fact
from deepresearch.kb.classify import classify_pair, decide, refusal
from deepresearch.kb.merge import fusion_problem
from deepresearch.models import llm
from tests.fakes import FakeChatModel

OLD_CAT, NEW_CAT = "My cat Momo is 2 years old and very clingy.", "My cat Momo is 3 years old."
OLD_TOWER, NEW_TOWER = "The Eiffel Tower is 330 metres tall.", "The Eiffel Tower is 324 metres tall."


def _pair(old: str, new: str, *, same_time: bool = False) -> tuple[Fact, Fact]:
    return Fact(old, "https://e.com/old", verified_at=1.0), Fact(
        new, "https://e.com/new", verified_at=1.0 if same_time else 2.0
    )


class Failing(FakeChatModel):
    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        self.history.append({"messages": messages, "schema": schema})
        raise ModelError("backend gone")


def test_an_accepted_update_uses_the_models_fused_text():
    model = FakeChatModel([{"relation": "update", "merged": "My cat Momo is 3 years old and very clingy."}])
    decision = classify_pair(*_pair(OLD_CAT, NEW_CAT), model)
    assert decision is not None
    assert (decision.kind, decision.method, decision.text) == (
        "update",
        "model",
        "My cat Momo is 3 years old and very clingy.",
    )
    assert model.history[0]["schema"]["properties"]["relation"]["enum"] == [
        "same",
        "update",
        "contradiction",
        "distinct",
    ]


def test_a_fused_text_that_loses_a_detail_is_refused_and_the_rule_decides():
    lossy = {"relation": "update", "merged": "My cat Momo is 3 years old."}
    model = FakeChatModel([lossy, lossy], default={"merged": "nonsense words here", "contradiction": False})
    older, newer = _pair(OLD_CAT, NEW_CAT)
    assert classify_pair(older, newer, model) is None  # asked twice (one retry), refused twice
    decision = decide(older, newer, model, near=False, classify=True)
    assert decision.kind == "update" and decision.method == "mechanical"
    assert decision.text == "My cat Momo is 3 years old and very clingy."
    assert "loses details of the old fact" in refusal(OLD_CAT, NEW_CAT, lossy)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"relation": "same", "merged": NEW_TOWER}, "not the same claim"),  # a value changed
        ({"relation": "maybe", "merged": ""}, "not one of"),
        ({"relation": "update", "merged": ""}, "no merged text"),
        ({"relation": "update", "merged": "The Eiffel Tower is 324 metres tall and red."}, "adds words"),
    ],
)
def test_refusals(answer, problem):
    assert problem in refusal(OLD_TOWER, NEW_TOWER, answer)


def test_a_contradiction_needs_a_value_that_differs():
    old, new = "Marie Curie won two Nobel Prizes in her career.", "Marie Curie won two Nobel Prizes during her career."
    assert "needs a value that differs" in refusal(old, new, {"relation": "contradiction", "merged": ""})
    assert refusal(OLD_TOWER, NEW_TOWER, {"relation": "contradiction", "merged": ""}) is None


def test_an_update_without_a_later_verification_is_a_contradiction():
    model = FakeChatModel([{"relation": "update", "merged": NEW_TOWER}])
    decision = classify_pair(*_pair(OLD_TOWER, NEW_TOWER, same_time=True), model)
    assert decision is not None and decision.kind == "contradiction" and decision.text is None


def test_the_model_may_keep_apart_what_the_rule_would_merge():
    model = FakeChatModel([{"relation": "distinct", "merged": ""}])
    older, newer = _pair(OLD_TOWER, NEW_TOWER)
    assert decide(older, newer, None, near=False).kind == "update"  # the rule alone
    decision = decide(older, newer, model, near=False, classify=True)
    assert (decision.kind, decision.method) == ("distinct", "model")


def test_claims_about_different_times_are_never_put_to_the_model():
    model = FakeChatModel([{"relation": "update", "merged": "x"}])
    older, newer = _pair(
        "In 2022 the company earned 5 billion dollars in revenue.",
        "In 2023 the company earned 7 billion dollars in revenue.",
    )
    assert decide(older, newer, model, near=False, classify=True).kind == "distinct"
    assert model.history == []


def test_off_by_default_and_a_failing_model_falls_back_to_the_rule():
    older, newer = _pair(OLD_CAT, NEW_CAT)
    quiet = FakeChatModel(default={"merged": "", "contradiction": False})
    decide(older, newer, quiet, near=False)  # classify=False: only the fusion prompt is asked
    assert all("relation" not in call["schema"]["properties"] for call in quiet.history)
    failing = Failing()
    decision = decide(older, newer, failing, near=False, classify=True)
    assert decision.kind == "update" and decision.method == "mechanical"
    assert fusion_problem(OLD_CAT, NEW_CAT, decision.text or "") is None


@pytest.fixture
def fake_chat(monkeypatch):
    """A queue-driven chat model registered as backend "fake" and selected through the environment."""
    model = FakeChatModel()
    llm.register_chat_model("fake")(lambda config: model)
    monkeypatch.setattr(llm, "_LOADED", {})
    monkeypatch.setenv("DEEPRESEARCH__LLM__BACKEND", "fake")
    yield model
    llm.CHAT_MODELS.unregister("fake")


def _kb(home, *args: str) -> dict:
    result = CliRunner().invoke(app, ["--home", str(home), "kb", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_kb_add_asks_the_model_only_when_configured(tmp_path, real_embedder, fake_chat, monkeypatch):
    # The rule alone links nothing here: the new text is reworded, not the old one with a value swapped.
    old, new = "The Eiffel Tower is 330 metres tall.", "Measured in 2024, the Eiffel Tower stands 324 metres tall."
    merged = "Measured in 2024, the Eiffel Tower stands 324 metres tall (it was 330 metres)."
    for on in (False, True):
        home = tmp_path / f"classify-{on}"
        home.mkdir()
        monkeypatch.setenv("DEEPRESEARCH__KB__CLASSIFY_WITH_MODEL", str(on).lower())
        first = _kb(home, "add", old, "--source", "https://e.com/a", "--category", "historical")["added"][0]
        fake_chat.replies, fake_chat.history = [{"relation": "update", "merged": merged}], []
        added = _kb(home, "add", new, "--source", "https://e.com/b", "--category", "historical")
        hits = [h["fact"] for h in _kb(home, "query", "Eiffel Tower height")["hits"]]
        if not on:  # off by default: no model call, two separate facts
            assert added["merged"] == [] and fake_chat.history == [] and sorted(hits) == sorted([old, new])
            continue
        assert len(fake_chat.history) == 1 and "relation" in fake_chat.history[0]["schema"]["properties"]
        assert len(added["merged"]) == 1 and added["merged"][0]["new_text"] == merged
        assert added["merged"][0]["method"] == "model" and added["merged"][0]["old_ids"] == [first]
        assert hits == [merged]


@pytest.mark.slow
def test_real_llm_classification_is_grounded_or_left_to_the_rule(real_llm):
    """Whatever the shipped tiny model answers, a fused text keeps both facts and a changed value is never 'same'."""
    bridge = ("The old bridge is 120 metres long and painted red.", "The old bridge is 150 metres long.")
    for old, new in ((OLD_CAT, NEW_CAT), (OLD_TOWER, NEW_TOWER), bridge):
        older, newer = _pair(old, new)
        decision = decide(older, newer, real_llm, near=False, classify=True)
        assert decision.kind in ("update", "contradiction", "distinct"), decision  # a value changed: never 'same'
        if decision.text is not None:
            assert fusion_problem(old, new, decision.text) is None
    # another subject's value: kept apart by the rule, the model is not asked
    older, newer = _pair("Mount Everest is 8849 metres tall.", "Mont Blanc is 4808 metres tall.")
    assert decide(older, newer, real_llm, near=False, classify=True).kind == "distinct"
