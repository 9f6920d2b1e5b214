"""Edits of an ONNX graph on the protobuf wire, without the `onnx` package.

A NodeProto is read into `Node` (inputs, outputs, op_type; its other fields kept as bytes) and
written back; `rewrite_nodes` applies the node rewrites below to the int8 MiniLM export, each
only where its whole pattern is found, each giving the same numbers up to float rounding order:
- `lookup_before_dequantize`: token rows are looked up, then dequantized;
- `without_nan_guard`: the export's `Where(IsNaN(softmax), 0, softmax)` goes;
- `fused_gelu`: bias add + erf GELU (six elementwise passes) as one com.microsoft BiasGelu;
- `fused_attention`: the exported scaled-dot-product attention (scale muls, reshapes and
  transposes, mask add, softmax, two batched products) as one com.microsoft MultiHeadAttention
  **without** the key padding mask: onnxruntime runs its flash attention kernel only without a
  mask (no batch × heads × tokens² score buffer: 1.19× the speed of a full 4,096-token batch,
  ≈100 MiB less peak memory), so the rewritten model must be fed unpadded batches, every row of
  a batch the same length (what `OnnxEmbedder` does with it);
then nodes nothing reads any more are dropped.
Wire format: a field is a varint key (number << 3 | wire type) and a value; wire type 2 values
carry a varint length. NodeProto: 1 input, 2 output, 4 op_type, 5 attribute, 7 domain;
AttributeProto: 1 name, 2 f, 3 i, 20 type.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Iterator
from dataclasses import dataclass

MS_DOMAIN = "com.microsoft"


def varint(buf: bytes | mmap.mmap, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fields(buf: bytes | mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, field start, value start, value end) of each field of the message in buf[start:end]."""
    pos = start
    while pos < end:
        first = pos
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value_end = varint(buf, pos)[1]
        elif wire == 2:
            size, pos = varint(buf, pos)
            value_end = pos + size
        elif wire in (1, 5):
            value_end = pos + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {first}")
        if value_end > end:
            raise ValueError(f"protobuf field {number} at byte {first} runs past its message")
        yield number, first, pos, value_end
        pos = value_end


def length_delimited(number: int, size: int) -> bytes:
    """The key and length prefix of a length-delimited field of `size` bytes."""
    return encode_varint(number << 3 | 2) + encode_varint(size)


@dataclass
class Node:
    """A NodeProto: inputs (field 1), outputs (2), op_type (4); every other field kept as raw bytes."""

    inputs: list[str]
    outputs: list[str]
    op_type: str
    rest: bytes = b""

    @classmethod
    def parse(cls, buf: bytes) -> Node:
        node = cls([], [], "")
        rest = []
        for number, first, start, end in fields(buf, 0, len(buf)):
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
            out.append(length_delimited(number, len(encoded)) + encoded)
        return b"".join(out)

    def int_attributes(self) -> dict[str, int]:
        """The node's integer attributes (AttributeProto name 1, i 3) by name; others map to -1."""
        found = {}
        for number, _, start, end in fields(self.rest, 0, len(self.rest)):
            if number == 5:
                name, value = "", -1
                for n, _, s, e in fields(self.rest, start, end):
                    if n == 1:
                        name = self.rest[s:e].decode()
                    elif n == 3:
                        value = varint(self.rest, s)[0]
                found[name] = value
        return found


def attribute_int(name: str, value: int) -> bytes:
    """A NodeProto.attribute field holding an INT AttributeProto (name 1, i 3, type 20 = INT)."""
    encoded = name.encode()
    body = length_delimited(1, len(encoded)) + encoded + encode_varint(3 << 3) + encode_varint(value)
    body += encode_varint(20 << 3) + encode_varint(2)
    return length_delimited(5, len(body)) + body


_CAST_TO_FLOAT = attribute_int("to", 1)


def contrib(inputs: list[str], outputs: list[str], op_type: str, attributes: bytes = b"") -> Node:
    domain = MS_DOMAIN.encode()
    return Node(inputs, outputs, op_type, attributes + length_delimited(7, len(domain)) + domain)


