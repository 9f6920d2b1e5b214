"""Updates and contradictions the KB catches on write (issue 16), through the CLI with real MiniLM."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.facts import Fact
from deepresearch.kb.merge import relation, value_change


def _kb(home, *args: str):
    result = CliRunner().invoke(app, ["--home", str(home), "kb", *args])
    assert result.exit_code == 0, result.output
    return result


def _add(home, text: str, source: str, *extra: str) -> dict:
    return json.loads(_kb(home, "add", text, "--source", source, "--category", "historical", "--json", *extra).stdout)


def _active(home, query: str) -> list[dict]:
    return json.loads(_kb(home, "query", query, "--json").stdout)["hits"]


def test_the_cat_update_supersedes_and_keeps_the_old_detail(home, real_embedder):
    first = _add(home, "My cat Momo is 2 years old and very clingy.", "https://e.com/a")["added"][0]
    _add(home, "My cat Momo is 3 years old.", "https://e.com/b")
    hits = _active(home, "how old is Momo the cat")
    assert len(hits) == 1
    assert "3 years" in hits[0]["fact"] and "clingy" in hits[0]["fact"]
    assert sorted(hits[0]["sources"]) == ["https://e.com/a", "https://e.com/b"]
    history = json.loads(_kb(home, "history", first, "--json").stdout)
    supersede = [e for e in history if e["event"] == "supersede"]
    assert supersede and supersede[0]["old_text"] == "My cat Momo is 2 years old and very clingy."
    assert supersede[0]["new_text"] == hits[0]["fact"]
    assert "2 years" in _kb(home, "history", first).stdout and "→" in _kb(home, "history", first).stdout


def test_the_eiffel_tower_update_is_linked(home, real_embedder):
    first = _add(home, "The Eiffel Tower is 330 metres tall.", "https://e.com/c")["added"][0]
    _add(home, "The Eiffel Tower is 324 metres tall.", "https://e.com/d")
    conflicts = json.loads(_kb(home, "conflicts", "--json").stdout)
    status = json.loads(_kb(home, "history", first, "--json").stdout)[-1]["event"]
    assert status == "supersede" or any(first in (c["fact_id"], c["other_id"]) for c in conflicts)
    assert [h["fact"] for h in _active(home, "Eiffel Tower height")] == ["The Eiffel Tower is 324 metres tall."]


def test_different_subjects_with_different_numbers_stay_apart(home, real_embedder):
    _add(home, "Mount Everest is 8849 metres tall.", "https://e.com/e")
    _add(home, "Mont Blanc is 4808 metres tall.", "https://e.com/f")
    hits = _active(home, "how tall is the mountain")
    assert {h["fact"] for h in hits} == {"Mount Everest is 8849 metres tall.", "Mont Blanc is 4808 metres tall."}
    assert all(h["conflicts_with"] == [] for h in hits)
    assert json.loads(_kb(home, "conflicts", "--json").stdout) == []


def test_a_contradiction_stays_active_and_recall_says_so(home, real_embedder):
    # the newer source is less confident: no basis to prefer it, so both stay and are flagged
    old = _add(home, "The Eiffel Tower is 330 metres tall.", "https://e.com/g", "--confidence", "0.9")["added"][0]
    new = _add(home, "The Eiffel Tower is 324 metres tall.", "https://e.com/h", "--confidence", "0.6")
    assert new["flagged"] and new["flagged"][0]["other_id"] == old
    hits = {h["id"]: h for h in _active(home, "Eiffel Tower height")}
    assert hits[old]["conflicts_with"] == new["added"]
    assert hits[new["added"][0]]["conflicts_with"] == [old]
    table = _kb(home, "query", "Eiffel Tower height").stdout
    assert table.count("! The Eiffel Tower") == 2 and "contradicts" in table


@pytest.mark.parametrize(
    ("older", "newer", "expected"),
    [
        ("The Eiffel Tower is 330 metres tall.", "The Eiffel Tower is 324 metres tall.", "330 → 324"),
        (
            "Raymond James Stadium in Tampa, Florida hosted the game.",
            "Raymond James Stadium in Glendale, Arizona hosted the game.",
            "Tampa, Florida → Glendale, Arizona",
        ),
        ("Mount Everest is 8849 metres tall.", "Mont Blanc is 4808 metres tall.", None),  # two values: another subject
        ("Dogs are loyal and friendly animals.", "Cats are loyal and friendly animals.", None),  # first word: no name
        ("A man is playing a guitar on the stage.", "A man is playing a flute on the stage.", None),  # not a value
        (
            "Syria urges an end to the violence in Homs.",
            "Syrian urges an end to the violence in Homs.",
            None,
        ),  # spelling
        ("Stocks close 0.39% higher", "Stocks close 2.47% higher", None),  # too little shared to be one subject
        # another number AND another word: the victims changed too, not only their count
        (
            "A roadside bomb killed 10 Afghan soldiers on the highway.",
            "A roadside bomb killed 4 Afghan police on the highway.",
            None,
        ),
        (
            "Storms destroyed 12 homes in the village of Eastwick.",
            "Storms destroyed 3 barns in the village of Eastwick.",
            None,
        ),
        (  # a word only one side has, inside the aligned frame: not a separable detail
            "The city museum in Oslo has 12 exhibition rooms and a large garden.",
            "The city museum in Oslo has 14 small exhibition rooms.",
            None,
        ),
        (  # a detail only the old side has, set off by a comma: kept by the merge, not a change
            "The city museum in Oslo has 12 exhibition rooms, a cafe and a large garden.",
            "The city museum in Oslo has 14 exhibition rooms.",
            "12 → 14",
        ),
        (  # the same value written another way is no change
            "The bridge cost $40 million to build over the river.",
            "The bridge cost 40 million dollars to build over the river.",
            None,
        ),
        (  # a first word is a name when the text capitalizes it again; possessives are the same value
            "Netflix bought the studio in 2019, and Netflix's shares rose sharply that week.",
            "Amazon bought the studio in 2019, and Amazon's shares rose sharply that week.",
            "Netflix → Amazon",
        ),
        (
            "Lions are the largest cats living in the African savanna.",
            "Tigers are the largest cats living in the African savanna.",
            None,
        ),
        (
            "The festival opens on Jan 14, 2021 in the old town of Bruges.",
            "The festival opens on May 14, 2021 in the old town of Bruges.",
            "Jan → May",
        ),
    ],
)
def test_value_change(older, newer, expected):
    assert value_change(older, newer) == expected


def test_a_changed_date_is_another_date_for_the_same_event():
    text = "The game Xenoblade Chronicles 2 was released on {} for the Nintendo Switch."
    older = Fact(text.format("December 1, 2017"), "s:", verified_at=1)
    newer = Fact(text.format("May 29, 2020"), "s:", verified_at=2)
    assert relation(older, newer)[0] == "update"
    # a year that moves together with another value is a claim about another time
    assert relation(
        Fact("In 2022 the company earned 5 billion dollars in revenue.", "s:", verified_at=1),
        Fact("In 2023 the company earned 7 billion dollars in revenue.", "s:", verified_at=2),
    ) == ("distinct", "different years: claims about different times")


def test_compress_applies_the_same_classification(home, real_embedder):
    """Facts stored without merging: `kb compress` finds the update, the contradiction and the distinct pair."""
    from deepresearch.kb.store import KnowledgeBase
    from deepresearch.workspace import Workspace

    ws = Workspace.open(home)
    kb = KnowledgeBase.from_workspace(ws)
    start = time.time() - 7200  # recent: recall's default freshness window must still show them

    def add(text: str, hours: int, confidence: float = 0.7) -> str:
        fact = Fact(text, f"https://e.com/{len(text)}-{hours}", category="historical", confidence=confidence)
        return kb.add_facts([fact], now=start + hours * 3600, merge=False).added[0]

    cat_old, cat_new = add("My cat Momo is 2 years old and very clingy.", 0), add("My cat Momo is 3 years old.", 1)
    tower_old = add("The Eiffel Tower is 330 metres tall.", 0, 0.9)
    tower_new = add("The Eiffel Tower is 324 metres tall.", 1, 0.6)  # newer but less confident: no basis to prefer
    apart = [add("Mount Everest is 8849 metres tall.", 0), add("Mont Blanc is 4808 metres tall.", 1)]
    ws.close()
    done = json.loads(_kb(home, "compress", "--no-model", "--json").stdout)
    [merge] = done["merges"]
    assert merge["kind"] == "update" and sorted(merge["old_ids"]) == sorted([cat_old, cat_new])
    assert "3 years" in merge["new_text"] and "clingy" in merge["new_text"] and "2 years" not in merge["new_text"]
    assert [sorted(f[:2]) for f in done["flagged"]] == [sorted([tower_old, tower_new])]
    conflicts = json.loads(_kb(home, "conflicts", "--json").stdout)
    assert {frozenset((c["fact_id"], c["other_id"])) for c in conflicts} == {frozenset((tower_old, tower_new))}
    statuses = {h["id"]: h["conflicts_with"] for h in _active(home, "how tall is the mountain")}
    assert all(statuses.get(i) == [] for i in apart), statuses
