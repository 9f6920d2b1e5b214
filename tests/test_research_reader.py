"""The answer step: the model's reading is kept only when the evidence states it (a span of a
cited or retrieved passage, yes/no for a yes/no question), otherwise the confident extractive
answer or an abstention with no bold guess; only supporting passages are cited. Logic on the
real KB and SQLite with the fake embedder and fake model; one run with the real shipped SmolLM2."""

from __future__ import annotations

import re

import pytest

from deepresearch.models.base import field_logprobs
from deepresearch.research.loop import run_research
from deepresearch.research.progress import describe
from deepresearch.research.reader import (
    asked_shape,
    check_hop,
    check_reading,
    counts_fit,
    fits_question,
    full_date,
    longer_names,
    normalize_answer,
    reader_evidence,
    states,
    the_identifier,
)
from deepresearch.research.report import ABSTAIN_NOTE
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions, Source
from deepresearch.views import to_jsonable
from tests.fakes import FakeChatModel
from tests.research_helpers import ListBackend, RoutedChatModel, make_deps
from tests.test_research_answer import DIRECTOR, FILM, QUESTION, TWO_HOP, KeywordBackend

PAINTERS = {
    "file:///corpus/alma.md": "Alma Reyes is a Chilean painter known for her large murals.",
    "file:///corpus/bruno.md": "Bruno Tal is an Israeli painter and sculptor.",
    "file:///corpus/carl.md": "Carl Moss is a British jazz drummer and bandleader.",
}


