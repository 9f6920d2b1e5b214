"""The int8 ONNX file with its weight correction written in, built once into the user's cache.

An int8 MiniLM file stores each matrix as `Cast(int8) × scale`; its correction
(`int8-correction.npz`, made by scripts/make_int8_correction.py) holds each weight's rounding
error in 2 bits. `corrected_model` writes a copy of the ONNX file whose int8 matrices are
replaced by the corrected values in int8 steps (int8 + correction, exact in float16: at most
7 integer and 3 fraction bits), so onnxruntime loads it like any model: a one-shot query runs
it as it is, bulk embedding with graph optimizations that fold `Cast × scale` into float32
matrices once. Two node rewrites that give the same numbers go with it: the token table is
dequantized per looked-up row instead of whole (kb query peak RSS 260 → 140 MiB), and the
export's NaN guard after each attention softmax, which never fires here, is dropped (≈20 % of
a 256-token run). The copy is keyed by sha256 of the ONNX file, the correction and `FORMAT`,
written atomically and never downloaded; where the cache folder cannot be written the same
bytes are built in memory.

No `onnx` package at run time: the ONNX protobuf is edited on the wire (ModelProto field 7 is
the graph, GraphProto field 5 its initializers, TensorProto fields 1 dims, 2 data_type,
8 name, 9 raw_data); every other byte is copied as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# Part of the cache key: bump it when the rewrite changes, so older cache files are not used.
FORMAT = 2
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


def _varint(buf: bytes | mmap.mmap, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf: bytes | mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, field start, value start, value end) of each field of the message in buf[start:end]."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value_end = _varint(buf, pos)[1]
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value_end = pos + size
        elif wire in (1, 5):
            value_end = pos + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {first}")
        if value_end > end:
            raise ValueError(f"protobuf field {number} at byte {first} runs past its message")
        yield number, first, pos, value_end
        pos = value_end


def _length_delimited(number: int, size: int) -> bytes:
    """The key and length prefix of a length-delimited field of `size` bytes."""
    return _encode_varint(number << 3 | 2) + _encode_varint(size)


def _tensor(name: str, array: np.ndarray) -> list[bytes]:
    """A float16 TensorProto (dims, data_type, name, raw_data) as byte pieces."""
    head = b"".join(_encode_varint(1 << 3) + _encode_varint(d) for d in array.shape)
    head += _encode_varint(2 << 3) + _encode_varint(_FLOAT16)
    encoded = name.encode()
    head += _length_delimited(8, len(encoded)) + encoded
    data = array.astype("<f2").tobytes()
    return [head, _length_delimited(9, len(data)), data]


@dataclass
class _Node:
    """A NodeProto: inputs (field 1), outputs (2), op_type (4); every other field kept as raw bytes."""

    inputs: list[str]
    outputs: list[str]
    op_type: str
    rest: bytes = b""

    @classmethod
    def parse(cls, buf: bytes) -> _Node:
        node = cls([], [], "")
        rest = []
        for number, first, start, end in _fields(buf, 0, len(buf)):
            if number in (1, 2):
                (node.inputs if number == 1 else node.outputs).append(buf[start:end].decode())
            elif number == 4:
                node.op_type = buf[start:end].decode()
            else:
                rest.append(buf[first:end])
        node.rest = b"".join(rest)
        return node

    def encode(self) -> bytes:
        out = [self.rest]
        for number, value in [*((1, i) for i in self.inputs), *((2, o) for o in self.outputs), (4, self.op_type)]:
            encoded = value.encode()
            out.append(_length_delimited(number, len(encoded)) + encoded)
        return b"".join(out)

    def int_attributes(self) -> dict[str, int]:
        """The node's integer attributes (AttributeProto name 1, i 3) by name; others map to -1."""
        found = {}
        for number, _, start, end in _fields(self.rest, 0, len(self.rest)):
            if number == 5:
                name, value = "", -1
                for n, _, s, e in _fields(self.rest, start, end):
                    if n == 1:
                        name = self.rest[s:e].decode()
                    elif n == 3:
                        value = _varint(self.rest, s)[0]
                found[name] = value
        return found


def _attribute_int(name: str, value: int) -> bytes:
    """A NodeProto.attribute field holding an INT AttributeProto (name 1, i 3, type 20 = INT)."""
    encoded = name.encode()
    body = _length_delimited(1, len(encoded)) + encoded + _encode_varint(3 << 3) + _encode_varint(value)
    body += _encode_varint(20 << 3) + _encode_varint(2)
    return _length_delimited(5, len(body)) + body


_CAST_TO_FLOAT = _attribute_int("to", 1)


