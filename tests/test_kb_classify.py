"""The model's second opinion on the pairs the update rule cannot decide (kb/updates.py `undecided`,
`second_opinion`; wired by kb/classify.py into kb/merge.py `relation`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.errors import ModelError
from deepresearch.facts import Fact
from deepresearch.kb.classify import decide
from deepresearch.kb.merge import mechanical_merge, relation
from deepresearch.kb.updates import second_opinion, undecided
from deepresearch.models import llm
from tests.fakes import FakeChatModel

# reworded around a changed value: the rule cannot align it as one slot changed
OLD_TOWER, NEW_TOWER = (
    "The Eiffel Tower is 330 metres tall.",
    "Measured in 2024, the Eiffel Tower stands 324 metres tall.",
)
OLD_ZH, NEW_ZH = "第六届立法会共有70个议席，经选举产生。", "据报道，本届立法会的议席总数为170个，经选举产生。"


def _pair(old: str, new: str, *, same_time: bool = False) -> tuple[Fact, Fact]:
    later = 1.0 if same_time else 2.0
    return Fact(old, "https://e.com/old", verified_at=1.0), Fact(new, "https://e.com/new", verified_at=later)


class Asked:
    """A judge that records the pairs it is asked about and answers one verdict."""

    def __init__(self, verdict: str | None):
        self.verdict, self.pairs = verdict, []

    def __call__(self, older: str, newer: str) -> str | None:
        self.pairs.append((older, newer))
        return self.verdict


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My cat Momo is 2 years old and very clingy.", "My cat Momo is 3 years old."),  # one slot changed
        (
            "In 2022 the company earned 5 billion dollars in revenue.",  # different times
            "In 2023 the company earned 7 billion dollars in revenue.",
        ),
        ("Pump 4 delivers 300 litres a minute.", "Pump 12 delivers 310 litres a minute."),  # two values
        ("The museum opened in the old harbour.", "The museum opened in the old harbour, near the station."),
        ("小明今年3岁。", "小明今年4岁。"),
        ("A man is playing a guitar on stage.", "Stocks closed higher on Friday after the report."),  # little shared
    ],
)
def test_pairs_the_rule_decides_are_never_put_to_the_judge(old, new):
    judge = Asked("update")
    rule = relation(*_pair(old, new), near=False)
    assert relation(*_pair(old, new), near=False, judge=judge) == rule
    assert judge.pairs == [] and not undecided(old, new)


@pytest.mark.parametrize(("old", "new"), [(OLD_TOWER, NEW_TOWER), (OLD_ZH, NEW_ZH)])
def test_an_undecided_pair_takes_the_second_opinion(old, new):
    assert undecided(old, new)
    assert relation(*_pair(old, new), near=False)[0] == "distinct"  # the rule alone
    kind, reason = relation(*_pair(old, new), near=False, judge=Asked("update"))
    assert kind == "update" and reason.startswith("second opinion")
    # the direction is the metadata's call: verified at the same time, no update but a contradiction
    assert relation(*_pair(old, new, same_time=True), near=False, judge=Asked("update"))[0] == "contradiction"
    assert relation(*_pair(old, new), near=False, judge=Asked("distinct"))[0] == "distinct"
    assert relation(*_pair(old, new), near=False, judge=Asked(None))[0] == "distinct"  # no opinion: the rule's


def test_verdicts_inconsistent_with_the_texts_are_refused():
    assert second_opinion(OLD_TOWER, NEW_TOWER, Asked("same")) is None  # 330 → 324: not the same claim
    assert second_opinion(OLD_TOWER, NEW_TOWER, Asked("maybe")) is None
    reworded = ("The bridge opened to traffic in the spring.", "In the spring, the bridge opened to traffic.")
    assert second_opinion(*reworded, Asked("update")) is None  # nothing replaced: no update
    assert second_opinion(*reworded, Asked("same")) == "same"
    negated = ("The bridge is open to traffic.", "The bridge is not open to traffic.")
    assert second_opinion(*negated, Asked("same")) is None

    def broken(older: str, newer: str) -> str | None:
        raise ModelError("backend gone")

    assert second_opinion(OLD_TOWER, NEW_TOWER, broken) is None


def test_decide_asks_the_model_only_when_configured():
    older, newer = _pair(OLD_TOWER, NEW_TOWER)
    model = FakeChatModel([{"relation": "update"}], default="no fusion from this model")
    assert decide(older, newer, model, near=False).kind == "distinct"
    assert model.history == []  # classify off: the rule alone, no call
    decision = decide(older, newer, model, near=False, classify=True)
    assert "relation" in model.history[0]["schema"]["properties"]
    assert decision.kind == "update" and decision.method == "mechanical"  # the fusion fell back: checked text
    assert decision.text == mechanical_merge(OLD_TOWER, NEW_TOWER)
    assert OLD_TOWER.rstrip(".") in decision.text and NEW_TOWER.rstrip(".") in decision.text  # nothing lost


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
    for on in (False, True):
        home = tmp_path / f"classify-{on}"
        home.mkdir()
        monkeypatch.setenv("DEEPRESEARCH__KB__CLASSIFY_WITH_MODEL", str(on).lower())
        first = _kb(home, "add", OLD_TOWER, "--source", "https://e.com/a", "--category", "historical")["added"][0]
        fake_chat.replies, fake_chat.history = [{"relation": "update"}], []
        added = _kb(home, "add", NEW_TOWER, "--source", "https://e.com/b", "--category", "historical")
        hits = [h["fact"] for h in _kb(home, "query", "Eiffel Tower height")["hits"]]
        if not on:  # off by default: no model call, two separate facts
            assert added["merged"] == [] and fake_chat.history == [] and sorted(hits) == sorted([OLD_TOWER, NEW_TOWER])
            continue
        assert "relation" in fake_chat.history[0]["schema"]["properties"]
        assert len(added["merged"]) == 1 and added["merged"][0]["old_ids"] == [first]
        assert hits == [mechanical_merge(OLD_TOWER, NEW_TOWER)]


@pytest.mark.slow
def test_real_model_second_opinion_is_an_enum_verdict_or_none(qwen_llm):
    """Whatever the shipped Qwen answers, the verdict is one of the four or none, and a pair the
    rule decides is never put to it."""
    from deepresearch.models.judge import ModelJudge

    judge = ModelJudge(qwen_llm)
    for old, new in ((OLD_TOWER, NEW_TOWER), (OLD_ZH, NEW_ZH)):
        assert judge(old, new) in ("same", "update", "contradiction", "distinct", None)
        kind, _ = relation(*_pair(old, new), near=False, judge=judge)
        assert kind in ("update", "contradiction", "distinct")  # a value changed: never the same claim
    calls = judge.calls
    relation(*_pair("Mount Everest is 8849 metres tall.", "Mont Blanc is 4808 metres tall."), near=False, judge=judge)
    assert judge.calls == calls
