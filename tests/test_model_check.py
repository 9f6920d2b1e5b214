"""The `check` model step (models/standalone.py `ModelCheck`, `ConfirmedCheck`, `ModelChecked`): the chat model
confirms that each fact about to be stored stands alone. Its "no" drops the fact, an unusable answer or a failed
call keeps the learned check's decision, grammar's exemption is never asked, and with the step off the model is
never asked. Logic with a fake chat model (real SQLite KB, the cue-word categorizer: no learned check, so every
sentence the rules pass is put to the model); one test with the real Qwen2.5-Coder-1.5B."""

from __future__ import annotations

import functools
from contextlib import closing

import pytest

from deepresearch.errors import ModelError
from deepresearch.models.categorize import RuleCategorizer
from deepresearch.models.extract import extract_facts
from deepresearch.models.standalone import ConfirmedCheck, ModelCheck, ModelChecked
from deepresearch.prompts import STANDALONE_CHECK
from deepresearch.research.loop import run_research
from deepresearch.research.state import RunOptions
from deepresearch.workspace import Workspace
from tests.fakes import FakeChatModel
from tests.research_helpers import make_deps
from tests.test_research_answer import QUESTION, TWO_HOP, KeywordBackend

MARKER = "You check sentences copied out of a document"  # the check's system prompt

# Real sentences (Wikipedia, CC BY-SA: Marie Curie).
CURIE = (
    "Marie Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering research on"
    " radioactivity. Marie Curie won the Nobel Prize in Physics in 1903 with Pierre Curie and Henri Becquerel."
    " Marie Curie won the Nobel Prize in Chemistry in 1911 for the discovery of polonium and radium."
)


class JudgingModel(FakeChatModel):
    """Answers the stands-alone question by the sentence: `no` for those containing one of `rejected`, an unusable
    reply for those containing one of `garbled`, yes otherwise; any other prompt gets ''."""

    def __init__(self, rejected: tuple[str, ...] = (), garbled: tuple[str, ...] = ()):
        super().__init__()
        self.rejected, self.garbled = rejected, garbled

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        sentence = messages[1]["content"] if len(messages) > 1 else ""  # the retry repeats the first turns
        reply: object = ""
        if MARKER in messages[0]["content"]:
            alone = not any(word in sentence for word in self.rejected)
            reply = "not json" if any(word in sentence for word in self.garbled) else {"alone": alone}
        self.replies = [reply]
        return super().complete(messages, schema, max_tokens, temperature)

    def judged(self) -> list[str]:
        """The sentences the check asked about, in order."""
        asked = [h["messages"] for h in self.history if MARKER in h["messages"][0]["content"]]
        return [messages[1]["content"].split("Sentence: ", 1)[1] for messages in asked]


class KeepsBut:
    """A learned check stand-in: keeps every sentence except those containing `dropped`."""

    def __init__(self, dropped: str):
        self.dropped = dropped

    def keep(self, sentences: list[str], passage: str, title: str) -> list[str]:
        return [s for s in sentences if self.dropped not in s]


def test_yes_keeps_no_drops_and_an_unusable_answer_leaves_the_checks_decision():
    model = JudgingModel(rejected=("moved",), garbled=("won",))
    check = ModelCheck(model)
    confirmed = ConfirmedCheck(KeepsBut("Warsaw"), check)
    sentences = [
        "Marie Curie discovered polonium.",  # yes → kept
        "She moved to Paris in 1891.",  # no → dropped
        "Marie Curie won two Nobel Prizes.",  # unusable twice (complete_json retries once) → the check's keep
        "She was born in Warsaw.",  # the learned check drops it: the model is not asked
        "Polonium is a chemical element with the symbol Po.",  # a definition, grammar's exemption: not asked
    ]
    kept = list(confirmed.keep(sentences, " ".join(sentences), "Marie Curie"))
    assert kept == [sentences[0], sentences[2], sentences[4]]
    assert model.judged() == [sentences[0], sentences[1], sentences[2], sentences[2]]
    assert (check.calls, check.kept, check.dropped) == (3, 1, 1)
    assert model.history[0]["messages"] == STANDALONE_CHECK.messages(title="Marie Curie", sentence=sentences[0])
    assert model.history[0]["schema"]["properties"] == {"alone": {"type": "boolean"}}


def test_a_sentence_the_caller_will_not_store_is_not_asked():
    model = JudgingModel(rejected=("moved", "born"))
    confirmed = ConfirmedCheck(None, ModelCheck(model), worth=lambda s: "Paris" not in s)
    sentences = ["She moved to Paris in 1891.", "She was born in Warsaw."]
    assert list(confirmed.keep(sentences, "", "Marie Curie")) == [sentences[0]]  # passed on, dropped by the caller
    assert model.judged() == [sentences[1]]


