"""Samples with several named fields (docs/fields.md): the `fields=` argument
of feedline.Loader, parsed into the engine's field requests, and each
batch's fields turned into what a training loop uses."""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from . import _C

# The kinds a field may name explicitly ("text:caption").
_KINDS = {
    "image": _C.FieldRequest.Kind.IMAGE,
    "label": _C.FieldRequest.Kind.LABEL,
    "text": _C.FieldRequest.Kind.TEXT,
    "json": _C.FieldRequest.Kind.JSON,
    "ndarray": _C.FieldRequest.Kind.NDARRAY,
    "bytes": _C.FieldRequest.Kind.BYTES,
    "op": _C.FieldRequest.Kind.OP,
}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}
COLLATES = ("stack", "list")

# "op:<name>[(<key>=<value>, ...)]:<parts>", e.g. "op:mask_fraction(threshold=128):seg.png".
_OP = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*:(.*)$", re.S)

# What a field's value may be: "jpg;png", "text:caption", or a list of part names.
FieldValue = Union[str, Sequence[str]]


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # "image", "label", "text", "json", "ndarray", "bytes", "op"; "tensor": what a map= returned
    parts: List[str]
    op: str = ""  # kind "op": the registered C++ op (docs/custom_ops.md)
    params: Dict[str, str] = field(default_factory=dict)


def _parse_op(name: str, text: str) -> Field:
    m = _OP.match(text)
    if m is None:
        raise ValueError(f"field {name!r}: expected 'op:<name>(<key>=<value>, ...):<parts>', got 'op:{text}'")
    op, args, parts_text = m.group(1), m.group(2), m.group(3)
    params: Dict[str, str] = {}
    for item in (args or "").split(","):
        if not item.strip():
            continue
        key, eq, val = item.partition("=")
        if not eq or not key.strip() or not val.strip():
            raise ValueError(f"field {name!r}: op {op!r}: expected key=value parameters, got {item.strip()!r}")
        if key.strip() in params:
            raise ValueError(f"field {name!r}: op {op!r}: parameter {key.strip()!r} given twice")
        params[key.strip()] = val.strip()
    parts = [p.strip().lower() for p in parts_text.split(";") if p.strip()]
    if not parts:
        raise ValueError(f"field {name!r}: op {op!r} names no parts to read (after the last ':')")
    return Field(name, "op", parts, op, params)


def parse(fields: Mapping[str, FieldValue], columns: Optional[Mapping[str, Any]] = None) -> List[Field]:
    """{"image": "jpg;png", "label": "cls", "caption": "txt", "meta": "json"}
    -> fields in order. A value lists the sample parts (WebDataset member
    extensions) that may hold the field, first present wins, separated by
    ';'; the first part's name gives the kind as webdataset names them
    (image extensions, cls, txt, json, npy; anything else is bytes) unless
    the value starts with "<kind>:" ("text:caption", "bytes:jpg"). A
    registered C++ op (feedline.registered_ops(), feedline.load_ops()) is
    "op:<name>(<key>=<value>, ...):<parts>", e.g.
    "op:mask_fraction(threshold=128):seg.png"; parameters are strings to
    the op (no ',' or ')' inside them), the parentheses may be left out.

    For a Parquet or Arrow source, `columns` maps each lower-cased column
    name to (name, Arrow type, kind): parts are column names, and a field's
    kind is its first column's (encoded bytes an image, a string text, an
    integer a label, a list of numbers an ndarray) unless given."""
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"fields must be a non-empty dict {{name: parts}}, got {fields!r}")
    out: List[Field] = []
    for name, value in fields.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a field name must be a non-empty str, got {name!r}")
        kind: Optional[str] = None
        if isinstance(value, str):
            text = value.strip()
            head, sep, rest = text.partition(":")
            if sep and head.strip().lower() == "op":
                out.append(_parse_op(name, rest))
                continue
            if sep and head.strip().lower() in _KINDS:
                kind, text = head.strip().lower(), rest
            parts = [p.strip().lower() for p in text.split(";") if p.strip()]
        elif isinstance(value, Sequence) and all(isinstance(p, str) for p in value):
            parts = [p.strip().lower() for p in value if p.strip()]
        else:
            raise ValueError(f"field {name!r}: expected parts such as 'jpg;png' or a list of them, got {value!r}")
        if not parts:
            raise ValueError(f"field {name!r}: no parts named in {value!r}")
        if columns is not None:
            present = [p for p in parts if p in columns]
            if not present:
                have = ", ".join(f"{c[0]} ({c[1]})" for c in columns.values())
                raise ValueError(f"field {name!r}: no column named {' or '.join(repr(p) for p in parts)}; the data "
                                 f"has {have}")
            if kind is None:
                col_name, col_type, kind = columns[present[0]]
                if not kind:
                    raise ValueError(f"field {name!r}: column {col_name!r} has type {col_type}, which no field kind "
                                     f"reads (binary or {{bytes, path}}: image/bytes, string: text/json, integer: "
                                     f"label, list of numbers: ndarray)")
        if kind is None:
            kind = _KIND_NAMES[_C.kind_of_part(parts[0])]
        out.append(Field(name, kind, parts))
    return out


