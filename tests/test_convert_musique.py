"""scripts/convert_musique.py: MuSiQue items → the eval format of scripts/eval_research.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "convert_musique.py"

# A tiny MuSiQue-format item: the two supporting paragraphs share a title with a distractor,
# and the paragraphs are listed out of idx order.
ITEM = {
    "id": "3hop1__11_22_33",
    "paragraphs": [
        {"idx": 2, "title": "Alpha", "paragraph_text": "Alpha was founded in 1901.", "is_supporting": True},
        {"idx": 0, "title": "Beta", "paragraph_text": "Beta is a river.", "is_supporting": False},
        {"idx": 1, "title": "Alpha", "paragraph_text": "Alpha lies on the Beta.", "is_supporting": True},
        {"idx": 3, "title": "Gamma", "paragraph_text": "Gamma wrote about Alpha.", "is_supporting": True},
    ],
    "question": "When was the town on the river Gamma wrote about founded?",
    "question_decomposition": [
        {"id": 11, "question": "Gamma >> wrote about", "answer": "Alpha", "paragraph_support_idx": 3},
        {"id": 22, "question": "#1 >> located next to", "answer": "Beta", "paragraph_support_idx": 1},
        {"id": 33, "question": "When was #1 founded?", "answer": "1901", "paragraph_support_idx": 2},
    ],
    "answer": "1901",
    "answer_aliases": ["in 1901"],
    "answerable": True,
}
UNANSWERABLE = {**ITEM, "id": "2hop__5_6", "question": "Unanswerable?", "answerable": False}
EVAL_ITEM = {
    "_id": "2hop__1_2",
    "question": "An earlier question?",
    "answer": "x",
    "answer_aliases": [],
    "type": "2hop",
    "supporting_facts": [["Delta", 0]],
    "context": [["Delta", ["Delta text."]]],
}


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_converts_a_json_list_to_the_eval_format(tmp_path: Path) -> None:
    src, out = tmp_path / "dev.json", tmp_path / "eval.json"
    src.write_text(json.dumps([ITEM, UNANSWERABLE]), encoding="utf-8")
    done = run(str(src), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 converted (1 unanswerable skipped)" in done.stderr
    assert json.loads(out.read_text(encoding="utf-8")) == [
        {
            "_id": "3hop1__11_22_33",
            "question": ITEM["question"],
            "answer": "1901",
            "answer_aliases": ["in 1901"],
            "type": "3hop1",
            # paragraph (idx) order; the shared title is listed once per supporting paragraph
            "supporting_facts": [["Alpha", 0], ["Alpha", 0], ["Gamma", 0]],
            "context": [
                ["Beta", ["Beta is a river."]],
                ["Alpha", ["Alpha lies on the Beta."]],
                ["Alpha", ["Alpha was founded in 1901."]],
                ["Gamma", ["Gamma wrote about Alpha."]],
            ],
        }
    ]


def test_jsonl_input_appended_after_an_eval_file(tmp_path: Path) -> None:
    src, before, out = tmp_path / "dev.jsonl", tmp_path / "train.json", tmp_path / "all.json"
    src.write_text(json.dumps(ITEM) + "\n\n", encoding="utf-8")
    before.write_text(json.dumps([EVAL_ITEM]), encoding="utf-8")
    done = run(str(src), "-o", str(out), "--after", str(before))
    assert done.returncode == 0, done.stderr
    items = json.loads(out.read_text(encoding="utf-8"))
    assert [i["_id"] for i in items] == ["2hop__1_2", "3hop1__11_22_33"]
    assert items[0] == EVAL_ITEM


def test_a_question_already_in_the_after_file_is_an_error(tmp_path: Path) -> None:
    src, before, out = tmp_path / "dev.json", tmp_path / "train.json", tmp_path / "all.json"
    src.write_text(json.dumps([ITEM]), encoding="utf-8")
    before.write_text(json.dumps([{**EVAL_ITEM, "question": ITEM["question"].upper() + " "}]), encoding="utf-8")
    done = run(str(src), "-o", str(out), "--after", str(before))
    assert done.returncode == 1
    assert done.stderr.startswith("Error: 1 item(s) already in the --after file: 3hop1__11_22_33")
    assert not out.exists()


def test_an_item_that_is_not_musique_is_one_clear_error(tmp_path: Path) -> None:
    src, out = tmp_path / "hotpot.json", tmp_path / "eval.json"
    src.write_text(json.dumps([EVAL_ITEM]), encoding="utf-8")
    done = run(str(src), "-o", str(out))
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: an item has no 'paragraphs' field")
    assert not out.exists()
