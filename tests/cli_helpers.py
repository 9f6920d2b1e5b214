"""What CLI tests assert about a failed command: one `Error:` line, exit 1, no traceback."""

from __future__ import annotations

from typing import Any

STARTED = ("research: ", "resuming run ")


def one_error_line(result: Any, *needles: str) -> str:
    """The single `Error:` line of a failed command (exit 1, no traceback), holding every needle."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output, result.exception
    # `research` says it started before anything can fail (its first progress line); nothing else precedes the error.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(STARTED)]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
