"""The int8 ONNX file with its weight correction written in, built once into the user's cache.

An int8 MiniLM file stores each matrix as `Cast(int8) × scale`; its correction
(`int8-correction.npz`, made by scripts/make_int8_correction.py) holds each weight's rounding
error in 2 bits. `corrected_model` writes a copy of the ONNX file whose int8 matrices are
replaced by the corrected values in int8 steps (int8 + correction, exact in float16: at most
7 integer and 3 fraction bits), so onnxruntime loads it like any model: a one-shot query runs
it as it is, bulk embedding with graph optimizations that fold `Cast × scale` into float32
matrices once. The node rewrites of `onnx_graph` go with it (same numbers up to rounding
order): token rows looked up before they are dequantized (kb query peak RSS 260 → 140 MiB),
the export's never-firing NaN guard after each softmax dropped, GELU and attention fused into
onnxruntime's BiasGelu and MultiHeadAttention kernels (ingest 0.58 → 0.89× torch), the attention
without its key padding mask so onnxruntime runs its flash kernel (the embedder feeds this model
unpadded batches). The copy is keyed by sha256 of the ONNX file, the correction and `FORMAT`,
written atomically (copies of older sources are removed) and never downloaded; where the cache
folder cannot be written the same bytes are built in memory. The file is trusted by its
content, not its name: a record of its sha256 and stat is written beside it, and a symbolic
link, a file whose bytes changed, or a file or folder another user owns or can write is
rebuilt (in memory, with a warning naming the fix, when the folder itself is not private).

No `onnx` package at run time: the ONNX protobuf is edited on the wire (ModelProto field 7 is
the graph, 8 an opset import; GraphProto field 1 a node, 5 an initializer, 12 an output;
TensorProto fields 1 dims, 2 data_type, 8 name, 9 raw_data); every other byte is copied as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import mmap
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.files import not_private, stat_record
from deepresearch.models.onnx_graph import (
    MS_DOMAIN,
    Node,
    encode_varint,
    fields,
    length_delimited,
    rewrite_nodes,
    uses_contrib_ops,
    varint,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# Part of the cache key: bump it when the rewrite changes, so older cache files are not used.
FORMAT = 4  # 4: attention without the key padding mask (onnx_graph.fused_attention)
_FLOAT16 = 10  # TensorProto.DataType


def corrected_weights(onnx_path: Path, correction: Path) -> dict[str, np.ndarray] | None:
    """Float16 stand-ins for the int8 matrices of `onnx_path` (in int8 steps: int8 value + its correction).

    None, with a warning, when the ONNX file does not hold the int8 data the correction was made
    for (checked by sha256 over exactly the bytes it reads)."""
    import numpy as np

    with onnx_path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as raw:
        with np.load(correction, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            tensors = meta["tensors"]
            slices = [(t["offset"], math.prod(t["shape"])) for t in tensors]
            digest = hashlib.sha256()
            for offset, count in slices:
                digest.update(raw[offset : offset + count])
            if digest.hexdigest() != meta["weights_sha256"]:
                log.warning(
                    "%s was made for another ONNX file than %s; its int8 weights are used as they are",
                    correction,
                    onnx_path,
                )
                return None
            bits = int(meta["bits"])
            levels, shifts = 1 << bits, np.arange(0, 8, bits, dtype=np.uint8)
            # the middle of each error cell, in int8 steps (2 bits: -0.375, -0.125, 0.125, 0.375), looked
            # up per packed byte: one table row holds the values of the 8 // bits weights in that byte
            middles = ((np.arange(levels, dtype=np.float32) + 0.5) / levels - 0.5).astype(np.float16)
            table = middles[(np.arange(256, dtype=np.uint8)[:, None] >> shifts) & (levels - 1)]
            weights = {}
            for tensor, (offset, count) in zip(tensors, slices, strict=True):
                values = table[data[tensor["name"]]].reshape(-1)[:count]
                values += np.frombuffer(raw, dtype=np.int8, count=count, offset=offset)
                weights[tensor["name"]] = values.reshape(tensor["shape"])
    return weights


def _tensor(name: str, array: np.ndarray) -> list[bytes]:
    """A float16 TensorProto (dims, data_type, name, raw_data) as byte pieces."""
    head = b"".join(encode_varint(1 << 3) + encode_varint(d) for d in array.shape)
    head += encode_varint(2 << 3) + encode_varint(_FLOAT16)
    encoded = name.encode()
    head += length_delimited(8, len(encoded)) + encoded
    data = array.astype("<f2").tobytes()
    return [head, length_delimited(9, len(data)), data]


def rewrite(buf: bytes | mmap.mmap, replacements: dict[str, np.ndarray]) -> list[bytes]:
    """The ONNX model in `buf` with the named graph initializers replaced (float16) and the nodes
    rewritten (`onnx_graph.rewrite_nodes`), as byte pieces."""
    model: list[bytes] = []
    done: set[str] = set()
    contrib = False
    for number, first, start, end in fields(buf, 0, len(buf)):
        if number != 7:  # ModelProto.graph
            model.append(buf[first:end])
            continue
        graph: list[bytes] = []
        nodes: list[Node] = []
        shapes: dict[str, list[int]] = {}
        scalars: dict[str, float] = {}
        outputs: list[str] = []
        for g_number, g_first, g_start, g_end in fields(buf, start, end):
            if g_number == 1:  # GraphProto.node
                nodes.append(Node.parse(buf[g_start:g_end]))
                continue
            if g_number == 12:  # GraphProto.output: ValueInfoProto, name 1
                outputs += [bytes(buf[s:e]).decode() for n, _, s, e in fields(buf, g_start, g_end) if n == 1]
            if g_number == 5:  # GraphProto.initializer
                name, dims, data_type, raw = "", [], 0, b""
                for n, _, s, e in fields(buf, g_start, g_end):
                    if n == 8:
                        name = bytes(buf[s:e]).decode()
                    elif n == 1:
                        dims.append(varint(buf, s)[0])
                    elif n == 2:
                        data_type = varint(buf, s)[0]
                    elif n == 9 and e - s == 4:
                        raw = bytes(buf[s:e])
                shapes[name] = dims
                if data_type == 1 and raw:  # a float32 scalar: the rewrites check constants
                    scalars[name] = struct.unpack("<f", raw)[0]
                if name in replacements:
                    tensor = _tensor(name, replacements[name])
                    graph += [length_delimited(5, sum(map(len, tensor))), *tensor]
                    done.add(name)
                    continue
            graph.append(buf[g_first:g_end])
        nodes = rewrite_nodes(nodes, shapes, scalars, outputs)
        contrib = contrib or uses_contrib_ops(nodes)
        for node in nodes:
            encoded = node.encode()
            graph.append(length_delimited(1, len(encoded)) + encoded)
        model += [length_delimited(7, sum(map(len, graph))), *graph]
    missing = sorted(set(replacements) - done)
    if missing:
        raise ValueError(f"initializers not found in the ONNX graph: {', '.join(missing[:3])}")
    if contrib:  # ModelProto.opset_import: OperatorSetIdProto domain 1, version 2
        domain = MS_DOMAIN.encode()
        opset = length_delimited(1, len(domain)) + domain + encode_varint(2 << 3) + encode_varint(1)
        model.append(length_delimited(8, len(opset)) + opset)
    return model


def cache_key(*paths: Path, salt: str = "") -> str:
    """sha256 over FORMAT, `salt` and the files' bytes (the ONNX file and its correction), shortened."""
    digest = hashlib.sha256(f"format {FORMAT}\n{salt}".encode())
    for path in paths:
        with path.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:20]


