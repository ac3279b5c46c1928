"""A sentence-boundary model for Argos Translate that never splits: each line is one sentence.

Argos Translate (1.11) splits every line into sentences before translating, with MiniSBD: an
ONNX model in the package's `minisbd/` folder, or else one it downloads for the source language
on first use (no offline use). Its `ARGOS_CHUNK_TYPE=NONE` is not implemented (a package under
it is skipped). So the package ships this model: MiniSBD's `no_ssplit` setting (in the model's
metadata) turns sentence splitting off, and the graph predicts "no boundary" at every character
(MiniSBD itself ends the last token at the line's end), so Argos translates each line whole,
as `transduce translate` does, and the package needs no download.

The ONNX file is written here as its protobuf bytes (onnx.proto: ModelProto, GraphProto,
NodeProto, TensorProto, ValueInfoProto) so that export needs no `onnx` package. The graph:
logits = Expand(NO_BOUNDARY, Concat(Shape(units), [5])), shape (batch, characters, 5); MiniSBD
reads the argmax per character (0: inside a token, 1: token end, 2: sentence end, 3-4: MWT).
"""

from __future__ import annotations

import json
import struct

CLASSES = 5  # MiniSBD's (stanza's) per-character labels
NO_BOUNDARY = [1.0, 0.0, 0.0, 0.0, 0.0]  # logits: label 0 everywhere
FLOAT, INT64 = 1, 7  # TensorProto.DataType
IR_VERSION, OPSET = 8, 13
# MiniSBD's settings (the model's metadata): no sentence splitting, no features, a vocabulary
# of its two specials (every character reads as <UNK>, which the graph ignores)
CONFIG = {"no_ssplit": True, "feat_funcs": [], "max_seqlen": 1000, "batch_size": 1}
VOCAB = {"lang": "", "idx": 0, "cutoff": 0, "lower": False, "_unit2id": {"<PAD>": 0, "<UNK>": 1}}
VOCAB["_id2unit"] = list(VOCAB["_unit2id"])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | str | bytes) -> bytes:
    """One protobuf field: an int as a varint (wire type 0), text or bytes length-delimited (2)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, data_type: int, values: list[float] | list[int]) -> bytes:
    """A 1-d TensorProto (dims 1, data_type 2, name 8, raw_data 9: little-endian values)."""
    raw = struct.pack(f"<{len(values)}{'f' if data_type == FLOAT else 'q'}", *values)
    return _field(1, len(values)) + _field(2, data_type) + _field(8, name) + _field(9, raw)


def _value_info(name: str, elem_type: int, dims: list[str]) -> bytes:
    """A ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1: elem_type 1, shape 2 of
    Dimension.dim_param 2)."""
    shape = b"".join(_field(1, _field(2, d)) for d in dims)
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str]) -> bytes:
    """A NodeProto: input 1, output 2, name 3, op_type 4."""
    body = b"".join(_field(1, i) for i in inputs) + b"".join(_field(2, o) for o in outputs)
    return body + _field(3, op.lower()) + _field(4, op)


def never_split_model(lang: str) -> bytes:
    """The ONNX model file (MiniSBD's inputs `units` and `features`, output `logits`) for the
    source language `lang`."""
    graph = b"".join(
        [
            _field(1, _node("Shape", ["units"], ["length"])),
            _field(1, _node("Concat", ["length", "classes"], ["logits_shape"]) + _field(5, _axis())),
            _field(1, _node("Expand", ["no_boundary", "logits_shape"], ["logits"])),
            _field(2, "never_split"),
            _field(5, _tensor("classes", INT64, [CLASSES])),
            _field(5, _tensor("no_boundary", FLOAT, NO_BOUNDARY)),
            _field(11, _value_info("units", INT64, ["batch", "characters"])),
            _field(11, _value_info("features", FLOAT, ["batch", "characters", "features"])),
            _field(12, _value_info("logits", FLOAT, ["batch", "characters", "labels"])),
        ]
    )
    metadata = {"lang_code": lang, "config": json.dumps(CONFIG), "vocab": json.dumps({**VOCAB, "lang": lang})}
    props = b"".join(_field(14, _field(1, key) + _field(2, value)) for key, value in metadata.items())
    opset = _field(8, _field(1, "") + _field(2, OPSET))
    return _field(1, IR_VERSION) + _field(2, "transduce") + _field(7, graph) + opset + props


def _axis() -> bytes:
    """Concat's `axis` attribute (AttributeProto: name 1, i 3, type 20 = INT 2): the last axis."""
    return _field(1, "axis") + _field(3, 0) + _field(20, 2)
