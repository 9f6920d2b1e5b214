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
from pathlib import Path

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
