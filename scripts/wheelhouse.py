"""Wheelhouse helpers for scripts/wheelhouse.sh and scripts/setup.sh --offline (stdlib only).

    python3 scripts/wheelhouse.py record WHEEL --kind portable ...  # stamp how a wheel was built into its .dist-info
    python3 scripts/wheelhouse.py manifest DIR [--extras dev]  # MANIFEST.json + hash-pinned requirements.txt
    python3 scripts/wheelhouse.py verify DIR                  # every file present with its recorded sha256

Runs on the airgapped machine too, with whatever Python is there: no third-party imports.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import platform
import re
import shutil
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

MANIFEST = "MANIFEST.json"
REQUIREMENTS = "requirements.txt"
# The name llama-cpp-python's .dist-info carries the build record under; deepresearch doctor reads it.
BUILD_RECORD = "DEEPRESEARCH-BUILD.json"
# {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl (PEP 427)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def sha256(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record(wheel: Path, build: dict) -> None:
    """Add BUILD_RECORD (and its RECORD line) to the wheel's .dist-info: the installed package says how it was built."""
    with zipfile.ZipFile(wheel) as src:
        names = src.namelist()
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        dist_info = record_name.rsplit("/", 1)[0]
        payload = (json.dumps(build, indent=2, sort_keys=True) + "\n").encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
        entry = f"{dist_info}/{BUILD_RECORD}"
        tmp = Path(tempfile.mkstemp(suffix=".whl", dir=wheel.parent)[1])
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                if info.filename not in (entry, record_name):  # re-stamping replaces an old record
                    dst.writestr(info, src.read(info.filename), zipfile.ZIP_DEFLATED)
            stamp = zipfile.ZipInfo(entry, date_time=time.gmtime()[:6])
            stamp.external_attr = 0o644 << 16
            dst.writestr(stamp, payload, zipfile.ZIP_DEFLATED)
            lines = [ln for ln in src.read(record_name).decode().splitlines() if ln and not ln.startswith(entry + ",")]
            lines.append(f"{entry},sha256={digest},{len(payload)}")
            dst.writestr(src.getinfo(record_name), "\n".join(lines) + "\n", zipfile.ZIP_DEFLATED)
    shutil.copymode(wheel, tmp)  # mkstemp made it 0600
    shutil.move(str(tmp), wheel)


def _requirement(path: Path, digest: str, project: str, extras: str) -> str:
    match = WHEEL_NAME.match(path.name)
    if not match:
        raise SystemExit(f"Error: {path.name} is not a wheel file name; remove it from the wheelhouse")
    name, version = match["name"], match["version"]
    if extras and name.lower().replace("_", "-") == project:
        name = f"{name}[{extras}]"
    return f"{name}=={version} --hash=sha256:{digest}"


def manifest(folder: Path, extras: str, llama_wheel: str | None) -> dict:
    """Write MANIFEST.json (files, sha256, sizes, total) and a hash-pinned requirements.txt (--require-hashes)."""
    wheels = sorted(folder.glob("*.whl"))
    files = [{"file": w.name, "sha256": sha256(w), "bytes": w.stat().st_size} for w in wheels]
    project = "deepresearch"
    reqs = [_requirement(folder / f["file"], f["sha256"], project, extras) for f in files]
    build = None
    if llama_wheel:
        with zipfile.ZipFile(folder / llama_wheel) as zf:
            rec = next((n for n in zf.namelist() if n.endswith("/" + BUILD_RECORD)), None)
            build = json.loads(zf.read(rec)) if rec else None
    data = {
        "project": project,
        "extras": extras.split(",") if extras else [],
        "python": sys.implementation.cache_tag,
        "platform": sysconfig.get_platform(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "llama_cpp_build": build,
        "files": files,
        "total_bytes": sum(f["bytes"] for f in files),
    }
    (folder / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")
    (folder / REQUIREMENTS).write_text("\n".join(reqs) + "\n")
    return data


def verify(folder: Path) -> dict:
    """Check every file listed in the manifest is present with its sha256; exit 1 with one Error line otherwise."""
    path = folder / MANIFEST
    if not path.is_file():
        raise SystemExit(f"Error: no {MANIFEST} in {folder}; build the wheelhouse with scripts/wheelhouse.sh {folder}")
    data = json.loads(path.read_text())
    here = sysconfig.get_platform(), sys.implementation.cache_tag
    if (data["platform"], data["python"]) != here:
        raise SystemExit(
            f"Error: wheelhouse {folder} was built for {data['platform']} {data['python']}, this Python is "
            f"{here[0]} {here[1]}; build it on a machine with the same OS and Python version"
        )
    for entry in data["files"]:
        wheel = folder / entry["file"]
        if not wheel.is_file():
            raise SystemExit(f"Error: {wheel} is missing; copy the whole wheelhouse folder again")
        if sha256(wheel) != entry["sha256"]:
            raise SystemExit(f"Error: {wheel} does not match its sha256 in {MANIFEST}; copy it again")
    return data


def main() -> None:
    """Dispatch the three sub-commands."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("wheel", type=Path)
    rec.add_argument("--kind", required=True, help="portable or native")
    rec.add_argument("--baseline", required=True, help="instruction-set baseline, e.g. x86-64-v3")
    rec.add_argument("--cmake-args", required=True)
    rec.add_argument("--compiler", default="")
    man = sub.add_parser("manifest")
    man.add_argument("folder", type=Path)
    man.add_argument("--extras", default="")
    man.add_argument("--llama-wheel")
    ver = sub.add_parser("verify")
    ver.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.cmd == "record":
        build = {
            "kind": args.kind,
            "baseline": args.baseline,
            "cmake_args": args.cmake_args,
            "compiler": args.compiler,
            "built_by": "scripts/wheelhouse.sh",
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "built_on": {"machine": platform.machine(), "cpu": _cpu_model()},
        }
        record(args.wheel, build)
    elif args.cmd == "manifest":
        data = manifest(args.folder, args.extras, args.llama_wheel)
        mib = data["total_bytes"] / 2**20
        print(f"wheelhouse {args.folder}: {len(data['files'])} wheels, {mib:.0f} MiB, manifest {MANIFEST}")
    else:
        data = verify(args.folder)
        print(f"wheelhouse {args.folder}: {len(data['files'])} wheels verified (sha256)")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
