"""The real `deepresearch` CLI with the test fakes registered as backends named "fake".

Subprocess tests (the crash matrix) run `python -m tests.crash_cli …` with
`DEEPRESEARCH__EMBEDDING__BACKEND=fake` and `DEEPRESEARCH_LLM_BACKEND=fake`: the fakes come in
through the same registries an extension would use, and the process starts without torch or
a GGUF, so it can be killed and rerun many times in a few seconds.
"""

from __future__ import annotations

from deepresearch.models.base import register_chat_model, register_embedder
from tests.fakes import FakeChatModel, FakeEmbedder

register_embedder("fake")(lambda config: FakeEmbedder(model_id="fake-embedder"))
register_chat_model("fake")(lambda config: FakeChatModel())

if __name__ == "__main__":
    from deepresearch.cli.main import run

    run()
