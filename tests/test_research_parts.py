"""A multi-hop question read one hop at a time: split by its wording (`research/parts.py`), each part read as its own
question, its answer written into the rest (`reader.read_in_parts`). Logic on the real KB and SQLite with the fake
embedder and a fake reader that answers by the question it is asked."""

from __future__ import annotations

import re

import pytest

from deepresearch.research import parts, reader
from deepresearch.research.loop import run_research
from deepresearch.research.runs import RunStore
from deepresearch.research.state import RunOptions
from deepresearch.views import to_jsonable
from tests.fakes import FakeChatModel
from tests.research_helpers import ListBackend, make_deps
from tests.test_research_answer import DIRECTOR, FILM

DOCS = {
    FILM: "Night Harbor is a 1986 thriller film directed by Mara Quell.",
    DIRECTOR: "Mara Quell grew up in the town of Tromsø, far in the north of Norway.",
}
QUESTION = "In which town was the director of Night Harbor raised?"
PART = "What is the director of Night Harbor?"
REST = "In which town was Mara Quell raised?"


@pytest.mark.parametrize(
    ("question", "span", "asked"),
    [
        (
            "When did the country where the village of Clonbrook is located, join CARICOM?",
            "the country where the village of Clonbrook is located",
            "What is the country where the village of Clonbrook is located?",
        ),
        (QUESTION, "the director of Night Harbor", PART),
        ("Who founded Hello Love's label?", "Hello Love's label", "What is the label of Hello Love?"),
        # A name runs over the small words of a title, and a sentence's opening word is not part of it.
        (
            "Who produced the sequel to the remake of The Jewel of the Nile?",
            "the remake of The Jewel of the Nile",
            "What is the remake of The Jewel of the Nile?",
        ),
        ("Did Mara Quell's band tour Norway?", "Mara Quell's band", "What is the band of Mara Quell?"),
        (
            "Which region is Mara Quell's city of birth in?",
            "Mara Quell's city of birth",
            "What is the city of birth of Mara Quell?",
        ),
        # A comma inside a number or before a capitalized word does not end a relative clause.
        (
            "What county borders the county in which Leland, North Carolina is located?",
            "the county in which Leland, North Carolina is located",
            "What is the county in which Leland, North Carolina is located?",
        ),
        # The last describing phrase is read first: the innermost hop.
        (
            "Who is the spouse of the performer of Decade?",
            "the performer of Decade",
            "What is the performer of Decade?",
        ),
    ],
)
def test_the_last_describing_phrase_is_the_first_part(question, span, asked):
    assert parts.first_part(question) == parts.Part(span, asked)


def test_a_subject_running_to_the_end_keeps_its_verb_and_gets_the_answer_in_parentheses():
    # The main verb ("win") is inside the phrase: writing the answer in its place would drop it.
    question = "When did the team that won the 1959 cup final win the cup?"
    part = parts.first_part(question)
    assert part == parts.Part("the team that won the 1959 cup final win the cup", f"What is {part.span}?")
    assert parts.answered(question, part, "Leland FC") == (
        "When did the team that won the 1959 cup final win the cup (Leland FC)?",
        True,
    )
    # A phrase after the main verb is replaced as usual.
    question = "When did the club open in the city where Mara Quell grew up?"
    part = parts.first_part(question)
    assert part is not None and parts.answered(question, part, "Tromsø") == ("When did the club open in Tromsø?", False)


@pytest.mark.parametrize(
    "question",
    [
        "Who directed Night Harbor?",  # one hop: nothing to split
        "What is the population of the city of Leeds?",  # a place's own name, not a hop
        "Who was the band?",  # "the band" alone names nothing to look up
        "the director of Night Harbor?",  # the phrase is the whole question
    ],
)
def test_a_question_without_a_hop_in_its_wording_does_not_split(question):
    assert parts.first_part(question) is None


def test_an_answer_is_written_in_the_phrases_place_and_a_question_left_asking_only_it_is_answered():
    part = parts.Part("the director of Night Harbor", PART)
    assert parts.answered(QUESTION, part, "Mara Quell") == (REST, False)
    assert parts.only_asks("Who was Mara Quell?", "Mara Quell")
    assert not parts.only_asks(REST, "Mara Quell")