def requests(fields: List[Field], transforms: Mapping[str, Any]) -> List[Any]:
    """The engine's FieldRequests; `transforms` maps each image field to its
    native ImageTransform."""
    reqs = []
    for f in fields:
        r = _C.FieldRequest()
        r.name, r.kind, r.parts = f.name, _KINDS[f.kind], list(f.parts)
        if f.kind == "image":
            r.transform = transforms[f.name]
        if f.kind == "op":
            r.op, r.params = f.op, dict(f.params)
        reqs.append(r)
    return reqs


def _ndarray(blob: bytes) -> np.ndarray:
    # The engine checked the header against the size (src/pipelines/npy.cc).
    return np.lib.format.read_array(io.BytesIO(blob), allow_pickle=False)


def collate(fields: List[Field], raw: Dict[str, Any], sample_ids: np.ndarray, collate_mode: str) -> Dict[str, Any]:
    """One batch as the loop gets it: images and labels as tensors (already
    collated by the engine), text as lists of str, JSON as lists of values,
    ndarrays stacked into one tensor when their shapes and dtypes agree
    (else a ValueError naming the samples, or lists of tensors with
    collate="list"), bytes as lists of bytes. An op field gives each of its
    outputs ("<name>", or "<name>.<x>" for several) as the engine made it:
    tensors, or lists of bytes."""
    out: Dict[str, Any] = {}
    for f in fields:
        if f.kind == "op":
            for key, value in raw.items():
                if key == f.name or key.startswith(f.name + "."):
                    out[key] = value if isinstance(value, torch.Tensor) else list(value)
            continue
        v = raw[f.name]
        if f.kind in ("image", "label", "tensor"):  # "tensor": a number or tensor a map returned
            out[f.name] = v
        elif f.kind == "text":
            out[f.name] = [b.decode("utf-8") for b in v]
        elif f.kind == "json":
            out[f.name] = [json.loads(b) for b in v]
        elif f.kind == "ndarray":
            arrays = [_ndarray(b) for b in v]
            if collate_mode == "list":
                out[f.name] = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
                continue
            if arrays:
                first = arrays[0]
                for i, a in enumerate(arrays):
                    if a.shape != first.shape or a.dtype != first.dtype:
                        raise ValueError(
                            f"field {f.name!r}: sample {int(sample_ids[i])} has shape {a.shape} {a.dtype}, "
                            f"sample {int(sample_ids[0])} has {first.shape} {first.dtype}: arrays of one batch "
                            "must agree to be stacked; pass collate=\"list\" to get a list per batch")
                out[f.name] = torch.from_numpy(np.stack(arrays))
            else:
                out[f.name] = torch.empty(0)
        else:
            out[f.name] = list(v)
    return out
