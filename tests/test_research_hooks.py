"""The research run's test hooks (`research/hooks.py`): the crash tests' pause, off by default."""

from __future__ import annotations

from deepresearch.research.hooks import PAUSE_ENV, PAUSE_SECONDS, after_step


def test_pause_only_after_the_named_step() -> None:
    slept: list[float] = []
    hook = after_step({PAUSE_ENV: "search"}, sleep=slept.append)
    for step in ("recall", "plan", "search", "rank"):
        hook(step)
    assert slept == [PAUSE_SECONDS]


def test_no_variable_no_pause() -> None:
    slept: list[float] = []
    hook = after_step({}, sleep=slept.append)
    for step in ("recall", "plan", "search", "report"):
        hook(step)
    assert slept == []
