"""The baseline ("today") extraction that scripts/eval_extraction.py and
scripts/build_extraction_candidates.py compare the new one with: deepresearch/models/extract.py as
of commit 2477481 (before issue 25), read from git history and run as this module — not kept as a
second copy of the code in the tree. Needs a clone with that commit (`git fetch --unshallow` in a
shallow one)."""

from __future__ import annotations

import subprocess
from pathlib import Path

BASELINE_COMMIT = "2477481dcbdefd8ed9b4990c4dd4b64855c5809b"
BASELINE_PATH = "deepresearch/models/extract.py"


def _source() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        return subprocess.run(
            ["git", "-C", str(root), "show", f"{BASELINE_COMMIT}:{BASELINE_PATH}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise SystemExit(
            f"Error: cannot read the baseline extraction {BASELINE_COMMIT[:7]}:{BASELINE_PATH} from git ({detail})"
            " — run from a git clone with full history (git fetch --unshallow)"
        ) from None


# The old module's names (extract_facts, _clean_sentence, …) become this module's.
exec(compile(_source(), f"{BASELINE_COMMIT[:7]}:{BASELINE_PATH}", "exec"), globals())
