"""Integer matrix products for bulk corpus embedding: the corrected model with int8 matrices.

`quantized_model` writes, once, a copy of the corrected model (`onnx_model.corrected_model`) in
which every `MatMul(x, Cast(w) × scale)` is a com.microsoft `DynamicQuantizeMatMul`: 8-bit weights
with one scale per output column, the activations quantized per call to uint8 with one scale per
tensor, products in integers (VNNI/AMX on CPUs that have them: ≈ 2× the float model's chunks
per second on 256-token chunks; a 766-page folder's vectors in 0.64× the time on a nearly quiet
machine, docs/BENCHMARKS.md session 13). A per-tensor scale is what breaks plain int8 here
(session 10: cosine 0.977 to the float model at worst on STS-B): a few channels of the
activations are 10-15× larger than the rest and set the step for all of them.
Two measured remedies, chosen by what produces the input (`int8-activations.npz` holds each
input's largest value per channel, measured on HotpotQA paragraphs by
scripts/make_int8_calibration.py — neither the SciFact nor the STS-B sets the figures are
reported on):
- LayerNormalization outputs (query/key/value and FFN-in): SmoothQuant — the input is divided
  per channel by s = max|x|^α / max|w|^(1-α) (one Mul, shared by the matrices that read it) and
  the weight rows multiplied by s, so the outlier channels are flattened into the weights;
- BiasGelu outputs (FFN-out), whose GELU cannot absorb a scale: the `OUTLIERS` largest channels
  are zeroed for the int8 product and added back by a small float product (Gather + MatMul).
Each matrix's bias goes into the DynamicQuantizeMatMul. The weights are stored unsigned, offset by a zero point of
128 (`quantize_columns`): with signed weights, a CPU with AVX2 but no VNNI multiplies uint8 by int8 with an
instruction that adds pairs of products into 16 bits and saturates (255·127·2 > 32767), and there the vectors drifted
from the float model's (cosine 0.987 at worst on HotpotQA paragraphs, on an AMD EPYC with onnxruntime 1.32);
unsigned by unsigned is widened to 16 bits first and exact on every CPU (0.9987, and 1.26× the chunks a second
there; docs/BENCHMARKS.md, session 28). The vector of a text depends on what
else is in its batch (one activation scale per tensor), so this model is run one text per batch.
Queries and knowledge-base facts never use it (models/onnx_embed: `embed_documents` only).

The copy is cached like the corrected one (keyed by sha256 of the ONNX file, the correction, the
calibration and `INT8_FORMAT`, atomic, verified by its sha256 record, rebuilt when it does not
load) and never downloaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deepresearch.models.onnx_graph import (
    Node,
    attribute_int,
    contrib,
    encode_varint,
    fields,
    length_delimited,
    links,
    varint,
    without_unused,
)
from deepresearch.models.onnx_model import cache_key, cached, corrected_model, stored

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

INT8_FORMAT = 2  # part of the cache key: bump it when the rewrite below changes
CALIBRATION_FILE = "int8-activations.npz"  # beside the tokenizer and the correction
ALPHA = 0.75  # SmoothQuant's migration strength (HotpotQA paragraphs: 0.5 / 0.6 / 0.75 → 0.75)
OUTLIERS = 8  # channels of each GELU output kept in float
_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 7: "<i8", 10: "<f2"}  # TensorProto.DataType → numpy


def tensor_field(name: str, array: np.ndarray) -> bytes:
    """A GraphProto.initializer field: TensorProto dims 1, data_type 2, name 8, raw_data 9."""
    codes = {v: k for k, v in _DTYPES.items()}
    body = b"".join(encode_varint(1 << 3) + encode_varint(d) for d in array.shape)
    body += encode_varint(2 << 3) + encode_varint(codes[array.dtype.str.replace("|", "")])
    encoded, data = name.encode(), array.tobytes()
    body += length_delimited(8, len(encoded)) + encoded + length_delimited(9, len(data)) + data
    return length_delimited(5, len(body)) + body


@dataclass
class Graph:
    """A GraphProto read off the wire: nodes, initializers (name → field bytes) and other fields."""

    nodes: list[Node] = field(default_factory=list)
    initializers: dict[str, bytes] = field(default_factory=dict)
    other: list[bytes] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, buf: bytes | mmap.mmap, start: int, end: int) -> Graph:
        graph = cls()
        for number, first, value, last in fields(buf, start, end):
            if number == 1:  # GraphProto.node
                graph.nodes.append(Node.parse(bytes(buf[value:last])))
            elif number == 5:  # GraphProto.initializer, found by its name (TensorProto field 8)
                name = next(bytes(buf[s:e]).decode() for n, _, s, e in fields(buf, value, last) if n == 8)
                graph.initializers[name] = bytes(buf[first:last])
            else:
                graph.other.append(bytes(buf[first:last]))
                if number == 12:  # GraphProto.output: ValueInfoProto, name 1
                    graph.outputs += [bytes(buf[s:e]).decode() for n, _, s, e in fields(buf, value, last) if n == 1]
        return graph

    def array(self, name: str) -> np.ndarray:
        """An initializer (raw_data) as a numpy array."""
        import numpy as np

        raw = self.initializers[name]
        _, value, last = next((f, s, e) for n, f, s, e in fields(raw, 0, len(raw)) if n == 5)
        dims, dtype, data = [], 0, b""
        for number, _, start, end in fields(raw, value, last):
            if number == 1:
                dims.append(varint(raw, start)[0])
            elif number == 2:
                dtype = varint(raw, start)[0]
            elif number == 9:
                data = raw[start:end]
        return np.frombuffer(data, dtype=_DTYPES[dtype]).reshape(dims)

    def encode(self, added: dict[str, np.ndarray]) -> bytes:
        """The graph with unread nodes and initializers dropped and `added` initializers appended."""
        nodes = without_unused(self.nodes, self.outputs)
        read = {i for n in nodes for i in n.inputs}
        pieces = [length_delimited(1, len(e)) + e for e in (n.encode() for n in nodes)]
        pieces += [raw for name, raw in self.initializers.items() if name in read]
        pieces += [tensor_field(name, array) for name, array in added.items()]
        return b"".join(pieces + self.other)


@dataclass
class Linear:
    """A `MatMul(x, Cast(w) × scale)` of the corrected model, and the bias added to its output."""

    matmul: Node
    weight: np.ndarray  # float32 [in, out]
    bias_add: Node | None  # an `Add(output, bias initializer)` that is its only reader


def linears(graph: Graph) -> list[Linear]:
    """Every matrix product on a dequantized weight (the corrected model's `Cast × scale`)."""
    producer, consumers = links(graph.nodes)
    found = []
    for node in graph.nodes:
        mul = producer.get(node.inputs[1]) if node.op_type == "MatMul" else None
        cast = producer.get(mul.inputs[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.inputs[0] not in graph.initializers:
            continue
        if mul is None or mul.inputs[1] not in graph.initializers:
            continue
        weight = graph.array(cast.inputs[0]).astype("<f4") * graph.array(mul.inputs[1])
        readers = consumers.get(node.outputs[0], [])
        add = readers[0] if len(readers) == 1 and readers[0].op_type == "Add" else None
        bias = add is not None and add.inputs[0] == node.outputs[0] and add.inputs[1] in graph.initializers
        found.append(Linear(node, weight, add if bias else None))
    return found


def smoothing(maxima: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    """SmoothQuant's per-channel divisor of an input read by `weights`, geometric mean 1."""
    import numpy as np

    weight_max = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)
    s = np.maximum(maxima, 1e-5) ** ALPHA / np.maximum(weight_max, 1e-5) ** (1 - ALPHA)
    return (s / np.exp(np.log(s).mean())).astype("<f4")


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 weight, float32 scale and uint8 zero point per output column): symmetric ±127 steps, stored offset by
    the zero point 128."""
    import numpy as np

    scale = (np.maximum(np.abs(weight).max(axis=0), 1e-12) / 127).astype("<f4")
    zero = np.full(scale.shape, 128, dtype="u1")
    return (np.clip(np.round(weight / scale), -127, 127) + 128).astype("u1"), scale, zero


def plan(
    producer_op: str, maxima: np.ndarray | None, weights: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(per-channel divisor s, channels kept in float or None) for an input made by `producer_op`
    and read by `weights`; None: quantized as it is (no maxima, or another producer)."""
    import numpy as np

    if maxima is None:
        return None
    if producer_op == "LayerNormalization":
        return smoothing(maxima, weights), None
    if producer_op == "BiasGelu":
        return np.ones(len(maxima), "<f4"), np.sort(np.argsort(maxima)[-OUTLIERS:]).astype("<i8")
    return None


def quantized_nodes(graph: Graph, maxima: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rewrite `graph.nodes` in place (module docstring); returns the initializers to add."""
    producer = links(graph.nodes)[0]
    groups: dict[str, list[Linear]] = {}
    for linear in linears(graph):
        groups.setdefault(linear.matmul.inputs[0], []).append(linear)
    added: dict[str, np.ndarray] = {}
    replaced: dict[int, list[Node]] = {}
    for name, group in groups.items():
        source = producer.get(name)
        chosen = plan(source.op_type if source else "", maxima.get(name), [lin.weight for lin in group])
        s, outliers = chosen or (None, None)
        x = name
        if source is not None and s is not None:  # x / s (0 on float channels), once for the group
            divisor = (1 / s).astype("<f4")
            if outliers is not None:
                divisor[outliers] = 0
            x, added[f"{name}_int8_in"] = f"{name}_int8", divisor
            replaced[id(source)] = [source, Node([name, f"{name}_int8_in"], [x], "Mul")]
        else:
            s, outliers = None, None
        for linear in group:
            nodes, tensors = _int8_linear(linear, x, s, outliers)
            added.update(tensors)
            replaced[id(linear.matmul)] = nodes
            if linear.bias_add is not None:
                replaced[id(linear.bias_add)] = []  # the bias is DynamicQuantizeMatMul's
    graph.nodes = [new for node in graph.nodes for new in replaced.get(id(node), [node])]
    return added


def _int8_linear(
    linear: Linear, x: str, s: np.ndarray | None, outliers: np.ndarray | None
) -> tuple[list[Node], dict[str, np.ndarray]]:
    """The nodes and initializers of one int8 product on input `x` (already divided by `s`)."""
    original = linear.matmul.inputs[0]
    key = linear.matmul.outputs[0]
    weight = linear.weight if s is None else linear.weight * s[:, None]
    result = linear.bias_add.outputs[0] if linear.bias_add is not None else key
    tensors: dict[str, np.ndarray] = {}
    if outliers is not None:
        tensors[f"{key}_outlier_rows"] = outliers
        tensors[f"{key}_outlier_weight"] = linear.weight[outliers].astype("<f4")
        weight = weight.copy()
        weight[outliers] = 0
    tensors[f"{key}_w8"], tensors[f"{key}_w8_scale"], tensors[f"{key}_w8_zero"] = quantize_columns(weight)
    inputs = [x, f"{key}_w8", f"{key}_w8_scale", f"{key}_w8_zero"]
    if linear.bias_add is not None:
        inputs += [linear.bias_add.inputs[1]]
    if outliers is None:
        return [contrib(inputs, [result], "DynamicQuantizeMatMul")], tensors
    minus_one = attribute_int("axis", (1 << 64) - 1)  # int64 -1 on the wire: the channel axis
    return [
        contrib(inputs, [f"{key}_int8_part"], "DynamicQuantizeMatMul"),
        Node([original, f"{key}_outlier_rows"], [f"{key}_outliers"], "Gather", minus_one),
        Node([f"{key}_outliers", f"{key}_outlier_weight"], [f"{key}_float_part"], "MatMul"),
        Node([f"{key}_int8_part", f"{key}_float_part"], [result], "Add"),
    ], tensors


def quantize(buf: bytes | mmap.mmap, maxima: dict[str, np.ndarray]) -> list[bytes]:
    """The corrected model in `buf` with int8 products (`quantized_nodes`), as byte pieces."""
    pieces: list[bytes] = []
    for number, first, start, end in fields(buf, 0, len(buf)):
        if number != 7:  # ModelProto.graph; opset imports (com.microsoft included) are kept as they are
            pieces.append(bytes(buf[first:end]))
            continue
        graph = Graph.parse(buf, start, end)
        added = quantized_nodes(graph, maxima)
        body = graph.encode(added)
        pieces.append(length_delimited(7, len(body)) + body)
    return pieces


def calibration(path: Path, onnx_path: Path) -> dict[str, np.ndarray] | None:
    """The activation maxima of `path` by input name, or None (with a warning) when they were
    measured on another ONNX file than `onnx_path` (sha256 recorded in the file's meta)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        with onnx_path.open("rb") as handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != meta["onnx_sha256"]:
                log.warning("%s was measured on another ONNX file than %s; documents keep float", path, onnx_path)
                return None
        return {name: data[name].astype("<f4") for name in data.files if name != "meta"}


def quantized_model(
    onnx_path: Path, correction: Path, activations: Path, cache_dir: Path, *, rebuild: bool = False
) -> Path | bytes | None:
    """The int8 model: a file in `cache_dir` (built on first use from the shipped files), its bytes
    where that folder cannot be written or trusted, or None when the correction or the calibration
    does not fit the ONNX file (documents are then embedded by the float model)."""
    stem = f"{onnx_path.stem}-int8"
    target = cache_dir / f"{stem}-{cache_key(onnx_path, correction, activations, salt=f'int8 {INT8_FORMAT}')}.onnx"
    hit, unsafe = cached(target, cache_dir, rebuild)
    if hit is not None:
        return hit
    maxima = calibration(activations, onnx_path)
    corrected = corrected_model(onnx_path, correction, cache_dir) if maxima is not None else None
    if maxima is None or corrected is None:
        return None
    pieces = _from_source(corrected, lambda buf: quantize(buf, maxima))
    return stored(target, pieces, stem, unsafe)


def _from_source(source: Path | bytes, build: Callable[[bytes | mmap.mmap], list[bytes]]) -> list[bytes]:
    if isinstance(source, bytes):
        return build(source)
    with source.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as raw:
        return build(raw)
