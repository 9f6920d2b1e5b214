"""Docs stay true to the code: every CLI command is in README's command table."""

import re
from pathlib import Path

import typer.main

from deepresearch.cli.main import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
ROWS = [line for line in README.splitlines() if line.startswith("| `deepresearch ")]


def _leaf_paths(command, prefix=()):
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield prefix
        return
    for name, sub in subcommands.items():
        yield from _leaf_paths(sub, prefix + (name,))


def test_every_command_is_in_the_readme_table():
    missing = []
    for path in _leaf_paths(typer.main.get_command(app)):
        *groups, leaf = path
        head = "`deepresearch " + " ".join(groups) if groups else "`deepresearch " + leaf
        rows = [row for row in ROWS if row.startswith("| " + head)]
        if not any(re.search(rf"(?<![\w-]){re.escape(leaf)}(?![\w-])", row) for row in rows):
            missing.append(" ".join(path))
    assert not missing, f"commands missing from README.md's table: {missing}"


def test_readme_has_the_two_setup_commands():
    assert "bash scripts/setup.sh && deepresearch corpus add docs/corpus && deepresearch research" in README
    assert "bash scripts/setup.sh dev && python3 -m pytest" in README