def corrected_model(
    onnx_path: Path, correction: Path, cache_dir: Path, *, rebuild: bool = False
) -> Path | bytes | None:
    """The corrected model: a file in `cache_dir` (built on first use), its bytes if that folder cannot
    be written or is not private, or None when the correction does not fit the ONNX file (use the file
    as it is). A cached file is used only while it is verified (`verified`); else it is rebuilt."""
    stem = f"{onnx_path.stem}-corrected"
    target = cache_dir / f"{stem}-{cache_key(onnx_path, correction)}.onnx"
    hit, unsafe = cached(target, cache_dir, rebuild)
    if hit is not None:
        return hit
    weights = corrected_weights(onnx_path, correction)
    if weights is None:
        return None
    with onnx_path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as raw:
        pieces = rewrite(raw, weights)
    del weights
    return stored(target, pieces, stem, unsafe)


def cached(target: Path, cache_dir: Path, rebuild: bool) -> tuple[Path | None, str | None]:
    """(`target` if it is there and verified, else None; why `cache_dir` cannot be trusted, or None)."""
    unsafe = folder_problem(cache_dir)
    if unsafe is None and not rebuild and os.path.lexists(target):
        problem = verified(target)
        if problem is None:
            return target, None
        log.warning("%s; rebuilding it", problem)
    return None, unsafe