def lookup_before_dequantize(nodes: list[_Node], shapes: dict[str, list[int]]) -> list[_Node]:
    """`Gather(Cast(table_q) × scale, ids)` as `Cast(Gather(table_q, ids)) × Gather(scale, ids)`.

    The same numbers, but a one-shot query dequantizes the rows it looks up instead of the whole
    30,522 × 384 token table (two 47 MB float32 temporaries per call). Only for a per-row scale
    (shape [rows, 1]) and a table read by axis-0 Gathers alone."""
    producer = {o: n for n in nodes for o in n.outputs}
    consumers: dict[str, list[_Node]] = {}
    for node in nodes:
        for name in node.inputs:
            consumers.setdefault(name, []).append(node)
    dropped: set[int] = set()
    out: list[_Node] = []
    for node in nodes:
        gather = node.op_type == "Gather" and node.int_attributes().get("axis", 0) == 0
        mul = producer.get(node.inputs[0]) if gather else None
        cast = producer.get(mul.inputs[0]) if mul is not None and mul.op_type == "Mul" else None
        if (
            mul is None
            or cast is None
            or cast.op_type != "Cast"
            or cast.inputs[0] not in shapes
            or shapes.get(mul.inputs[1]) != [shapes[cast.inputs[0]][0], 1]
            or any(c.op_type != "Gather" or c.int_attributes().get("axis", 0) for c in consumers[mul.outputs[0]])
            or len(consumers[cast.outputs[0]]) != 1
        ):
            out.append(node)
            continue
        table_q, scale, (ids,), (result,) = cast.inputs[0], mul.inputs[1], node.inputs[1:], node.outputs
        dropped.update((id(mul), id(cast)))
        out += [
            _Node([table_q, ids], [f"{result}_q"], "Gather"),
            _Node([scale, ids], [f"{result}_scale"], "Gather"),
            _Node([f"{result}_q"], [f"{result}_f"], "Cast", _CAST_TO_FLOAT),
            _Node([f"{result}_f", f"{result}_scale"], [result], "Mul"),
        ]
    return [n for n in out if id(n) not in dropped]


def without_nan_guard(nodes: list[_Node]) -> list[_Node]:
    """Drop `Where(IsNaN(softmax), 0, softmax)` after each attention softmax (the export's guard for
    a fully masked row): every row here sees at least [CLS] and [SEP], so the guard never fires,
    and on 256-token chunks its two passes over the [batch, heads, tokens, tokens] scores cost
    ≈20 % of the run (onnxruntime profile)."""
    producer = {o: n for n in nodes for o in n.outputs}
    renamed: dict[str, str] = {}
    dropped: set[int] = set()
    for node in nodes:
        if node.op_type != "Where" or len(node.inputs) != 3:
            continue
        isnan, softmax = producer.get(node.inputs[0]), producer.get(node.inputs[2])
        if isnan and softmax and isnan.op_type == "IsNaN" and softmax.op_type == "Softmax":
            if isnan.inputs[0] == softmax.outputs[0]:
                renamed[node.outputs[0]] = softmax.outputs[0]
                dropped.update((id(node), id(isnan)))
    kept = [n for n in nodes if id(n) not in dropped]
    for node in kept:
        node.inputs = [renamed.get(i, i) for i in node.inputs]
    return kept


def rewrite(buf: bytes | mmap.mmap, replacements: dict[str, np.ndarray]) -> list[bytes]:
    """The ONNX model in `buf` with the named graph initializers replaced (float16) and the nodes
    rewritten (`lookup_before_dequantize`, `without_nan_guard`), as byte pieces."""
    model: list[bytes] = []
    done: set[str] = set()
    for number, first, start, end in _fields(buf, 0, len(buf)):
        if number != 7:  # ModelProto.graph
            model.append(buf[first:end])
            continue
        graph: list[bytes] = []
        nodes: list[_Node] = []
        shapes: dict[str, list[int]] = {}
        for g_number, g_first, g_start, g_end in _fields(buf, start, end):
            if g_number == 1:  # GraphProto.node
                nodes.append(_Node.parse(buf[g_start:g_end]))
                continue
            if g_number == 5:  # GraphProto.initializer
                name, dims = "", []
                for n, _, s, e in _fields(buf, g_start, g_end):
                    if n == 8:
                        name = bytes(buf[s:e]).decode()
                    elif n == 1:
                        dims.append(_varint(buf, s)[0])
                shapes[name] = dims
                if name in replacements:
                    tensor = _tensor(name, replacements[name])
                    graph += [_length_delimited(5, sum(map(len, tensor))), *tensor]
                    done.add(name)
                    continue
            graph.append(buf[g_first:g_end])
        for node in without_nan_guard(lookup_before_dequantize(nodes, shapes)):
            encoded = node.encode()
            graph.append(_length_delimited(1, len(encoded)) + encoded)
        model += [_length_delimited(7, sum(map(len, graph))), *graph]
    missing = sorted(set(replacements) - done)
    if missing:
        raise ValueError(f"initializers not found in the ONNX graph: {', '.join(missing[:3])}")
    return model


def cache_key(*paths: Path) -> str:
    """sha256 over FORMAT and the files' bytes (the ONNX file and its correction), shortened."""
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    for path in paths:
        with path.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:20]


def corrected_model(
    onnx_path: Path, correction: Path, cache_dir: Path, *, rebuild: bool = False
) -> Path | bytes | None:
    """The corrected model: a file in `cache_dir` (built on first use), its bytes if that folder cannot
    be written, or None when the correction does not fit the ONNX file (use the file as it is)."""
    target = cache_dir / f"{onnx_path.stem}-corrected-{cache_key(onnx_path, correction)}.onnx"
    if target.is_file() and not rebuild:
        return target
    weights = corrected_weights(onnx_path, correction)
    if weights is None:
        return None
    with onnx_path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as raw:
        pieces = rewrite(raw, weights)
    del weights
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as out:
            for piece in pieces:
                out.write(piece)
        os.replace(tmp, target)  # a concurrent process never loads a half-written file
    except OSError as exc:
        log.info("cannot write the corrected model into %s (%s); building it in memory", cache_dir, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return b"".join(pieces)
    log.info("wrote the corrected embedding model %s", target)
    return target