def _answer_section(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


def _one_passage(question: str, title: str, text: str) -> tuple[ResearchState, list[tuple[str, str, str, str]]]:
    """A state whose pool is one passage S1, and the reader evidence that shows it whole."""
    state = ResearchState("r", question, RunOptions())
    state.sources = [Source("S1", "file:///a", title, text, question, 0)]
    return state, [("S1", "S1", title, text)]


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
        reads = [p for p in model.prompts("answer research") if '"entity"' not in p]
        assert model is not None and len(reads) == 1
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
    result, model = _run(workspace, fake_embedder, question, PAINTERS, {"answer": "no", "sources": ["S1", "S2"]}, 1)
    # The comparison of the two passages answers a yes/no question; the model is not asked.
    assert result.short_answer == "Yes" and result.report_stats["answer_method"] == "extractive"
    assert model is not None and model.prompts("answer research") == []
    assert _answer_section(result.report).strip().startswith("**Yes.**")
    state = ResearchState("r", question, RunOptions())
    state.sources = [Source("S1", "file:///a", "Alma Reyes", PAINTERS["file:///corpus/alma.md"], question, 0)]
    evidence = [("S1", "S1", "Alma Reyes", "Alma Reyes is a Chilean painter")]
    assert check_reading({"answer": "painter", "sources": ["S1"]}, state, evidence) is None
    assert check_reading({"answer": "No.", "sources": ["S1"]}, state, evidence)["text"] == "No"  # type: ignore[index]


@pytest.mark.parametrize(
    "question",
    [
        "Which was founded first, Alma Records or Bruno Music?",
        "Which label was founded first Alma Records or Bruno Music?",
    ],
)
def test_an_either_or_answer_must_be_one_of_the_options(question):
    text = "Alma Records was founded in 1950. Bruno Music was founded in 1961."
    state, evidence = _one_passage(question, "Alma Records", text)
    assert check_reading({"answer": "alma records", "sources": ["S1"]}, state, evidence)["text"] == "Alma Records"  # type: ignore[index]
    assert check_reading({"answer": "1950", "sources": ["S1"]}, state, evidence) is None


def test_an_either_or_question_the_years_do_not_decide_abstains_without_asking_the_model(workspace, fake_embedder):
    docs = {
        "file:///corpus/alma.md": "Alma Reyes is a Chilean painter whose murals cover three city blocks.",
        "file:///corpus/bruno.md": "Bruno Tal is a French painter of small portraits.",
    }
    question = "Which painter is better known, Alma Reyes or Bruno Tal?"
    result, model = _run(workspace, fake_embedder, question, docs, {"answer": "Alma Reyes", "sources": ["S1"]}, 1)
    assert model is not None and model.prompts("answer research") == []
    assert result.short_answer is None and result.report_stats["answer_method"] == "abstained"
    assert ABSTAIN_NOTE in _answer_section(result.report)


def test_a_name_read_shorter_than_the_evidence_writes_it_is_taken_whole():
    question = "Who was the first president of the association that publishes the Quell Review?"
    text = "The association's first president was G. Stanley Hall, who founded it in 1892."
    state, evidence = _one_passage(question, "Quell Association", text)
    kept = check_reading({"answer": "G. Hall", "sources": ["S1"]}, state, evidence)
    assert kept is not None and kept["text"] == "G. Stanley Hall" and kept["sids"] == ["S1"]
    assert longer_names("G. Hall", "G. Stanley Hall and G. Hall") == {"G. Stanley Hall", "G. Hall"}
    assert longer_names("Ann Bo", "Ann Cy Di Ed Bo") == set()  # three more words: another name
    assert longer_names("painter Hall", "painter Stanley Hall") == set()  # not a name
    # Two longer names fit: which one is not certain, so the reading is rejected.
    two = "G. Stanley Hall met G. Henry Hall."
    state.sources = [Source("S1", "file:///a", "Quell Association", two, question, 0)]
    assert (
        check_reading({"answer": "G. Hall", "sources": ["S1"]}, state, [("S1", "S1", "Quell Association", two)]) is None
    )


def test_a_how_or_why_question_is_answered_by_the_best_sentences_without_the_model(workspace, fake_embedder):
    docs = {"file:///corpus/wal.md": "Readers keep reading the last committed state while a writer appends to the WAL."}
    question = "How does SQLite WAL mode let readers and writers work at the same time?"
    lines: list[str] = []
    model = RoutedChatModel(answer={"answer": "WAL mode", "sources": ["S1"]})
    deps = make_deps(workspace, fake_embedder, model, KeywordBackend(docs), model_steps=("answer",))
    result = run_research(
        workspace, question, RunOptions(loops=1), deps=deps, progress=lambda e, **i: lines.append(describe(e, **i))
    )
    assert model.prompts("answer research") == []  # not read: ~20 s saved
    assert result.short_answer is None and result.report_stats["answer_method"] == "sentences"
    answer = _answer_section(result.report)
    assert "**" not in answer and ABSTAIN_NOTE not in answer
    assert answer.strip().startswith("Readers keep reading the last committed state")
    assert "answer (sentences): the best sentences of the evidence" in lines


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
    # One read, and for this span question at most a hop (entity) call and a second read.
    assert 1 <= result.counters["model.answer.calls"] <= 3 and result.counters["model.answer.seconds"] > 0
    assert re.search(r"model used for: answer \(\d+\.\d s(, \d calls)?\)", result.report)
    state = RunStore(workspace.db).load_state(result.run_id)
    by_url = {s.url: s for s in state.sources}
    if result.short_answer is None:
        assert ABSTAIN_NOTE in result.report
    else:
        assert any(states(result.short_answer, by_url[s["url"]].text) for s in result.answer_sources)
    assert result.report_stats["invalid_citations_removed"] == 0
    assert {s["url"] for s in result.sources} <= set(by_url)


class HopModel(FakeChatModel):
    """A reader that cannot answer from the first evidence, names the director as the missing
    hop, and answers from the hop's passage once it is in the evidence."""

    def __init__(self, hop: object, first: str = "", second: str = "Tromsø") -> None:
        super().__init__()
        self.hop, self.first, self.second = hop, first, second

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        prompt = messages[-1]["content"]
        if '"entity"' in prompt:
            reply: object = self.hop
        elif "Tromsø" in prompt:
            reply = {"answer": self.second, "sources": []}
        else:
            reply = {"answer": self.first, "sources": []}
        self.replies = [reply]
        return super().complete(messages, schema, max_tokens, temperature)


def _hop_run(workspace, embedder, hop, second_read=True, **replies):  # type: ignore[no-untyped-def]
    backend = KeywordBackend(TWO_HOP)
    deps = make_deps(workspace, embedder, HopModel(hop, **replies), backend, cache=False, model_steps=("answer",))
    options = RunOptions(loops=1, queries=2, second_read=second_read)  # one loop: the loop itself takes no hop
    result = run_research(workspace, QUESTION, options, deps=deps)
    return result, backend, RunStore(workspace.db).load_state(result.run_id)


def test_the_hop_read_searches_the_named_entity_and_answers_from_its_passage(workspace, fake_embedder):
    hop = {"entity": "Mara Quell", "question": "Where did Mara Quell grow up?"}
    result, backend, state = _hop_run(workspace, fake_embedder, hop)
    assert backend.calls[-1] == "Where did Mara Quell grow up?"  # the hop went through the search step
    assert result.short_answer == "Tromsø"
    found = state.short_answer
    assert found["method"] == "reader" and found["hop"]["entity"] == "Mara Quell"
    assert found["hop"]["first_read"] is None and found["hop"]["second_read"] == "Tromsø"
    # The answer's passage and the passage that named the director (the hop that led there) are cited.
    assert [s["url"] for s in result.answer_sources] == [DIRECTOR, FILM]
    assert {DIRECTOR, FILM} <= {s["url"] for s in result.sources}
    assert state.hops["Where did Mara Quell grow up?"]["entity"] == "Mara Quell"
    assert result.counters["model.answer.calls"] == 3 and result.counters["model.answer.accepted"] == 2


def test_a_hop_the_evidence_does_not_name_is_not_searched(workspace, fake_embedder):
    for hop in (
        {"entity": "Oslo Film Institute", "question": "Where is the Oslo Film Institute?"},  # not in the evidence
        {"entity": "Leland", "question": "What is Leland?"},  # the question's own word
        "Mara Quell",  # not the schema's object
    ):
        result, backend, state = _hop_run(workspace, fake_embedder, hop)
        assert len(backend.calls) == 1 and result.short_answer is None
        assert "hop" not in state.short_answer and result.counters["model.answer.calls"] == 2
    result, backend, _ = _hop_run(workspace, fake_embedder, {"entity": "Mara Quell", "question": ""}, second_read=False)
    assert len(backend.calls) == 1 and result.counters["model.answer.calls"] == 1  # the option off: one read


def test_check_hop_builds_a_search_from_the_entity_when_its_question_does_not_name_it():
    state = ResearchState("r", QUESTION, RunOptions())
    evidence = [("S1", "S1", "Night Harbor", TWO_HOP[FILM])]
    hop = check_hop({"entity": "Mara Quell.", "question": "Where was she raised?"}, state, evidence)
    assert hop is not None and hop["entity"] == "Mara Quell" and hop["parent"] == "S1"
    assert hop["query"].startswith("Mara Quell ") and "raised" in hop["query"]
    state.queries_done = [hop["query"]]
    assert check_hop({"entity": "Mara Quell", "question": "Where was she raised?"}, state, evidence) is None


def test_a_span_must_have_the_shape_the_question_asks_for():
    assert fits_question("1989", "date") and fits_question("March 3", "date") and not fits_question("American", "date")
    assert fits_question("three", "number") and fits_question("22,000", "number")
    assert not fits_question("several", "number")
    assert fits_question("Mara Quell", "person") and not fits_question("top scorer", "person")
    assert fits_question("Tromsø", "place") and not fits_question("the town", "place")
    assert not fits_question("Leland is a town in Brunswick County", "place")  # a clause names nothing
    assert not fits_question("Mara Quell was the director", "person")
    assert fits_question("thriller", "entity") and fits_question("thriller", "")
    assert asked_shape("When was it shot?") == "date" and asked_shape("In what year was it shot?") == "date"
    assert asked_shape("How many towns are there?") == "number" and asked_shape("Who directed it?") == "person"
    # A wh-word inside a clause does not say what is asked.
    assert asked_shape("What position does the footballer who plays for Benfica play?") == ""
    assert asked_shape("Under what name did he sing when he released Void?") == ""
    question = "When was Night Harbor shot?"
    state, evidence = _one_passage(question, "Night Harbor", TWO_HOP[FILM])
    assert check_reading({"answer": "thriller film", "sources": ["S1"]}, state, evidence) is None
    assert check_reading({"answer": "1986", "sources": ["S1"]}, state, evidence)["text"] == "1986"  # type: ignore[index]
    # A bare number answers a question that asks a quantity or a time, not "which film".
    assert counts_fit("22,000", "What is the population of Leland?") and counts_fit("Leland", "Which town?")
    assert not counts_fit("1986", "Which of the two films was shot in Leland?")
    # Documentation asks numbers of versions, values and shares.
    assert counts_fit("3.37.0", "Which SQLite version introduced STRICT tables?")
    assert counts_fit("0.0625", "unlikely(X) is likelihood(X, Y) with which value of Y?")
    assert counts_fit("35%", "What share of the source code is comments?")


FROB_LOG = (
    "frob-log(1). frob log lists the commits of a branch. With --first-parent, frob log follows only the first "
    "parent of a merge. The frob.logLimit variable sets how many commits it lists by default."
)


def test_a_question_that_asks_for_an_option_or_a_variable_is_answered_by_its_name():
    assert asked_shape("Which frob log option follows only the first-parent chain?") == "identifier"
    assert asked_shape("When listing commits, which config variable sets the default count?") == "identifier"
    assert asked_shape("Which AllowOverride directive is required for ErrorDocument?") == "identifier"
    assert asked_shape("What key is the symphony in?") == "" and asked_shape("Which setting did the film use?") == ""
    # The noun of a clause is not what is asked, nor is a noun outside a which/what phrase.
    assert asked_shape("What does frob print by default for an undefined variable?") == ""
    assert asked_shape("Which module implements the Digest method?") == ""
    question = "Which frob log option follows only the first-parent chain?"
    assert the_identifier("frob log --first-parent", question) == "--first-parent"  # the command is the question's
    assert the_identifier("the --first-parent option", question) == "--first-parent"
    assert the_identifier("frob-log(1)", question) == ""  # a manual page
    assert the_identifier("frob-log", question) == ""  # the command the question names
    assert the_identifier("Follows only the first parent", question) == ""  # a clause
    assert the_identifier("-1", question) == ""
    assert the_identifier("frob.logLimit", "Which variable sets how many commits frob log lists?") == "frob.logLimit"
    assert the_identifier("--all", "Which option works like --all?") == ""  # the question writes it
    assert the_identifier("REINDEX", "Which reindexdb options cannot be used when reindexing?") == ""  # its words
    state, evidence = _one_passage(question, "frob-log(1)", FROB_LOG)
    kept = check_reading({"answer": "frob log --first-parent", "sources": ["S1"]}, state, evidence)
    assert kept is not None and kept["text"] == "--first-parent"
    assert check_reading({"answer": "frob-log(1)", "sources": ["S1"]}, state, evidence) is None
    assert check_reading({"answer": "--all-parents", "sources": ["S1"]}, state, evidence) is None  # not stated


def test_a_wh_phrase_after_the_head_still_says_a_date_or_a_number_is_asked():
    assert asked_shape("The league includes a team that was formed in what year?") == "date"
    assert asked_shape("King Albert lived during a war that Italy entered when?") == "date"
    assert asked_shape("The club is based in a suburb of a city with a population of what in 2010?") == "number"
    # A question that opens with "which" asks for what its noun names, whatever its clause counts.
    assert asked_shape("Which sqldiff option shows how many rows changed in each table?") == "identifier"
    assert asked_shape("The film stars an actress who has won how many Emmy Awards?") == "number"
    # A "when" or "who" inside a clause still asks nothing.
    assert asked_shape("Which singer who was famous when she was young recorded it?") == ""
    assert asked_shape("What city with a population of 48,982 hosts the club?") == ""
    question = "Night Harbor was made by a director who was born when?"
    state, evidence = _one_passage(question, "Night Harbor", TWO_HOP[FILM])
    assert check_reading({"answer": "Mara Quell", "sources": ["S1"]}, state, evidence) is None  # the director


@pytest.mark.parametrize(
    ("title", "text", "question", "kept", "written", "word"),
    [
        (
            "Vilnius Old Town",
            "Vilnius Old Town, one of the largest surviving medieval old towns in Europe, holds the Vilnius Cathedral.",
            "In which of the largest surviving medieval old towns in Europe is the Vilnius Cathedral located?",
            "Vilnius Old Town",  # made of the question's scattered words
            "Vilnius Cathedral",
            "Vilnius",
        ),
        (  # documentation (session 33, eval_docqa): an identifier joins words the question writes apart
            "Mutex Methods Object",
            "Pass an sqlite3_mutex_methods structure to sqlite3_config() with the SQLITE_CONFIG_MUTEX option.",
            "Which sqlite3_config() option installs a custom mutex from an sqlite3_mutex_methods structure?",
            "SQLITE_CONFIG_MUTEX",
            "sqlite3_config()",
            "mutex",
        ),
    ],
)
def test_a_name_the_question_writes_is_rejected_but_one_made_of_its_scattered_words_is_not(
    title, text, question, kept, written, word
):
    state, evidence = _one_passage(question, title, text)
    reading = check_reading({"answer": kept, "sources": ["S1"]}, state, evidence)
    assert reading is not None and reading["text"] == kept
    assert check_reading({"answer": written, "sources": ["S1"]}, state, evidence) is None  # written there
    assert check_reading({"answer": word, "sources": ["S1"]}, state, evidence) is None  # one of its words


def test_a_when_question_read_as_a_year_gets_the_full_date_its_sentence_states():
    sentence = "Mara Quell (born 8 June 1951) is a singer; her debut came out on March 3, 1975."
    assert full_date("1951", sentence, "When was Mara Quell born?") == "8 June 1951"
    assert full_date("1975", sentence, "when did her debut come out?") == "March 3, 1975"
    assert full_date("1951", sentence, "What year was Mara Quell born?") == "1951"  # a year was asked
    assert full_date("1951", "Born in 1951, she sang.", "When was she born?") == "1951"  # no full date
    two = "She played on 1 May 1951 and on 9 July 1951."
    assert full_date("1951", two, "When did she play?") == "1951"  # which date is not certain
    assert full_date("Spring", sentence, "When was Mara Quell born?") == "Spring"


def test_a_second_read_naming_the_entity_it_looked_up_has_not_answered(workspace, fake_embedder):
    hop = {"entity": "Mara Quell", "question": "Where did Mara Quell grow up?"}
    # The first read answered with the director, the model then asked about her: the hop's answer stands.
    result, _, state = _hop_run(workspace, fake_embedder, hop, first="Mara Quell")
    assert result.short_answer == "Tromsø" and state.short_answer["hop"]["first_read"] == "Mara Quell"
    # The second read names her again: the first read stands.
    result, _, state = _hop_run(workspace, fake_embedder, hop, first="Brunswick County", second="Mara Quell")
    assert state.short_answer["hop"]["second_read"] == "Mara Quell"
    assert result.short_answer == state.short_answer["hop"]["first_read"] == "Brunswick County"


def _chain_state() -> ResearchState:
    """A three-hop question's pool: the song (named by the question) names its band, whose passage
    names the city the answer is about; two passages name none of them."""
    from deepresearch.research.state import Sentence

    texts = [
        ("Brother (Pearl Jam song)", "Brother is a song by the American rock band Pearl Jam, released in 2009."),
        ("Seattle", "Seattle receives an average of 6.8 inches of snow a year."),
        ("Boston", "Boston receives an average of 43.8 inches of snow a year."),
        ("Pearl Jam", "Pearl Jam is a rock band formed in Seattle, Washington, in 1990."),
        ("Riemann integral", "The Riemann integral was the first rigorous definition of the integral."),
    ]
    question = "What is the average snowfall in the city where the performers of Brother were formed?"
    state = ResearchState("r", question, RunOptions())
    for i, (title, text) in enumerate(texts, 1):
        sentence = Sentence(text, 0.5 - i / 100, 0.5 - i / 100)
        state.sources.append(Source(f"S{i}", f"file:///c/{i}", title, text, question, 0, rank=i, sentences=[sentence]))
        state.retrievals.append([f"S{i}", question, i])
    return state


def test_a_chain_cites_its_middle_passage_and_not_the_passages_it_never_names():
    from deepresearch.research.reader import CHAIN_LINKS, linked_passages, most_of_question, supporting_passages
    from deepresearch.research.state import Sentence

    state = _chain_state()
    found = {"text": "6.8 inches", "sids": ["S2"], "method": "reader"}
    cited = supporting_passages(state, found, ["S1", "S2", "S3"])
    # S1 the question names; S2 the answer; S4 (Pearl Jam) named by S1, names S2's Seattle.
    assert cited[:2] == ["S2", "S1"] and "S4" in cited, cited
    assert "S3" not in cited and "S5" not in cited  # Boston and the integral link to nothing cited
    assert linked_passages(state, ["S5"]) == []
    assert most_of_question(state, ["S1", "S2", "S3", "S4", "S5"]) == []  # none states 0.3 of the question
    stated = "The performers of Brother formed in a city whose average snowfall is 6.8 inches."
    for sid in ("S6", "S7"):  # the passage stating most of the question is cited (both on a tie)
        state.sources.append(
            Source(sid, f"file:///c/{sid}", "Notes", stated, "q", 1, sentences=[Sentence(stated, 0, 0)])
        )
    assert most_of_question(state, ["S5", "S6", "S7"]) == ["S6", "S7"]
    many = [f"S{i}" for i in range(10, 10 + CHAIN_LINKS + 3)]
    for sid in many:  # a title every passage names cites at most CHAIN_LINKS of them
        state.sources.append(Source(sid, f"file:///c/{sid}", "Other", "A page that names Seattle.", "q", 1))
    assert len(linked_passages(state, ["S2"])) == CHAIN_LINKS


def test_the_passage_stating_most_of_the_question_is_cited_only_when_no_cited_one_states_part_of_it():
    from deepresearch.research.reader import question_shares, supporting_passages
    from deepresearch.research.state import Sentence

    state = _chain_state()
    stated = "The performers of Brother formed in a city whose average snowfall is 6.8 inches."
    state.sources.append(Source("S6", "file:///c/6", "Notes", stated, "q", 1, sentences=[Sentence(stated, 0, 0)]))
    pool = ["S1", "S2", "S3", "S6"]
    # The answer rests on Riemann (a wrong reading): nothing cited states part of the question,
    # so the passage that states most of it is cited beside it.
    wrong = {"text": "1854", "sids": ["S5"], "method": "reader"}
    assert question_shares(state, ["S5"])["S5"] < 0.3
    assert "S6" in supporting_passages(state, wrong, pool)
    # The answer's passage states most of the question itself: no other is added for that reason.
    right = {"text": "6.8 inches", "sids": ["S6"], "method": "reader"}
    stated2 = "The performers formed in a city whose average snowfall was measured."  # names no title
    state.sources.append(Source("S7", "file:///c/7", "Climate", stated2, "q", 1, sentences=[Sentence(stated2, 0, 0)]))
    assert question_shares(state, ["S6"])["S6"] >= 0.3
    assert "S7" not in supporting_passages(state, right, [*pool, "S7"])


def test_a_page_titles_disambiguation_is_dropped_from_the_answer():
    question = "What 1944 film was the singer's mother in?"
    text = "Geet is a 1944 Indian film in which Nirmala Devi sang."
    state, evidence = _one_passage(question, "Geet (1944 film)", text)
    kept = check_reading({"answer": "Geet (1944 film)", "sources": ["S1"]}, state, evidence)
    assert kept is not None and kept["text"] == "Geet"
    # A parenthesis that is no disambiguation stays: a date, a converted unit.
    from deepresearch.research.reader import _DISAMBIGUATION

    assert _DISAMBIGUATION.sub("", "SQLite 3.35.0 (2021-03-12)") == "SQLite 3.35.0 (2021-03-12)"
    assert _DISAMBIGUATION.sub("", "43.8 inches (1,110 mm)") == "43.8 inches (1,110 mm)"
    assert _DISAMBIGUATION.sub("", "Foo Fighters (American band)") == "Foo Fighters"


def test_field_logprobs_are_the_tokens_that_spell_a_fields_value():
    tokens = [('{"', -0.1), ("answer", 0.0), ('":', 0.0), (' "', -0.2), ("Trom", -0.5), ("sø", -0.1), ('",', 0.0)]
    tokens += [(' "sources', 0.0), ('": ["', 0.0), ("S1", -1.0), ('"]}', 0.0)]
    assert field_logprobs(tokens, "answer") == [-0.5, -0.1]
    assert field_logprobs([('{"answer": ""', -0.3), (', "sources": []}', 0.0)], "answer") == []
    assert field_logprobs([("{}", 0.0)], "answer") == []


class SureModel(RoutedChatModel):
    """An answer reply with every generated character's log-probability `logprob` (as llama.cpp reports tokens)."""

    def __init__(self, answer, logprob):  # type: ignore[no-untyped-def]
        super().__init__(answer=answer)
        self.logprob = logprob

    def complete(self, messages, schema=None, max_tokens=None, temperature=None):  # type: ignore[no-untyped-def]
        out = super().complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        out.extra["token_logprobs"] = [(c, self.logprob) for c in out.text]
        return out


@pytest.mark.parametrize(("logprob", "kept"), [(-0.01, True), (-0.7, False)])
def test_a_supported_reading_the_model_was_unsure_of_abstains(workspace, fake_embedder, logprob, kept):
    model = SureModel({"answer": "Tromsø", "sources": ["S1"]}, logprob)
    deps = make_deps(workspace, fake_embedder, model, KeywordBackend(TWO_HOP), model_steps=("answer",))
    result = run_research(workspace, QUESTION, RunOptions(loops=2, queries=2), deps=deps)
    state = RunStore(workspace.db).load_state(result.run_id)
    assert result.report_stats["model_steps"]["answer"]["calls"] == 1
    assert state.options.reader_min_confidence == 0.6  # the default
    if kept:  # exp(-0.01) = 0.99 ≥ 0.6: the headline, with its confidence
        assert result.short_answer == "Tromsø" and state.short_answer["confidence"] == pytest.approx(0.99, abs=0.001)
    else:  # exp(-0.7) = 0.50: supported by the evidence, but no headline; the reading is kept as rejected
        assert result.short_answer is None and ABSTAIN_NOTE in result.report
        assert "**Tromsø**" not in result.report
        assert state.short_answer["reader_rejected"]["confidence"] == pytest.approx(0.4966, abs=0.001)
        assert result.report_stats["model_steps"]["answer"]["accepted"] == 0
