"""Issue 21 (5): the corrected ONNX model in the cache is trusted by its content, not its name.

Real files throughout: a symlink to the uncorrected model, one scaled weight matrix (mtime put
back), a file owned by another user or writable by others, and a shared cache folder are each
detected; the vectors stay those of the correct model."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat

import numpy as np
import pytest

from deepresearch.files import stat_record
from deepresearch.models import embed, onnx_model
from deepresearch.models.onnx_embed import CORRECTION_FILE, Correction, OnnxEmbedder

CORRECTION = embed.SHIPPED_TOKENIZER / CORRECTION_FILE
SENTENCES = ["SQLite in WAL mode lets readers continue while one writer appends.", "GPU shipments rose 40%."]


def _embedder(cache_dir):  # type: ignore[no-untyped-def]
    source, tokenizer = embed.onnx_files(None)
    return OnnxEmbedder(source, tokenizer, embed.DEFAULT_MODEL_ID, correction=Correction(CORRECTION, cache_dir))


@pytest.fixture(scope="module")
def good_vectors(tmp_path_factory):  # type: ignore[no-untyped-def]
    return _embedder(tmp_path_factory.mktemp("good") / "cache").embed_batch(SENTENCES)


def _cached(cache):  # type: ignore[no-untyped-def]
    (path,) = sorted(cache.glob("*.onnx"))
    return path


def _built(tmp_path, good_vectors):  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    assert np.array_equal(_embedder(cache).embed_batch(SENTENCES), good_vectors)
    return cache, _cached(cache)


def _scaled_model(path) -> bytes:  # type: ignore[no-untyped-def]
    """The corrected model with one weight matrix scaled by 1.5: loads fine, other vectors."""
    source = embed.onnx_files(None)[0]
    weights = onnx_model.corrected_weights(source, CORRECTION)
    assert weights is not None
    name = sorted(weights)[3]
    weights[name] = weights[name] * 1.5
    with source.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as raw:
        return b"".join(onnx_model.rewrite(raw, weights))


def test_a_symlink_to_the_uncorrected_model_is_replaced(tmp_path, good_vectors, caplog) -> None:
    cache, path = _built(tmp_path, good_vectors)
    path.unlink()
    path.symlink_to(embed.onnx_files(None)[0])  # the int8 file without its correction
    assert np.array_equal(_embedder(cache).embed_batch(SENTENCES), good_vectors)
    assert "is not a regular file" in caplog.text and "rebuilding it" in caplog.text
    assert not path.is_symlink() and path.is_file()


def test_one_scaled_weight_matrix_is_detected_by_its_sha256(tmp_path, good_vectors, caplog) -> None:
    cache, path = _built(tmp_path, good_vectors)
    before = path.stat()
    path.write_bytes(_scaled_model(path))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime put back, as a careful attacker would
    tampered = OnnxEmbedder(path, embed.onnx_files(None)[1], "tampered").embed_batch(SENTENCES)
    assert not np.allclose(tampered, good_vectors, atol=1e-3)  # the tampered file alone gives other scores
    assert np.array_equal(_embedder(cache).embed_batch(SENTENCES), good_vectors)
    assert "does not match the sha256 recorded" in caplog.text


@pytest.mark.parametrize("how", ["another user owns it", "others can write it"])
def test_a_cached_file_that_is_not_ours_alone_is_rebuilt(tmp_path, good_vectors, caplog, how) -> None:
    cache, path = _built(tmp_path, good_vectors)
    if how == "another user owns it":
        if os.geteuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(path, 65534, 65534)
    else:
        path.chmod(0o666)
    assert np.array_equal(_embedder(cache).embed_batch(SENTENCES), good_vectors)
    assert "rebuilding it" in caplog.text
    info = path.lstat()
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o600


def test_a_shared_cache_folder_is_not_trusted_and_the_model_is_built_in_memory(tmp_path, good_vectors, caplog) -> None:
    cache, path = _built(tmp_path, good_vectors)
    path.write_bytes(_scaled_model(path))  # planted by another user of the shared folder …
    record = path.with_name(path.name + onnx_model.RECORD_SUFFIX)
    planted = json.loads(record.read_text())
    planted["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()  # … with a matching record
    planted["stat"] = stat_record(path.lstat())
    record.write_text(json.dumps(planted))
    cache.chmod(0o777)
    assert isinstance(onnx_model.corrected_model(embed.onnx_files(None)[0], CORRECTION, cache), bytes)
    assert np.array_equal(_embedder(cache).embed_batch(SENTENCES), good_vectors)
    assert f"chmod 700 {cache}" in caplog.text and "built in memory" in caplog.text


def test_a_verified_file_costs_no_hash_and_a_copied_back_file_one(tmp_path, good_vectors, monkeypatch) -> None:
    cache, path = _built(tmp_path, good_vectors)
    hashed: list[str] = []
    real = hashlib.file_digest

    def counting(handle, digest):  # type: ignore[no-untyped-def]
        hashed.append(os.path.basename(handle.name))
        return real(handle, digest)

    monkeypatch.setattr(onnx_model.hashlib, "file_digest", counting)
    source = embed.onnx_files(None)[0]
    assert onnx_model.corrected_model(source, CORRECTION, cache) == path
    assert path.name not in hashed  # same stat as recorded: trusted without reading it
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # the same bytes, another inode and ctime
    path.chmod(0o600)
    assert onnx_model.corrected_model(source, CORRECTION, cache) == path
    assert hashed.count(path.name) == 1
    assert onnx_model.verified(path) is None  # the new stat is recorded
    assert hashed.count(path.name) == 1


def test_the_cache_folder_and_files_are_created_private(tmp_path, good_vectors) -> None:
    cache, path = _built(tmp_path, good_vectors)
    record = path.with_name(path.name + onnx_model.RECORD_SUFFIX)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (cache, path, record)}
    assert modes == {"cache": 0o700, path.name: 0o600, record.name: 0o600}


def test_onnxruntime_telemetry_is_off(tmp_path) -> None:
    """Issue 21 (8): onnxruntime wrote a device id under $XDG_CACHE_HOME/Microsoft, and printed a
    coloured warning when it could not; an offline tool turns its telemetry off."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (
        "from deepresearch.config import EmbeddingConfig\n"
        "from deepresearch.models.embed import get_embedder\n"
        "print(get_embedder(EmbeddingConfig()).embed('offline').shape)\n"
    )
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for cache in (tmp_path / "cache", blocked / "cache"):  # writable, then not writable at all
        env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
        env.update(XDG_CACHE_HOME=str(cache), PYTHONPATH=str(root))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "(384,)", proc.stderr
        assert "telemetry" not in proc.stderr.lower() and "\x1b[" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["deepresearch"]
