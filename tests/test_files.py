"""Every writer of a user-named path (kb export, research --out, saved reports) replaces only a
regular file: a symbolic link, FIFO, device or folder at the path is refused and left as it was."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepresearch import files
from deepresearch.cli.main import app
from deepresearch.errors import InputError
from tests.cli_helpers import one_error_line

runner = CliRunner()


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _device(tmp_path: Path) -> Path:
    """A character device node: a private copy of /dev/full as root (never the real one), else /dev/full."""
    if os.geteuid() != 0:
        return Path("/dev/full")  # not ours to replace: the old code failed on /dev, not cleanly
    path = tmp_path / "full"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return path


def _link(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "target.txt"
    target.write_text("the link's target\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    return link, target


def test_atomic_output_replaces_only_regular_files(tmp_path: Path) -> None:
    """Issue 21 (1): os.replace turned a FIFO into a file, replaced a link, deleted a device node."""
    link, target = _link(tmp_path)
    fifo = _fifo(tmp_path / "pipe")
    device = _device(tmp_path)
    for path, words in ((link, "symbolic link"), (fifo, "FIFO"), (device, "character device")):
        with pytest.raises(InputError, match=words):
            files.write_output(path, "x", overwrite=True)
    assert link.is_symlink() and target.read_text() == "the link's target\n"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert stat.S_ISCHR(device.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"link.jsonl", "target.txt", "pipe", *(["full"] if device.parent == tmp_path else [])}
    )


def test_atomic_output_writes_new_and_regular_files_privately(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        files.write_output(tmp_path / "new.md", "one", private=True)
        files.write_output(tmp_path / "open.md", "two")
        (tmp_path / "old.md").write_text("old")
        files.write_output(tmp_path / "old.md", "three", overwrite=True, private=True)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"new.md": 0o600, "open.md": 0o644, "old.md": 0o600}
    assert (tmp_path / "old.md").read_text() == "three"


def test_something_appearing_at_the_path_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    with pytest.raises(InputError, match="FIFO"):
        with files.atomic_output(path, overwrite=True) as tmp:
            tmp.write_text("report")
            _fifo(path)
    assert stat.S_ISFIFO(path.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_check_output_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="pass --force"):
        (tmp_path / "a").write_text("")
        files.check_output(tmp_path / "a")
    with pytest.raises(InputError, match="mkdir -p"):
        files.check_output(tmp_path / "no" / "a")
    with pytest.raises(InputError, match="is a folder"):
        files.check_output(tmp_path, overwrite=True)
    files.check_output(tmp_path / "b")


def _add(home: Path) -> None:
    result = runner.invoke(
        app, ["--home", str(home), "kb", "add", "Exports write regular files only", "-s", "https://e.org"]
    )
    assert result.exit_code == 0, result.output


def test_kb_export_force_refuses_link_fifo_and_device(home: Path, fake_model, tmp_path: Path) -> None:
    """Issue 21 (1) through the CLI: `kb export --output PATH --force` replaced whatever was at PATH."""
    _add(home)
    link, target = _link(tmp_path)
    fifo = _fifo(tmp_path / "pipe")
    device = _device(tmp_path)
    for path, words in ((link, "symbolic link"), (fifo, "named pipe"), (device, "character device")):
        result = runner.invoke(app, ["--home", str(home), "kb", "export", "--output", str(path), "--force"])
        one_error_line(result, str(path), words)
    assert link.is_symlink() and target.read_text() == "the link's target\n"
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISCHR(device.lstat().st_mode)


def test_kb_export_file_follows_workspace_private(home: Path, fake_model, tmp_path: Path) -> None:
    """Issue 21 (8): exports were 0644 while the database is 0600."""
    _add(home)
    out = tmp_path / "facts.jsonl"
    old = os.umask(0o022)
    try:
        result = runner.invoke(app, ["--home", str(home), "kb", "export", "--output", str(out)])
        cfg = tmp_path / "open.yaml"
        cfg.write_text("workspace:\n  private: false\n")
        shared = tmp_path / "shared.jsonl"
        opened = runner.invoke(app, ["--home", str(home), "--config", str(cfg), "kb", "export", "-o", str(shared)])
    finally:
        os.umask(old)
    assert result.exit_code == 0 and opened.exit_code == 0, (result.output, opened.output)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    assert json.loads(out.read_text())["fact"] == "Exports write regular files only"


def test_research_out_refuses_a_fifo_before_the_run_and_writes_reports_privately(
    home: Path, fake_embedder, tmp_path: Path
) -> None:
    """Issue 21 (1, 8): research --out wrote into a FIFO or through a link; its reports were 0644."""
    from deepresearch.research.loop import run_research
    from deepresearch.research.runs import RunStore
    from deepresearch.research.state import RunOptions
    from deepresearch.workspace import Workspace
    from tests.research_helpers import make_deps

    fifo = _fifo(tmp_path / "pipe")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer into the FIFO must not block the test
    link, target = _link(tmp_path)
    ws = Workspace.open(home)
    try:
        for path in (fifo, link):
            with pytest.raises(InputError, match="not a regular file|symbolic link"):
                run_research(ws, "How does WAL work?", RunOptions(loops=1), deps=make_deps(ws, fake_embedder), out=path)
        assert RunStore(ws.db).recent() == []  # refused before a run was created
        out = tmp_path / "report.md"
        old = os.umask(0o022)
        try:
            result = run_research(
                ws, "How does WAL work?", RunOptions(loops=1), deps=make_deps(ws, fake_embedder), out=out
            )
        finally:
            os.umask(old)
    finally:
        ws.close()
        os.close(reader)
    assert out.read_text() == result.report and target.read_text() == "the link's target\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(result.report_path).stat().st_mode) == 0o600


def test_doctor_write_probe_never_follows_a_planted_link(home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    (home / ".doctor-write-test").symlink_to(victim)
    skip = [
        a
        for name in ("sqlite", "sqlite-vec", "fts5-trigram", "embedding-model", "llama-build", "llm", "duckdb")
        for a in ("--skip", name)
    ]
    result = runner.invoke(app, ["--home", str(home), "doctor", *skip])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "untouched\n"
