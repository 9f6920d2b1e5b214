"""Test hooks of a research run, kept in one place: none does anything unless a test sets it.

`DEEPRESEARCH_TEST_PAUSE_AFTER=<step>` blocks a run for ten minutes right after that step is
checkpointed, so a crash test can SIGKILL the process at a known point and resume the run
(tests/test_research_kill.py, tests/test_crash_matrix.py).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Mapping

PAUSE_ENV = "DEEPRESEARCH_TEST_PAUSE_AFTER"
PAUSE_SECONDS = 600.0


def after_step(
    env: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep
) -> Callable[[str], None]:
    """The run's after-step hook: pause after the step named in $DEEPRESEARCH_TEST_PAUSE_AFTER, if any."""
    step = (os.environ if env is None else env).get(PAUSE_ENV)

    def hook(name: str) -> None:
        if step and name == step:
            sleep(PAUSE_SECONDS)

    return hook
