"""Issue 13 (2): `kb import` validates every record fully; a bad line is reported by number and
the rest are kept; records that would break `kb check` are rejected — through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from deepresearch.cli.main import app
from tests.fakes import FakeEmbedder

runner = CliRunner()
GOOD = {"fact": "The plant in Dresden shipped 40 units in 2024.", "source_url": "https://e.org/a"}


@pytest.fixture
def fake(use_embedder) -> FakeEmbedder:  # type: ignore[no-untyped-def]
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def _import(home: Path, tmp_path: Path, lines: list[Any]) -> tuple[Any, dict[str, Any]]:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["--home", str(home), "kb", "import", str(path), "--json"])
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 1) and not isinstance(result.exception, (TypeError, ValueError, OverflowError))
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def _check(home: Path) -> None:
    result = runner.invoke(app, ["--home", str(home), "kb", "check"])
    assert result.exit_code == 0, result.output


def _reasons(data: dict[str, Any]) -> list[str]:
    return [r["reason"] for r in data["rejected"]]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"id": "X1", "fact": "A fact with a list category here.", "category": ["a"]}', "category"),
        ('{"id": "X2", "fact": "A fact created at infinity here.", "created_at": Infinity}', "created_at"),
        ('{"id": "X3", "fact": "A fact verified at NaN here too.", "verified_at": NaN}', "verified_at"),
        ('{"fact": "A fact from the year 9999 is bogus.", "created_at": "9999-01-01"}', "created_at"),
        ('{"fact": "A fact from the year 0001 is bogus.", "verified_at": "0001-01-01T00:00:00"}', "verified_at"),
        ('{"fact": "A fact that expires in 9999 is bogus.", "expires_at": "9999-12-31"}', "expires_at"),
        ('{"fact": "A fact with a wordy confidence.", "confidence": "high"}', "confidence"),
        ('{"fact": "A fact with too much confidence.", "confidence": 1.5}', "confidence"),
        ('{"fact": "A fact with a boolean confidence.", "confidence": true}', "confidence"),
        ('{"fact": "A fact with an odd status value.", "status": "zombie"}', "status"),
        ('{"fact": "A fact with sources as a mapping.", "sources": {"a": 1}}', "sources"),
        ('{"fact": "A fact with sources that are numbers.", "sources": [1, 2]}', "sources"),
        ('{"fact": "A fact with an object as its id.", "id": {"a": 1}}', "id"),
        ('{"fact": "A fact with a numeric source url.", "source_url": 5}', "source_url"),
        ('{"fact": "Superseded by a fact nobody has.", "status": "superseded", "superseded_by": "NOPE"}', "NOPE"),
        ('{"fact": "Superseded by no fact at all here.", "status": "superseded"}', "superseded_by"),
        ('{"fact": "Active but claims to be superseded.", "superseded_by": "X9"}', "superseded_by"),
    ],
)
def test_a_bad_record_is_reported_by_line_and_the_rest_kept(home, tmp_path, fake, bad: str, reason: str) -> None:
    """One bad value was a traceback that discarded every good line."""
    result, data = _import(home, tmp_path, [GOOD, bad, {**GOOD, "fact": "The Dresden plant opened in 2019."}])
    assert result.exit_code == 0 and len(data["added"]) == 2, result.output
    assert len(data["rejected"]) == 1 and data["rejected"][0]["reason"].startswith("line 2: ")
    assert reason in data["rejected"][0]["reason"]
    _check(home)


def test_same_id_twice_with_different_text_is_an_error_for_that_line(home, tmp_path, fake) -> None:
    """The second text was reported as "reconfirmed" and silently dropped."""
    first = {**GOOD, "id": "01DUP0000000000000000000000"}
    lines = [first, {**first, "fact": "A different claim under the same id."}, first]
    result, data = _import(home, tmp_path, lines)
    assert len(data["added"]) == 1 and _reasons(data) == [
        "line 2: id 01DUP0000000000000000000000 appears on line 1 with a different text"
    ]
    again, data = _import(home, tmp_path, [{**first, "fact": "Yet another claim under the same id."}])
    assert again.exit_code == 1 and "already holds a different text" in _reasons(data)[0]
    _check(home)


def test_superseded_record_whose_target_is_in_the_file_or_the_kb(home, tmp_path, fake) -> None:
    new = {**GOOD, "id": "01NEW0000000000000000000000", "fact": "The plant shipped 45 units in 2024."}
    old = {**GOOD, "id": "01OLD0000000000000000000000", "status": "superseded", "superseded_by": new["id"]}
    result, data = _import(home, tmp_path, [old, new])  # the target comes later in the same file
    assert result.exit_code == 0 and sorted(data["added"]) == [new["id"], old["id"]], result.output
    older = {**old, "id": "01OLDER00000000000000000000", "fact": "The plant shipped 30 units in 2024."}
    result, data = _import(home, tmp_path, [older])  # the target is already in the KB
    assert result.exit_code == 0 and data["added"] == [older["id"]]
    _check(home)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(st.text(max_size=5), kids, max_size=2),
    max_leaves=4,
)
_VALUES = {
    "id": st.sampled_from(["A1", "A2", "01ABC", ""]) | _JSON,
    "fact": st.sampled_from(["The plant shipped 40 units in 2024.", "Another plant closed in 2021."]) | _JSON,
    "source_url": st.just("https://e.org/x") | _JSON,
    "sources": st.just(["https://e.org/y"]) | _JSON,
    "category": st.sampled_from(["technology", "historical", "nonsense"]) | _JSON,
    "confidence": st.floats(0, 1) | _JSON,
    "created_at": st.sampled_from(["2024-05-01T00:00:00Z", 1.7e9, "9999-01-01"]) | _JSON,
    "verified_at": st.sampled_from(["2024-06-01", 1.71e9]) | _JSON,
    "expires_at": st.sampled_from([None, 1.9e9, "2030-01-01"]) | _JSON,
    "status": st.sampled_from(["active", "superseded", "expired"]) | _JSON,
    "superseded_by": st.sampled_from(["A1", "A2", None]) | _JSON,
}
_RECORD = st.fixed_dictionaries({"fact": _VALUES["fact"]}, optional={k: v for k, v in _VALUES.items() if k != "fact"})


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_RECORD | _JSON, min_size=1, max_size=4))
def test_fuzz_import_records_end_in_import_or_rejections_and_a_clean_check(tmp_path_factory, fake, records) -> None:
    """Issue 13 (fuzz): any records → success or per-line rejections (never a traceback); kb check stays clean."""
    tmp = tmp_path_factory.mktemp("imp")
    home = tmp / "ws"
    lines = [json.dumps(r, allow_nan=True) for r in records]
    result, data = _import(home, tmp, lines)
    if result.exit_code == 0 or data:
        assert len(data["added"]) + len(data["reconfirmed"]) + len(data["rejected"]) >= 1
    _check(home)


# --- issue 26: `kb import` restores (default) or links someone else's facts (--link) --------------

FESTIVAL = "The Lisbon harbour festival opens on March 3 with a parade of tall ships."
MOVED = "The Lisbon harbour festival opens on June 12 with a parade of tall ships."


def _kb(home: Path, *args: str) -> Any:
    result = runner.invoke(app, ["--home", str(home), "kb", *args])
    assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output
    return result


def _import_as(home: Path, tmp_path: Path, records: list[dict[str, Any]], *flags: str) -> dict[str, Any]:
    path = tmp_path / "theirs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return json.loads(_kb(home, "import", str(path), "--json", *flags).stdout)


def _stored(home: Path) -> str:
    return json.loads(_kb(home, "add", FESTIVAL, "--source", "https://mine.example/a", "--json").stdout)["added"][0]


THEIRS = {
    "id": "01THEIRS000000000000000000",
    "fact": MOVED,
    "source_url": "https://theirs.example/b",
    "verified_at": "2099-01-01T00:00:00Z",
    "created_at": "2099-01-01T00:00:00Z",
}


def test_import_restores_by_default_keeping_ids_and_linking_nothing(home: Path, tmp_path: Path, real_embedder) -> None:
    mine = _stored(home)
    data = _import_as(home, tmp_path, [THEIRS])
    assert data["added"] == [THEIRS["id"]] and data["merged"] == [] and data["flagged"] == []
    assert json.loads(_kb(home, "history", mine, "--json").stdout)[-1]["event"] == "add"  # untouched
    assert _import_as(home, tmp_path, [THEIRS], "--restore")["reconfirmed"] == [THEIRS["id"]]  # same id again
    _check(home)


def test_import_link_updates_through_the_write_rule(home: Path, tmp_path: Path, real_embedder) -> None:
    mine = _stored(home)
    gone = {
        **THEIRS,
        "id": "01THEIRSOLD0000000000000000",
        "fact": "The Lisbon harbour festival is free.",
        "status": "superseded",
        "superseded_by": THEIRS["id"],
    }
    data = _import_as(home, tmp_path, [gone, THEIRS], "--link")
    [merge] = data["merged"]
    assert merge["old_ids"] == [mine] and merge["kind"] == "update" and merge["new_text"] == MOVED
    assert data["added"] == [merge["new_id"]] and THEIRS["id"] not in data["added"]  # a new id: linked, not restored
    assert len(data["rejected"]) == 1 and "--link imports active facts only" in data["rejected"][0]["reason"]
    history = json.loads(_kb(home, "history", mine, "--json").stdout)
    assert history[-1]["event"] == "supersede" and history[-1]["new_text"] == MOVED
    _check(home)


def test_import_link_never_lets_an_older_fact_overwrite_a_newer_one(home: Path, tmp_path: Path, real_embedder) -> None:
    _stored(home)
    older = {**THEIRS, "verified_at": "2001-01-01T00:00:00Z", "created_at": "2001-01-01T00:00:00Z"}
    data = _import_as(home, tmp_path, [older], "--link")
    # verified before mine: my value stays, their source joins it
    [merge] = data["merged"]
    assert merge["new_text"] == FESTIVAL
    facts = json.loads(_kb(home, "query", "Lisbon harbour festival", "--json").stdout)["hits"]
    assert [h["fact"] for h in facts] == [FESTIVAL]
    assert sorted(facts[0]["sources"]) == ["https://mine.example/a", "https://theirs.example/b"]
    _check(home)


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        (  # a person's name in a chief executive fact
            "Maria Lindqvist is the chief executive of the Nordvik shipping company.",
            "Tomas Berg is the chief executive of the Nordvik shipping company.",
        ),
        (  # a title
            "Her best-known novel is The Blue Door, published by Penguin in the autumn.",
            "Her best-known novel is Night Train, published by Penguin in the autumn.",
        ),
        ("The old mill was built in 1900.", "The old mill was built in 1901."),  # a short fact, a year
        ("该片由詹姆斯·卡梅隆执导，于2009年上映。", "该片由斯蒂夫·康拉德执导，于2009年上映。"),  # a name, Chinese
        ("音乐节于2021年3月3日开幕。", "音乐节于2022年6月12日开幕。"),  # a full date in a short Chinese fact
        (  # a title in 《》
            "她最有名的小说是《蓝色的门》，由企鹅出版社在秋天出版。",
            "她最有名的小说是《夜行列车》，由企鹅出版社在秋天出版。",
        ),
    ],
)
def test_import_link_updates_each_kind_of_change(home: Path, tmp_path: Path, real_embedder, mine, theirs) -> None:
    old = json.loads(_kb(home, "add", mine, "--source", "https://mine.example/a", "--json").stdout)["added"][0]
    data = _import_as(home, tmp_path, [{**THEIRS, "fact": theirs}], "--link")
    [merge] = data["merged"]
    assert (merge["old_ids"], merge["kind"], merge["new_text"]) == ([old], "update", theirs)
    _check(home)
