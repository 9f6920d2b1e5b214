"""scripts/eval_docqa.py: each question is a real `research` process on an ingested documentation folder, scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "eval_docqa.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_a_question_on_the_shipped_corpus_is_scored(home, tmp_path):
    # conftest runs research without the model here: the extractive path, a few seconds a question
    added = subprocess.run(["deepresearch", "--home", str(home), "corpus", "add", str(ROOT / "docs" / "corpus")])
    assert added.returncode == 0
    questions = tmp_path / "q.jsonl"
    item = {"id": "wal-1", "question": "Which SQLite journal mode lets readers and writers work at the same time?",
            "answer": "WAL", "aliases": ["write-ahead log"], "page": "sqlite-wal.md"}  # fmt: skip
    questions.write_text(json.dumps(item) + "\n", encoding="utf-8")
    out = tmp_path / "out.json"
    done = _run(str(questions), "--home", str(home), "--json", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    row = data["rows"][0]
    assert data["figures"]["questions"] == 1 and data["figures"]["errors"] == 0
    assert row["page_cited"] and row["baseline_page"] and row["in_report"]
    assert row["abstained"] == (row["headline"] is None) and 0.0 <= row["f1"] <= 1.0
    assert json.loads(done.stdout) == data["figures"]


def test_a_missing_question_file_is_a_clear_error(home, tmp_path):
    done = _run(str(tmp_path / "none.jsonl"), "--home", str(home))
    assert done.returncode == 1 and "Error:" in done.stderr and "none.jsonl" in done.stderr
    assert "Traceback" not in done.stderr
