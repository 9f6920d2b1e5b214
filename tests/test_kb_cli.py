"""`deepresearch kb …` through CliRunner: exact exit codes and output shapes."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from tests.fakes import FakeEmbedder

runner = CliRunner()
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


@pytest.fixture
def fake_model(use_embedder):
    """The configured embedding model, plugged in through the embedding registry."""
    return use_embedder(FakeEmbedder(model_id="fake-embedder"))


def kb(home, *args, input=None):
    return runner.invoke(app, ["--home", str(home), "kb", *args], input=input)


def _add(home, text, *extra):
    result = kb(home, "add", text, "--source", "https://example.com/a", *extra)
    assert result.exit_code == 0, result.output
    return ULID.findall(result.stdout)[0]


def test_add_query_history(home, fake_model):
    fid = _add(home, "AI chip sales tripled in 2024 according to analysts", "--category", "market_data")
    result = kb(home, "query", "AI chip sales")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["conf", "rel", "age", "category", "fact"]
    assert re.match(r"^\s*0\.70\s+\d\.\d\d\s+today\s+market_data\s+AI chip sales tripled", lines[1])
    assert fid in lines[2]
    as_json = json.loads(kb(home, "query", "AI chip sales", "--json").stdout)
    assert as_json["degraded"] is False and as_json["reason"] is None
    assert set(as_json["hits"][0]) == {
        "id",
        "fact",
        "source_url",
        "sources",
        "category",
        "confidence",
        "raw_confidence",
        "relevance",
        "age_days",
        "created_at",
        "research_topic",
        "status",
        "expires_at",
        "expired",
        "conflicts_with",
    }
    assert as_json["hits"][0]["status"] == "active" and as_json["include_expired"] is False
    again = kb(
        home,
        "add",
        "AI chip sales tripled in 2024 according to analysts.",
        "--source",
        "https://example.com/b",
        "--json",
    )
    assert json.loads(again.stdout)["reconfirmed"] == [fid]
    hist = kb(home, "history", fid)
    assert hist.exit_code == 0
    assert [line.split()[2] for line in hist.stdout.splitlines()] == ["add", "reconfirm"]
    assert kb(home, "history", "01NOSUCHFACT").exit_code == 1


def test_add_rejected_exits_1(home, fake_model):
    result = kb(home, "add", "short", "--source", "https://example.com")
    assert result.exit_code == 1
    assert "too short" in result.stderr


def test_query_filters_and_invalid_mode(home, fake_model):
    _add(home, "Quarterly revenue of the chip maker rose", "--category", "market_data")
    bogus = kb(home, "query", "chip revenue", "--lifecycle", "bogus")
    assert bogus.exit_code == 1 and "use one of off, inform, freshness, lifecycle" in bogus.stderr
    for args in (
        ["--lifecycle", "freshness"],
        ["--lifecycle", "off", "--category", "market_data"],
        ["--fresh", "high"],
        ["--min-confidence", "0.5", "--top-k", "1"],
    ):
        result = kb(home, "query", "chip revenue", *args, "--json")
        assert result.exit_code == 0, (args, result.output)
        assert len(json.loads(result.stdout)["hits"]) == 1
    assert json.loads(kb(home, "query", "chip revenue", "--min-confidence", "0.9", "--json").stdout)["hits"] == []
    assert kb(home, "query", "chip revenue", "--min-confidence", "2").exit_code == 2
    empty = kb(home, "query", "chip revenue", "--category", "historical")
    assert empty.exit_code == 0 and "no facts found" in empty.stderr


def test_degraded_query_prints_warning(home, fake_model, monkeypatch):
    _add(home, "Keyword search still finds this sentence")
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    result = kb(home, "query", "keyword search")
    assert result.exit_code == 0
    assert result.stderr.startswith("Warning: keyword search only, not semantic recall: sqlite-vec is not available")
    assert "Keyword search still finds" in result.stdout
    data = json.loads(kb(home, "query", "keyword search", "--json").stdout)
    assert data["degraded"] is True and "sqlite-vec" in data["reason"] and len(data["hits"]) == 1


def test_model_mismatch_exits_1_names_reembed_and_leaves_db_unchanged(home, fake_model, use_embedder):
    _add(home, "Facts embedded with the first model")
    db = home / "deepresearch.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    use_embedder(FakeEmbedder(dimension=128, model_id="other-model"))
    for args in (
        ["query", "first model"],
        ["add", "Another fact for the other model", "--source", "https://x.example"],
    ):
        result = kb(home, *args)
        assert result.exit_code == 1
        assert result.stderr.startswith(
            "Error: the knowledge base was built with embedding model fake-embedder (384-d)"
        )
        assert "deepresearch kb reembed" in result.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    fixed = kb(home, "reembed")
    assert fixed.exit_code == 0 and "re-embedded 1 facts with other-model" in fixed.stdout
    assert kb(home, "query", "first model").exit_code == 0
    assert kb(home, "check").exit_code == 0


def test_sweep_output_modes(home, fake_model, tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps(
            {
                "fact": "An old market figure from long ago",
                "source_url": "https://o.example",
                "category": "market_data",
                "created_at": "2020-01-01T00:00:00Z",
            }
        )
        + "\n"
    )
    assert kb(home, "import", str(old)).exit_code == 0
    dry = kb(home, "sweep", "--dry-run")
    assert (dry.exit_code, dry.stdout.strip()) == (
        0,
        "sweep: would expire 1 fact(s) in 0 batch(es), " + dry.stdout.split(", ")[-1].strip(),
    )
    quiet = kb(home, "sweep", "--quiet")
    assert (quiet.exit_code, quiet.stdout) == (0, "")
    again = json.loads(kb(home, "sweep", "--json").stdout)
    assert (again["expired"], again["purged"]) == (0, 0)
    purge = kb(home, "sweep", "--purge")
    assert purge.exit_code == 0 and purge.stdout.startswith("sweep: expired 0 fact(s), purged 1")


def test_check_stats_export_import_round_trip(home, fake_model, tmp_path):
    _add(home, "Stats count every fact by category", "--category", "technology")
    _add(home, "Exports carry ids and sources along", "--category", "historical")
    ok = kb(home, "check")
    assert (ok.exit_code, ok.stdout.strip()) == (0, "ok: facts, vectors and FTS agree")
    stats = json.loads(kb(home, "stats", "--json").stdout)
    assert stats["total"] == 2 and stats["by_category"]["technology"]["active"] == 1
    assert "facts: 2" in kb(home, "stats").stdout
    exported = kb(home, "export", "--format", "jsonl")
    assert exported.exit_code == 0
    path = tmp_path / "facts.jsonl"
    path.write_text(exported.stdout, encoding="utf-8")
    other = tmp_path / "other"
    result = kb(other, "import", str(path), "--json")
    assert result.exit_code == 0 and len(json.loads(result.stdout)["added"]) == 2
    assert kb(other, "export").stdout == exported.stdout
    assert kb(home, "export", "--format", "parquet").exit_code == 2
    assert kb(home, "export", "--format", "xml").exit_code == 2
    assert kb(home, "export", "--format", "csv", "--output", str(tmp_path / "f.csv")).exit_code == 0
    assert (tmp_path / "f.csv").read_text().startswith("id,fact,source_url,sources,")


def test_import_bad_lines(home, fake_model, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('not json\n{"fact": "short"}\n', encoding="utf-8")
    result = kb(home, "import", str(path))
    assert result.exit_code == 1
    assert "line 1" in result.stderr and "too short" in result.stderr
    assert kb(home, "import", str(tmp_path / "missing.jsonl")).exit_code == 1


def test_check_reports_problems_exit_1(home, fake_model):
    _add(home, "A fact whose vector will vanish")
    from deepresearch.db import connect

    conn = connect(home / "deepresearch.db")
    conn.execute("delete from fact_vec")
    conn.close()
    result = kb(home, "check")
    assert result.exit_code == 1
    assert result.stdout.startswith("problem: 1 facts without a vector")


def test_cron_script_runs_a_quiet_cron_safe_sweep(home):
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "cron_sweep.sh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPRESEARCH")}
    done = subprocess.run(
        ["sh", str(script)],
        env={**env, "DEEPRESEARCH_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\S+Z sweep: expired 0 fact\(s\), purged 0 in 0 batch\(es\), [\d.]+s\n", done.stdout)
    missing = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "DEEPRESEARCH_HOME" in missing.stderr


def test_import_of_a_csv_export_is_one_clear_error(home, fake_model, tmp_path):
    _add(home, "A fact that will travel through a CSV export")
    out = tmp_path / "facts.csv"
    assert kb(home, "export", "--format", "csv", "--output", str(out)).exit_code == 0
    result = kb(home, "import", str(out))
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: {out} is not JSONL (one JSON object per line) — export with `kb export --format jsonl`"
    ]


def test_sweep_of_a_missing_workspace_fails_instead_of_creating_one(tmp_path):
    missing = tmp_path / "nowhere"
    result = runner.invoke(app, ["--home", str(missing), "kb", "sweep", "--json", "--quiet"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: no workspace at {missing} (knowledge base {missing / 'deepresearch.db'})")
    assert not missing.exists()


@pytest.mark.parametrize(
    ("category", "warned"),
    [("market_data", False), ("Market-Data", False), ("market  data", False), ("weather", True)],
)
def test_add_warns_only_for_an_unknown_category(home, fake_model, category, warned):
    """One normalization (facts.is_known_category): "market  data" was warned about, then stored as market_data."""
    result = kb(home, "add", f"Fact filed under {category}", "--source", "https://example.com/c", "-c", category)
    assert result.exit_code == 0, result.output
    assert ("Warning: unknown category" in result.stderr) is warned


@pytest.mark.parametrize(
    "args",
    [("export", "--format", "xml"), ("query", "x", "--fresh", "bogus")],
)
def test_choices_are_checked_by_the_cli_framework(home, args):
    """Usage errors (exit 2) before anything opens: the choices are Enums, not checks by hand."""
    result = kb(home, *args)
    assert result.exit_code == 2 and "Invalid value for" in result.stderr, result.output
    assert list(home.iterdir()) == []  # no database was created
