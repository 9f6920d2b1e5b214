"""Research state has one door: steps read the state and return updates; only the loop writes it.
A checkpoint saved by an older version (sentences as lists, the candidate as a dict) still loads."""

from __future__ import annotations

import copy
import json

from deepresearch.research import loop
from deepresearch.research.answer import Candidate
from deepresearch.research.loop import run_research
from deepresearch.research.runs import RunStore
from deepresearch.research.state import ResearchState, RunOptions, Sentence
from tests.research_helpers import RoutedChatModel, make_deps
from tests.test_research_answer import QUESTION, TWO_HOP, KeywordBackend

TOPIC = "How does SQLite WAL mode let readers and writers work together?"


def test_no_step_writes_the_state_it_receives(workspace, fake_embedder, monkeypatch):
    seen: list[str] = []

    def watched(name, step):  # type: ignore[no-untyped-def]
        def run(state, deps, ctx):  # type: ignore[no-untyped-def]
            before = copy.deepcopy(state)
            update = step(state, deps, ctx)
            assert state == before, f"step {name} wrote the state it was given"
            assert state.to_dict() == before.to_dict()
            seen.append(name)
            return update

        return run

    for name, step in list(loop.STEP_FUNCTIONS.items()):
        monkeypatch.setitem(loop.STEP_FUNCTIONS, name, watched(name, step))
    # A two-hop question with every model step on: two loops, a bridge, the reader.
    model = RoutedChatModel(
        plan={"rationale": "r", "queries": ["film shot in Leland"]},
        reflect={"sufficient": False, "knowledge_gap": "more", "follow_up_queries": ["Leland town population"]},
        answer={"answer": "Tromsø", "sources": ["S1"]},
    )
    deps = make_deps(workspace, fake_embedder, model, backend=KeywordBackend(TWO_HOP))
    result = run_research(workspace, QUESTION, RunOptions(loops=2, queries=2), deps=deps)
    assert set(seen) == set(loop.STEP_FUNCTIONS)  # every step was watched
    assert seen.count("search") == 2  # and a second loop ran on the first one's update
    # What the steps tallied reached the state through the loop: searches and model calls alike.
    assert result.counters["backend_searches"] >= 2 and result.counters["model.plan.calls"] == 1
    assert result.counters["llm_seconds"] >= 0 and result.counters["llm_calls"] >= 3


def test_a_checkpoint_keeps_its_json_shape_and_an_older_one_loads(workspace, fake_embedder):
    result = run_research(workspace, TOPIC, RunOptions(loops=1), deps=make_deps(workspace, fake_embedder))
    (saved,) = workspace.db.execute("select state_json from research_runs where id = ?", (result.run_id,)).fetchone()
    data = json.loads(saved)
    sentence = data["sources"][0]["sentences"][0]
    assert isinstance(sentence, list) and len(sentence) == 3  # [text, to question, to its query], as before
    state = RunStore(workspace.db).load_state(result.run_id)
    assert isinstance(state.sources[0].sentences[0], Sentence)
    assert state.sources[0].sentences[0].to_json() == sentence
    assert state.to_dict() == data  # loading and saving changes nothing

    # An older version's yes/no candidate had no score or sentence; "no candidate" was {}.
    old = {**data, "candidate": {"kind": "yesno", "text": "Yes", "sid": "S1", "support": ["S1", "S2"]}}
    loaded = ResearchState.from_dict(old)
    assert loaded.candidate == Candidate("Yes", 0.0, "", "S1", ["S1", "S2"], "yesno")
    assert ResearchState.from_dict({**data, "candidate": {}}).candidate is None
    assert ResearchState.from_dict({**data, "candidate": {}}).to_dict()["candidate"] == {}
