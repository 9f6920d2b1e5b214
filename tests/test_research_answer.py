"""Multi-hop research and the direct answer, on the real KB and SQLite with a fake embedder and model:
a second document reachable only through a name the first one gives, yes/no from compared
passages; which supporting sentences join the Answer, by rule and on the shipped corpus with the
real embedder. (The model's reading: test_research_reader.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.research.evidence import best_sentences, top_sentence_score
from deepresearch.research.loop import run_research
from deepresearch.research.report import ANSWER_SHARE_OF_BEST
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions, Sentence, Source
from tests.research_helpers import DOCS, ListBackend, make_deps

FILM = "file:///corpus/night-harbor.md"
DIRECTOR = "file:///corpus/mara-quell.md"
TWO_HOP = {
    FILM: "Night Harbor is a 1986 thriller film directed by Mara Quell. The film was shot in Leland.",
    DIRECTOR: "Mara Quell grew up in the town of Tromsø, far in the north of Norway.",
    "file:///corpus/leland.md": "Leland is a town in Brunswick County with a population of 22,000 people.",
}
QUESTION = "In which town was the director of the film shot in Leland raised?"


class KeywordBackend(ListBackend):
    """Like BM25 with a floor: a document must share two content words with the query."""

    def search(self, query: str, count: int) -> list:  # type: ignore[type-arg]
        return [r for r in super().search(query, count) if r.score >= 2]


def _answer_section(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


def _cited_urls(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {s["url"] for s in result.sources}


def test_second_hop_is_reached_through_a_name_in_the_first_document(workspace, fake_embedder):
    backend = KeywordBackend(TWO_HOP)
    assert DIRECTOR not in {r.url for r in backend.search(QUESTION, 5)}  # one search cannot reach it
    backend.calls.clear()
    deps = make_deps(workspace, fake_embedder, backend=backend, model_steps=())
    result = run_research(workspace, QUESTION, RunOptions(loops=2, queries=2), deps=deps)
    assert backend.calls[0] == QUESTION  # the question itself is always searched first
    assert any(call.startswith("Mara Quell") for call in backend.calls[1:])  # the bridge
    assert {FILM, DIRECTOR} <= _cited_urls(result)
    answer = _answer_section(result.report)
    # With no model a span question abstains (reader.TRUSTED_KINDS) but shows the sentence that states it.
    assert "**" not in answer and "Mara Quell grew up in the town of Tromsø" in answer
    state = RunStore(workspace.db).load_state(result.run_id)
    assert "Mara Quell" in [hop["entity"] for hop in state.hops.values()]


def test_yes_no_comparison_is_yes_from_both_passages_and_never_no_for_a_missing_word(workspace, fake_embedder):
    docs = {
        "file:///corpus/alma.md": "Alma Reyes is a Chilean painter known for her large murals.",
        "file:///corpus/bruno.md": "Bruno Tal is an Israeli painter and sculptor.",
        "file:///corpus/carl.md": "Carl Moss is a British jazz drummer and bandleader.",
    }

    def ask(question: str):  # type: ignore[no-untyped-def]
        deps = make_deps(workspace, fake_embedder, backend=ListBackend(docs), model_steps=())
        return run_research(workspace, question, RunOptions(loops=1), deps=deps)

    yes = ask("Are Alma Reyes and Bruno Tal both painters?")
    assert _answer_section(yes.report).strip().startswith("**Yes.**")
    assert {"file:///corpus/alma.md", "file:///corpus/bruno.md"} <= _cited_urls(yes)
    # One lead sentence without the predicate word is no "No" (it may use a synonym): with no model to read
    # it the run abstains and shows both passages' sentences.
    unsure = ask("Are Alma Reyes and Carl Moss both painters?")
    assert unsure.short_answer is None and "**" not in _answer_section(unsure.report)
    assert "Carl Moss is a British jazz drummer" in _answer_section(unsure.report)
    # Every predicate word, not half of them: Bruno Tal is a painter but not a Chilean one.
    assert ask("Are Alma Reyes and Bruno Tal both Chilean painters?").short_answer is None


def test_same_agent_is_compared_by_the_names_after_the_participle_and_a_verb_is_no_part_of_a_name():
    from deepresearch.research.answer import _entities, yes_no

    texts = {
        "Glass Slipper": "Glass Slipper is a 1950 American animated film released by Radio Pictures.",
        "The Llama King": "The Llama King is a 2000 American animated film released by Castle Pictures.",
        "Blue Lantern": "Blue Lantern is a 1951 British film released by Radio Pictures.",
    }
    state = ResearchState("r", "", RunOptions())
    state.sources = [Source(f"S{i}", f"file:///{i}", t, x, "", i) for i, (t, x) in enumerate(texts.items())]
    sids = [s.sid for s in state.sources]

    def answered(question: str) -> str | None:
        state.topic = question
        found = yes_no(state, sids)
        return found[0] if found else None

    # Both American: sharing that name is not sharing the company; the names after "released by" differ.
    assert answered("Were Glass Slipper and The Llama King released by the same picture company?") == "No"
    assert answered("Were Glass Slipper and Blue Lantern released by the same company?") == "Yes"
    # "situated", "released by": the words after a name in "Are A and B situated in the same …" are not the name.
    assert _entities("Are Nantong and Jingdezhen situated in the same province?") == ["Nantong", "Jingdezhen"]
    assert _entities("Were Slipper and The Llama King released by the same company?") == ["Slipper", "The Llama King"]
    assert _entities("Are the Bullenbeisser and the pug both dogs?") == ["the Bullenbeisser", "the pug"]


def test_only_facts_related_to_the_question_are_stored(workspace, fake_embedder):
    deps = make_deps(workspace, fake_embedder, backend=ListBackend(), model_steps=())
    result = run_research(
        workspace, "How do readers and the writer share the SQLite WAL?", RunOptions(loops=1), deps=deps
    )
    state = RunStore(workspace.db).load_state(result.run_id)
    assert {s.url for s in state.sources} == set(DOCS)  # every document was retrieved and cited …
    stored = [deps.kb.get(i) for i in result.fact_ids]
    assert stored and {f.source_url for f in stored} == {"file:///corpus/wal.md"}  # … only WAL facts kept


def test_a_fact_in_an_open_kb_conflict_is_flagged_next_to_the_claim(workspace, fake_embedder):
    from deepresearch.facts import Fact

    deps = make_deps(workspace, fake_embedder, backend=ListBackend(), model_steps=())
    added = deps.kb.add_facts(
        [
            Fact("SQLite WAL mode readers need shared memory on the same host.", "file:///notes/a.md"),
            Fact("SQLite WAL mode readers work across hosts over a network share.", "file:///notes/b.md"),
        ],
        merge=False,
    )
    first, second = added.added
    deps.kb.flag_conflict(first, second, "different values")
    result = run_research(workspace, "Do SQLite WAL mode readers need shared memory?", RunOptions(loops=1), deps=deps)
    kb_section = result.report.split("## From the knowledge base", 1)[1].split("\n## ", 1)[0]
    line = next(ln for ln in kb_section.splitlines() if "need shared memory on the same host" in ln)
    assert "⚠ contradicted in the knowledge base by: “SQLite WAL mode readers work across hosts" in line
    assert result.report_stats["conflicts_shown"] >= 1


def _chosen(texts: dict[str, str], question: str) -> str | None:
    """The option choose_option picks for `question` over passages titled by `texts`' keys."""
    from deepresearch.research.answer import choose_option

    state = ResearchState("r", question, RunOptions())
    state.sources = [Source(f"S{i}", f"file:///{i}", t, x, question, i) for i, (t, x) in enumerate(texts.items())]
    found = choose_option(state, [s.sid for s in state.sources])
    return found.text if found else None


