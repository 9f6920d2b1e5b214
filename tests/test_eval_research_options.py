"""scripts/eval_research.py: kept runs made with other research options are named, not silently re-read."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import eval_research  # noqa: E402

from deepresearch.facts import new_id  # noqa: E402
from deepresearch.research.runs import RunStore  # noqa: E402
from deepresearch.research.state import ResearchState, RunOptions  # noqa: E402
from deepresearch.workspace import Workspace  # noqa: E402


def _kept_run(home: Path, **options: object) -> tuple[RunStore, str]:
    ws = Workspace.open(home)
    store = RunStore(ws.db)
    state = ResearchState(new_id(), "Which river flows through Alpha?", dataclasses.replace(RunOptions(), **options))
    store.create(state)
    return store, state.run_id


def test_a_kept_run_with_other_options_is_named(tmp_path, capsys):
    # session 19: a reader "with 350 tokens" re-read checkpoints made with 500 and the hop read on
    store, run_id = _kept_run(tmp_path, second_read=not RunOptions().second_read)
    eval_research._warn_other_options(store, [run_id], RunOptions())
    assert "second_read" in capsys.readouterr().err


def test_kept_runs_with_todays_options_say_nothing(tmp_path, capsys):
    store, run_id = _kept_run(tmp_path)
    eval_research._warn_other_options(store, [run_id], RunOptions())
    assert capsys.readouterr().err == ""


def test_only_selects_a_subset_of_the_questions_in_its_order():
    parser = eval_research._parser()
    args = parser.parse_args(["x.json", "--only", "7,2,40"])
    assert eval_research.selected(50, args) == [7, 2, 40]
    args = parser.parse_args(["x.json", "--start", "45", "--limit", "10"])
    assert eval_research.selected(50, args) == [45, 46, 47, 48, 49]  # as the slice did


def test_only_past_the_end_of_the_file_is_an_error():
    args = eval_research._parser().parse_args(["x.json", "--only", "3,50"])
    with pytest.raises(ValueError, match="0 to 49"):
        eval_research.selected(50, args)