@pytest.mark.parametrize(
    "question",
    [
        "What was pilot, whose life was filmed in Night Harbor?",  # a clause that describes the answer's name
        "Name Mara Quell, 2nd Countess Quell, who was the daughter of Ivo Quell?",  # an appositive, then a clause
        "What is 100, the maximum depth of the stack?",  # an appositive that says what the asked value is
        "What was Mara Quell",  # no question mark
        "What is Columbus, Ohio?",  # "the county seat of Franklin County, Ohio": the state is the part's name's
    ],
)
def test_a_question_left_asking_only_the_answer_before_a_comma_was_answered_by_its_part(question):
    answer = next(a for a in ("pilot", "Mara Quell", "100", "Columbus") if a in question)
    assert parts.only_asks(question, answer)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where was Mara Quell born?", "Mara Quell"),  # asks more about the answer
        ("What is the spouse of Mara Quell, the director?", "Mara Quell"),  # the answer is a step
        ("Who was Mara Quell's father?", "Mara Quell"),
    ],
)
def test_a_question_that_asks_more_than_its_answer_is_not_answered_by_its_part(question, answer):
    assert not parts.only_asks(question, answer)


class PartsReader(FakeChatModel):
    """A reader that answers each question it is asked from `answers` (question → answer; "" otherwise), citing the
    evidence lines that hold the answer and a word of the question."""

    def __init__(self, answers: dict[str, str], logprob: float | None = None) -> None:
        super().__init__()
        self.answers, self.logprob = answers, logprob

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        prompt = messages[-1]["content"]
        asked = re.findall(r"Question: (.+)", prompt)[-1].strip()
        answer = self.answers.get(asked, "")
        words = {w for w in re.findall(r"[A-Z]\w+", asked) if w not in ("What", "In")}
        lines = re.findall(r"^\[(S\d+)\] (.+)$", prompt, re.M)
        cited = [pid for pid, line in lines if answer and answer in line and any(w in line for w in words)]
        self.replies = [{"answer": answer, "sources": cited}]
        out = super().complete(messages, schema, max_tokens, temperature)
        if self.logprob is not None:  # every character as sure as `logprob` (as llama.cpp reports tokens)
            out.extra["token_logprobs"] = [(c, self.logprob) for c in out.text]
        return out

    def asked(self) -> list[str]:
        return [re.findall(r"Question: (.+)", h["messages"][-1]["content"])[-1].strip() for h in self.history]


def _run(workspace, embedder, answers, logprob=None, **options):  # type: ignore[no-untyped-def]
    model = PartsReader(answers, logprob)
    deps = make_deps(workspace, embedder, model, ListBackend(DOCS), cache=False, model_steps=("answer",))
    options = {"read_parts": True, "search_parts": False, **options}  # the chain's logic, whatever the defaults
    result = run_research(workspace, QUESTION, RunOptions(loops=1, queries=2, **options), deps=deps)
    return result, model, RunStore(workspace.db).load_state(result.run_id)


def test_a_chain_is_read_part_by_part_and_cites_every_parts_passage(workspace, fake_embedder):
    result, model, state = _run(workspace, fake_embedder, {PART: "Mara Quell", REST: "Tromsø"})
    assert model.asked() == [PART, REST]
    assert result.short_answer == "Tromsø" and result.report_stats["answer_method"] == "reader"
    # The final part's passage first, then the one that named the director.
    assert [s["url"] for s in result.answer_sources] == [DIRECTOR, FILM]
    assert [p["answer"] for p in state.short_answer["parts"]] == ["Mara Quell", "Tromsø"]
    answer = result.report.split("## Answer", 1)[1].split("\n## ", 1)[0]
    assert f"Read in parts: {PART} → Mara Quell; {REST} → Tromsø." in answer
    assert re.search(r"model used for: answer \(\d+\.\d s, 2 calls\)", result.report)
    assert to_jsonable(result)["answer_parts"] == [
        {"question": PART, "answer": "Mara Quell"},
        {"question": REST, "answer": "Tromsø"},
    ]