def test_an_either_or_question_is_decided_by_the_passages_years_only_when_it_asks_first_or_later():
    texts = {
        "Alma Records": "Alma Records was founded in 1950 in Oslo.",
        "Bruno Music": "Bruno Music was founded in 1961.",
    }

    def chosen(question: str) -> str | None:
        return _chosen(texts, question)

    assert chosen("Which label was founded first, Bruno Music or Alma Records?") == "Alma Records"
    assert chosen("Which label was founded later, Alma Records or Bruno Music?") == "Bruno Music"
    assert chosen("Which label was founded more recently, Alma Records or Bruno Music?") == "Bruno Music"
    # Anything but first or later the years do not decide: no answer by rank (the run abstains).
    assert chosen("Which label is larger, Alma Records or Bruno Music?") is None
    texts["Bruno Music"] = "Bruno Music was founded in 1950 too."
    assert chosen("Which label was founded first, Alma Records or Bruno Music?") is None


def test_an_either_or_question_about_lifespans_or_counts_is_decided_by_what_each_passage_states():
    texts = {
        "Ada Quill": "Ada Quill (5 June 1928 – 14 November 1991) was an English director. She made two feature films.",
        "Bo Renn": "Bo Renn (April 12, 1908 - August 17, 1981) was an Italian director who made six feature films.",
    }

    # Born – died: 63 years against 73, in days when both dates are full.
    assert _chosen(texts, "Who lived longer, Ada Quill or Bo Renn?") == "Bo Renn"
    assert _chosen(texts, "Which director died younger, Ada Quill or Bo Renn?") == "Ada Quill"
    # A count spelled out before the counted thing; the smaller one for "fewer".
    assert _chosen(texts, "Who made more feature films, Ada Quill or Bo Renn?") == "Bo Renn"
    assert _chosen(texts, "Who made fewer feature films, Ada Quill or Bo Renn?") == "Ada Quill"
    # A count after the thing ("The population was 3,001"); a year beside it is no count.
    towns = {
        "Minby": "Minby is a town in Nevada. The population was 3,001 at the 2010 census.",
        "Garby": "Garby is a town in Nevada with a 2010 census population of 5,656.",
    }
    assert _chosen(towns, "Which town has a greater population as of the 2010 census, Minby or Garby?") == "Garby"
    # A passage that states no count, or no (born – died) dates, decides nothing: the run abstains.
    texts["Bo Renn"] = "Bo Renn (born April 12, 1908) is an Italian director of feature films."
    assert _chosen(texts, "Who lived longer, Ada Quill or Bo Renn?") is None
    assert _chosen(texts, "Who made more feature films, Ada Quill or Bo Renn?") is None


