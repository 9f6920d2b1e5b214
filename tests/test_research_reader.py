"""The answer step: the model's reading is kept only when the evidence states it (a span of a
cited or retrieved passage, yes/no for a yes/no question), otherwise the confident extractive
answer or an abstention with no bold guess; only supporting passages are cited. Logic on the
real KB and SQLite with the fake embedder and fake model; one run with the real shipped SmolLM2."""

from __future__ import annotations

import re

import pytest

from deepresearch.research.loop import run_research
from deepresearch.research.reader import check_reading, normalize_answer, reader_evidence, states
from deepresearch.research.report import ABSTAIN_NOTE
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions, Source
from deepresearch.views import to_jsonable
from tests.research_helpers import ListBackend, RoutedChatModel, make_deps
from tests.test_research_answer import DIRECTOR, FILM, QUESTION, TWO_HOP, KeywordBackend

PAINTERS = {
    "file:///corpus/alma.md": "Alma Reyes is a Chilean painter known for her large murals.",
    "file:///corpus/bruno.md": "Bruno Tal is an Israeli painter and sculptor.",
    "file:///corpus/carl.md": "Carl Moss is a British jazz drummer and bandleader.",
}


def _answer_section(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


def _run(workspace, embedder, question, docs, reply=None, loops=2):  # type: ignore[no-untyped-def]
    model = RoutedChatModel(answer=reply) if reply is not None else None
    steps = ("answer",) if model else ()
    deps = make_deps(workspace, embedder, model, KeywordBackend(docs), model_steps=steps)
    return run_research(workspace, question, RunOptions(loops=loops, queries=2), deps=deps), model


def test_normalization_is_squad_style_and_spans_match_whole_words():
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("Café Zürich, Switzerland") == "cafe zurich switzerland"
    assert states("tromsø", "Mara Quell grew up in Tromsø.")
    assert not states("Trom", "Mara Quell grew up in Tromsø.")
    assert not states("", "anything")


def test_a_reading_the_evidence_does_not_state_falls_back(workspace, fake_embedder):
    extractive, _ = _run(workspace, fake_embedder, QUESTION, TWO_HOP)
    for reply in (
        {"answer": "Oslo", "sources": ["S1"]},  # not in any passage
        {"answer": "Leland", "sources": ["S1"]},  # the question's own word
        {"answer": "yes", "sources": ["S1"]},  # yes/no for a question that is not yes/no
        "Tromsø is the answer",  # not JSON
    ):
        result, model = _run(workspace, fake_embedder, QUESTION, TWO_HOP, reply)
        assert model is not None and len(model.prompts("answer research")) == 1
        assert result.report_stats["model_steps"]["answer"]["accepted"] == 0
        assert result.report_stats["answer_method"] != "reader"
        assert result.short_answer == extractive.short_answer
        assert "model used for: answer (" in result.report


def test_a_stated_span_is_kept_and_cited_from_the_passage_that_states_it(workspace, fake_embedder):
    # The model cites the film passage; the span stands in the director's: that one is cited too.
    probe, _ = _run(workspace, fake_embedder, QUESTION, TWO_HOP, {"answer": "", "sources": []})
    state = RunStore(workspace.db).load_state(probe.run_id)
    evidence = reader_evidence(state, [s.sid for s in state.sources], 600)
    film_id = next(pid for pid, sid, _, _ in evidence if state.source_by_sid()[sid].url == FILM)
    result, _ = _run(workspace, fake_embedder, QUESTION, TWO_HOP, {"answer": "Tromsø", "sources": [film_id]})
    assert result.short_answer == "Tromsø"
    assert result.report_stats["answer_method"] == "reader"
    assert [s["url"] for s in result.answer_sources] == [DIRECTOR, FILM]
    assert _answer_section(result.report).strip().startswith("**Tromsø** — Mara Quell grew up in the town of Tromsø")
    data = to_jsonable(result)
    assert data["short_answer"] == "Tromsø" and data["answer_sources"][0]["url"] == DIRECTOR


def test_yes_no_is_accepted_only_for_a_yes_no_question(workspace, fake_embedder):
    question = "Are Alma Reyes and Bruno Tal both painters?"
    result, _ = _run(workspace, fake_embedder, question, PAINTERS, {"answer": "yes", "sources": ["S1", "S2"]}, 1)
    assert result.short_answer == "Yes" and result.report_stats["answer_method"] == "reader"
    assert _answer_section(result.report).strip().startswith("**Yes.**")
    state = ResearchState("r", question, RunOptions())
    state.sources = [Source("S1", "file:///a", "Alma Reyes", PAINTERS["file:///corpus/alma.md"], question, 0)]
    evidence = [("S1", "S1", "Alma Reyes", "Alma Reyes is a Chilean painter")]
    assert check_reading({"answer": "painter", "sources": ["S1"]}, state, evidence) is None
    assert check_reading({"answer": "No.", "sources": ["S1"]}, state, evidence)["text"] == "No"  # type: ignore[index]


def test_an_either_or_answer_must_be_one_of_the_options():
    question = "Which was founded first, Alma Records or Bruno Music?"
    state = ResearchState("r", question, RunOptions())
    text = "Alma Records was founded in 1950. Bruno Music was founded in 1961."
    state.sources = [Source("S1", "file:///a", "Alma Records", text, question, 0)]
    evidence = [("S1", "S1", "Alma Records", text)]
    assert check_reading({"answer": "alma records", "sources": ["S1"]}, state, evidence)["text"] == "Alma Records"  # type: ignore[index]
    assert check_reading({"answer": "1950", "sources": ["S1"]}, state, evidence) is None


def test_with_no_supported_answer_the_report_abstains_with_no_bold_guess(workspace, fake_embedder):
    # A "when" question over passages that name no date: nothing to answer with.
    question = "When did readers first share the SQLite WAL with a writer?"
    deps = make_deps(
        workspace,
        fake_embedder,
        RoutedChatModel(answer={"answer": "1999", "sources": ["S1"]}),
        ListBackend(),
        model_steps=("answer",),
    )
    result = run_research(workspace, question, RunOptions(loops=1), deps=deps)
    answer = _answer_section(result.report)
    assert "**" not in answer and answer.strip().startswith(ABSTAIN_NOTE)
    assert "readers continue while a writer appends" in answer
    assert result.short_answer is None and result.answer_sources == []
    assert to_jsonable(result)["short_answer"] is None
    assert result.report_stats["answer_method"] == "abstained"


def test_passages_that_support_nothing_are_named_but_not_cited(workspace, fake_embedder):
    deps = make_deps(workspace, fake_embedder, backend=ListBackend(), model_steps=())
    result = run_research(
        workspace, "How do readers and the writer share the SQLite WAL?", RunOptions(loops=1), deps=deps
    )
    cited = {s["url"] for s in result.sources}
    assert cited == {"file:///corpus/wal.md"}, result.report
    assert "Also searched, not cited: fts5.md" in result.report or "not cited:" in result.report
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", result.report.split("## Sources")[0])}
    assert numbers == {1}


@pytest.mark.slow
def test_the_real_smollm2_reads_through_the_reader_path(workspace, real_embedder):
    """The shipped SmolLM2-135M through the real llama.cpp backend and JSON schema: one call,
    and whatever it says, the headline is a span a cited passage states, or an abstention."""
    from deepresearch.config import LLMConfig
    from deepresearch.models.llm import get_chat_model

    model = get_chat_model(LLMConfig(model_path="smollm2-135m-instruct", n_threads=2))
    deps = make_deps(workspace, real_embedder, model, KeywordBackend(TWO_HOP), model_steps=("answer",))
    result = run_research(workspace, QUESTION, RunOptions(loops=2, queries=2), deps=deps)
    assert result.counters["model.answer.calls"] == 1 and result.counters["model.answer.seconds"] > 0
    assert re.search(r"model used for: answer \(\d+\.\d s\)", result.report)
    state = RunStore(workspace.db).load_state(result.run_id)
    by_url = {s.url: s for s in state.sources}
    if result.short_answer is None:
        assert ABSTAIN_NOTE in result.report
    else:
        assert any(states(result.short_answer, by_url[s["url"]].text) for s in result.answer_sources)
    assert result.report_stats["invalid_citations_removed"] == 0
    assert {s["url"] for s in result.sources} <= set(by_url)
