"""The CLI shell: help, version, error translation and exit codes, lazy imports."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.errors import ConfigError

runner = CliRunner()


def _all_commands(group, prefix=()):
    import typer.main

    click_group = typer.main.get_command(group) if isinstance(group, typer.Typer) else group
    for name, cmd in click_group.commands.items():
        yield prefix + (name,), cmd
        if hasattr(cmd, "commands"):
            yield from _all_commands(cmd, prefix + (name,))


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("deepresearch ")


def test_every_command_has_help_text():
    for path, cmd in _all_commands(app):
        assert (cmd.help or "").strip(), f"`deepresearch {' '.join(path)}` has no help text"
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)


def test_usage_error_exits_2():
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2


def test_user_error_is_one_line_on_stderr_exit_1(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kb: [\n")
    result = runner.invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(bad), "doctor", "--json"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: invalid YAML in ")
    assert "Traceback" not in result.output


def test_raise_errors_env_reraises(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kb: [\n")
    monkeypatch.setenv("DEEPRESEARCH_RAISE_ERRORS", "1")
    result = runner.invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(bad), "doctor"])
    assert isinstance(result.exception, ConfigError)


def test_help_and_version_do_not_import_heavy_modules():
    code = (
        "import sys\n"
        "sys.argv = ['deepresearch', '--help']\n"
        "from deepresearch.cli.main import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "heavy = ('torch', 'llama_cpp', 'sentence_transformers', 'duckdb', 'numpy', 'mcp')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


HEAVY_FOR_QUERIES = ("torch", "sentence_transformers", "transformers", "llama_cpp", "duckdb", "pyarrow")


def test_kb_query_and_corpus_search_do_not_import_heavy_modules(home, tmp_path):
    # Real commands on a real workspace (default embedding backend): a query that only reads
    # the KB or the corpus must not pay for torch, llama.cpp, DuckDB or Arrow.
    doc = tmp_path / "wal.md"
    doc.write_text("# WAL\n\nIn WAL mode readers do not block writers and writers do not block readers.")
    for args in (
        [
            "kb",
            "add",
            "SQLite WAL mode lets readers and writers work at the same time.",
            "--source",
            "https://a.example",
        ],
        ["corpus", "add", str(doc)],
    ):
        assert runner.invoke(app, ["--home", str(home), *args]).exit_code == 0
    for command in (["kb", "query", "WAL readers writers"], ["corpus", "search", "WAL readers"]):
        code = (
            "import sys\n"
            f"sys.argv = ['deepresearch', '--home', {str(home)!r}, *{command!r}]\n"
            "from deepresearch.cli.main import app\n"
            "try:\n    app()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('HEAVY', [m for m in {HEAVY_FOR_QUERIES!r} if m in sys.modules])\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert "WAL" in proc.stdout and "HEAVY []" in proc.stdout, (command, proc.stdout, proc.stderr)


@pytest.mark.parametrize("argv", [["--help"], ["kb", "--help"], ["--version"]])
def test_module_entry_point(argv):
    proc = subprocess.run([sys.executable, "-m", "deepresearch", *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_opened_workspace_is_closed_even_when_the_command_fails(home, monkeypatch):
    """One close path (ctx.call_on_close): a failing `search` used to leave its workspace and cache open."""
    from deepresearch.workspace import Workspace

    opened: list[Workspace] = []
    closed: list[Workspace] = []
    real_open, real_close = Workspace.open.__func__, Workspace.close  # type: ignore[attr-defined]

    def recording_open(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(real_open(cls, *args, **kwargs))
        return opened[-1]

    def recording_close(self):  # type: ignore[no-untyped-def]
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(Workspace, "open", classmethod(recording_open))
    monkeypatch.setattr(Workspace, "close", recording_close)
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DEEPRESEARCH__SEARCH__SEARXNG__MAX_RETRIES", "0")
    cases = [
        (["search", "q", "--backend", "searxng"], 1),
        (["runs", "show", "no-such-run"], 1),
        (["kb", "history", "no-such-fact"], 1),
        (["kb", "stats", "--json"], 0),
        (["corpus", "search", "q"], 0),
        (["cache", "stats"], 0),
    ]
    for args, code in cases:
        opened.clear()
        closed.clear()
        result = runner.invoke(app, ["--home", str(home), *args])
        assert result.exit_code == code, (args, result.output)
        assert opened and all(any(c is o for c in closed) for o in opened), args
    assert sorted(p.name for p in home.iterdir()) == ["cache", "deepresearch.db"]  # no -wal/-shm: closed


def test_missing_workspace_is_an_error_only_where_a_command_asks(tmp_path):
    """The "workspace must exist" rule lives in Workspace.open(create=False), which `kb sweep` asks for."""
    from deepresearch.errors import NotFound
    from deepresearch.workspace import Workspace

    missing = tmp_path / "nowhere"
    with pytest.raises(NotFound, match="no workspace at"):
        Workspace.open(missing, create=False)
    assert not missing.exists()
    Workspace.open(missing).close()
    assert missing.is_dir()


def test_backend_choice_is_checked_against_the_registry(home):
    """--backend is a usage error unless registered; a backend registered like a built-in is accepted."""
    from deepresearch.search.backends import BACKENDS, register_backend
    from tests.research_helpers import ListBackend

    for args in (["search", "q", "--backend", "nope"], ["research", "q", "--backend", "nope"]):
        result = runner.invoke(app, ["--home", str(home), *args])
        assert result.exit_code == 2 and "'nope' is not a search backend" in result.stderr, result.output
    register_backend("listed")(lambda ws: ListBackend())
    try:
        result = runner.invoke(app, ["--home", str(home), "search", "sqlite wal", "--backend", "listed", "--json"])
    finally:
        BACKENDS.unregister("listed")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backend"] == "list" and json.loads(result.stdout)["results"]