def stored(target: Path, pieces: list[bytes], prefix: str, unsafe: str | None) -> Path | bytes:
    """The built model written as `target` (older `prefix-*` copies removed), or its bytes where the
    cache folder is not private (`unsafe`) or cannot be written."""
    if unsafe is not None:
        log.warning("%s; the embedding model is built in memory instead (≈0.3 s per process)", unsafe)
        return b"".join(pieces)
    return _write(target, pieces, prefix)


# --- the cached file is trusted by its content, not its name ---------------------------------
# Beside each cached model, `<name>.sha256.json` records the sha256 of the bytes written and the
# file's stat after the rename. A load that finds the same stat (size, mtime, ctime, inode, device:
# ctime cannot be set back, any write or rename changes it) trusts the file for the cost of two
# stat calls; any other stat re-hashes the file (≈30 ms for 34 MB) and rebuilds it on a mismatch.
# A symbolic link, or a file or folder another user owns or can write, is never trusted.
RECORD_SUFFIX = ".sha256.json"


def folder_problem(cache_dir: Path) -> str | None:
    """Why files in `cache_dir` cannot be trusted (another user owns it or can write to it), or None
    (also when it does not exist yet: it is created 0700)."""
    try:
        info = cache_dir.stat()
    except OSError:
        return None
    why = not_private(info)
    if why is None:
        return None
    return (
        f"the model cache folder {cache_dir} {why} — chmod 700 {cache_dir} if it is yours, or set"
        " XDG_CACHE_HOME to a folder of your own"
    )


def verified(target: Path) -> str | None:
    """None if `target` holds the bytes written into the cache (checked by its record's stat, else
    by its sha256); else why not (a symbolic link, not private, no record, changed since written)."""
    import stat

    info = target.lstat()
    if not stat.S_ISREG(info.st_mode):
        return f"the cached embedding model {target} is not a regular file (a symbolic link?)"
    why = not_private(info)
    if why is not None:
        return f"the cached embedding model {target} {why}"
    record_path = target.with_name(target.name + RECORD_SUFFIX)
    try:
        if not stat.S_ISREG(record_path.lstat().st_mode) or not_private(record_path.lstat()):
            raise ValueError("not a private regular file")
        record = json.loads(record_path.read_text(encoding="utf-8"))
        expected, seen = str(record["sha256"]), record["stat"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"the cached embedding model {target} has no readable sha256 record"
    if seen == stat_record(info):
        return None
    with target.open("rb") as handle:
        if hashlib.file_digest(handle, "sha256").hexdigest() != expected:
            return f"the cached embedding model {target} does not match the sha256 recorded when it was written"
    _record(target, expected)  # same bytes, another stat (copied back, touched): remember the new one
    return None


def _record(target: Path, digest: str) -> None:
    """Write `target`'s sha256 record (atomically, 0600)."""
    record_path = target.with_name(target.name + RECORD_SUFFIX)
    tmp = record_path.with_name(f"{record_path.name}.{os.getpid()}.part")
    data = json.dumps({"sha256": digest, "stat": stat_record(target.lstat())})
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(data)
    os.replace(tmp, record_path)


def _write(target: Path, pieces: list[bytes], prefix: str) -> Path | bytes:
    """Write the model into its private cache folder with its sha256 record; its bytes if that fails."""
    cache_dir = target.parent
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            for piece in pieces:
                out.write(piece)
                digest.update(piece)
        os.replace(tmp, target)  # a concurrent process never loads a half-written file
        _record(target, digest.hexdigest())
    except OSError as exc:
        log.info("cannot write the corrected model into %s (%s); building it in memory", cache_dir, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return b"".join(pieces)
    log.info("wrote the embedding model %s", target)
    for stale in cache_dir.glob(f"{prefix}-*.onnx*"):
        if stale.name not in (target.name, target.name + RECORD_SUFFIX) and not stale.name.endswith(".part"):
            with contextlib.suppress(OSError):  # made from an older source or rewrite (34 MB each)
                stale.unlink()
    return target