def links(nodes: list[Node]) -> tuple[dict[str, Node], dict[str, list[Node]]]:
    """(producer by output name, consumers by input name)."""
    consumers: dict[str, list[Node]] = {}
    for node in nodes:
        for name in node.inputs:
            consumers.setdefault(name, []).append(node)
    return {o: n for n in nodes for o in n.outputs}, consumers


def _only(consumers: dict[str, list[Node]], node: Node, op_type: str) -> Node | None:
    """The single consumer of `node`'s output when it is an `op_type` node, else None."""
    found = consumers.get(node.outputs[0], [])
    return found[0] if len(found) == 1 and found[0].op_type == op_type else None


def lookup_before_dequantize(nodes: list[Node], shapes: dict[str, list[int]]) -> list[Node]:
    """`Gather(Cast(table_q) × scale, ids)` as `Cast(Gather(table_q, ids)) × Gather(scale, ids)`.

    The same numbers, but a one-shot query dequantizes the rows it looks up instead of the whole
    30,522 × 384 token table (two 47 MB float32 temporaries per call). Only for a per-row scale
    (shape [rows, 1]) and a table read by axis-0 Gathers alone."""
    producer, consumers = links(nodes)
    dropped: set[int] = set()
    out: list[Node] = []
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
            Node([table_q, ids], [f"{result}_q"], "Gather"),
            Node([scale, ids], [f"{result}_scale"], "Gather"),
            Node([f"{result}_q"], [f"{result}_f"], "Cast", _CAST_TO_FLOAT),
            Node([f"{result}_f", f"{result}_scale"], [result], "Mul"),
        ]
    return [n for n in out if id(n) not in dropped]


def without_nan_guard(nodes: list[Node]) -> list[Node]:
    """Drop `Where(IsNaN(softmax), 0, softmax)` after each attention softmax (the export's guard for
    a fully masked row): every row here sees at least [CLS] and [SEP], so the guard never fires,
    and on 256-token chunks its two passes over the [batch, heads, tokens, tokens] scores cost
    ≈20 % of the run (onnxruntime profile)."""
    producer = links(nodes)[0]
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


def fused_gelu(nodes: list[Node], shapes: dict[str, list[int]], scalars: dict[str, float]) -> list[Node]:
    """`y = x · ½(1 + erf(x / √2))` on `x = MatMul + bias` as one com.microsoft BiasGelu(MatMul, bias)."""
    producer, consumers = links(nodes)
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for erf in (n for n in nodes if n.op_type == "Erf"):
        div = producer.get(erf.inputs[0])
        biased = producer.get(div.inputs[0]) if div and div.op_type == "Div" else None
        one = _only(consumers, erf, "Add")
        half = _only(consumers, one, "Mul") if one else None
        out = _only(consumers, half, "Mul") if half else None
        if not (biased and biased.op_type == "Add" and one and half and out and div):
            continue
        if len(shapes.get(biased.inputs[1], [])) != 1:  # BiasGelu(x, bias): a 1-D bias second
            continue
        constants = (scalars.get(div.inputs[1]), *(scalars.get(i) for i in one.inputs + half.inputs))
        if (
            not math.isclose(constants[0] or 0, math.sqrt(2), rel_tol=1e-6)
            or 1.0 not in constants[1:3]
            or 0.5 not in constants[3:]
            or sorted(map(id, consumers[biased.outputs[0]])) != sorted((id(div), id(out)))
            or biased.outputs[0] not in out.inputs
        ):
            continue
        replaced[id(out)] = contrib(biased.inputs, out.outputs, "BiasGelu")
        dropped.update(map(id, (biased, div, erf, one, half)))
    return [replaced.get(id(n), n) for n in nodes if id(n) not in dropped]