def _answer_section(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


def test_a_part_the_evidence_does_not_state_breaks_the_chain_and_the_whole_reading_is_no_answer(
    workspace, fake_embedder
):
    # "Oslo" is in no passage: the part is rejected. The question is read whole, skipping the hop the chain could not
    # follow: the run abstains, and the Answer shows the reading's sentence, not bolded, as the closest one.
    result, model, state = _run(workspace, fake_embedder, {PART: "Oslo", QUESTION: "Tromsø"})
    assert model.asked() == [PART, QUESTION]
    assert result.short_answer is None and "parts" not in state.short_answer
    assert state.short_answer["reader_rejected"]["chain_broke"] == "Tromsø"
    answer = _answer_section(result.report)
    assert "does not state the answer directly" in answer and "**" not in answer
    assert answer.index(DOCS[DIRECTOR]) < answer.index(DOCS[FILM])
    assert "Read in parts" not in result.report and result.answer_parts == []


def test_with_reading_after_a_broken_chain_on_the_whole_reading_is_the_answer(workspace, fake_embedder, monkeypatch):
    monkeypatch.setattr(reader, "READ_AFTER_BROKEN_CHAIN", True)
    result, model, state = _run(workspace, fake_embedder, {PART: "Oslo", QUESTION: "Tromsø"})
    assert model.asked() == [PART, QUESTION]
    assert result.short_answer == "Tromsø" and "reader_rejected" not in state.short_answer


def test_a_rejected_last_part_keeps_no_half_chain(workspace, fake_embedder):
    # The director is read, the town is not: the chain gives no answer, and the whole question is read. The Answer
    # says how far the chain went.
    result, model, _ = _run(workspace, fake_embedder, {PART: "Mara Quell", REST: "Norway town", QUESTION: ""})
    assert model.asked() == [PART, REST, QUESTION]
    assert result.short_answer is None and result.answer_parts == []
    assert (
        f"Read in parts as far as the evidence went: {PART} → Mara Quell; {REST} → no sure answer."
        in _answer_section(result.report)
    )


def test_a_part_answered_by_a_name_the_question_writes_was_no_hop(workspace, fake_embedder):
    # "Who produced X?" does not hop through X: a part read as a name the question already writes ends the chain, and
    # so does a last part that answers with the question's own words; the question is then read whole.
    question = "In which town was Mara Quell, the director of Night Harbor, raised?"
    part = "What is the director of Night Harbor?"
    answers = {part: "Mara Quell", question: "Tromsø"}
    model = PartsReader(answers)
    deps = make_deps(workspace, fake_embedder, model, ListBackend(DOCS), cache=False, model_steps=("answer",))
    options = RunOptions(loops=1, queries=2, read_parts=True, search_parts=False)
    result = run_research(workspace, question, options, deps=deps)
    assert model.asked() == [part, question]
    assert result.short_answer == "Tromsø" and result.answer_parts == []


def test_a_last_reading_that_answers_with_the_questions_own_name_ends_the_chain(workspace, fake_embedder):
    # The director is read; the rest, read as the film the question names, is no answer: the question is read whole.
    result, model, _ = _run(workspace, fake_embedder, {PART: "Mara Quell", REST: "Night Harbor", QUESTION: "Tromsø"})
    assert model.asked() == [PART, REST, QUESTION]
    assert result.short_answer == "Tromsø" and result.answer_parts == []


def test_a_whole_reading_that_names_a_hop_of_the_failed_chain_is_not_kept(workspace, fake_embedder):
    # The director is read, the town is not; read whole, the question is answered with the director: a step of the
    # chain, not what it leads to. The run abstains and keeps the reading as rejected.
    result, model, state = _run(workspace, fake_embedder, {PART: "Mara Quell", REST: "", QUESTION: "Mara Quell"})
    assert model.asked() == [PART, REST, QUESTION]
    assert result.short_answer is None
    rejected = state.short_answer["reader_rejected"]
    assert rejected["hop_answer"] == "Mara Quell" and "chain_broke" not in rejected  # the narrower reason is named
    answer = _answer_section(result.report)  # the reading's sentence, and how far the chain went
    assert DOCS[FILM] in answer and f"{PART} → Mara Quell; {REST} → no sure answer." in answer


def test_with_read_parts_off_the_question_is_read_whole(workspace, fake_embedder):
    result, model, _ = _run(workspace, fake_embedder, {QUESTION: "Tromsø"}, read_parts=False)
    assert model.asked() == [QUESTION] and result.short_answer == "Tromsø"


@pytest.mark.parametrize(("logprob", "chained"), [(-0.1, True), (-0.3, False)])
def test_a_chain_is_as_sure_as_all_its_parts(workspace, fake_embedder, logprob, chained):
    # Each reading alone clears the 0.6 gate (exp(-0.1) = 0.90, exp(-0.3) = 0.74); the chain is right only if every
    # part is: 0.90 × 0.90 = 0.82 keeps it, 0.74 × 0.74 = 0.55 does not, and the question is read whole.
    answers = {PART: "Mara Quell", REST: "Tromsø", QUESTION: "Tromsø"}
    result, model, state = _run(workspace, fake_embedder, answers, logprob=logprob)
    if chained:
        assert model.asked() == [PART, REST] and result.short_answer == "Tromsø"
        assert state.short_answer["confidence"] == pytest.approx(0.9048**2, abs=0.001)
        assert [p["confidence"] for p in state.short_answer["parts"]] == [pytest.approx(0.9048, abs=0.001)] * 2
    else:  # an unsure chain broke: the whole reading is not the answer either
        assert model.asked() == [PART, REST, QUESTION] and "parts" not in state.short_answer
        assert result.short_answer is None and state.short_answer["reader_rejected"]["chain_broke"] == "Tromsø"


SPOUSE = "https://example.org/ivo-brandt"
SPOUSE_QUESTION = "Who is the spouse of the director of Night Harbor?"
SPOUSE_REST = "Who is the spouse of Mara Quell?"  # the question once the director is written in
SPOUSE_PART = "What is the spouse of Mara Quell?"  # its last phrase, read as the next part


@pytest.mark.parametrize("search_parts", [True, False])
def test_a_rewritten_part_is_searched_and_its_passage_read_and_cited(workspace, fake_embedder, search_parts):
    # The spouse's passage shares no word with the question: its own searches never find it. The rewritten part
    # names the director, and a search for it does.
    docs = {**DOCS, SPOUSE: "Mara Quell married the painter Ivo Brandt in 1990."}
    backend = ListBackend(docs)
    model = PartsReader({PART: "Mara Quell", SPOUSE_PART: "Ivo Brandt", SPOUSE_QUESTION: ""})
    deps = make_deps(workspace, fake_embedder, model, backend, cache=False, model_steps=("answer",))
    options = RunOptions(loops=1, queries=2, read_parts=True, search_parts=search_parts)
    result = run_research(workspace, SPOUSE_QUESTION, options, deps=deps)
    state = RunStore(workspace.db).load_state(result.run_id)
    if not search_parts:  # the last part reads no passage that states it: the question is read whole, and abstains
        assert SPOUSE_REST not in backend.calls and result.short_answer is None
        assert model.asked() == [PART, SPOUSE_PART, SPOUSE_QUESTION]
        return
    assert backend.calls[-1] == SPOUSE_REST and model.asked() == [PART, SPOUSE_PART]
    assert result.short_answer == "Ivo Brandt"
    # The found passage is cited, and so is the one that named the director (the hop it came from).
    assert [s["url"] for s in result.answer_sources][:2] == [SPOUSE, FILM]
    assert SPOUSE in {s.url for s in state.sources} and state.hops[SPOUSE_REST]["entity"] == "Mara Quell"
    assert f"Read in parts: {PART} → Mara Quell; {SPOUSE_PART} → Ivo Brandt." in result.report


@pytest.mark.parametrize("anchored", [True, False])
def test_a_later_part_reads_only_the_passages_that_name_the_hop_before_it(
    workspace, fake_embedder, monkeypatch, anchored
):
    # "Night Harbor premiered in Bergen" shares the question's words but not the director's name: the part that
    # asks where Mara Quell was raised is not shown it (session 31: an answer from a passage that does not name the
    # hop — "What year did John Knox die?" read from another John's page — was wrong 28 times in 36).
    monkeypatch.setattr(reader, "ANCHOR_PARTS", anchored)
    docs = {**DOCS, "file:///corpus/premiere.md": "Night Harbor premiered in Bergen, a town in the west of Norway."}
    model = PartsReader({PART: "Mara Quell", REST: "Tromsø"})
    deps = make_deps(workspace, fake_embedder, model, ListBackend(docs), cache=False, model_steps=("answer",))
    options = RunOptions(loops=1, queries=2, read_parts=True, search_parts=False)
    result = run_research(workspace, QUESTION, options, deps=deps)
    prompts = {q: h["messages"][-1]["content"] for q, h in zip(model.asked(), model.history, strict=True)}
    assert "premiered in Bergen" in prompts[PART]  # the first part reads every passage
    assert ("premiered in Bergen" in prompts[REST]) is not anchored
    assert result.short_answer == "Tromsø"
