"""Pure helpers of the research steps: citation parsing, grounding, query hygiene, wording, routing."""

from __future__ import annotations

from deepresearch.kb.lifecycle import age_tag
from deepresearch.research import prompts
from deepresearch.research.loop import route
from deepresearch.research.state import Known, ResearchState, RunOptions
from deepresearch.research.steps import clean_queries, grounded_rewrite, missing_words, parse_cited

EVIDENCE = {
    "S1": "SQLite WAL mode lets readers continue while a writer appends to the write-ahead log.",
    "S2": "A checkpoint copies pages from the WAL back into the main database file.",
}


def test_parse_cited_moves_trailing_citations_and_counts_unknown_ids():
    text = "Readers continue while a writer appends. [S1] [S2] Checkpoints copy pages [S9]. Answer: more [x]."
    sentences, invalid = parse_cited(text, set(EVIDENCE))
    assert sentences == [
        ("Readers continue while a writer appends.", ["S1", "S2"]),
        ("Checkpoints copy pages.", []),
        ("more.", []),
    ]
    assert invalid == 2


def test_grounded_rewrite_accepts_only_complete_supported_cited_sentences():
    good = "In WAL mode readers continue while a writer appends to the log [S1]. A checkpoint copies pages back [S2]."  # noqa: E501
    assert grounded_rewrite(good, EVIDENCE) == [
        ("In WAL mode readers continue while a writer appends to the log.", ["S1"]),
        ("A checkpoint copies pages back.", ["S2"]),
    ]
    assert grounded_rewrite("Readers continue while a writer appends [S3].", EVIDENCE) is None  # unknown id
    assert grounded_rewrite("Readers continue while a writer appends.", EVIDENCE) is None  # no citation
    assert grounded_rewrite("Penguins manage the database file [S2].", EVIDENCE) is None  # not in the evidence
    assert grounded_rewrite("A checkpoint copies pages from the [S2]", EVIDENCE) is None  # cut by max_tokens
    assert grounded_rewrite(None, EVIDENCE) is None


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
    assert missing_words("When does SQLite copy WAL pages?", "A checkpoint copies the pages of the WAL in SQLite") == []
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


def test_route_sends_a_spent_budget_to_the_report():
    state = ResearchState("r", "t", RunOptions(), pending=["q"])
    assert route(state, "plan", over_budget=False) == "search"
    assert route(state, "plan", over_budget=True) == "report" and state.stop_reason == "budget"
    state.stop_reason = None
    assert route(state, "reflect", over_budget=False) == "search"
    state.pending = []
    assert route(state, "plan", over_budget=False) == "reflect"
    assert route(state, "report", over_budget=False) == "done"


def test_bridge_queries_follow_names_the_findings_add():
    from deepresearch.research.state import Summary
    from deepresearch.research.steps import bridge_queries

    state = ResearchState("r", "Who directed the film that was shot in or around Leland, North Carolina?", RunOptions())
    state.summaries = [
        Summary(
            "q",
            0,
            [
                ("Parts of the film Blue Velvet were shot in Leland, North Carolina.", ["S1"]),
                ("Leland is a town in Brunswick County.", ["S1"]),
            ],
            "extractive",
        )
    ]
    assert bridge_queries(state, 3) == ["Blue Velvet directed", "Brunswick County directed"]
    state.queries_done = ["Blue Velvet directed"]
    assert bridge_queries(state, 3) == ["Brunswick County directed"]


def test_answer_labels_are_stripped_and_embellished_sentences_rejected():
    from deepresearch.research.steps import parse_cited, supported

    evidence = {
        "S1": "FTS5 ranks matches with the BM25 algorithm through its built-in bm25() function. "
        "Lower bm25 values mean better matches."
    }
    text = (
        "S1: FTS5 ranks matches with the BM25 algorithm through its built-in bm25() function, "
        "which is a key component of the FTS5 algorithm. [S1] Lower bm25 values mean better matches. [S1]"
    )
    sentences, invalid = parse_cited(text, set(evidence))
    assert invalid == 0 and not sentences[0][0].startswith("S1")
    assert [supported(s, ids, evidence) for s, ids in sentences] == [False, True]