def test_a_failed_call_keeps_the_sentence_names_an_empty_title_and_stops_asking():
    class Broken(FakeChatModel):
        def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
            super().complete(messages, schema, max_tokens, temperature)
            raise ModelError("backend gone")

    model = Broken()
    check = ModelCheck(model)
    assert check("Marie Curie discovered polonium.", "  ") is None
    assert list(ConfirmedCheck(None, check).keep(["Polonium is rare."], "", "")) == ["Polonium is rare."]
    assert model.history[0]["messages"][1]["content"].startswith("Title: (none)\n")
    # a backend that failed is not asked again (a dead server would stall every sentence of the source)
    assert len(model.history) == 1 and check.calls == check.failures == 1 and check.kept == check.dropped == 0


def test_the_check_asks_at_temperature_zero_and_not_once_the_budget_is_spent():
    class Recording(JudgingModel):
        def __init__(self) -> None:
            super().__init__()
            self.temperatures: list[float | None] = []

        def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
            self.temperatures.append(temperature)
            return super().complete(messages, schema, max_tokens, temperature)

    model = Recording()
    spent = [False]
    check = ModelCheck(model, spent=lambda: spent[0])
    assert check("Marie Curie discovered polonium.", "Marie Curie") is True
    assert model.temperatures == [0.0]  # the same page stores the same facts on every run
    spent[0] = True
    assert check("Marie Curie won two Nobel Prizes.", "Marie Curie") is None and check.calls == 1


def test_extraction_stores_only_what_the_model_confirms_and_asks_no_more_than_needed():
    result = extract_facts(CURIE, "https://w.example/curie", title="Marie Curie", categorizer=RuleCategorizer())
    plain = [f.fact for f in result.facts]
    physics, chemistry, definition = plain  # the fallback's order: names and numbers first
    assert "Physics" in physics and "Chemistry" in chemistry and definition.startswith("Marie Curie was a")
    model = JudgingModel(rejected=("Physics",))
    categorizer = ModelChecked(RuleCategorizer(), ModelCheck(model))
    result = extract_facts(CURIE, "https://w.example/curie", title="Marie Curie", categorizer=categorizer)
    assert [f.fact for f in result.facts] == [chemistry, definition]
    assert [f.category for f in result.facts] == RuleCategorizer().categorize([chemistry, definition])
    assert model.judged() == [physics, chemistry]  # the definition is grammar's exemption: not asked
    model = JudgingModel()
    categorizer = ModelChecked(RuleCategorizer(), ModelCheck(model))
    one = extract_facts(CURIE, "https://w.example/curie", title="Marie Curie", categorizer=categorizer, max_facts=1)
    assert [f.fact for f in one.facts] == [physics] and model.judged() == [physics]  # no more asked than needed


def _stored(home, embedder, model, steps):  # type: ignore[no-untyped-def]
    """One run in a fresh workspace under `home`: its result and the facts it stored."""
    with closing(Workspace.open(home)) as workspace:
        deps = make_deps(workspace, embedder, model, KeywordBackend(TWO_HOP), model_steps=steps)
        deps.categorizer = RuleCategorizer()  # as wiring.py: the extraction's categorizer, which the step wraps
        deps.extract = functools.partial(extract_facts, categorizer=deps.categorizer)
        result = run_research(workspace, QUESTION, RunOptions(loops=2, queries=2), deps=deps)
        stored = sorted(row[0] for row in workspace.db.execute("SELECT fact FROM facts"))
    return result, stored


def test_the_research_step_off_never_asks_and_on_drops_what_the_model_rejects(tmp_path, fake_embedder):
    model = JudgingModel(rejected=("Tromsø",))
    off, facts_off = _stored(tmp_path / "off", fake_embedder, model, ("answer",))
    assert model.judged() == [] and "check" not in off.report_stats["model_steps"]
    assert any("Tromsø" in f for f in facts_off), facts_off
    on, facts_on = _stored(tmp_path / "on", fake_embedder, model, ("answer", "check"))
    assert facts_on == [f for f in facts_off if "Tromsø" not in f]
    step = on.report_stats["model_steps"]["check"]
    assert step["calls"] == len(model.judged()) >= 2 and step["accepted"] == step["calls"] - 1
    assert "check (" in on.report  # the footer's model seconds per step


@pytest.mark.slow
def test_the_real_model_confirms_a_named_claim_and_rejects_a_dangling_one(qwen_llm):
    check = ModelCheck(qwen_llm)
    title = "Write-Ahead Logging"
    assert check("In SQLite's WAL mode, readers do not block writers and a writer does not block readers.", title)
    assert check("It also does that when they are done.", title) is False
    assert check("See the section below for details.", title) is False
    assert check.calls == 3 and check.seconds > 0