def test_a_supporting_sentence_needs_a_share_of_the_best_score():
    topic = "How does the write-ahead log let readers and writers work at once?"
    state = ResearchState("r", topic, RunOptions())
    wal = Source("S1", "file:///wal.md", "WAL", "", topic, 0)
    wal.sentences = [Sentence("A checkpoint copies pages back to the database file.", 0.8, 0.8)]
    vec = Source("S2", "file:///vec.md", "sqlite-vec", "", topic, 0)
    vec.sentences = [Sentence("A vec0 table keeps vectors beside other columns.", 0.3, 0.3)]
    state.sources = [wal, vec]
    passages = ["S1", "S2"]
    floor = ANSWER_SHARE_OF_BEST * top_sentence_score(state, passages)
    assert top_sentence_score(state, passages) == 0.8  # no key word of the question in either sentence
    assert [sid for _, sid in best_sentences(state, passages, 3, floor)] == ["S1"]
    assert [sid for _, sid in best_sentences(state, passages, 3)] == ["S1", "S2"]  # no floor: the old rule
    # The best sentence always clears the floor, so the Answer is never empty when evidence exists.
    assert best_sentences(state, passages, 3, top_sentence_score(state, passages)) == [(wal.sentences[0].text, "S1")]


@pytest.mark.slow
def test_the_readme_question_answers_from_the_wal_passage_only(home, real_embedder):
    corpus = Path(__file__).resolve().parents[1] / "docs" / "corpus"
    runner = CliRunner()
    assert runner.invoke(app, ["--home", str(home), "corpus", "add", str(corpus)]).exit_code == 0
    question = "How does SQLite WAL mode let readers and writers work at the same time?"
    result = runner.invoke(app, ["--home", str(home), "research", question, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    answer = _answer_section(data["report"])
    urls = {s["n"]: s["url"] for s in data["sources"]}
    cited = {urls[int(n)] for n in re.findall(r"\[(\d+)\]", answer)}
    assert cited == {f"file://{corpus / 'sqlite-wal.md'}"}, answer
    assert "readers do not block writers" in answer and "sqlite-vec" not in answer


def test_an_either_or_question_about_a_property_picks_the_option_whose_passage_states_more_of_it():
    texts = {
        "Mark Kingsley": "Mark Kingsley (born 1958) is an English musician and singer of Level 43.",
        "Nick Hexley": "Nick Hexley (born 1970) is an American singer-songwriter with a mezzo-soprano vocal range.",
        "Nick Hexley: The Biography": "Nick Hexley: The Biography is a book about a singer.",
    }

    def chosen(question: str) -> str | None:
        return _chosen(texts, question)

    # Its own passage (by title, not the book about it) states "American" as well as "singer".
    assert chosen("Which singer is American, Mark Kingsley or Nick Hexley?") == "Nick Hexley"
    # Hyphenated words count by their parts: "singer-songwriter" states "songwriter".
    assert chosen("Which songwriter has a mezzo-soprano range, Mark Kingsley or Nick Hexley?") == "Nick Hexley"
    # Each passage states an asked word the other does not: undecided, the run abstains.
    assert chosen("Which English songwriter is it, Mark Kingsley or Nick Hexley?") is None
    # A ranking no passage states is not decided by who states more words.
    assert chosen("Which singer is more famous, Mark Kingsley or Nick Hexley?") is None
    assert chosen("Which singer has the greater range, Mark Kingsley or Nick Hexley?") is None
    assert chosen("Which is the larger American singer, Mark Kingsley or Nick Hexley?") is None
    assert chosen("Which singer sings faster, Mark Kingsley or Nick Hexley?") is None
    # "More than 300" is a property, not a ranking.
    texts["Mark Kingsley"] += " He has written more than 300 songs."
    assert chosen("Who has written more than 300 songs, Mark Kingsley or Nick Hexley?") == "Mark Kingsley"


def test_a_stem_states_a_longer_word_it_starts_only_from_five_letters():
    from deepresearch.research.answer import _states_stem

    assert _states_stem("japan", {"japane"})  # Japan / Japanese
    assert not _states_stem("rock", {"rocket"}) and not _states_stem("film", {"filmog"})