def _projection(producer: dict[str, Node], name: str, scalars: dict[str, float]) -> tuple[str, float] | None:
    """(the `MatMul + bias` output a head split starts from, product of the scalar Muls on the way)."""
    scale = 1.0
    node = producer.get(name)
    while node is not None and node.op_type in ("Reshape", "Transpose", "Mul"):
        if node.op_type == "Mul":
            factor = next((scalars[i] for i in node.inputs if i in scalars), None)
            if factor is None:
                return None
            scale *= factor
            name = next(i for i in node.inputs if i not in scalars)
        else:
            name = node.inputs[0]
        node = producer.get(name)
    return (name, scale) if node is not None and node.op_type == "Add" else None


def _ancestry(producer: dict[str, Node], name: str) -> set[str]:
    """Every tensor name `name` is computed from (graph inputs and initializers included)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        node = producer.get(current)
        if node is not None:
            todo += [i for i in node.inputs if i]
    return seen


def fused_attention(nodes: list[Node], shapes: dict[str, list[int]], scalars: dict[str, float]) -> list[Node]:
    """Each exported `softmax(q·kᵀ·scale + mask_bias)·v` with its head split and merge as one
    com.microsoft MultiHeadAttention on the projections, without the mask: only where the mask is
    the key padding of `attention_mask`, which an unpadded batch (all rows one length) never needs."""
    producer, consumers = links(nodes)
    replaced: dict[int, Node] = {}
    for softmax in (n for n in nodes if n.op_type == "Softmax"):
        add = producer.get(softmax.inputs[0])
        scores = producer.get(add.inputs[0]) if add and add.op_type == "Add" else None
        fill = producer.get(add.inputs[1]) if add else None
        mix = _only(consumers, softmax, "MatMul")
        merge = _only(consumers, mix, "Transpose") if mix else None
        reshape = _only(consumers, merge, "Reshape") if merge else None
        if not (scores and scores.op_type == "MatMul" and fill and fill.op_type == "Where" and reshape and mix):
            continue
        if "attention_mask" not in _ancestry(producer, fill.inputs[0]):  # key padding, nothing else
            continue
        query, key = (_projection(producer, i, scalars) for i in scores.inputs)
        value = _projection(producer, mix.inputs[1], scalars)
        masked = scalars.get(fill.inputs[2], 0.0)
        if not (query and key and value) or value[1] != 1.0 or scalars.get(fill.inputs[1]) != 0.0 or masked > -1e30:
            continue
        bias = shapes.get(producer[query[0]].inputs[1], [])
        head_size = 1 / (query[1] * key[1]) ** 2  # scale = 1/√head_size, split between q and k
        heads = bias[0] / head_size if len(bias) == 1 else 0
        if not (math.isclose(heads, round(heads), rel_tol=1e-4) and heads >= 1):
            continue
        projections, heads_attribute = [query[0], key[0], value[0]], attribute_int("num_heads", round(heads))
        replaced[id(reshape)] = contrib(projections, reshape.outputs, "MultiHeadAttention", heads_attribute)
    return [replaced.get(id(n), n) for n in nodes]


def without_unused(nodes: list[Node], outputs: list[str]) -> list[Node]:
    """The nodes the graph outputs still depend on (the rewrites leave their old subgraphs unread)."""
    needed = set(outputs)
    kept = []
    for node in reversed(nodes):
        if any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(i for i in node.inputs if i)
    return kept[::-1]


def rewrite_nodes(
    nodes: list[Node], shapes: dict[str, list[int]], scalars: dict[str, float], outputs: list[str]
) -> list[Node]:
    """All rewrites of the module docstring, in order (`shapes` and `scalars` describe the initializers)."""
    nodes = without_nan_guard(lookup_before_dequantize(nodes, shapes))
    nodes = fused_attention(fused_gelu(nodes, shapes, scalars), shapes, scalars)
    return without_unused(nodes, outputs)


def uses_contrib_ops(nodes: list[Node]) -> bool:
    """True when a node is from the com.microsoft domain (the model must import that opset)."""
    return any(n.op_type in ("BiasGelu", "MultiHeadAttention") for n in nodes)
