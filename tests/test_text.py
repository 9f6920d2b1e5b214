"""Sentence splitting and tokenization used by extraction, summaries and chunking."""

from hypothesis import given
from hypothesis import strategies as st

from deepresearch.text import content_words, numbers, split_sentences, truncate, words


def test_split_keeps_abbreviations_and_handles_cjk():
    text = "NVIDIA shipped 3.7 million GPUs in 2023, e.g. the H100. Revenue rose 40%! 英伟达的销量增长。市场份额很高！"
    assert split_sentences(text) == [
        "NVIDIA shipped 3.7 million GPUs in 2023, e.g. the H100.",
        "Revenue rose 40%!",
        "英伟达的销量增长。",
        "市场份额很高!",
    ]


def test_words_ending_like_abbreviations_still_end_sentences():
    text = "He came first. Then he left. She is a pianist. He moved West. Dr. Smith met Mr. Jones at St. Mary's."
    assert split_sentences(text) == [
        "He came first.",
        "Then he left.",
        "She is a pianist.",
        "He moved West.",
        "Dr. Smith met Mr. Jones at St. Mary's.",
    ]


def test_words_cjk_bigrams_and_numbers():
    assert words("AI芯片销量 grew") == ["ai", "芯片", "片销", "销量", "grew"]
    assert content_words("the cat is on the mat") == ["cat", "mat"]
    assert numbers("3,700 units, 40% and 1.5") == {"3700", "40%", "1.5"}


def test_truncate():
    assert truncate("short", 10) == "short"
    out = truncate("one two three four five six seven", 15)
    assert len(out) <= 15 and out.endswith("…")


@given(st.text())
def test_split_never_loses_words(text):
    joined = " ".join(split_sentences(text))
    assert sorted(words(joined)) == sorted(words(text))


def test_an_initial_inside_a_name_does_not_end_a_sentence():
    text = (
        "Novels by J. K. Rowling sold well. He was the brother of Albert E. Smith. SQLite is written in C. "
        "Davina McCall presented it. It was during World War I. The war ended. Take vitamin D. Then rest."
    )
    assert split_sentences(text) == [
        "Novels by J. K. Rowling sold well.",
        "He was the brother of Albert E. Smith.",
        "SQLite is written in C.",
        "Davina McCall presented it.",
        "It was during World War I.",
        "The war ended.",
        "Take vitamin D.",
        "Then rest.",
    ]
