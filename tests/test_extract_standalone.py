"""The learned stands-alone check (models/standalone.py): its features, its fit, the shipped weights
with the real embedding model, and extraction using it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deepresearch.models import standalone
from deepresearch.models.extract import extract_facts
from deepresearch.models.standalone import (
    FEATURE_NAMES,
    StandaloneCheck,
    cheap_features,
    fit_logistic,
    grammar_stands_alone,
)

# Real sentences: a SciFact abstract (PubMed, "Mouse ovarian surface epithelial cells …"), Wikipedia
# (CC BY-SA) and the SQLite documentation (public domain).
LAB_PASSAGE = (
    "Mouse ovarian surface epithelial cells (MOSEC) were obtained from virgin, mature mice by mild "
    "trypsinization and were repeatedly passaged in vitro. Early passage cells (<20 passages) exhibited a "
    "cobblestone morphology and contact inhibition of growth. Ten clonal lines were established from late "
    "passage MOSEC."
)


def _features(sentence: str, passage: str, title: str) -> dict[str, float]:
    return dict(zip(FEATURE_NAMES, cheap_features(sentence, passage, title), strict=False))


def test_features_see_how_a_sentence_opens_and_whether_its_subject_is_named():
    title = "Akinoshū Kenji"
    passage = "Akinoshū Kenji is a former sumo wrestler from Hiroshima, Japan. He made his debut in 1984."
    named = _features("Akinoshū Kenji is a former sumo wrestler from Hiroshima, Japan.", passage, title)
    pronoun = _features("He made his debut in 1984.", passage, title)
    assert named["name_open"] == 1.0 and named["title_open"] == 1.0 and named["title_share"] == 1.0
    assert named["first_sentence"] == 1.0 and named["position"] == 0.0
    assert pronoun["pronoun_open"] == 1.0 and pronoun["title_share"] == 0.0 and pronoun["position"] > 0.5
    study = _features("Ten clonal lines were established from late passage MOSEC.", LAB_PASSAGE, "Ovarian cancer")
    assert study["subject_named"] == 0.0 and study["digits"] == 0.0 and study["study_words"] == 0.0
    assert named["subject_named"] == 1.0  # "Kenji" after the first word
    common = _features("The bomb was targeted at the city of Hiroshima.", passage, "Enola Gay")
    assert common["the_common_open"] == 1.0 and common["connector_open"] == 0.0


def test_logistic_fit_separates_what_it_can():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = [int(row[0] + 0.5 * row[1] > 0) for row in x]
    weights, bias = fit_logistic(x, y, c=10.0)
    predicted = [int(v > 0) for v in x @ weights + bias]
    assert sum(p == t for p, t in zip(predicted, y, strict=True)) >= 190
    assert weights[0] > weights[1] > abs(weights[2])


def test_shipped_weights_are_for_the_default_model_and_every_labeled_split_but_the_fresh_ones(real_embedder):
    data = json.loads(standalone.WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert data["features"] == list(FEATURE_NAMES)
    # the blind splits, each joined once read: blind13 … blind16 after blind16's read (session 36), blind17 … blind22
    # in session 38
    assert {f"blind{i}" for i in range(2, 23)} <= set(data["trained_on"])
    assert not {f"blind{i}" for i in range(23, 27)} & set(data["trained_on"])  # session 38's fresh splits
    assert data["model_id"] == real_embedder.model_id
    assert len(data["weights"]) == real_embedder.dimension + len(FEATURE_NAMES)
    assert data["threshold"] == 0.8  # session 37's, chosen on blind17 … blind19 (build_standalone_weights.THRESHOLD)


def test_the_shipped_check_drops_a_lab_step_and_keeps_a_named_claim(real_embedder):
    check = StandaloneCheck(real_embedder, standalone.shipped_model())
    steps = [
        "Early passage cells (<20 passages) exhibited a cobblestone morphology and contact inhibition of growth.",
        "Ten clonal lines were established from late passage MOSEC.",
    ]
    named = "The Prestige is a 2006 British-American mystery thriller film directed by Christopher Nolan."
    assert check.keep(steps, LAB_PASSAGE, "Mouse ovarian surface epithelial cells as a model for ovarian cancer") == []
    assert check.keep([named], named, "The Prestige (film)") == [named]
    p_steps = check.probabilities(steps, LAB_PASSAGE, "Mouse ovarian cancer model")
    assert max(p_steps) < check.model.threshold < check.probabilities([named], named, "The Prestige (film)")[0]


def test_the_check_is_off_for_another_embedding_model(real_embedder):
    model = standalone.shipped_model()
    assert model is not None

    class Other:
        model_id = "another-model"
        dimension = real_embedder.dimension

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            raise AssertionError("an unusable check embeds nothing")

    check = StandaloneCheck(Other(), model)  # type: ignore[arg-type]
    assert check.model is None
    assert check.keep(["He left in 1998."], "He left in 1998.", "") == ["He left in 1998."]


@pytest.mark.parametrize("with_check", [True, False])
def test_extraction_applies_the_check_after_the_rules(real_embedder, with_check):
    from deepresearch.models.categorize import LinearCategorizer, RuleCategorizer

    # The rules pass both lab steps (names and numbers, no pronoun); only the learned check drops them.
    categorizer = LinearCategorizer(real_embedder) if with_check else RuleCategorizer()
    result = extract_facts(LAB_PASSAGE, "https://scifact.example/1", categorizer=categorizer, title="MOSEC")
    stored = [f.fact for f in result.facts]
    lab_steps = [s for s in stored if s.startswith(("Early passage", "Ten clonal"))]
    assert (lab_steps == []) if with_check else (len(lab_steps) == 2), stored


def test_grammar_keeps_definitions_of_a_named_subject_only():
    assert grammar_stands_alone("FTS5 is the full-text search extension built into SQLite.")
    assert grammar_stands_alone(
        "Akinoshū Kenji (born 17 January 1969 as Kenji Imada) is a former sumo wrestler from Hiroshima, Japan."
    )
    # an indefinite subject is the check's to judge since session 38: half of those it dropped lean on their page
    assert not grammar_stands_alone("A checkpoint copies pages from the WAL back into the main database file.")
    assert not grammar_stands_alone("A value of 0 is equivalent to inputscale=72.")
    assert not grammar_stands_alone("Signmark won his qualifying round on January 23, 2009 with Speakerbox.")
    assert not grammar_stands_alone("The markka was replaced by the euro.")
    assert not grammar_stands_alone("Early passage cells exhibited a cobblestone morphology.")


def test_the_check_keeps_a_definition_under_a_file_name_title(real_embedder):
    # research over a local corpus: the title is a file name, which tells the model nothing
    check = StandaloneCheck(real_embedder, standalone.shipped_model())
    text = (
        "FTS5 is the full-text search extension built into SQLite. "
        "A checkpoint copies pages from the WAL back into the main database file."
    )
    sentences = ["FTS5 is the full-text search extension built into SQLite.",
                 "A checkpoint copies pages from the WAL back into the main database file."]  # fmt: skip
    # the definition by grammar; the indefinite subject is the check's to judge (session 38), and it is unsure
    assert check.keep(sentences, text, "notes.md") == sentences[:1]


def test_categories_reuse_the_vectors_the_check_computed(real_embedder):
    from deepresearch.models.categorize import LinearCategorizer

    categorizer = LinearCategorizer(real_embedder)
    categorizer._fit()
    embedded: list[str] = []
    original = real_embedder.embed_batch

    def counted(texts, *args, **kwargs):
        embedded.extend(texts)
        return original(texts, *args, **kwargs)

    real_embedder.embed_batch = counted
    try:
        passage = (
            "Akinoshū Kenji is a former sumo wrestler from Hiroshima, Japan. Akinoshū Kenji made his professional "
            "debut in March 1984 and reached the top division in 1988."
        )
        facts = extract_facts(
            passage, "file:///akinoshu", topic="Akinoshū Kenji", title="Akinoshū Kenji", categorizer=categorizer
        )
    finally:
        real_embedder.embed_batch = original
    stored = [f.fact for f in facts.facts]
    assert stored and all(embedded.count(fact) == 1 for fact in stored), embedded
