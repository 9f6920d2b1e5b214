"""Pure helpers of the research steps: query hygiene, wording, routing, answer typing, bridges."""

from __future__ import annotations

from deepresearch.kb.lifecycle import age_tag
from deepresearch.research import prompts
from deepresearch.research.answer import asking_sentence, choice_options, question_type
from deepresearch.research.queries import clean_queries, missing_words, names_in
from deepresearch.research.reader import asked_shape
from deepresearch.research.router import route
from deepresearch.research.state import Known, ResearchState, RunOptions, Sentence, Source


def test_clean_queries_drops_repeats_junk_and_ungrounded():
    raw = [
        "SQLite WAL checkpoint",
        "sqlite  wal CHECKPOINT",
        "query 1",
        42,
        "SELECTRY_CALLBACK_SALES",
        "wal readers",
        "x" * 200,
        "penguin migration routes wal",
    ]
    assert clean_queries(raw, ["wal readers"], 5, "How do SQLite WAL checkpoints work?") == ["SQLite WAL checkpoint"]


def test_missing_words_matches_word_forms():
    assert (
        missing_words(
            "When do SQLite checkpoints copy WAL pages?", "A checkpoint copy moves the page of the WAL in SQLite"
        )
        == []
    )
    assert missing_words("How do FTS5 trigram tokenizers work?", "FTS5 ranks with BM25") == [
        "trigram",
        "tokenizers",
    ]


def test_known_facts_wording_per_lifecycle_mode():
    known = [Known("1", "GGUF replaced GGML in August 2023.", ["file:///docs/gguf.md"], "historical", 0.7, 40.0)]
    text, note = prompts.render_known(known, "off", age_tag)
    assert text == "- [K1] GGUF replaced GGML in August 2023. (historical, confidence 0.70, source gguf.md)"
    assert note == "Do not search these again."
    text, note = prompts.render_known(known, "lifecycle", age_tag)
    assert "verified 1 month ago" in text and note.startswith("Older facts may be outdated")
    assert prompts.render_known([], "inform", age_tag) == ("(nothing yet)", "")


def test_route_sends_a_spent_budget_to_the_answer_without_touching_the_state():
    state = ResearchState("r", "t", RunOptions(), pending=["q"])
    assert route(state, "plan", over_budget=False) == ("search", None)
    assert route(state, "plan", over_budget=True) == ("answer", "budget")
    assert state.stop_reason is None  # the router decides, the loop records
    assert route(state, "search", over_budget=False) == ("rank", None)
    assert route(state, "reflect", over_budget=False) == ("search", None)
    state.stop_reason = "sufficient"
    assert route(state, "reflect", over_budget=True) == ("answer", None)
    assert route(state, "answer", over_budget=True) == ("report", None)
    state.pending = []
    assert route(state, "plan", over_budget=False) == ("reflect", None)
    assert route(state, "report", over_budget=False) == ("done", None)


def test_question_types_follow_the_question_word():
    assert question_type("Who directed the film shot in Leland?") == "person"
    assert question_type("When was the band formed?") == "date"
    assert question_type("In what year did the war end?") == "date"
    assert question_type("How many Publix stores are in Georgia?") == "number"
    assert question_type("Where was the author born?") == "place"
    assert question_type("How does SQLite WAL mode let readers and writers work at the same time?") == "explain"
    assert question_type("Are Christopher Nolan and Sathish Kalathil both film directors?") == "yesno"
    assert question_type("Which band was formed first, Killing Heidi or Suede?") == "choice"


def test_the_sentence_that_asks_types_the_question():
    # a statement first, then the question: its own first word says what is asked
    assert question_type("The director Jane Roe has a knighthood. Does the director John Doe also have one?") == "yesno"
    assert question_type("The river Foo was dammed in 1950. Who designed the dam?") == "person"
    # an initial or a title ends no sentence, even before a word that could open a question
    assert asking_sentence("In what county is the town where John Q. Public was born?").startswith("In what county")
    assert question_type("Where did Mr. Will Roe go to college?") == "place"
    assert question_type("Where was J. Will Roe born?") == "place"
    assert asked_shape("How many episodes of Dr. Who were made?") == "number"
    assert asked_shape("The river Foo was dammed in 1950. Who designed the dam?") == "person"
    # a title that opens with an auxiliary, asking for a year
    assert question_type("Do Re Mi, a remake of an older film, was released in which year?") == "date"
    assert question_type("Is the resort, which year-round hosts skiers, in Utah?") == "yesno"
    # … or with "how": a book's title, not a how-question
    assert question_type("How to Cook, a book by a chef, was released in which year?") == "date"
    assert question_type("How was the bridge built in the year the city was founded?") == "explain"
    assert choice_options("Which band was formed first, Killing Heidi or Suede?") == ["Killing Heidi", "Suede"]
    assert question_type("Which FC Barcelona signee was a contender for Rookie of the Year?") == "entity"


