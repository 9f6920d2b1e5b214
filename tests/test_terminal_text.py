"""Issue 21 (6): stored text (facts, run topics and reports, model paths in errors) never reaches
the terminal as escape sequences: every command prints through `cli.common.echo` / `status` /
`warn` / `echo_json`, which show control characters escaped."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app

runner = CliRunner()
CLI = Path(__file__).resolve().parents[1] / "deepresearch" / "cli"
TITLE = "\x1b]0;pwned\x07"  # OSC 0: sets the terminal window title
CSI = "\x9b2J"  # C1 CSI: clears the screen on terminals that take 8-bit controls
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _clean(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text)


def _cli(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["--home", str(home), *args])


def test_terminal_safe_escapes_controls_and_keeps_text() -> None:
    from deepresearch.text import terminal_safe

    assert terminal_safe(f"a{TITLE}b \u202eevil\u2028z") == "a\\x1b]0;pwned\\x07b \\u202eevil\\u2028z"
    assert terminal_safe("line\n\tnext\r", keep_newlines=True) == "line\n\tnext\\r"
    assert terminal_safe("a\nb") == "a\\nb"
    for text in ("plain", "中文 AI芯片", "café — ok", ""):
        assert terminal_safe(text) == text


def test_kb_query_table_and_json_escape_stored_sequences(home: Path, fake_model) -> None:
    added = _cli(
        home, "kb", "add", f"Pump stations {TITLE} report {CSI} flow \u202e rates daily", "-s", "https://e.org"
    )
    assert added.exit_code == 0, added.output
    table = _cli(home, "kb", "query", "pump stations flow rates")
    assert table.exit_code == 0, table.output
    _clean(table.output)
    assert "\\x1b]0;pwned\\x07" in table.stdout and "\\x9b2J" in table.stdout
    as_json = _cli(home, "kb", "query", "pump stations flow rates", "--json")
    _clean(as_json.stdout)
    assert TITLE in json.loads(as_json.stdout)["hits"][0]["fact"]  # the data itself is unchanged


def test_runs_list_and_show_escape_the_topic(home: Path, fake_embedder) -> None:
    from deepresearch.research.loop import run_research
    from deepresearch.research.state import RunOptions
    from deepresearch.workspace import Workspace
    from tests.research_helpers import make_deps

    ws = Workspace.open(home)
    try:
        run = run_research(ws, f"How does WAL {TITLE} work?", RunOptions(loops=1), deps=make_deps(ws, fake_embedder))
    finally:
        ws.close()
    for args in (["runs", "list"], ["runs", "search", "WAL"], ["runs", "show", run.run_id]):
        result = _cli(home, *args)
        assert result.exit_code == 0, result.output
        _clean(result.output)
        assert "\\x1b]0;pwned\\x07" in result.stdout


def test_error_line_and_doctor_escape_what_they_quote(home: Path, tmp_path: Path) -> None:
    missing = _cli(home, "kb", "history", f"01ID{TITLE}")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: no history for fact 01ID\\x1b]0;")
    _clean(missing.output)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"llm": {"model_path": f"/nowhere/m{TITLE}.gguf"}}))
    skip = [
        a
        for n in ("sqlite", "sqlite-vec", "fts5-trigram", "embedding-model", "duckdb", "workspace")
        for a in ("--skip", n)
    ]
    doctor = runner.invoke(app, ["--home", str(home), "--config", str(cfg), "doctor", *skip, "--skip", "llama-build"])
    assert doctor.exit_code == 1 and "FAIL llm" in doctor.stdout, doctor.output
    _clean(doctor.output)


def _direct_prints(path: Path) -> list[int]:
    """Lines of `path` that print with typer.echo/secho or print() instead of the escaping helpers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            fn = node.func
            if (
                isinstance(fn, ast.Attribute)
                and fn.attr in ("echo", "secho")
                and getattr(fn.value, "id", "") == "typer"
            ):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Name) and first.id == "CLEAR_LINE") and not _raw_data(node):
                    found.append(node.lineno)
            elif isinstance(fn, ast.Name) and fn.id == "print":
                found.append(node.lineno)
    return found


def _raw_data(node: ast.Call) -> bool:
    """`typer.echo(data, nl=False)` of `kb export` to a pipe: the exported bytes, unchanged on purpose."""
    return bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "data"


@pytest.mark.parametrize("module", ["kb.py", "research.py", "models.py", "doctor.py"])
def test_commands_print_stored_text_only_through_the_escaping_helpers(module: str) -> None:
    assert _direct_prints(CLI / module) == []