def test_either_or_questions_are_found_without_a_comma_and_after_between():
    assert choice_options("Which band was formed first The Exies or Circus Diablo ?") == ["The Exies", "Circus Diablo"]
    assert choice_options("Which came first the forming of The Dandy Warhols or the birth of Robert Young?") == [
        "The Dandy Warhols",
        "Robert Young",
    ]
    assert choice_options("Who is older Sid Haig or Vic Darchinyan?") == ["Sid Haig", "Vic Darchinyan"]
    assert choice_options("Between Iain Banks and Irwin Shaw, which writer had a more diverse career?") == [
        "Iain Banks",
        "Irwin Shaw",
    ]
    # No comparison, or no name on a side: not an either-or question.
    assert choice_options("Who was the first president of Germany or Austria?") == []
    assert choice_options("Who was the first President of the United States or the Confederacy?") == []
    assert choice_options("Which was the first Beatles album released in the US or UK?") == []
    assert choice_options("Between 1990 and 2000, who was the president of the USA?") == []
    assert choice_options("Between the World Wars and the Cold War, who led France?") == []
    assert choice_options("Between Simon and Garfunkel and the Beatles, which act formed first?") == []  # which "and"?
    assert choice_options("Who directed the film that was shot in or around Leland, North Carolina in 1986") == []
    assert choice_options("What team won 2 or 3 titles first?") == []
    assert choice_options("Who wrote 1984 or Animal Farm first?") == []


def test_either_or_options_lose_their_quotes_and_are_found_mid_question_and_after_lead_words():
    assert choice_options('Which movie came out first, "Bambi" or "Underdog"?') == ["Bambi", "Underdog"]
    assert choice_options("Which album came first, “Talk That Talk” or “Loud”?") == ["Talk That Talk", "Loud"]
    assert choice_options("Which breed, Chinese Chongqing Dog or Kanni, is used for hunting?") == [
        "Chinese Chongqing Dog",
        "Kanni",
    ]
    assert choice_options("Between two bands Audioslave and Bodyjar, which group formed earlier?") == [
        "Audioslave",
        "Bodyjar",
    ]
    assert choice_options("In between Alma College and Bruno Institute which was founded first?") == [
        "Alma College",
        "Bruno Institute",
    ]
    # A side that does not open on a name is no option.
    assert choice_options("Which actor, born in 1950 or 1951, starred in Alien?") == []


def test_a_yes_no_opening_whose_subject_is_one_of_two_names_is_an_either_or_question():
    assert choice_options("Did Qionghai or Suining have a population of 658,798 in 2002?") == ["Qionghai", "Suining"]
    assert choice_options("Is the Marsilea or the Brabejum the genus of more species?") == ["Marsilea", "Brabejum"]
    assert choice_options("Does the genus Cunninghamia or Chilopsis contain only one species?") == [
        "Cunninghamia",
        "Chilopsis",
    ]
    assert question_type("Was the Bank of England or the Fed founded first?") == "choice"
    # The names are not the subject, or one side is no name: a yes/no question.
    assert question_type("Can a WAL database be read over NFS or SMB?") == "yesno"
    assert question_type("Does SQLite use WAL or rollback journals by default?") == "yesno"
    assert question_type("Did John Smith or his brother found Acme?") == "yesno"
    assert question_type("Was the album released in 1990 or 1991?") == "yesno"
    # Quoted names, and a capitalized "The" that is part of one.
    assert choice_options('Is "Bambi" or "Underdog" older?') == ["Bambi", "Underdog"]
    assert choice_options("Did The Exies or The Strokes form first?") == ["The Exies", "The Strokes"]


def test_between_options_keep_their_inner_small_words_and_years_are_no_options():
    assert choice_options("Between Gone with the Wind and Casablanca, which was released first?") == [
        "Gone with the Wind",
        "Casablanca",
    ]
    assert choice_options("Between 1990 and 2000, which team won more titles?") == []
    # "between" deep inside a question is no either-or opening.
    assert choice_options("How many more games were played between 1990 and 2000 which Arsenal won?") == []


def test_names_keep_inner_small_words_but_not_sentence_starts_or_and():
    assert names_in("The journal is published by the Society for the Exploration of Psychotherapy Integration.") == [
        "Society for the Exploration of Psychotherapy Integration"
    ]
    assert names_in("Alma Reyes and Bruno Tal are painters. He was born in Leland.") == [
        "Alma Reyes",
        "Bruno Tal",
        "Leland",
    ]


def test_bridges_follow_names_the_question_does_not_mention():
    from deepresearch.research.steps import bridges

    topic = "Who directed the film that was shot in or around Leland, North Carolina?"
    state = ResearchState("r", topic, RunOptions())
    text = "Parts of the film Blue Velvet were shot in Leland, North Carolina. Leland is a town in Brunswick County."
    source = Source("S1", "file:///leland.md", "Leland, North Carolina", text, topic, 0)
    source.sentences = [
        Sentence("Parts of the film Blue Velvet were shot in Leland, North Carolina.", 0.8, 0.8),
        Sentence("Leland is a town in Brunswick County.", 0.4, 0.4),
    ]
    state.sources, state.retrievals = [source], [["S1", topic, 1]]
    found = bridges(state, 3)
    assert [b.query() for b in found] == ["Blue Velvet directed", "Brunswick County directed"]
